#pragma once
// A phase's result as one JSON object (docs/output-format.md): the JSON Lines record, and what a
// cluster rank forwards to its coordinator.
#include <string>

#include "model/result.hh"
#include "model/sink.hh"

namespace rb::model {

std::string json_line(const RunInfo& h, const PhaseResult& r, int repeats);
// "tcp write bw t1": the run's transport, the phase's op and mode, and its thread count.
std::string run_label(const RunInfo& h, const Phase& p);

}  // namespace rb::model
