#pragma once
// The client side of a run: connects, hands the run description to the server, runs every
// phase (op x mode x size x repeat) and hands each one's figures to a ResultSink.
#include <atomic>

#include "bench/sink.hh"
#include "bench/spec.hh"
#include "bootstrap/channel.hh"
#include "transport/registry.hh"

namespace rb::bench {

struct ClientOptions {
  bootstrap::HostPort server;
  // Use::test also opens the in-process transports (inproc, skeleton): for tests that run client
  // and server in one process. No flag sets it.
  transport::Use transports = transport::Use::run;
};

Status run_client(const RunSpec& spec, const ClientOptions& opt, ResultSink& sink, const std::atomic<bool>& interrupt);

}  // namespace rb::bench
