#pragma once
namespace rb::app {
// Prints every transport and libfabric provider with its capabilities, or why it is unusable.
int print_list();
}
