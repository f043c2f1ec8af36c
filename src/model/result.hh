#pragma once
// What one measured phase produced, computed once from the worker threads' state.
#include <string>
#include <vector>

#include "model/spec.hh"
#include "core/cpu_usage.hh"
#include "core/histogram.hh"
#include "transport/transport.hh"

namespace rb::model {

struct LatencySummary {  // microseconds
  double min = 0, p50 = 0, avg = 0, p99 = 0, p999 = 0, p9999 = 0, max = 0, stdev = 0;
};
LatencySummary summarize(const HistogramSnapshot& h);

struct ThreadFigures {
  int thread = 0;
  uint64_t iterations = 0;
  double seconds = 0, gbps = 0, mops = 0;
};

struct CpuFigures {
  CpuTimes times;
  double util = 0;  // (user + sys) / window; 1.0 = one core busy
};

struct PhaseResult {
  Phase phase{};
  std::string label;
  transport::DomainInfo info;
  uint64_t iterations = 0, bytes = 0;
  double duration_s = 0, gbps = 0, gbytes_per_s = 0, mops = 0;
  const char* lat_kind = "completion";
  HistogramSnapshot hist;
  LatencySummary lat;
  std::vector<ThreadFigures> per_thread;
  std::vector<ThreadFigures> per_rail;  // `thread` holds the rail number
  bool has_cpu = false;
  CpuFigures client_cpu, server_cpu;
  bool partial = false;  // interrupted: figures cover the part measured before the stop
  bool has_reverse = false;  // --bidir: the server's stream back at us at the same time
  ThreadFigures reverse;
};

const char* lat_kind_of(const Phase& p);

}  // namespace rb::model
