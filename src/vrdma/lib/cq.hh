#pragma once
// A completion queue lives in the client: the completions of its QPs' own requests, queued here
// as they complete, and the arrivals peers pushed into the QPs whose receives it reports.
#include <deque>
#include <vector>

#include <vrdma/vrdma.h>

#include "core/courteous_yield.hh"
#include "core/unique_fd.hh"

namespace rb::vrdma {

class Qp;

class Cq {
 public:
  explicit Cq(int capacity);
  // Becomes readable once a peer pushed an arrival after arm(), or the router went away.
  int event_fd() const { return efd_.get(); }
  // Asks to be woken: 1 when completions may be waiting already (poll, do not sleep), 0 when the
  // caller may sleep on event_fd(). Clears the descriptor first.
  int arm();
  // A completion of this process's own request (the direct path completes inside post_send): it
  // wakes a sleeper when the CQ is armed, as a peer's arrival does.
  void push(const vrdma_wc& wc);
  // A QP joining an armed CQ is armed with it: a program may arm the CQ before it makes the QP
  // (rping does), and the first arrival must still wake it.
  void attach_receiver(Qp* qp);
  void attach_sender(Qp* qp);
  void detach(Qp* qp);
  int poll(int n, vrdma_wc* out);
  bool routed() const;  // a QP of this CQ is on the router path
  bool has_qps() const { return !receivers_.empty() || !senders_.empty(); }

 private:
  int capacity_;
  bool armed_ = false;   // arm() was called and no own completion has woken it since
  int empty_polls_ = 0;  // in a row: on the router path every 16th gives the core away
  CourteousYield yield_;
  UniqueFd efd_;
  std::deque<vrdma_wc> local_;
  std::vector<Qp*> receivers_;
  std::vector<Qp*> senders_;  // router-path requests complete through them
};

}  // namespace rb::vrdma
