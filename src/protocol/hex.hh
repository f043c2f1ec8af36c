#pragma once
// Opaque binary blobs (endpoint addresses, region handles) as hex strings inside JSON messages.
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.hh"

namespace rb::protocol {
std::string to_hex(const std::vector<uint8_t>& b);
Result<std::vector<uint8_t>> from_hex(const std::string& s);
}  // namespace rb::protocol
