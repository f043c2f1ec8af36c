#pragma once
// The client side of a run: connects, hands the run description to the server, runs every
// phase (op x mode x size x repeat) and reports each one.
#include <atomic>
#include <string>

#include "bench/spec.hh"
#include "bootstrap/channel.hh"

namespace rb::bench {

struct ClientOptions {
  bootstrap::HostPort server;
  std::string json_path, csv_path;
  double connect_timeout_s = 5;
};

Status run_client(const RunSpec& spec, const ClientOptions& opt, const std::atomic<bool>& interrupt);

}  // namespace rb::bench
