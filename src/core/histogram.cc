#include "core/histogram.hh"

#include <algorithm>
#include <cmath>

namespace rb {

Histogram::Histogram() : bins_(kBins) { reset(); }

Bin Histogram::bounds_of(size_t idx) {
  if (idx < kSub) return {idx, idx + 1, 0};
  uint64_t k = (idx - kSub) / kSub, sub = (idx - kSub) % kSub;
  int shift = int(k);  // exponent m = k + kSubBits, bin width 2^(m - kSubBits)
  return {(kSub + sub) << shift, (kSub + sub + 1) << shift, 0};
}

void Histogram::reset() {
  for (auto& b : bins_) b.store(0, std::memory_order_relaxed);
  count_.store(0, std::memory_order_relaxed);
  sum_.store(0, std::memory_order_relaxed);
  sumsq_.store(0, std::memory_order_relaxed);
  min_.store(UINT64_MAX, std::memory_order_relaxed);
  max_.store(0, std::memory_order_relaxed);
}

HistogramSnapshot Histogram::snapshot() const {
  HistogramSnapshot s;
  for (size_t i = 0; i < kBins; ++i) s.counts[i] = bins_[i].load(std::memory_order_relaxed);
  // Derive the count from the bins so a snapshot taken mid-record is self-consistent.
  s.count = 0;
  for (auto c : s.counts) s.count += c;
  s.sum = sum_.load(std::memory_order_relaxed);
  s.sumsq = sumsq_.load(std::memory_order_relaxed);
  s.min = min_.load(std::memory_order_relaxed);
  s.max = max_.load(std::memory_order_relaxed);
  return s;
}

void HistogramSnapshot::merge(const HistogramSnapshot& o) {
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += o.counts[i];
  count += o.count;
  sum += o.sum;
  sumsq += o.sumsq;
  min = std::min(min, o.min);
  max = std::max(max, o.max);
}

HistogramSnapshot HistogramSnapshot::since(const HistogramSnapshot& e) const {
  HistogramSnapshot d;
  for (size_t i = 0; i < counts.size(); ++i) d.counts[i] = counts[i] - std::min(counts[i], e.counts[i]);
  d.count = count - std::min(count, e.count);
  d.sum = sum - e.sum;
  d.sumsq = sumsq - e.sumsq;
  d.min = min;
  d.max = max;
  return d;
}

double HistogramSnapshot::percentile(double q) const {
  if (count == 0) return 0.0;
  uint64_t rank = uint64_t(std::ceil(q * double(count)));
  rank = std::clamp<uint64_t>(rank, 1, count);
  uint64_t cum = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    cum += counts[i];
    if (cum >= rank) {
      Bin b = Histogram::bounds_of(i);
      double mid = (double(b.low) + double(b.high)) / 2.0;
      return std::clamp(mid, double(min), double(max));
    }
  }
  return double(max);
}

double HistogramSnapshot::stdev() const {
  if (count < 2) return 0.0;
  double m = mean();
  double var = (sumsq - double(count) * m * m) / double(count - 1);
  return var > 0 ? std::sqrt(var) : 0.0;
}

std::vector<Bin> HistogramSnapshot::nonempty_bins() const {
  std::vector<Bin> out;
  for (size_t i = 0; i < counts.size(); ++i)
    if (counts[i]) {
      Bin b = Histogram::bounds_of(i);
      b.count = counts[i];
      out.push_back(b);
    }
  return out;
}

}  // namespace rb
