#pragma once
// The checks that need this machine rather than the command line alone, made before anything
// starts (no loopback child, no connection): the transport -t names must have a usable instance
// here, and one that can do the run's ops.
#include "bench/spec.hh"

namespace rb::app {

// invalid_argument (exit 2) naming -t when no instance of the chosen transport is usable here,
// or when none that is can do what the run asks (check_caps: --op send on dma).
Status check_usable_here(const bench::RunSpec& spec);

}  // namespace rb::app
