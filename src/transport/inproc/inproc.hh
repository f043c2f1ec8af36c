#pragma once
// In-process transport for unit tests: domains opened in one process reach each other's
// registered memory directly, through pointers carried in endpoint addresses and region handles.
// Keys and bounds are checked like a real NIC would, so the conformance suite can test error
// completions. Not reachable across processes, hence hidden from --help and --list.
#include <memory>

#include "transport/entry.hh"

namespace rb::transport::inproc {

std::unique_ptr<Domain> open_domain();
TransportEntry registry_entry();

}  // namespace rb::transport::inproc
