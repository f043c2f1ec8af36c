#pragma once
// Cluster mode under a launcher: every rank serves and drives pairs as rank 0's coordinator asks,
// over MPI messages; rank 0 also coordinates and reports.
#include <atomic>
#include <functional>

#include "cluster/coordinator.hh"
#include "cluster/options.hh"

namespace rb::cluster {

// Called on rank 0 only, with the hosts the ranks form; returns the process's exit code.
using Coordinate = std::function<int(Hosts& hosts)>;

// MPI_Init (through the launcher's PMIx or PMI), the agents, `coordinate` on rank 0, then
// MPI_Finalize. Returns this rank's exit code.
int run_mpi_ranks(int* argc, char*** argv, const ClusterJob& job, const Coordinate& coordinate,
                  const std::atomic<bool>& stop);

}  // namespace rb::cluster
