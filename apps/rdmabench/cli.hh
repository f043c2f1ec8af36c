#pragma once
// Command line -> what to do. Every flag is parsed into a RunSpec or the side's options;
// nothing is rewritten: a value that does not fit is an error naming the flag and the fix.
#include <string>
#include <vector>

#include "bench/client.hh"
#include "bench/server.hh"
#include "bench/spec.hh"
#include "report/report_sink.hh"

namespace rb::app {

constexpr uint16_t kDefaultPort = 7471;

// A run flag given on the command line beside --job: it replaces the job file's [defaults].
struct GivenFlag {
  std::string name;   // long name without dashes, the job file's key: "size"
  std::string value;  // as typed; empty for a switch
  bool is_switch = false;
};

struct Command {
  enum class Kind { client, server, loopback, list, version, help, job } kind = Kind::loopback;
  bench::RunSpec spec;
  bench::ClientOptions client;
  report::OutputPaths output;
  bench::ServerOptions server;
  std::vector<int> server_cpus;  // --loopback: pins the child server
  std::string help;
  bool list_json = false;        // --list json
  std::string job;               // --job FILE
  std::vector<GivenFlag> given;  // --job: the other flags on the command line
};

// What a job file may say about one flag: the command line's own flag table.
struct FlagInfo {
  std::string name;                  // long name without dashes: "size"
  std::vector<std::string> aliases;  // its other long names: "payload"
  bool is_switch = false;            // takes no value (--validate)
  bool in_job = true;                // false for --server, --list and the like
  std::string help;
};
const std::vector<FlagInfo>& flag_table();

// Returns the command or an invalid_argument Status with a one-line message.
Result<Command> parse_command_line(int argc, char** argv);
// The same for arguments without the program name (a job's runs are built as argument lists).
Result<Command> parse_command_line(const std::vector<std::string>& args);

}  // namespace rb::app
