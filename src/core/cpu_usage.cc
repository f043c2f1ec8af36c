#include "core/cpu_usage.hh"

#include <sys/resource.h>
#include <time.h>

namespace rb {
CpuTimes CpuTimes::now() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return {double(ru.ru_utime.tv_sec) + double(ru.ru_utime.tv_usec) * 1e-6,
          double(ru.ru_stime.tv_sec) + double(ru.ru_stime.tv_usec) * 1e-6, double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9};
}
}  // namespace rb
