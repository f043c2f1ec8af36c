#include "job_runner.hh"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/client.hh"
#include "loopback_server.hh"

namespace rb::app {
namespace {

using nlohmann::ordered_json;

// A run's own failures, after which the next run may well succeed.
bool run_local(Errc c) { return c == Errc::invalid_argument || c == Errc::unsupported || c == Errc::validation; }

std::vector<std::string> without_json(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--json" && i + 1 < args.size()) ++i;
    else out.push_back(args[i]);
  }
  return out;
}

// The client writes a run's results to `from`; they are moved to the job's file with the job's
// note added: which file and run they come from, and the run's tags in the label (runs that differ
// only in depth would otherwise share a label, and plots and summaries would pool them). The
// lines are annotated on the way rather than rewritten in place, so earlier results in the job's
// file are never touched. Returns how many lines were appended.
Result<size_t> move_results(const std::string& from, const std::string& to, const Job& job, size_t index) {
  std::ifstream in(from);
  if (!in) return size_t(0);  // the run ended before its first result
  std::FILE* out = std::fopen(to.c_str(), "a");
  if (!out) return Status(Errc::io, fmt::format("--json {}: cannot append: {}", to, strerror(errno)));
  const JobRun& run = job.runs[index];
  std::string tags;
  for (const auto& t : run.tags) tags += " " + t;
  ordered_json note = {{"file", job.path}, {"run", index + 1}, {"runs", job.runs.size()}, {"args", without_json(run.args)}};
  size_t n = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto rec = ordered_json::parse(line, nullptr, false);
    if (rec.is_object()) {
      if (rec.contains("label") && rec["label"].is_string()) rec["label"] = rec["label"].get<std::string>() + tags;
      rec["job"] = note;
      line = rec.dump();
    }
    std::fprintf(out, "%s\n", line.c_str());
    ++n;
  }
  bool ok = std::fflush(out) == 0;
  ok = std::fclose(out) == 0 && ok;
  if (!ok) return Status(Errc::io, fmt::format("--json {}: write failed: {}", to, strerror(errno)));
  std::remove(from.c_str());
  return n;
}

}  // namespace

Status run_job(const Job& job, const std::atomic<bool>& stop) {
  const size_t total = job.runs.size();
  const std::string partial = job.json_path + ".partial";
  std::optional<LoopbackServer> child;
  std::vector<int> child_cpus;
  std::vector<std::string> failed;
  Errc first_failure = Errc::ok;
  size_t results = 0;
  Status end;
  for (size_t i = 0; i < total && end.is_ok(); ++i) {
    if (stop.load()) {
      end = Status(Errc::interrupted, "interrupted");
      break;
    }
    const JobRun& run = job.runs[i];
    if (i > 0) fmt::print("\n");  // each run prints its own table; keep them apart
    std::fflush(stdout);
    fmt::print(stderr, "[{}/{}] {}\n", i + 1, total, join_args(without_json(run.args)));
    std::fflush(stderr);
    Command cmd = run.cmd;
    if (cmd.kind == Command::Kind::loopback) {
      // One child serves the job; a new one only when it died or its pinning changes.
      if (!child || !child->alive() || child_cpus != cmd.server_cpus) {
        if (child) child->finish(0);
        child.reset();
        auto c = LoopbackServer::start(cmd.server_cpus, /*once=*/false);
        if (!c) {
          end = c.status();
          break;
        }
        child.emplace(std::move(*c));
        child_cpus = cmd.server_cpus;
      }
      cmd.client.server = {"127.0.0.1", child->port()};
    }
    std::remove(partial.c_str());
    cmd.output.json = partial;
    auto sink = report::ReportSink::open(cmd.output);
    if (!sink) {
      end = sink.status();
      break;
    }
    Status st = engine::run_client(cmd.spec, cmd.client, **sink, stop);
    sink->reset();  // closes the partial file before its lines are moved
    // Partial results of an interrupted or failed run are kept too, as a single run keeps them.
    auto moved = move_results(partial, job.json_path, job, i);
    if (!moved) {
      end = moved.status();
      break;
    }
    results += *moved;
    if (st.is_ok()) continue;
    if (!run_local(st.code())) {
      end = st;
      break;
    }
    fmt::print(stderr, "[{}/{}] failed: {}\n", i + 1, total, st.message());
    if (failed.empty()) first_failure = st.code();
    failed.push_back(std::to_string(i + 1));
  }
  if (child) child->finish(0);
  fmt::print(stderr, "rdmabench: job {}: {} result line(s) appended to {}\n", job.path, results, job.json_path);
  if (!end.is_ok()) return end;
  if (!failed.empty()) {
    std::string list;
    for (const auto& f : failed) list += (list.empty() ? "" : ", ") + f;
    return Status(first_failure, fmt::format("job {}: {} of {} runs failed (run {}); see their errors above", job.path,
                                              failed.size(), total, list));
  }
  return {};
}

}  // namespace rb::app
