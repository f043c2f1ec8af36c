#pragma once
// RunSpec <-> JSON, for the wire (client -> server) and for the JSON Lines "params" field.
#include <nlohmann/json.hpp>

#include "bench/spec.hh"

namespace rb::bench {
nlohmann::json spec_to_json(const RunSpec& s);
Result<RunSpec> spec_from_json(const nlohmann::json& j);
Result<Op> parse_op(const std::string& s);
Result<Mode> parse_mode(const std::string& s);
}  // namespace rb::bench
