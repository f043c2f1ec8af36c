#pragma once
// Yielding the core while waiting on another process, minus the case where it backfires.
//
// A waiter that yields lets a peer sharing its core run: on two cores, a client, a router and a
// server need that to make progress at all. But next to a process that never yields (perftest
// spinning on the last byte of its buffer), a yield hands the core over for the rest of that
// one's time slice, and each yield pushes the yielder's own scheduling deadline further out, so
// that once it has work again it waits for the next tick (4 ms here) to get the core back.
// Measured here: a yield next to such a spinner came back after about 4 ms once in three, and
// perftest's ib_write_lat across two routers ran at 4 ms an iteration in half the runs. Yields
// that come back that late, a few in a row, are the sign. For a while after them the waiter does
// not yield: a client polls, a router naps (a timer's wake-up preempts the spinner; a yield does
// not).
#include <cstdint>

namespace rb {

class CourteousYield {
 public:
  // Gives the core away unless a recent yield cost a whole time slice. True when it yielded.
  bool yield();
  // A yield came back late within the hold-off: the core's other user does not yield.
  bool core_hoarded() const;

 private:
  int64_t hoarded_until_ns_ = 0;
  int64_t last_late_ns_ = 0;
  int late_ = 0;
  int since_late_ = 0;  // yields since the last late one
};

// The idle stretch of a router loop: yield turns while they stay cheap, then park. Where the
// core is hoarded it naps instead, for a while, then parks.
class IdleSpin {
 public:
  enum class Turn { again, nap, park };
  static constexpr int64_t kNapNs = 20'000;

  explicit IdleSpin(int rounds);  // sets the calling thread's timer slack so a nap is that short
  void worked() { turns_ = 0; }
  // One idle turn: `again` after a yield, `nap` to sleep kNapNs (woken early by a kick), `park`.
  Turn turn();

 private:
  int rounds_;
  int turns_ = 0;
  int64_t started_ns_ = 0;
  CourteousYield yield_;
};

}  // namespace rb
