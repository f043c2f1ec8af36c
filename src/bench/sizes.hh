#pragma once
// Byte counts as people type them: 64, 4K, 1M, 2G; lists (64,4K,1M), ranges in powers of two
// (2:8M) and "all" (2 B .. 8 MiB).
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.hh"

namespace rb::bench {
Result<uint64_t> parse_bytes(const std::string& text, const char* flag);
Result<std::vector<uint64_t>> parse_size_list(const std::string& text, const char* flag);
std::string format_bytes(uint64_t n);  // 4096 -> "4K", 1536 -> "1536"
}  // namespace rb::bench
