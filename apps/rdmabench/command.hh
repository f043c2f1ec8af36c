#pragma once
// What rdmabench is asked to do: the result of reading the flags (cli.hh) or a job's run (job.hh).
#include <string>
#include <vector>

#include "engine/client.hh"
#include "engine/server.hh"
#include "model/spec.hh"
#include "cluster/options.hh"
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
  enum class Kind { client, server, loopback, cluster, list, version, help, job, completion } kind = Kind::loopback;
  model::RunSpec spec;
  engine::ClientOptions client;
  report::OutputPaths output;
  engine::ServerOptions server;
  std::vector<int> server_cpus;  // --loopback: pins the child server
  std::string help;
  bool list_json = false;        // --list json
  std::string job;               // --job FILE
  std::vector<GivenFlag> given;  // --job: the other flags on the command line
  cluster::ClusterOptions cluster;
};

}  // namespace rb::app
