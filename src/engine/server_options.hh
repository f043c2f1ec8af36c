#pragma once
// How a server listens and serves: what run_server and each connection's run are given.
#include <string>
#include <vector>

#include "bootstrap/channel.hh"
#include "registry/registry.hh"

namespace rb::engine {

struct ServerOptions {
  bootstrap::HostPort listen;
  std::string domain;      // the server's own NIC; empty = the interface the client reached
  std::vector<std::string> domains;  // one NIC per rail for clients that run --domains; empty = by subnet
  std::vector<int> cpus;   // pin server threads
  bool once = false;
  int ready_fd = -1;       // write "PORT\n" here once listening (used by --loopback)
  bool quiet = false;
  double hello_timeout_s = 10;  // a connection silent this long before its hello is dropped
  size_t max_runs = 64;         // runs served at once; a client beyond them is told the server is busy
  // Use::test also opens the in-process transports a client names: for tests that serve a
  // connection in their own process. No flag sets it.
  transport::Use transports = transport::Use::run;
};

}  // namespace rb::engine
