#pragma once
// Cluster mode without a launcher: the hosts of a --hosts file, each running `rdmabench
// --server`, reached over the TCP rendezvous a client run uses.
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/channel.hh"
#include "cluster/coordinator.hh"

namespace rb::cluster {

// One HOST[:PORT] a line (default port `default_port`); blank lines and # comments are skipped.
// An error names the file, the line and the fix.
Result<std::vector<bootstrap::HostPort>> read_hosts_file(const std::string& path, uint16_t default_port);

std::unique_ptr<Hosts> tcp_hosts(std::vector<bootstrap::HostPort> hosts);

}  // namespace rb::cluster
