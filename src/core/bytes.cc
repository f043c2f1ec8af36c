#include "core/bytes.hh"

#include <cctype>

#include <fmt/format.h>

namespace rb {

Result<uint64_t> parse_bytes(const std::string& text, const char* flag) {
  auto bad = [&](const char* why) {
    return Status(Errc::invalid_argument,
                  fmt::format("{} '{}': {}; give bytes like 64, 4K, 1M or 2G", flag, text, why));
  };
  if (text.empty()) return bad("empty");
  size_t i = 0;
  uint64_t v = 0;
  while (i < text.size() && isdigit(static_cast<unsigned char>(text[i]))) {
    uint64_t d = uint64_t(text[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return bad("too large");
    v = v * 10 + d;
    ++i;
  }
  if (i == 0) return bad("not a number");
  std::string suffix = text.substr(i);
  int shift = 0;
  if (suffix.empty() || suffix == "B" || suffix == "b") shift = 0;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB" || suffix == "KB") shift = 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB" || suffix == "MB") shift = 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB" || suffix == "GB") shift = 30;
  else return bad("unknown suffix (K, M, G are powers of 1024)");
  if (shift && v > (UINT64_MAX >> shift)) return bad("too large");
  return v << shift;
}

std::string format_bytes(uint64_t n) {
  if (n >= (1ull << 30) && n % (1ull << 30) == 0) return fmt::format("{}G", n >> 30);
  if (n >= (1ull << 20) && n % (1ull << 20) == 0) return fmt::format("{}M", n >> 20);
  if (n >= (1ull << 10) && n % (1ull << 10) == 0) return fmt::format("{}K", n >> 10);
  return fmt::format("{}", n);
}

std::string bytes_with_unit(uint64_t n) {
  std::string short_form = format_bytes(n);
  char unit = short_form.back();
  if (unit == 'K' || unit == 'M' || unit == 'G') return fmt::format("{} {}iB", short_form.substr(0, short_form.size() - 1), unit);
  return short_form + " B";
}

}  // namespace rb
