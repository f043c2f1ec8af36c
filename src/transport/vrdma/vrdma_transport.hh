#pragma once
// vrdma as a transport: rdmabench on libvrdma's public C API, the same one the verbs layer
// uses. Needs a router (vrdmad) on this host; -o socket=PATH names its socket.
#include "transport/entry.hh"

namespace rb::transport::vrdma {
TransportEntry registry_entry();
}  // namespace rb::transport::vrdma
