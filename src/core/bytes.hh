#pragma once
// Byte counts as people type them (64, 4K, 1M, 2G: powers of 1024) and as we print them back.
#include <cstdint>
#include <string>

#include "core/status.hh"

namespace rb {
// `flag` names where the text came from in the error: "--size", "-o sndbuf".
Result<uint64_t> parse_bytes(const std::string& text, const char* flag);
std::string format_bytes(uint64_t n);  // 4096 -> "4K", 1536 -> "1536"
// For messages, where every size carries its unit: 4096 -> "4 KiB", 1536 -> "1536 B".
std::string bytes_with_unit(uint64_t n);
}  // namespace rb
