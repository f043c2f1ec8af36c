#pragma once
// A completion queue lives in the client: the completions of its QPs' own requests, queued here
// as they complete, and the arrivals peers pushed into the QPs whose receives it reports.
#include <deque>
#include <vector>

#include <vrdma/vrdma.h>

namespace rb::vrdma {

class Qp;

class Cq {
 public:
  explicit Cq(int capacity) : capacity_(capacity) {}
  void push(const vrdma_wc& wc) { local_.push_back(wc); }
  void attach_receiver(Qp* qp) { receivers_.push_back(qp); }
  void detach(Qp* qp);
  int poll(int n, vrdma_wc* out);
  bool has_qps() const { return !receivers_.empty() || senders_ > 0; }
  void add_sender() { ++senders_; }
  void remove_sender() { --senders_; }

 private:
  int capacity_;
  std::deque<vrdma_wc> local_;
  std::vector<Qp*> receivers_;
  int senders_ = 0;
};

}  // namespace rb::vrdma
