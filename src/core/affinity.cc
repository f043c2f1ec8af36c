#include "core/affinity.hh"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstring>

namespace rb {

int online_cpus() { return int(sysconf(_SC_NPROCESSORS_ONLN)); }

Result<std::vector<int>> parse_cpu_list(const std::string& text, const char* flag) {
  std::vector<int> cpus;
  size_t pos = 0;
  auto bad = [&](const std::string& why) {
    return Status(Errc::invalid_argument,
                  fmt::format("{} '{}': {}; give CPU numbers like 0,1 or 0-3 (this machine has 0-{})",
                              flag, text, why, online_cpus() - 1));
  };
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string part = text.substr(pos, end - pos);
    int a = -1, b = -1;
    char extra;
    if (std::sscanf(part.c_str(), "%d-%d%c", &a, &b, &extra) == 2) {
    } else if (std::sscanf(part.c_str(), "%d%c", &a, &extra) == 1) {
      b = a;
    } else {
      return bad("'" + part + "' is not a CPU number or range");
    }
    if (a < 0 || b < a) return bad("range '" + part + "' is empty or negative");
    if (b >= online_cpus()) return bad(fmt::format("CPU {} does not exist", b));
    for (int c = a; c <= b; ++c) cpus.push_back(c);
    pos = end + 1;
  }
  if (cpus.empty()) return bad("no CPU given");
  return cpus;
}

Status pin_this_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc != 0) return {Errc::io, fmt::format("cannot pin thread to CPU {}: {}", cpu, strerror(rc))};
  return {};
}

}  // namespace rb
