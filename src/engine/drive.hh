#pragma once
// Cluster mode, on a host the coordinator picked as a pair's source: run the pair as an ordinary
// client against the target and hand every phase's record back to the coordinator, with Alive
// between them so that the coordinator's --timeout measures silence, not the length of a run.
#include <atomic>

#include "engine/client.hh"
#include "protocol/peer.hh"

namespace rb::engine {

// Runs `d` and tells the coordinator how it ended (Bye, or Error naming the cause). The returned
// Status is the run's, for the host's own log.
Status drive_pair(protocol::Peer& coordinator, const protocol::Drive& d, const ConnectTarget& connect,
                  const std::atomic<bool>& stop);

}  // namespace rb::engine
