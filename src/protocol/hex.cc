#include "protocol/hex.hh"

namespace rb::protocol {
namespace {
int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string to_hex(const std::vector<uint8_t>& b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(b.size() * 2);
  for (uint8_t c : b) {
    s += kDigits[c >> 4];
    s += kDigits[c & 15];
  }
  return s;
}

Result<std::vector<uint8_t>> from_hex(const std::string& s) {
  if (s.size() % 2) return Status(Errc::io, "control protocol error: a hex string of odd length");
  std::vector<uint8_t> b(s.size() / 2);
  for (size_t i = 0; i < b.size(); ++i) {
    int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return Status(Errc::io, "control protocol error: a non-hex digit in a hex string");
    b[i] = uint8_t(hi << 4 | lo);
  }
  return b;
}

}  // namespace rb::protocol
