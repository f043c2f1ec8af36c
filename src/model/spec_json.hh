#pragma once
// A RunSpec's form on the wire (inside the client's hello): the transport selection, the workload
// and the addressing, each an object of its own. Every field is required: a peer that leaves one
// out is not of this protocol version.
#include <nlohmann/json.hpp>

#include "model/spec.hh"

namespace rb::model {
nlohmann::json spec_to_json(const RunSpec& s);
Result<RunSpec> spec_from_json(const nlohmann::json& j);
}  // namespace rb::model
