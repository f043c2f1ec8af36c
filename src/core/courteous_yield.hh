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
//
// A thread given a high priority (the router's unit runs it at nice -10) gives it up while it
// spins with nothing to do: spinning at nice -10 it kept a whole core from the client and server
// it shared two cores with (a router-path 64 B WRITE took 3.6-3.9 us, against 1.5-2.0 us at nice
// 0). It takes it back for work, for a nap and to park (so a wake-up preempts a busy neighbour),
// and for a while (10 ms to 1 s) after a yield that came back late (a neighbour wants the core:
// at nice 0 the router waits out the neighbour's time slice).
class IdleSpin {
 public:
  enum class Turn { again, nap, park };
  static constexpr int64_t kNapNs = 20'000;

  // Sets the calling thread's timer slack so a nap is that short, and notes its priority.
  explicit IdleSpin(int rounds);
  ~IdleSpin();
  IdleSpin(const IdleSpin&) = delete;
  IdleSpin& operator=(const IdleSpin&) = delete;
  void worked() {
    turns_ = 0;
    if (lowered_) restore();
  }
  // One idle turn: `again` after a yield, `nap` to sleep kNapNs (woken early by a kick), `park`.
  Turn turn();

 private:
  void lower();
  void restore();

  int rounds_;
  int turns_ = 0;
  int64_t started_ns_ = 0;
  CourteousYield yield_;
  int tid_ = 0;
  int nice_ = 0;              // the thread's own, below 0 when it may be lowered
  bool lowered_ = false;      // spinning at nice 0 now
  int64_t keep_until_ns_ = 0;  // after a late yield, not lowered before this
  int64_t keep_ns_ = 0;        // how long the last late yield kept it
};

}  // namespace rb
