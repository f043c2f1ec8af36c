#pragma once
// libfabric 1.17's shm provider names each endpoint's shared memory "/dev/shm/<pid>:<uid>:<n>" and
// unlinks it when the endpoint closes. A process killed first leaves its names behind: 16 MiB of
// memory each, and a later process that gets the same pid cannot create its own (fi_enable fails
// with EBUSY). Names that carry this process's pid are this process's to manage.
#include <sys/types.h>

namespace rb::transport::ofi {

// Before this process opens its first shm endpoint, names with its pid can only be leftovers of a
// dead process that had the same pid: removes them (once per process, forks included). Also makes
// std::quick_exit remove this process's names, for the paths that end a process that way.
void prepare_shm_names();

// Removes every shm name created by process `pid`.
void remove_shm_names_of(pid_t pid);

}  // namespace rb::transport::ofi
