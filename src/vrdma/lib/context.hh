#pragma once
// libvrdma's side of the control protocol: one connection to the router per context, a request
// and its reply at a time (the context's lock), every wait bounded so a dead router is an error
// within kReplyTimeoutMs, never a hang.
#include <cstdint>
#include <array>
#include <atomic>
#include <map>
#include <thread>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "core/shm.hh"
#include "core/status.hh"
#include "core/unique_fd.hh"
#include "vrdma/ipc/seqpacket.hh"
#include "vrdma/ipc/socket_path.hh"
#include "vrdma/lib/fork_copy.hh"
#include "vrdma/lib/user_spans.hh"
#include "vrdma/proto/control.hh"

namespace rb::vrdma {

constexpr int kReplyTimeoutMs = 1000;

// The path vrdma_open(NULL) uses.
using ipc::default_socket_path;

// An error that carries the errno value the C API returns.
struct CallError {
  int err = 0;
  std::string message;
};

template <class T>
struct Call {  // a value, or why not
  std::optional<T> value;
  CallError error;
  bool ok() const { return value.has_value(); }
};

// Memory mapped at an address chosen before the router saw it (verbs addresses are the owner's
// virtual addresses, which the router hands to peers): reserved first, then the memfd mapped over
// the reservation.
class FixedMapping {
 public:
  static Result<FixedMapping> reserve(size_t len);
  Status map_over(int fd);
  FixedMapping(FixedMapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)), len_(o.len_) {}
  ~FixedMapping();
  uint8_t* data() const { return p_; }
  size_t size() const { return len_; }

 private:
  FixedMapping(uint8_t* p, size_t len) : p_(p), len_(len) {}
  uint8_t* p_ = nullptr;
  size_t len_ = 0;
};

struct Region {
  uint32_t lkey = 0, rkey = 0, pd = 0, access = 0;
  uint64_t len = 0;
  uint8_t* base = nullptr;              // the region's first byte in this process
  std::optional<FixedMapping> owned;    // vrdma_alloc_mr: memory the library maps and unmaps
  UserSpans::Span* span = nullptr;      // vrdma_reg_mr: the run of pages whose memfd is under the caller's buffer
  uint64_t va() const { return reinterpret_cast<uint64_t>(base); }
};

struct Grant {  // a mapping of a peer's region (direct path)
  uint64_t va = 0, len = 0;
  uint32_t access = 0;
  Mapping map;
  uint32_t first = 0;  // the region's first byte is this far into the mapping
  uint8_t* at(uint64_t addr) const { return map.data() + first + (addr - va); }
  bool covers(uint64_t addr, uint64_t n) const { return addr >= va && n <= len && addr - va <= len - n; }
};

struct Connected {
  UniqueFd mem, doorbell;  // doorbell: the peer's recv CQ eventfd, absent if it has none
  uint64_t len = 0;
  bool router_path = false;  // then `mem` is the router's kick eventfd and there is no doorbell
  uint64_t peer_srq_len = 0;  // the peer's receives come from its SRQ, this much memory (peer_srq)
};

class Context {
 public:
  static Call<std::unique_ptr<Context>> open(const std::string& socket_path);
  ~Context();
  // The router closed our connection (it died or cut us off): the data path stops too, since
  // the checks behind every grant are gone. Set by a thread that waits for the hang-up.
  bool router_gone() const { return router_gone_.load(std::memory_order_relaxed); }
  // In a child of fork(): its copies of the parent's QPs, CQs and SRQs take no part (their
  // rings are the parent's, shared: a child's poll took the parent's completions).
  bool forked_away() const { return forked_away_; }
  // Descriptors written to when the router goes, so no thread sleeps on through it (CQ eventfds).
  void add_wake_fd(int fd);
  void remove_wake_fd(int fd);
  const std::string& tenant() const { return tenant_; }

  Call<uint32_t> alloc_pd();
  Call<bool> dealloc_pd(uint32_t pd);
  Call<std::unique_ptr<Region>> alloc_mr(uint32_t pd, uint64_t len, uint32_t access);
  Call<bool> dereg_mr(Region& r);
  // The caller's page-aligned buffer becomes shared memory with its contents kept: a memfd
  // takes the buffer's pages (mapped over them) and goes to the router as the region.
  Call<std::unique_ptr<Region>> reg_mr(uint32_t pd, void* addr, uint64_t len, uint32_t access);
  Call<std::string> stats(proto::StatsFormat format);
  // The router's MAC of our tenant and `bytes` (rdma_cm messages: proto::CmSign).
  Call<std::array<uint8_t, 32>> cm_sign(std::span<const uint8_t> bytes);
  Call<uint32_t> create_qp(uint32_t pd, int memfd, uint64_t mem_len, int doorbell, uint32_t srq);
  Call<uint32_t> create_srq(uint32_t pd, int memfd, uint64_t mem_len);
  Call<bool> destroy_srq(uint32_t srq);
  Call<bool> send_doorbell(uint32_t qp_num, int doorbell);
  Call<Connected> connect_qp(uint32_t qp_num, uint32_t peer_qp, uint64_t peer_router, const proto::RouterAddress& peer_at);
  Call<Grant> grant(uint32_t qp_num, uint32_t key);
  // The SRQ the connected peer's receives come from (direct path): its memory, mapped.
  Call<Mapping> peer_srq(uint32_t qp_num, uint64_t len);
  Call<bool> destroy_qp(uint32_t qp_num);
  Call<uint32_t> create_ah(const proto::RouterAddress& at);
  Call<bool> destroy_ah(uint32_t ah);

  uint64_t router_id() const { return router_id_; }
  const proto::RouterAddress& router_at() const { return router_at_; }
  bool direct_allowed() const { return direct_; }
  // This client's region of `lkey`, or null.
  const Region* region(uint32_t lkey) const;
  // Counts deregistrations: what a QP copied of a region stays true while this is unchanged.
  uint64_t regions_epoch() const { return regions_epoch_.load(std::memory_order_acquire); }

 private:
  struct Answer {
    std::vector<uint8_t> packet;
    proto::Message msg;
    UniqueFd fd, fd2;
  };
  ForkCopies::Hooks fork_hooks();
  void leave_to_parent();
  // Sends a request and waits for its answer; an Error answer becomes the CallError.
  Call<Answer> ask(proto::Type t, std::span<const uint8_t> body, proto::Type want, int fd = -1, int fd2 = -1);
  template <class T>
  Call<Answer> ask(proto::Type t, const T& body, proto::Type want, int fd = -1, int fd2 = -1) {
    return ask(t, {reinterpret_cast<const uint8_t*>(&body), sizeof body}, want, fd, fd2);
  }

  std::mutex mu_;
  UniqueFd sock_;
  std::string path_, tenant_;
  uint32_t seq_ = 0;
  void watch_router();
  UserSpans spans_;  // the caller's pages its regions share with the router
  uint64_t router_id_ = 0;
  proto::RouterAddress router_at_;  // where our router listens for other hosts' routers
  bool direct_ = false;
  std::atomic<bool> router_gone_{false};
  bool forked_away_ = false;  // set in the child alone (its one thread), before it runs on
  std::mutex wake_mu_;
  std::vector<int> wake_fds_;
  UniqueFd stop_watch_;  // an eventfd: wakes the watcher at close
  std::thread watcher_;
  mutable std::mutex regions_mu_;
  std::map<uint32_t, const Region*> regions_;  // by lkey
  std::atomic<uint64_t> regions_epoch_{0};
  bool broken_ = false;  // a reply went missing: later calls fail at once with why
  std::string broken_why_;
  std::optional<ForkCopies::Entry> fork_copies_;  // last: it goes first, before what it reaches
};

}  // namespace rb::vrdma
