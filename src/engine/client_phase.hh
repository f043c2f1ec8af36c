#pragma once
// One phase (op x mode x size x repeat) on the client: threads, the server's go, the measured
// stream, the end handshake and the figures.
#include <atomic>

#include "engine/model.hh"
#include "engine/session.hh"
#include "core/clock.hh"
#include "protocol/peer.hh"

namespace rb::engine {

struct ClientPhaseEnv {
  const RunSpec& spec;
  Session& session;
  protocol::Peer& server;
  const Clock& clock;
  ResultSink& sink;
  const std::atomic<bool>& interrupt;
};

// Runs phase `index`; `result` holds the figures (partial ones when interrupted) even when the
// phase fails after measuring.
Status run_client_phase(const ClientPhaseEnv& env, const Phase& phase, size_t index, PhaseResult& result);

}  // namespace rb::engine
