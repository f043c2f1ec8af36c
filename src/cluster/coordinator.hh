#pragma once
// Runs a cluster pattern: round after round, it asks each pair's source to measure against its
// destination, gathers their records as they come and stops at the first round with a failed
// pair, naming the host that failed. Hosts are reached through the launcher (MPI ranks) or
// through their `rdmabench --server` (--hosts): the Hosts interface hides which.
#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/spec.hh"
#include "cluster/outcome.hh"
#include "protocol/peer.hh"

namespace rb::cluster {

struct PairControl {
  protocol::Peer driver;                 // the source: records, then Bye | Error
  std::optional<protocol::Peer> server;  // the destination's own report, where it gives one (MPI)
};

class Hosts {
 public:
  virtual ~Hosts() = default;
  virtual std::vector<std::string> names() const = 0;
  // How the hosts were reached: "pmix", "mpi" (a launcher's) or "hosts" (a --hosts file).
  virtual std::string reached_by() const = 0;
  // Asks pair.src to measure against pair.dst; `session` is unique to the pair within the run.
  virtual Result<PairControl> start(const Pair& pair, uint64_t session, const model::RunSpec& spec) = 0;
  // Called while pairs run, about every alive interval: keep the hosts' own waits satisfied.
  virtual void keep_alive() {}
  // After a failure: which of `hosts` no longer answer, as one phrase ("host 2 (...) does not
  // answer"), or "" when all do or it cannot be told.
  virtual std::string unreachable(const std::vector<int>& hosts, const std::atomic<bool>& stop) = 0;
};

// Called with each record as it arrives (its line already carries the "cluster" member), so the
// results gathered so far are on disk whatever happens next.
using RecordWriter = std::function<Status(const Record&)>;

Outcome coordinate(Hosts& hosts, const model::RunSpec& spec, const Pattern& pattern, const RecordWriter& write,
                   const std::atomic<bool>& stop, Status& ended);

}  // namespace rb::cluster
