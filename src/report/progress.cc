#include "report/progress.hh"

#include <unistd.h>

#include <fmt/format.h>

namespace rb::report {

std::string interval_line(double at_s, const IntervalSample& s) {
  std::string who = s.thread < 0 ? "total" : fmt::format("t{}", s.thread);
  return fmt::format("@{:.1f}s {:>5} {:.3f} Mops/s {:.2f} Gbps p50 {:.2f} us", at_s, who, s.ops_per_s / 1e6, s.gbps, s.p50_us);
}

ProgressLine::ProgressLine(std::FILE* f) : f_(f), on_(f && isatty(fileno(f))) {}

void ProgressLine::update(const std::string& what, double elapsed, double eta) {
  if (!on_) return;
  fmt::print(f_, "\r\033[K{} | elapsed {:.0f}s{}", what, elapsed, eta >= 0 ? fmt::format(" | ETA {:.0f}s", eta) : "");
  std::fflush(f_);
  shown_ = true;
}

void ProgressLine::clear() {
  if (!on_ || !shown_) return;
  fmt::print(f_, "\r\033[K");
  std::fflush(f_);
  shown_ = false;
}

}  // namespace rb::report
