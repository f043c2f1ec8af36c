#pragma once
// A measured phase's figures, gathered once from its worker threads' state.
#include <memory>
#include <vector>

#include "engine/model.hh"
#include "core/clock.hh"

namespace rb::engine {

struct ThreadState;
PhaseResult collect(const Phase& phase, const std::vector<std::unique_ptr<ThreadState>>& threads, const Clock& clk);

}  // namespace rb::engine
