#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "model/record_json.hh"
#include "report/reporter.hh"

namespace rb::report {

Result<std::unique_ptr<JsonlReporter>> JsonlReporter::open(const std::string& path) {
  auto r = std::make_unique<JsonlReporter>();
  r->f_ = std::fopen(path.c_str(), "a");
  if (!r->f_) return Status(Errc::invalid_argument, fmt::format("--json {}: cannot open for appending: {}", path, strerror(errno)));
  r->path_ = path;
  return r;
}

JsonlReporter::~JsonlReporter() {
  if (f_) std::fclose(f_);
}

Status JsonlReporter::write(const RunHeader& h, const model::PhaseResult& r, int repeats) {
  std::string line = json_line(h, r, repeats);
  line += '\n';
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    return {Errc::io, fmt::format("--json {}: write failed: {}", path_, strerror(errno))};
  return {};
}

}  // namespace rb::report
