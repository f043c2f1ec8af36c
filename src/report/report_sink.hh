#pragma once
// The reporters a client run writes to, behind the engine's ResultSink: the table on stdout, the
// progress line and live lines, and optionally JSON Lines and CSV files.
#include <chrono>
#include <memory>
#include <string>

#include "model/sink.hh"
#include "report/progress.hh"
#include "report/reporter.hh"

namespace rb::report {

struct OutputPaths {
  std::string json, csv;  // empty: not written
};

class ReportSink final : public model::ResultSink {
 public:
  // Opens (appends to) the files now, so an unwritable path is an error before the run starts.
  static Result<std::unique_ptr<ReportSink>> open(const OutputPaths& paths);

  void run_started(const model::RunInfo& run) override;
  void phase_started(size_t index, size_t count, const model::Phase& phase) override;
  void interval(double at_s, const std::vector<model::IntervalSample>& samples) override;
  Status phase_done(const model::PhaseResult& result, int repeats) override;
  void run_ended() override { progress_.clear(); }

 private:
  ReportSink() = default;
  RunHeader header_;
  TableReporter table_{stdout};
  ProgressLine progress_{stderr};
  std::unique_ptr<JsonlReporter> jsonl_;
  std::unique_ptr<CsvReporter> csv_;
  std::chrono::steady_clock::time_point t0_{};
};

}  // namespace rb::report
