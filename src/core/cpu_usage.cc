#include "core/cpu_usage.hh"

#include <sys/resource.h>

namespace rb {
CpuTimes CpuTimes::now() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return {double(ru.ru_utime.tv_sec) + double(ru.ru_utime.tv_usec) * 1e-6,
          double(ru.ru_stime.tv_sec) + double(ru.ru_stime.tv_usec) * 1e-6};
}
}  // namespace rb
