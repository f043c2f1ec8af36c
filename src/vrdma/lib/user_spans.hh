#pragma once
// The caller's memory that its regions share with the router. A region over the caller's own
// buffer needs a memfd mapped under the buffer (contents kept), so that a peer's WRITE lands in
// it; two regions over one page must share that memfd, or the second mapping would cut the
// first region's tie to the caller's memory. So the pages are kept as spans: each a run of pages
// over one memfd, shared by every region within it, grown when a region reaches past it, and
// given back private memory when its last region goes.
//
// A span's memfd starts kHeadroomPages into the file, so a later region may reach below it by
// that much; a span grows upward without bound. A region that would join two spans, or reach
// further below one, is refused with a message that says so.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "core/status.hh"
#include "core/unique_fd.hh"

namespace rb::vrdma {

class UserSpans {
 public:
  struct Span;
  struct Share {
    int fd = -1;          // the span's memfd (kept by the span)
    uint64_t offset = 0;  // where the region starts in it
    Span* span = nullptr;
  };
  static constexpr uint64_t kHeadroomPages = 256;

  // Shares the pages [addr, addr + len) (page-aligned): in a span already there, grown, or new.
  Result<Share> share(uintptr_t addr, uint64_t len);
  // A region over `span` has gone; the last gives the pages back private memory, contents kept.
  void release(Span* span);
  // Around fork(): the spans stay as they are while held (see fork_copy.hh).
  void hold(bool on) { on ? mu_.lock() : mu_.unlock(); }
  // Each span's pages, [start, end); the caller holds them.
  template <class F>
  void each_span(F f) const;
  // In a child of fork(), after each span's pages were made private: its copies of the spans'
  // memfds become empty ones, so it cannot map the parent's pages through them either.
  void cut_fds_in_child();

 private:
  Result<Span*> grow(Span& s, uintptr_t addr, uintptr_t end);
  Result<Span*> make(uintptr_t addr, uintptr_t end);
  std::mutex mu_;
  std::map<uintptr_t, std::unique_ptr<Span>> spans_;  // by first page
};

struct UserSpans::Span {
  uintptr_t start = 0, end = 0;
  uint64_t file_offset = 0;  // where `start` is in the memfd
  UniqueFd fd;
  uint32_t regions = 0;
};

template <class F>
void UserSpans::each_span(F f) const {
  for (const auto& [first, s] : spans_) f(s->start, s->end);
}

}  // namespace rb::vrdma
