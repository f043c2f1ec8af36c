#pragma once
// Runs a loaded job: each run in turn against the job's server (or one --loopback child serving
// the whole job), a progress line per run on stderr, every result appended to the job's JSON
// Lines file.
#include <atomic>

#include "job.hh"

namespace rb::app {

// Ok when every run succeeded. A run that fails for a reason of its own (the provider cannot do
// it, a value the transport rejects, data arriving wrong) is reported and the job goes on, so one
// bad combination does not cost the others; anything else (no server, a dead peer, Ctrl-C) ends
// the job with that run's Status.
Status run_job(const Job& job, const std::atomic<bool>& stop);

}  // namespace rb::app
