#pragma once
// What a cluster run is asked to do, from its flags or a job file's [cluster] table.
#include <string>

#include "engine/server.hh"
#include "bootstrap/hub.hh"
#include "model/spec.hh"
#include "cluster/outcome.hh"
#include "cluster/schedule.hh"

namespace rb::cluster {

struct ClusterOptions {
  bool enabled = false;    // --cluster
  std::string hosts_file;  // --hosts: no launcher; every host runs `rdmabench --server`
  Pattern pattern;
  Thresholds thresholds;
  std::string data_net;    // launcher: the interface whose address each rank's data path uses
  bootstrap::HubKind bootstrap = bootstrap::HubKind::automatic;  // --bootstrap
};

struct ClusterJob {
  model::RunSpec spec;
  ClusterOptions cluster;
  engine::ServerOptions server;  // how an MPI rank serves its pairs (--domain, --cpus)
  std::string json;             // --json: one line per pair and phase
};

}  // namespace rb::cluster
