#pragma once
// The checks that need this machine rather than the command line alone, made before anything
// starts (no loopback child, no connection): the transport -t names must have a usable instance
// here, and one that can do the run's ops.
#include <map>
#include <string>
#include <vector>

#include "model/spec.hh"
#include "registry/registry.hh"

namespace rb::app {

// invalid_argument (exit 2) naming -t when no instance of the chosen transport is usable here,
// or when none that is can do what the run asks (check_caps: --op send on dma).
Status check_usable_here(const model::RunSpec& spec);

// The same for many runs (a job file), probing each transport once: a probe opens the provider
// (a few hundred ms for libfabric), and a job may name the same transport in every run.
class UsableHere {
 public:
  Status check(const model::RunSpec& spec);

 private:
  std::map<std::string, std::vector<transport::Availability>> probed_;  // by transport name (and -o, for probe_with)
};

}  // namespace rb::app
