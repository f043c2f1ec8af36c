#include <sys/stat.h>

#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "model/record_json.hh"
#include "report/reporter.hh"

namespace rb::report {

static const char* kCsvHeader =
    "timestamp,label,transport,provider,op,mode,size,threads,batch,depth,repeat,iterations,duration_s,gbps,"
    "gbytes_per_s,mops,lat_kind,lat_min_us,lat_p50_us,lat_avg_us,lat_p99_us,lat_p999_us,lat_p9999_us,lat_max_us,"
    "lat_stdev_us,partial\n";

Result<std::unique_ptr<CsvReporter>> CsvReporter::open(const std::string& path) {
  struct stat st{};
  bool fresh = stat(path.c_str(), &st) != 0 || st.st_size == 0;
  auto r = std::make_unique<CsvReporter>();
  r->f_ = std::fopen(path.c_str(), "a");
  if (!r->f_) return Status(Errc::invalid_argument, fmt::format("--csv {}: cannot open for appending: {}", path, strerror(errno)));
  r->path_ = path;
  if (fresh) std::fputs(kCsvHeader, r->f_);
  return r;
}

CsvReporter::~CsvReporter() {
  if (f_) std::fclose(f_);
}

Status CsvReporter::write(const RunHeader& h, const model::PhaseResult& r) {
  std::time_t t = std::time(nullptr);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  const auto& p = r.phase;
  const auto& l = r.lat;
  fmt::print(f_, "{},{},{},{},{},{},{},{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.6f},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{}\n",
             ts, model::run_label(h, p), h.info.transport, h.info.provider, transport::op_name(p.op), model::mode_name(p.mode),
             p.size, h.spec->threads, h.spec->batch, p.mode == model::Mode::bw ? h.spec->depth : 1, p.repeat,
             r.iterations, r.duration_s, r.gbps, r.gbytes_per_s, r.mops, r.lat_kind, l.min, l.p50, l.avg, l.p99, l.p999,
             l.p9999, l.max, l.stdev, r.partial);
  if (std::fflush(f_) != 0) return {Errc::io, fmt::format("--csv {}: write failed: {}", path_, strerror(errno))};
  return {};
}

}  // namespace rb::report
