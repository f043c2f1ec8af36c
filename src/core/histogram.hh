#pragma once
// Log-linear latency histogram in nanoseconds, after HdrHistogram: values below 128 ns have a
// bin each; above, every power of two is split into 128 equal bins, so a bin's width is at most
// 1/128 of its lower edge and a percentile read from the bin's middle is within 0.4% of the truth.
// Memory is fixed (kBins counters) whatever the run length.
//
// Histogram has one writer (the thread it belongs to) and any number of readers taking
// snapshots for live lines: counters are atomics updated with plain load/store, which costs
// the same as a non-atomic increment on x86 and keeps concurrent reads well defined.
#include <atomic>
#include <cstdint>
#include <vector>

namespace rb {

struct Bin {
  uint64_t low, high, count;  // low <= v < high
};

class HistogramSnapshot;

class Histogram {
 public:
  static constexpr int kSubBits = 7;
  static constexpr uint64_t kSub = 1u << kSubBits;  // 128
  static constexpr int kMaxExp = 44;                // values up to ~4.9 hours in ns
  static constexpr size_t kBins = kSub + (kMaxExp - kSubBits + 1) * kSub;

  Histogram();
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  static size_t index_of(uint64_t v) {
    if (v < kSub) return size_t(v);
    int m = 63 - __builtin_clzll(v);
    if (m > kMaxExp) return kBins - 1;
    uint64_t sub = (v >> (m - kSubBits)) & (kSub - 1);
    return size_t(kSub + uint64_t(m - kSubBits) * kSub + sub);
  }
  static Bin bounds_of(size_t idx);

  void record(uint64_t ns) {
    auto& b = bins_[index_of(ns)];
    b.store(b.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    count_.store(count_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    double d = double(ns);
    sum_.store(sum_.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
    sumsq_.store(sumsq_.load(std::memory_order_relaxed) + d * d, std::memory_order_relaxed);
    if (ns < min_.load(std::memory_order_relaxed)) min_.store(ns, std::memory_order_relaxed);
    if (ns > max_.load(std::memory_order_relaxed)) max_.store(ns, std::memory_order_relaxed);
  }
  // Only the writer may reset (at the warm-up boundary).
  void reset();
  HistogramSnapshot snapshot() const;

 private:
  std::vector<std::atomic<uint64_t>> bins_;
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0}, sumsq_{0};
  std::atomic<uint64_t> min_{UINT64_MAX}, max_{0};
};

// A plain copy: merged across threads, subtracted for intervals, queried for percentiles.
class HistogramSnapshot {
 public:
  HistogramSnapshot() : counts(Histogram::kBins, 0) {}
  std::vector<uint64_t> counts;
  uint64_t count = 0;
  double sum = 0, sumsq = 0;
  uint64_t min = UINT64_MAX, max = 0;

  void merge(const HistogramSnapshot& o);
  // Counts recorded since `earlier` (min/max stay those of the whole of this snapshot).
  HistogramSnapshot since(const HistogramSnapshot& earlier) const;
  // q in [0,1]; rank = max(1, ceil(q*count)); the bin's middle, clamped to [min, max]. ns.
  double percentile(double q) const;
  double mean() const { return count ? sum / double(count) : 0.0; }
  double stdev() const;
  std::vector<Bin> nonempty_bins() const;
};

}  // namespace rb
