#pragma once
// A flag's value text -> a number, with the flag's own one-line error: the flag, the value, the
// rule and an example to copy ("--threads 'x': must be a whole number from 1 to 256, e.g. --threads 4").
#include <cstdint>
#include <limits>
#include <string>

#include "core/status.hh"

namespace rb::app {

// "--{flag} '{text}': {rule}, e.g. --{flag} {example}"
Status bad_value(const std::string& flag, const std::string& text, const std::string& rule, const std::string& example);

// Whole numbers as CLI11 took them (strtoll base 0: 4, 0x10), no sign for an unsigned flag. A
// value out of [min, max], however far out (past the type's own range too), is told the range.
Result<int64_t> to_signed(const std::string& flag, const std::string& text, int64_t min, int64_t max, const std::string& example);
Result<uint64_t> to_unsigned(const std::string& flag, const std::string& text, uint64_t min, uint64_t max,
                             const std::string& example);

// The flag's range [lo, hi] within T's.
template <class T>
Result<T> to_whole(const std::string& flag, const std::string& text, const std::string& example, T lo, T hi) {
  if constexpr (std::numeric_limits<T>::is_signed) {
    auto v = to_signed(flag, text, lo, hi, example);
    if (!v) return v.status();
    return T(*v);
  } else {
    auto v = to_unsigned(flag, text, lo, hi, example);
    if (!v) return v.status();
    return T(*v);
  }
}

// A finite decimal number of seconds: 2, 0.5, 1e-3. Whether it may be 0 or negative is the
// flag's own rule, checked after.
Result<double> to_seconds(const std::string& flag, const std::string& text, const std::string& example);

// The span a time flag may take: below 1 ms a run measures nothing (it rounds to zero
// iterations), above a day it is a typo that would never end.
inline constexpr double kMinSeconds = 0.001, kMaxSeconds = 86400;
// to_seconds, then kMinSeconds..kMaxSeconds: "--duration '1e-9': must be from 0.001 s (1 ms) to 86400 s (1 day)".
Result<double> to_bounded_seconds(const std::string& flag, const std::string& text, const std::string& example);

// Counts of ops stop at 2^63-1: past it a count is a typo, and the loops count in signed time.
inline constexpr uint64_t kMaxCount = uint64_t(std::numeric_limits<int64_t>::max());

}  // namespace rb::app
