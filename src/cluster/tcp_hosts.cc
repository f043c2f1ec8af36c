#include "cluster/tcp_hosts.hh"

#include <fstream>

#include <fmt/format.h>

namespace rb::cluster {
namespace {

class TcpHosts final : public Hosts {
 public:
  explicit TcpHosts(std::vector<bootstrap::HostPort> hosts) : hosts_(std::move(hosts)) {}

  std::string reached_by() const override { return "hosts"; }
  std::vector<std::string> names() const override {
    std::vector<std::string> n;
    for (const auto& h : hosts_) n.push_back(bootstrap::host_port_text(h));
    return n;
  }

  Result<PairControl> start(const Pair& pair, uint64_t, const model::RunSpec& spec) override {
    auto ch = bootstrap::Channel::connect(hosts_[size_t(pair.src)], spec.timeout_s);
    if (!ch) return Status(ch.status().code(), fmt::format("{} (source): {}", bootstrap::host_port_text(hosts_[size_t(pair.src)]),
                                                           ch.status().message()));
    PairControl ctl{protocol::Peer(std::move(ch.value()), "source", spec.timeout_s), std::nullopt};
    Status st = ctl.driver.send(protocol::Drive{protocol::kVersion, RDMABENCH_VERSION, spec,
                                                bootstrap::host_port_text(hosts_[size_t(pair.dst)]), -1, 0});
    if (!st) return st;
    return ctl;
  }

  std::string unreachable(const std::vector<int>& which, const std::atomic<bool>&) override {
    std::string text;
    std::vector<bool> seen(hosts_.size());
    for (int h : which) {
      if (seen[size_t(h)]) continue;
      seen[size_t(h)] = true;
      auto ch = bootstrap::Channel::connect(hosts_[size_t(h)], 2);
      if (ch) continue;
      text += fmt::format("{}host {} ({}) does not answer", text.empty() ? "" : "; ", h,
                          bootstrap::host_port_text(hosts_[size_t(h)]));
    }
    return text;
  }

 private:
  std::vector<bootstrap::HostPort> hosts_;
};

}  // namespace

Result<std::vector<bootstrap::HostPort>> read_hosts_file(const std::string& path, uint16_t default_port) {
  std::ifstream in(path);
  if (!in) return Status(Errc::invalid_argument, fmt::format("--hosts {}: cannot read it: give a file with one HOST[:PORT] a line", path));
  std::vector<bootstrap::HostPort> hosts;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    auto b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b == std::string::npos) continue;
    std::string text = line.substr(b, e - b + 1);
    if (text.find_first_of(" \t") != std::string::npos)
      return Status(Errc::invalid_argument, fmt::format("{}:{}: '{}': one HOST[:PORT] a line", path, no, text));
    auto hp = bootstrap::parse_host_port(text, default_port, "--hosts");
    if (!hp) return Status(Errc::invalid_argument, fmt::format("{}:{}: {}", path, no, hp.status().message()));
    for (const auto& h : hosts)
      if (h.host == hp->host && h.port == hp->port)
        return Status(Errc::invalid_argument, fmt::format("{}:{}: '{}' is listed twice: list each host once", path, no, text));
    hosts.push_back(*hp);
  }
  if (hosts.size() < 2)
    return Status(Errc::invalid_argument, fmt::format("--hosts {}: lists {} host{}; a cluster run needs at least 2", path,
                                                      hosts.size(), hosts.size() == 1 ? "" : "s"));
  return hosts;
}

std::unique_ptr<Hosts> tcp_hosts(std::vector<bootstrap::HostPort> hosts) { return std::make_unique<TcpHosts>(std::move(hosts)); }

}  // namespace rb::cluster
