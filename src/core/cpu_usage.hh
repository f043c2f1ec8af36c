#pragma once
// CPU time of this whole process (all threads), for --cpu-util. `total_s` comes from
// CLOCK_PROCESS_CPUTIME_ID (nanosecond accounting); the user/system split comes from getrusage,
// which the kernel may sample at tick granularity, so it is only indicative for short windows.
namespace rb {
struct CpuTimes {
  double user_s = 0, sys_s = 0, total_s = 0;
  static CpuTimes now();
  CpuTimes operator-(const CpuTimes& o) const { return {user_s - o.user_s, sys_s - o.sys_s, total_s - o.total_s}; }
};
}  // namespace rb
