#pragma once
// In-process transport for unit tests: two Domains made from one Hub reach each other's
// registered memory directly. Keys and bounds are checked like a real NIC would, so the
// conformance suite can test error completions. Not reachable across processes.
#include <memory>

#include "transport/registry.hh"

namespace rb::transport::loopback {

class Hub;  // shared state of one in-process "fabric"

std::shared_ptr<Hub> make_hub();
std::unique_ptr<Domain> open_domain(std::shared_ptr<Hub> hub);
TransportEntry registry_entry();

constexpr int kErrBadKey = 1;
constexpr int kErrOutOfBounds = 2;
constexpr int kErrTruncated = 3;

}  // namespace rb::transport::loopback
