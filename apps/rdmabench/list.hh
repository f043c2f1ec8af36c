#pragma once
#include <string>

namespace rb::app {
// Every user-facing transport from the registry: its variants, what --domain means, its options
// with types and defaults, then each instance usable here (with its capabilities) or why not.
std::string list_text();
// The same for programs (the e2e tests), test-only entries included and marked.
std::string list_json();
int print_list(bool json);
}  // namespace rb::app
