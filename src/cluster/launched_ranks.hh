#pragma once
// Cluster mode under a launcher: every rank serves and drives pairs as rank 0's coordinator asks,
// over the launcher's hub (PMIx or MPI); rank 0 also coordinates and reports.
#include <atomic>
#include <functional>

#include "cluster/coordinator.hh"
#include "cluster/options.hh"

namespace rb::cluster {

// Called on rank 0 only, with the hosts the ranks form; returns the process's exit code.
using Coordinate = std::function<int(Hosts& hosts)>;

// The hub (PMIx_Init or MPI_Init), the agents, `coordinate` on rank 0, then the hub's finalize.
// Returns this rank's exit code.
int run_launched_ranks(int* argc, char*** argv, const ClusterJob& job, const Coordinate& coordinate,
                  const std::atomic<bool>& stop);

}  // namespace rb::cluster
