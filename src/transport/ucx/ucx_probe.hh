#pragma once
// What --list says about UCX here: its version, the transports and devices UCT finds, and for
// the default and every known variant whether two workers can connect over it, or why not.
#include <vector>

#include "transport/entry.hh"

namespace rb::transport::ucx {

std::vector<Availability> probe();
// Any UCX_TLS-style list, known or not: whether two workers connect over it.
Availability probe_variant(const std::string& tls);

}  // namespace rb::transport::ucx
