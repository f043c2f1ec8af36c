#pragma once
// What both sides build at the start of every phase: one ThreadState per thread, wired to its
// endpoints and to the memory its lanes use in their domains.
#include <functional>
#include <memory>
#include <vector>

#include "engine/session.hh"
#include "engine/worker.hh"

namespace rb::engine {

// `mr_in_domain[d]`: the memory the threads use, as registered in domain d (the session's own
// region, or a phase's receive ring). `area_of(t)`: where thread t's area starts inside it.
std::vector<std::unique_ptr<ThreadState>> thread_states(const Session& session, int threads,
                                                        const std::vector<const transport::MemoryRegion*>& mr_in_domain,
                                                        const std::function<uint64_t(int)>& area_of);

// The session's region as registered in each of its domains.
std::vector<const transport::MemoryRegion*> session_mrs(const Session& session);

// Runs fn(offset, length) over [0, len) in pieces, calling between() after each: a side busy
// preparing or checking gigabytes still tells its peer it is alive.
void in_pieces(uint64_t len, const std::function<void(uint64_t off, uint64_t n)>& fn, const std::function<void()>& between);

// The first worker error other than an interrupt, reading only workers that have stopped.
Status first_failure(const std::vector<std::unique_ptr<ThreadState>>& threads,
                     const std::function<bool(size_t)>& stopped);

}  // namespace rb::engine
