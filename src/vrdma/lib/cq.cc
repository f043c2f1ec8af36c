#include "vrdma/lib/cq.hh"

#include <algorithm>

#include "vrdma/lib/qp.hh"

namespace rb::vrdma {

void Cq::detach(Qp* qp) { receivers_.erase(std::remove(receivers_.begin(), receivers_.end(), qp), receivers_.end()); }

int Cq::poll(int n, vrdma_wc* out) {
  int got = 0;
  while (got < n && !local_.empty()) {
    out[got++] = local_.front();
    local_.pop_front();
  }
  for (Qp* qp : receivers_) {
    if (got == n) break;
    got += qp->take_arrivals(n - got, out + got);
  }
  return got;
}

}  // namespace rb::vrdma
