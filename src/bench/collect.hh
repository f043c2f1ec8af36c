#pragma once
// A measured phase's figures, gathered once from its worker threads' state.
#include <memory>
#include <vector>

#include "bench/model.hh"
#include "core/clock.hh"

namespace rb::bench {

struct ThreadState;
PhaseResult collect(const Phase& phase, const std::vector<std::unique_ptr<ThreadState>>& threads, const Clock& clk);

}  // namespace rb::bench
