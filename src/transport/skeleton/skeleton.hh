#pragma once
// The skeleton transport: the smallest complete transport, kept compiled and passing the
// conformance suite so that it stays a true template (in the manner of fio's
// engines/skeleton_external.c). Copy this folder to start a new transport; skeleton.cc says, hook
// by hook, what is required and what is optional.
//
// Its "fabric" is this process's address space: an endpoint's address is its own pointer and a
// write or read is a memcpy into or out of the peer's registered memory. Both sides must
// therefore live in one process, so the entry is test-only (hidden from --help and --list).
#include "transport/entry.hh"

namespace rb::transport::skeleton {
TransportEntry registry_entry();
}  // namespace rb::transport::skeleton
