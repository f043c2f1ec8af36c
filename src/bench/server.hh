#pragma once
// The server side: waits for clients, adopts each one's run description and serves its
// phases, one client after another, until stopped (or after one run with `once`).
#include <atomic>
#include <string>
#include <vector>

#include "bootstrap/channel.hh"
#include "core/status.hh"

namespace rb::bench {

struct ServerOptions {
  bootstrap::HostPort listen;
  std::string domain;      // the server's own NIC; empty = the interface the client reached
  std::vector<std::string> domains;  // one NIC per rail for clients that run --domains; empty = by subnet
  std::vector<int> cpus;   // pin server threads
  bool once = false;
  int ready_fd = -1;       // write "PORT\n" here once listening (used by --loopback)
  bool quiet = false;
};

Status run_server(const ServerOptions& opt, const std::atomic<bool>& stop);

}  // namespace rb::bench
