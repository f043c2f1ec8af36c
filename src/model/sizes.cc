#include "model/sizes.hh"

#include <fmt/format.h>

namespace rb::model {

Result<std::vector<uint64_t>> parse_size_list(const std::string& text, const char* flag) {
  std::vector<uint64_t> out;
  if (text == "all") {
    for (uint64_t s = 2; s <= (8u << 20); s <<= 1) out.push_back(s);
    return out;
  }
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string part = text.substr(pos, end - pos);
    size_t colon = part.find(':');
    if (colon != std::string::npos) {
      auto lo = parse_bytes(part.substr(0, colon), flag);
      if (!lo) return lo.status();
      auto hi = parse_bytes(part.substr(colon + 1), flag);
      if (!hi) return hi.status();
      if (*lo == 0 || *hi < *lo)
        return Status(Errc::invalid_argument,
                      fmt::format("{} '{}': a range is LOW:HIGH with 0 < LOW <= HIGH, e.g. 2:8M", flag, part));
      // The range doubles from LOW; a HIGH it never reaches would end the run short of what was asked.
      uint64_t last = *lo;
      while (last <= *hi / 2) last <<= 1;
      if (last != *hi)
        return Status(Errc::invalid_argument,
                      fmt::format("{} '{}': a range doubles from LOW, and {} never reaches {}; end it at {}, e.g. {}:{}",
                                  flag, part, bytes_with_unit(*lo), bytes_with_unit(*hi), bytes_with_unit(last),
                                  part.substr(0, colon), format_bytes(last)));
      for (uint64_t s = *lo; s <= *hi; s <<= 1) out.push_back(s);
    } else {
      auto v = parse_bytes(part, flag);
      if (!v) return v.status();
      if (*v == 0) return Status(Errc::invalid_argument, fmt::format("{} '{}': a size must be at least 1 byte", flag, part));
      out.push_back(*v);
    }
    pos = end + 1;
  }
  return out;
}

}  // namespace rb::model
