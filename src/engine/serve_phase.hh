#pragma once
// One phase on the server: the target side of the client's stream (or, with --bidir, a stream of
// its own back at the client), then the checks that nothing was lost, and the outcome.
#include <atomic>
#include <functional>
#include <vector>

#include "engine/session.hh"
#include "core/clock.hh"
#include "protocol/peer.hh"

namespace rb::engine {

struct ServePhaseEnv {
  const RunSpec& spec;
  Session& session;
  protocol::Peer& client;
  const Clock& clock;
  const std::vector<int>& cpus;  // the server's --cpus
  const std::atomic<bool>& stop;
};

// Serves the phase the client announced. A failure of the phase itself has already been told to
// the client when this returns; a broken connection has not (there is nobody to tell).
Status serve_phase(const ServePhaseEnv& env, const protocol::PhaseStart& start);

// Checks the region after a validated write stream: fully covered granules hold the pattern,
// partly covered ones hold pattern or zero, untouched ones are still zero. Calls between() every
// few tens of MiB.
Status check_region(const uint8_t* region, uint64_t len, const std::vector<uint8_t>& cover, uint64_t seed, uint64_t size,
                    const std::function<void()>& between);

}  // namespace rb::engine
