#include "engine/collect.hh"

#include <algorithm>
#include <memory>

#include "engine/worker.hh"

namespace rb::engine {

PhaseResult collect(const Phase& phase, const std::vector<std::unique_ptr<ThreadState>>& threads, const Clock& clk) {
  PhaseResult r;
  r.phase = phase;
  r.lat_kind = lat_kind_of(phase);
  uint64_t begin = UINT64_MAX, end = 0;
  for (auto& tp : threads) {
    const ThreadState& t = *tp;
    if (!t.t_begin) continue;
    uint64_t t_end = t.t_end ? t.t_end : clk.now();
    begin = std::min(begin, t.t_begin);
    end = std::max(end, t_end);
    ThreadFigures f;
    f.thread = t.index;
    f.iterations = t.ops.load();
    f.seconds = clk.to_s(t_end - t.t_begin);
    if (f.seconds > 0) {
      f.gbps = double(t.bytes.load()) * 8 / f.seconds / 1e9;
      f.mops = double(f.iterations) / f.seconds / 1e6;
    }
    r.per_thread.push_back(f);
    r.iterations += f.iterations;
    r.bytes += t.bytes.load();
    r.hist.merge(t.hist.snapshot());
  }
  if (end > begin) r.duration_s = clk.to_s(end - begin);
  // Per rail: the endpoints of every thread that sit on that rail (eps[rail * qps + q]).
  for (auto& tp : threads) {
    const ThreadState& t = *tp;
    for (size_t e = 0; e < t.lane_measured.size(); ++e) {
      size_t rail = e / size_t(std::max(1, t.qps));
      if (r.per_rail.size() <= rail) r.per_rail.resize(rail + 1);
      r.per_rail[rail].thread = int(rail);
      r.per_rail[rail].iterations += t.lane_measured[e];
    }
  }
  for (auto& f : r.per_rail) {
    f.seconds = r.duration_s;
    if (f.seconds > 0) {
      f.gbps = double(f.iterations) * double(phase.size) * 8 / f.seconds / 1e9;
      f.mops = double(f.iterations) / f.seconds / 1e6;
    }
  }
  if (r.duration_s > 0) {
    r.gbytes_per_s = double(r.bytes) / r.duration_s / 1e9;
    r.gbps = r.gbytes_per_s * 8;
    r.mops = double(r.iterations) / r.duration_s / 1e6;
  }
  r.lat = summarize(r.hist);
  return r;
}

}  // namespace rb::engine
