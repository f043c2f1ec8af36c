#pragma once
// The launcher hub over the job's PMIx server, with no MPI: each rank listens on a TCP port,
// publishes where (with a token a connecting rank must quote) through PMIx_Put, and learns every
// other rank's after one PMIx_Fence. Control frames then travel over a mesh of TCP connections
// (one per ordered pair, opened on first use), filed by (source, tag) as the MPI hub does.
#include <memory>
#include <string>

#include "bootstrap/hub.hh"

namespace rb::bootstrap {

// PMIx_Init, the listener, the exchange. `timeout_s` bounds the fence and each connect.
Result<std::unique_ptr<Hub>> start_pmix_hub(const std::string& data_ip, double timeout_s);

}  // namespace rb::bootstrap
