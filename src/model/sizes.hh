#pragma once
// Byte counts as people type them: 64, 4K, 1M, 2G; lists (64,4K,1M), ranges in powers of two
// (2:8M) and "all" (2 B .. 8 MiB).
#include <cstdint>
#include <string>
#include <vector>

#include "core/bytes.hh"
#include "core/status.hh"

namespace rb::model {
using rb::bytes_with_unit;
using rb::format_bytes;
using rb::parse_bytes;
Result<std::vector<uint64_t>> parse_size_list(const std::string& text, const char* flag);
}  // namespace rb::model
