#pragma once
// A test-only fault for the tests of --validate: which damage, to which op, and which op of that
// kind on each endpoint gets it. Real processes take it from the environment (kFaultEnv, see
// docs/transports.md), never from a flag: -o options travel in the run description and apply on
// both sides, and flags show in --help, --list and job files, while a fault must hit the one
// process a test chose and stay out of the user's way. Each process reads its own environment.
#include <cstdint>
#include <optional>
#include <string>

#include "core/status.hh"
#include "transport/transport.hh"

namespace rb::transport::fault {

inline constexpr const char* kFaultEnv = "RDMABENCH_FAULT";

enum class Kind : uint8_t { corrupt, misplace, drop, duplicate, truncate };
const char* kind_name(Kind k);

struct FaultPlan {
  Kind kind = Kind::corrupt;
  Op op = Op::write;
  uint64_t nth = 1;  // 1-based: the nth op of `op` each endpoint accepts
};

// "corrupt:write:5" -> the plan. An error names the variable, the value and the fix.
Result<FaultPlan> parse_fault_plan(const std::string& text);
// The plan in kFaultEnv: none when it is unset or empty, an error when it does not parse.
Result<std::optional<FaultPlan>> fault_plan_from_env();

}  // namespace rb::transport::fault
