#pragma once
// Command line -> what to do. Every flag is parsed into a RunSpec or the side's options;
// nothing is rewritten: a value that does not fit is an error naming the flag and the fix.
#include <string>
#include <vector>

#include "bench/client.hh"
#include "bench/server.hh"
#include "bench/spec.hh"

namespace rb::app {

constexpr uint16_t kDefaultPort = 7471;

struct Command {
  enum class Kind { client, server, loopback, list, version, help } kind = Kind::loopback;
  bench::RunSpec spec;
  bench::ClientOptions client;
  bench::ServerOptions server;
  std::vector<int> server_cpus;  // --loopback: pins the child server
  std::string help;
};

// Returns the command or an invalid_argument Status with a one-line message.
Result<Command> parse_command_line(int argc, char** argv);

}  // namespace rb::app
