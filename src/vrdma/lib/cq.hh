#pragma once
// A completion queue lives in the client: the completions of its QPs' own requests, queued here
// as they complete, and the arrivals peers pushed into the QPs whose receives it reports.
#include <deque>
#include <vector>

#include <vrdma/vrdma.h>

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
  void push(const vrdma_wc& wc) { local_.push_back(wc); }
  void attach_receiver(Qp* qp) { receivers_.push_back(qp); }
  void detach(Qp* qp);
  int poll(int n, vrdma_wc* out);
  bool has_qps() const { return !receivers_.empty() || senders_ > 0; }
  void add_sender() { ++senders_; }
  void remove_sender() { --senders_; }

 private:
  int capacity_;
  UniqueFd efd_;
  std::deque<vrdma_wc> local_;
  std::vector<Qp*> receivers_;
  int senders_ = 0;
};

}  // namespace rb::vrdma
