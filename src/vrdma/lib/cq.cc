#include "vrdma/lib/cq.hh"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "vrdma/lib/qp.hh"

namespace rb::vrdma {

Cq::Cq(int capacity) : capacity_(capacity), efd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

int Cq::arm() {
  uint64_t v;
  (void)!read(efd_.get(), &v, sizeof v);  // one read takes the whole count (not a semaphore): a wake-up's syscall less
  armed_ = true;
  for (Qp* qp : receivers_) qp->arm();
  for (Qp* qp : senders_) qp->arm_send();
  // Dekker with the producer: it pushes, fences, then reads `armed`; we store `armed`, fence,
  // then look at the rings. One of us sees the other.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!local_.empty()) return 1;
  for (Qp* qp : receivers_)
    if (qp->wake_worthy()) return 1;
  for (Qp* qp : senders_)
    if (qp->answers_waiting()) return 1;
  return 0;
}

void Cq::attach_receiver(Qp* qp) {
  receivers_.push_back(qp);
  if (armed_) qp->arm();
}

void Cq::attach_sender(Qp* qp) {
  senders_.push_back(qp);
  if (armed_) qp->arm_send();
}

void Cq::push(const vrdma_wc& wc) {
  local_.push_back(wc);
  if (armed_) {
    armed_ = false;
    uint64_t one = 1;
    (void)!write(efd_.get(), &one, sizeof one);
  }
}

bool Cq::routed() const {
  for (Qp* qp : senders_)
    if (qp->router_path()) return true;
  for (Qp* qp : receivers_)
    if (qp->router_path()) return true;
  return false;
}

void Cq::detach(Qp* qp) {
  receivers_.erase(std::remove(receivers_.begin(), receivers_.end(), qp), receivers_.end());
  senders_.erase(std::remove(senders_.begin(), senders_.end(), qp), senders_.end());
}

int Cq::poll(int n, vrdma_wc* out) {
  int got = 0;
  while (got < n && !local_.empty()) {
    out[got++] = local_.front();
    local_.pop_front();
  }
  for (Qp* qp : senders_) {
    if (got == n) break;
    got += qp->take_answers(n - got, out + got);
  }
  for (Qp* qp : receivers_) {
    if (got == n) break;
    got += qp->take_arrivals(n - got, out + got);
  }
  // Spin-then-yield: a router-path QP's bytes are moved by the router, which may need this very
  // core (two cores, three busy processes: client, router, server).
  if (got == 0 && ++empty_polls_ % 16 == 0 && routed()) yield_.yield();
  if (got) empty_polls_ = 0;
  return got;
}

}  // namespace rb::vrdma
