#pragma once
// The client side of a run: connects, hands the run description to the server, runs every
// phase (op x mode x size x repeat) and hands each one's figures to a ResultSink.
#include <atomic>

#include "bench/sink.hh"
#include "bench/spec.hh"
#include "bootstrap/channel.hh"

namespace rb::bench {

struct ClientOptions {
  bootstrap::HostPort server;
};

Status run_client(const RunSpec& spec, const ClientOptions& opt, ResultSink& sink, const std::atomic<bool>& interrupt);

}  // namespace rb::bench
