#include "flag_text.hh"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace rb::app {
namespace {

// The first character that is not blank: strtoll and strtod skip leading blanks.
char first_char(const std::string& text) {
  for (char c : text)
    if (!std::isspace(uint8_t(c))) return c;
  return '\0';
}

}  // namespace

Status bad_value(const std::string& flag, const std::string& text, const std::string& rule, const std::string& example) {
  return {Errc::invalid_argument, fmt::format("--{} '{}': {}, e.g. --{} {}", flag, text, rule, flag, example)};
}

// Anything but a whole number in the flag's range (an overflow of the type included) gets the
// flag's own range in its message.
Result<int64_t> to_signed(const std::string& flag, const std::string& text, int64_t min, int64_t max, const std::string& example) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 0);
  if (text.empty() || *end || errno == ERANGE || v < min || v > max)
    return bad_value(flag, text, fmt::format("must be a whole number from {} to {}", min, max), example);
  return int64_t(v);
}

Result<uint64_t> to_unsigned(const std::string& flag, const std::string& text, uint64_t min, uint64_t max,
                             const std::string& example) {
  // strtoull takes "-5" as 2^64-5; a negative count is a mistake, not a huge count.
  char* end = nullptr;
  errno = 0;
  unsigned long long v = first_char(text) == '-' ? 0 : std::strtoull(text.c_str(), &end, 0);
  if (first_char(text) == '-' || text.empty() || *end || errno == ERANGE || v < min || v > max)
    return bad_value(flag, text, fmt::format("must be a whole number from {} to {}", min, max), example);
  return uint64_t(v);
}

Result<double> to_seconds(const std::string& flag, const std::string& text, const std::string& example) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || !std::isfinite(v)) return bad_value(flag, text, "must be a number of seconds", example);
  return v;
}

Result<double> to_bounded_seconds(const std::string& flag, const std::string& text, const std::string& example) {
  auto v = to_seconds(flag, text, example);
  if (!v) return v;
  if (*v < kMinSeconds || *v > kMaxSeconds)
    return bad_value(flag, text, "must be from 0.001 s (1 ms) to 86400 s (1 day)", example);
  return v;
}

}  // namespace rb::app
