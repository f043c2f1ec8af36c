#include "core/courteous_yield.hh"

#include <linux/capability.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace rb {
namespace {

// A yield between processes that both yield costs 1-2 us here; one past a spinner, milliseconds.
constexpr int64_t kLateYieldNs = 200'000;
// A spinner makes one yield in three come back late. Processes that all yield (a client, two
// routers and a server on two cores) see one late in thousands (an interrupt, a daemon); taking
// that for hoarding made each stop yielding or nap for a second, which made the others' yields
// late in turn: across two hosts that cascade cost 15-40 us a message. So late yields count as
// hoarding only when they come close together.
constexpr int kLateYields = 3;     // within a hold-off of each other, and
constexpr int kYieldsPerLate = 8;  // at most this many yields from one late one to the next
// Long enough that probing again (one late yield) costs a fraction of a percent.
constexpr int64_t kHoldOffNs = 1'000'000'000;
// How long a router naps before it parks: its peer's next request usually comes sooner.
constexpr int64_t kNappingNs = 10'000'000;
// How long a thread keeps its high priority after a late yield. On a quiet machine a stray one
// (an interrupt, a daemon; one or two a second here) costs the shortest keep at the priority that
// takes a core from the router's own clients. Beside a busy neighbour every lowered yield is late
// (a time slice, 4 ms), so late yields that come soon after the last keep double it, up to a second.
constexpr int64_t kKeepMinNs = 10'000'000, kKeepMaxNs = 1'000'000'000;

int64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

bool has_cap_sys_nice() {
  __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
  if (syscall(SYS_capget, &head, data) != 0) return false;
  return data[CAP_TO_INDEX(CAP_SYS_NICE)].effective & CAP_TO_MASK(CAP_SYS_NICE);
}

// Whether the calling thread may set its nice value to `nice`. Without CAP_SYS_NICE a thread may
// take a nice value below its own only down to 20 minus RLIMIT_NICE: a router started at nice -10
// by a unit that drops every capability, and lowered to 0, could never come back (the unit sets
// LimitNICE=-10 so that it can).
bool may_raise_to(int nice) {
  rlimit r{};
  if (getrlimit(RLIMIT_NICE, &r) == 0 && (r.rlim_cur == RLIM_INFINITY || 20 - int64_t(r.rlim_cur) <= nice)) return true;
  return has_cap_sys_nice();
}

}  // namespace

bool CourteousYield::core_hoarded() const { return hoarded_until_ns_ && now_ns() < hoarded_until_ns_; }

bool CourteousYield::yield() {
  if (hoarded_until_ns_) {
    if (now_ns() < hoarded_until_ns_) return false;
    hoarded_until_ns_ = 0;
  }
  int64_t t0 = now_ns();
  sched_yield();
  int64_t t1 = now_ns();
  ++since_late_;
  if (t1 - t0 > kLateYieldNs) {
    // One late yield can be anything (an interrupt, a daemon waking); a spinner makes them come
    // one in three.
    late_ = t1 - last_late_ns_ < kHoldOffNs && since_late_ <= kYieldsPerLate ? late_ + 1 : 1;
    last_late_ns_ = t1;
    since_late_ = 0;
    if (late_ >= kLateYields) {
      hoarded_until_ns_ = t1 + kHoldOffNs;
      late_ = 0;
    }
  }
  return true;
}

IdleSpin::IdleSpin(int rounds) : rounds_(rounds), tid_(int(gettid())) {
  prctl(PR_SET_TIMERSLACK, 1000UL);  // the default 50 us would turn a 20 us nap into 70
  errno = 0;
  int nice = getpriority(PRIO_PROCESS, id_t(tid_));
  if (!errno && nice < 0 && may_raise_to(nice)) nice_ = nice;
}

IdleSpin::~IdleSpin() {
  if (lowered_) restore();
}

void IdleSpin::lower() {
  if (nice_ < 0 && !lowered_ && now_ns() >= keep_until_ns_) lowered_ = setpriority(PRIO_PROCESS, id_t(tid_), 0) == 0;
}

void IdleSpin::restore() {
  if (setpriority(PRIO_PROCESS, id_t(tid_), nice_) != 0) nice_ = 0;  // cannot: never lowered again
  lowered_ = false;
}

IdleSpin::Turn IdleSpin::turn() {
  if (turns_++ == 0) started_ns_ = now_ns();
  bool hoarded = yield_.core_hoarded();
  if (hoarded || turns_ >= rounds_) {
    if (lowered_) restore();
    return hoarded && now_ns() - started_ns_ < kNappingNs ? Turn::nap : Turn::park;
  }
  lower();
  int64_t t0 = now_ns();
  yield_.yield();
  if (lowered_ && now_ns() - t0 > kLateYieldNs) {  // a neighbour wants the core
    restore();
    int64_t now = now_ns();
    keep_ns_ = now - keep_until_ns_ > 4 * keep_ns_ ? kKeepMinNs : std::min(2 * keep_ns_, kKeepMaxNs);
    keep_until_ns_ = now + keep_ns_;
  }
  if (!yield_.core_hoarded()) return Turn::again;
  if (lowered_) restore();
  return Turn::nap;
}

}  // namespace rb
