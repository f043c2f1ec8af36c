#include "model/result.hh"

namespace rb::model {

LatencySummary summarize(const HistogramSnapshot& h) {
  LatencySummary l;
  if (!h.count) return l;
  l.min = double(h.min) / 1e3;
  l.p50 = h.percentile(0.50) / 1e3;
  l.avg = h.mean() / 1e3;
  l.p99 = h.percentile(0.99) / 1e3;
  l.p999 = h.percentile(0.999) / 1e3;
  l.p9999 = h.percentile(0.9999) / 1e3;
  l.max = double(h.max) / 1e3;
  l.stdev = h.stdev() / 1e3;
  return l;
}

const char* lat_kind_of(const Phase& p) {
  if (p.mode == Mode::bw) return "completion";
  return p.op == Op::read || is_atomic(p.op) ? "round_trip" : "half_round_trip";
}

}  // namespace rb::model
