#pragma once
// CPU time of this whole process (all threads), for --cpu-util.
namespace rb {
struct CpuTimes {
  double user_s = 0, sys_s = 0;
  static CpuTimes now();
  CpuTimes operator-(const CpuTimes& o) const { return {user_s - o.user_s, sys_s - o.sys_s}; }
};
}  // namespace rb
