#include "cluster/run.hh"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "bootstrap/hub.hh"
#include "cluster/host_verdict.hh"
#include "cluster/matrix.hh"
#include "cluster/launched_ranks.hh"
#include "cluster/tcp_hosts.hh"

namespace rb::cluster {
namespace {

constexpr uint16_t kDefaultPort = 7471;

class JsonFile {
 public:
  static Result<JsonFile> open(const std::string& path) {
    JsonFile f;
    if (path.empty()) return f;
    f.f_ = std::fopen(path.c_str(), "a");
    if (!f.f_) return Status(Errc::invalid_argument, fmt::format("--json {}: cannot open it for appending", path));
    return f;
  }
  JsonFile() = default;
  JsonFile(JsonFile&& o) noexcept : f_(o.f_) { o.f_ = nullptr; }
  ~JsonFile() {
    if (f_) std::fclose(f_);
  }
  Status write(const Record& r) { return write(r.line); }
  Status write(const nlohmann::json& line) {
    if (!f_) return {};
    std::string text = line.dump() + "\n";
    if (std::fwrite(text.data(), 1, text.size(), f_) != text.size() || std::fflush(f_) != 0)
      return {Errc::io, "--json: writing a record failed"};
    return {};
  }

 private:
  std::FILE* f_ = nullptr;
};

// Runs the pattern over `hosts` and reports; the exit code of the run.
int coordinate_and_report(Hosts& hosts, const ClusterJob& job, JsonFile& json, const std::atomic<bool>& stop) {
  Status ended;
  Outcome o = coordinate(hosts, job.spec, job.cluster.pattern, [&](const Record& r) { return json.write(r); }, stop, ended);
  auto groups = evaluate(o, job.cluster.thresholds);
  for (const auto& g : groups)  // after the pairs' records: each host's verdict, a line each
    for (const auto& v : g.hosts)
      if (Status s = json.write(host_record(g, v, o.names[size_t(v.host)], job.cluster.thresholds)); !s)
        fmt::print(stderr, "rdmabench: error: {}\n", s.message());
  // A launcher hands ranks a terminal of its own even when its output goes to a file: no colour there.
  bool color = isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR") && !bootstrap::launched_by_mpi();
  print_report(stdout, o, groups, job.cluster.thresholds, color);
  auto failures = acceptance_failures(o, groups);
  std::fflush(stdout);
  if (!failures.empty()) {
    fmt::print(stderr, "rdmabench: {} failing pair{}:\n", failures.size(), failures.size() == 1 ? "" : "s");
    for (const auto& f : failures) fmt::print(stderr, "  {}\n", f);
  }
  if (!ended) {
    fmt::print(stderr, "rdmabench: error: {}\n", ended.message());
    return ended.code() == Errc::interrupted ? 130 : ended.code() == Errc::invalid_argument ? 2 : 1;
  }
  return failures.empty() ? 0 : kMissedThreshold;
}

}  // namespace

int run_cluster(int* argc, char*** argv, const ClusterJob& job, const std::atomic<bool>& stop) {
  if (job.cluster.hosts_file.empty() && !bootstrap::launched_by_mpi()) {
    fmt::print(stderr, "rdmabench: error: --cluster: no launcher found and no --hosts: run it under mpirun or srun "
                       "(mpirun -np 4 rdmabench --cluster ...), or give --hosts FILE with every host running rdmabench --server\n");
    return 2;
  }
  std::vector<bootstrap::HostPort> listed;
  if (!job.cluster.hosts_file.empty()) {
    auto hosts = read_hosts_file(job.cluster.hosts_file, kDefaultPort);
    if (!hosts) return fmt::print(stderr, "rdmabench: error: {}\n", hosts.status().message()), 2;
    if (auto s = schedule(job.cluster.pattern, int(hosts->size())); !s)
      return fmt::print(stderr, "rdmabench: error: {}\n", s.status().message()), 2;
    listed = std::move(hosts.value());
  }
  auto json = JsonFile::open(job.json);
  if (!json) return fmt::print(stderr, "rdmabench: error: {}\n", json.status().message()), 2;
  if (!listed.empty()) {
    auto hosts = tcp_hosts(std::move(listed));
    return coordinate_and_report(*hosts, job, *json, stop);
  }
  return run_launched_ranks(argc, argv, job, [&](Hosts& hosts) { return coordinate_and_report(hosts, job, *json, stop); }, stop);
}

}  // namespace rb::cluster
