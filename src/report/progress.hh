#pragma once
// Live output: per-interval lines (--report-interval) and a sweep progress line on a terminal.
#include <cstdio>
#include <string>
#include <vector>

#include "model/sink.hh"

namespace rb::report {

using model::IntervalSample;
// "@1.0s  t0 4.16 Mops/s 2.13 Gbps p50 0.24 us"
std::string interval_line(double at_s, const IntervalSample& s);

class ProgressLine {
 public:
  explicit ProgressLine(std::FILE* tty);  // no-op unless tty is a terminal
  void update(const std::string& what, double elapsed_s, double eta_s);
  void clear();

 private:
  std::FILE* f_;
  bool on_ = false, shown_ = false;
};

}  // namespace rb::report
