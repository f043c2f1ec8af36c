#include "core/courteous_yield.hh"

#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

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

int64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
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

IdleSpin::IdleSpin(int rounds) : rounds_(rounds) {
  prctl(PR_SET_TIMERSLACK, 1000UL);  // the default 50 us would turn a 20 us nap into 70
}

IdleSpin::Turn IdleSpin::turn() {
  if (turns_++ == 0) started_ns_ = now_ns();
  if (yield_.core_hoarded()) return now_ns() - started_ns_ < kNappingNs ? Turn::nap : Turn::park;
  if (turns_ >= rounds_) return Turn::park;
  yield_.yield();
  return yield_.core_hoarded() ? Turn::nap : Turn::again;
}

}  // namespace rb
