#pragma once
#include <string>
#include <vector>

#include "core/status.hh"

namespace rb {
// Parses "0,2-3" into CPU numbers; names the flag in the error.
Result<std::vector<int>> parse_cpu_list(const std::string& text, const char* flag);
// Pins the calling thread to one CPU.
Status pin_this_thread(int cpu);
int online_cpus();
}  // namespace rb
