#pragma once
// The client side of a run: connects, hands the run description to the server, runs every
// phase (op x mode x size x repeat) and hands each one's figures to a ResultSink.
#include <atomic>
#include <functional>
#include <string>

#include "engine/model.hh"
#include "bootstrap/channel.hh"
#include "registry/registry.hh"

namespace rb::engine {

// Opens the control channel to a run's server within timeout_s.
using ConnectTarget = std::function<Result<bootstrap::Channel>(double timeout_s)>;

struct ClientOptions {
  bootstrap::HostPort server;
  // Use::test also opens the in-process transports (inproc, skeleton): for tests that run client
  // and server in one process. No flag sets it.
  transport::Use transports = transport::Use::run;
  // Cluster mode: how to reach the server when it is not `server` over TCP (an MPI rank), and
  // the name records give it.
  ConnectTarget connect;
  std::string server_name;
};

Status run_client(const RunSpec& spec, const ClientOptions& opt, ResultSink& sink, const std::atomic<bool>& interrupt);

}  // namespace rb::engine
