#include "core/histogram.hh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace rb {
namespace {

// Exact percentile by the same rank rule the histogram documents.
double exact(std::vector<uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  uint64_t rank = std::max<uint64_t>(1, uint64_t(std::ceil(q * double(v.size()))));
  return double(v[rank - 1]);
}

void expect_close(const HistogramSnapshot& s, const std::vector<uint64_t>& v) {
  for (double q : {0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0}) {
    double want = exact(v, q), got = s.percentile(q);
    // The README's promise: within 0.4% (half a bin of 1/128 of its power of two), or half a unit.
    EXPECT_LE(std::fabs(got - want), std::max(0.5, want * 0.004)) << "q=" << q << " want " << want << " got " << got;
  }
}

TEST(Histogram, BinsCoverEveryValueWithBoundedWidth) {
  for (uint64_t v : {0ull, 1ull, 127ull, 128ull, 129ull, 255ull, 256ull, 1000ull, 123456789ull, 1ull << 40}) {
    size_t i = Histogram::index_of(v);
    Bin b = Histogram::bounds_of(i);
    EXPECT_LE(b.low, v);
    EXPECT_LT(v, b.high);
    EXPECT_LE(double(b.high - b.low), std::max(1.0, double(b.low) / 128.0));
  }
}

TEST(Histogram, UniformDistributionPercentilesWithinTheDocumentedError) {
  std::mt19937_64 g(1);
  std::uniform_int_distribution<uint64_t> d(100, 100000);
  Histogram h;
  std::vector<uint64_t> v;
  for (int i = 0; i < 200000; ++i) {
    v.push_back(d(g));
    h.record(v.back());
  }
  auto s = h.snapshot();
  EXPECT_EQ(s.count, v.size());
  expect_close(s, v);
}

TEST(Histogram, ExponentialTailPercentilesWithinTheDocumentedError) {
  std::mt19937_64 g(2);
  std::exponential_distribution<double> d(1.0 / 2000.0);
  Histogram h;
  std::vector<uint64_t> v;
  for (int i = 0; i < 300000; ++i) {
    v.push_back(uint64_t(d(g)) + 300);
    h.record(v.back());
  }
  expect_close(h.snapshot(), v);
}

TEST(Histogram, MeanStdevMinMaxAreExact) {
  Histogram h;
  for (uint64_t v : {10, 20, 30, 40}) h.record(v);
  auto s = h.snapshot();
  EXPECT_DOUBLE_EQ(s.mean(), 25.0);
  EXPECT_NEAR(s.stdev(), 12.909944, 1e-5);
  EXPECT_EQ(s.min, 10u);
  EXPECT_EQ(s.max, 40u);
}

TEST(Histogram, ResetDropsWarmup) {
  Histogram h;
  for (int i = 0; i < 100; ++i) h.record(1000000);
  h.reset();
  h.record(500);
  auto s = h.snapshot();
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.max, 500u);
  EXPECT_EQ(s.percentile(0.99), 500.0);
}

TEST(Histogram, MergeAndSince) {
  Histogram a, b;
  for (int i = 0; i < 1000; ++i) a.record(100);
  auto first = a.snapshot();
  for (int i = 0; i < 1000; ++i) a.record(10000);
  for (int i = 0; i < 1000; ++i) b.record(5000);
  auto later = a.snapshot();
  auto interval = later.since(first);
  EXPECT_EQ(interval.count, 1000u);
  EXPECT_NEAR(interval.percentile(0.5), 10000, 100);
  auto m = later;
  m.merge(b.snapshot());
  EXPECT_EQ(m.count, 3000u);
  EXPECT_NEAR(m.percentile(0.5), 5000, 50);
}

TEST(Histogram, HugeValuesClampToLastBinButMaxIsExact) {
  Histogram h;
  h.record(1ull << 60);
  auto s = h.snapshot();
  EXPECT_EQ(s.max, 1ull << 60);
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.percentile(1.0), double(1ull << 60));
}

}  // namespace
}  // namespace rb
