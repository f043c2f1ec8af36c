#include "report/report_sink.hh"

#include <fmt/format.h>

#include "model/sizes.hh"

namespace rb::report {

Result<std::unique_ptr<ReportSink>> ReportSink::open(const OutputPaths& paths) {
  std::unique_ptr<ReportSink> sink(new ReportSink());
  if (!paths.json.empty()) {
    auto j = JsonlReporter::open(paths.json);
    if (!j) return j.status();
    sink->jsonl_ = std::move(j.value());
  }
  if (!paths.csv.empty()) {
    auto c = CsvReporter::open(paths.csv);
    if (!c) return c.status();
    sink->csv_ = std::move(c.value());
  }
  return sink;
}

void ReportSink::run_started(const model::RunInfo& run) {
  header_ = run;
  t0_ = std::chrono::steady_clock::now();
  table_.header(header_);
}

void ReportSink::phase_started(size_t index, size_t count, const model::Phase& ph) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  double eta = index ? elapsed / double(index) * double(count - index) : -1;
  progress_.update(fmt::format("[{}/{}] {} {} {}", index + 1, count, transport::op_name(ph.op), model::mode_name(ph.mode),
                               model::format_bytes(ph.size)),
                   elapsed, eta);
}

void ReportSink::interval(double at_s, const std::vector<model::IntervalSample>& samples) {
  progress_.clear();
  for (const auto& s : samples) fmt::print("{}\n", interval_line(at_s, s));
  std::fflush(stdout);
}

Status ReportSink::phase_done(const model::PhaseResult& r, int repeats) {
  progress_.clear();
  table_.phase(r, r.partial ? 1 : repeats);
  if (jsonl_) {
    Status w = jsonl_->write(header_, r, repeats);
    if (!w) return w;
  }
  if (csv_) {
    Status w = csv_->write(header_, r);
    if (!w) return w;
  }
  return {};
}

}  // namespace rb::report
