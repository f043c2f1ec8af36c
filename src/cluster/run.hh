#pragma once
// `rdmabench --cluster`: over the hosts of a --hosts file, or the ranks of an MPI launch. Writes
// the records as they come (--json), then the matrices, the outliers and the acceptance verdict.
#include <atomic>

#include "cluster/options.hh"

namespace rb::cluster {

// Exit codes: 0 every pair ran and met the thresholds; 1 a pair or host failed; 2 bad input;
// 3 every pair ran but some missed --expect-bw / --expect-lat; 130 interrupted.
constexpr int kMissedThreshold = 3;

int run_cluster(int* argc, char*** argv, const ClusterJob& job, const std::atomic<bool>& stop);

}  // namespace rb::cluster
