#pragma once
// Where a client run hands what it measures. The engine knows nothing of tables, files or
// terminals: the app wires reporters behind this interface (src/report/report_sink.hh).
#include <cstddef>
#include <string>
#include <vector>

#include "model/result.hh"
#include "model/spec.hh"

namespace rb::model {

struct RunInfo {
  const RunSpec* spec = nullptr;
  transport::DomainInfo info;
  std::string server;                // host:port
  std::string clock;                 // "tsc 2.1 GHz"
  std::vector<std::string> domains;  // every domain of the run (one per rail with --domains)
  double line_gbps = 0;              // aggregate link speed of those domains; 0 when unknown
};

struct IntervalSample {
  int thread;  // -1 = total
  double ops_per_s, gbps, p50_us;
};

class ResultSink {
 public:
  virtual ~ResultSink() = default;
  virtual void run_started(const RunInfo& run) = 0;
  // Phase `index` of `count` is about to start.
  virtual void phase_started(size_t index, size_t count, const Phase& phase) = 0;
  // --report-interval: one sample per thread (when there are several) and the total.
  virtual void interval(double at_s, const std::vector<IntervalSample>& samples) = 0;
  // A phase's figures (partial when interrupted). A failure to record them ends the run.
  virtual Status phase_done(const PhaseResult& result, int repeats) = 0;
  // The run is over, whether it succeeded or not.
  virtual void run_ended() = 0;
};

}  // namespace rb::model
