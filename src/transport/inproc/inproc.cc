#include "transport/inproc/inproc.hh"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "core/unique_fd.hh"

namespace rb::transport::inproc {
namespace {

// Provider codes, kept beside the shared status for describe_error.
constexpr int kErrBadKey = 1;
constexpr int kErrOutOfBounds = 2;
constexpr int kErrTruncated = 3;
constexpr int kErrMisaligned = 4;

struct Region {
  uint8_t* addr;
  size_t len;
};

struct Posted {  // a receive waiting for a message
  uint8_t* buf;
  uint32_t len;
  uint64_t wr_id;
};

// One endpoint's receive side and completion queue. `ready` is an eventfd that every push
// signals, for endpoints that sleep in arm_wait.
struct Queue {
  std::deque<Posted> recvs;
  std::deque<Completion> cq;
  UniqueFd ready{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  void push(const Completion& c) {
    cq.push_back(c);
    uint64_t one = 1;
    (void)!write(ready.get(), &one, 8);
  }
};

// One domain's "NIC": its registered regions and its endpoints' queues. Peers name it by address.
struct Hub {
  std::mutex mu;
  std::map<uint64_t, Region> regions;  // key -> region
  std::map<uint64_t, Queue> queues;    // endpoint id -> queue
  uint64_t next_key = 1, next_ep = 1;
};

std::vector<uint8_t> encode(const Hub* hub, uint64_t id) {
  std::vector<uint8_t> a(16);
  std::memcpy(a.data(), &hub, 8);
  std::memcpy(a.data() + 8, &id, 8);
  return a;
}

// Both hubs locked at once, in an order that cannot deadlock with a peer doing the same.
class HubLock {
 public:
  HubLock(Hub& a, Hub& b) : a_(a.mu, std::defer_lock), b_(b.mu, std::defer_lock) {
    if (&a == &b) a_.lock();
    else std::lock(a_, b_);
  }

 private:
  std::unique_lock<std::mutex> a_, b_;
};

class InprocMr final : public MemoryRegion {
 public:
  InprocMr(std::shared_ptr<Hub> hub, void* a, size_t l, uint64_t key) : hub_(std::move(hub)), addr_(a), len_(l), key_(key) {}
  ~InprocMr() override {
    std::lock_guard g(hub_->mu);
    hub_->regions.erase(key_);
  }
  void* addr() const override { return addr_; }
  size_t len() const override { return len_; }
  void* desc() const override { return nullptr; }
  RemoteRegion remote() const override { return {0, key_, len_, encode(hub_.get(), 0)}; }

 private:
  std::shared_ptr<Hub> hub_;
  void* addr_;
  size_t len_;
  uint64_t key_;
};

class InprocEp final : public Endpoint {
 public:
  InprocEp(std::shared_ptr<Hub> hub, uint64_t id, uint32_t rx_cap) : hub_(std::move(hub)), id_(id), rx_cap_(rx_cap) {}
  ~InprocEp() override {
    std::lock_guard g(hub_->mu);
    hub_->queues.erase(id_);
  }
  std::vector<uint8_t> address() const override { return encode(hub_.get(), id_); }
  Status connect(std::span<const uint8_t> peer) override {
    if (peer.size() != 16) return {Errc::invalid_argument, "inproc: peer address must be 16 bytes"};
    std::memcpy(&peer_hub_, peer.data(), 8);
    std::memcpy(&peer_, peer.data() + 8, 8);
    return {};
  }
  Status set_remote(const RemoteRegion& r) override {
    if (r.handle.size() != 16) return {Errc::invalid_argument, "inproc: region handle must be 16 bytes"};
    remote_ = r;
    std::memcpy(&remote_hub_, r.handle.data(), 8);
    return {};
  }

  int post(std::span<const WorkRequest> wrs) override {
    int n = 0;
    for (auto& w : wrs) {
      int r = w.op == Op::recv                             ? post_recv(w)
              : w.op == Op::send || w.op == Op::send_imm   ? post_send(w)
              : w.op == Op::fadd || w.op == Op::cswap      ? post_atomic(w)
              : w.op == Op::remote_write                   ? refuse(w)
                                                           : post_rma(w);
      if (r < 0) return n ? n : -1;
      if (r == 0) break;
      ++n;
    }
    return n;
  }

  int poll(std::span<Completion> out) override {
    std::lock_guard g(hub_->mu);
    auto& q = hub_->queues[id_].cq;
    size_t n = 0;
    while (n < out.size() && !q.empty()) {
      out[n++] = q.front();
      q.pop_front();
    }
    return int(n);
  }
  Status quiesce(double) override {
    std::lock_guard g(hub_->mu);
    auto& q = hub_->queues[id_];
    q.recvs.clear();  // nothing is in flight: every op completes inside post
    q.cq.clear();
    return {};
  }
  std::string describe_error(const Completion& c) const override {
    const char* status = wc_status_name(c.status);
    switch (c.vendor_err) {
      case kErrBadKey: return fmt::format("{}: remote key not registered", status);
      case kErrOutOfBounds: return fmt::format("{}: outside the registered region", status);
      case kErrTruncated: return fmt::format("{}: message longer than the posted receive", status);
      case kErrMisaligned: return fmt::format("{}: atomic target not 8-byte aligned", status);
    }
    return fmt::format("{} (code {})", status, c.vendor_err);
  }
  const std::string& last_error() const override { return err_; }

  int arm_wait(WaitHandle& out) override {
    std::lock_guard g(hub_->mu);
    auto& q = hub_->queues[id_];
    if (!q.cq.empty()) return 0;
    uint64_t drained;
    (void)!read(q.ready.get(), &drained, 8);  // pushes after this, under the lock, signal it again
    out = {q.ready.get(), EPOLLIN};
    return 1;
  }

 private:
  int refuse(const WorkRequest& w) {
    err_ = fmt::format("inproc: {} is not an op to post", op_name(w.op));
    return -1;
  }

  // Each returns 1 when the request was taken, 0 when the queue is busy.
  int post_recv(const WorkRequest& w) {
    std::lock_guard g(hub_->mu);
    auto& mine = hub_->queues[id_];
    if (mine.recvs.size() >= rx_cap_) return 0;
    mine.recvs.push_back({local(w), w.len, w.wr_id});
    return 1;
  }

  int post_send(const WorkRequest& w) {
    if (!peer_hub_) return 0;
    HubLock lock(*hub_, *peer_hub_);
    auto it = peer_hub_->queues.find(peer_);
    if (it == peer_hub_->queues.end() || it->second.recvs.empty()) return 0;  // busy: no receive posted
    Posted r = it->second.recvs.front();
    it->second.recvs.pop_front();
    Completion sc{w.wr_id, w.op, w.len}, rc{r.wr_id, Op::recv, w.len};
    rc.has_imm = w.op == Op::send_imm;
    rc.imm = rc.has_imm ? w.imm : 0;
    if (w.len > r.len) {
      sc = {w.wr_id, w.op, w.len, WcStatus::remote_operation, kErrTruncated};
      rc = {r.wr_id, Op::recv, w.len, WcStatus::local_length, kErrTruncated, rc.has_imm, rc.imm};
    } else {
      std::memcpy(r.buf, local(w), w.len);
    }
    it->second.push(rc);
    complete(w, sc);
    return 1;
  }

  int post_rma(const WorkRequest& w) {
    Hub& target = remote_hub_ ? *remote_hub_ : *hub_;
    HubLock lock(*hub_, target);
    Completion c{w.wr_id, w.op, w.len};
    auto it = target.regions.find(remote_.key);
    if (it == target.regions.end()) {
      c = {w.wr_id, w.op, w.len, WcStatus::remote_access, kErrBadKey};
    } else if (w.remote_off > it->second.len || w.len > it->second.len - w.remote_off) {
      c = {w.wr_id, w.op, w.len, WcStatus::remote_access, kErrOutOfBounds};
    } else if (w.op == Op::write || w.op == Op::write_imm) {  // the peer polls the last byte without taking the lock
      copy_last_byte_last(it->second.addr + w.remote_off, local(w), w.len);
      if (w.op == Op::write_imm) {
        auto q = peer_hub_ == &target ? target.queues.find(peer_) : target.queues.end();
        if (q == target.queues.end()) {
          c = {w.wr_id, w.op, w.len, WcStatus::remote_operation, kErrBadKey};
        } else {
          Completion arrival{0, Op::remote_write, w.len};
          arrival.has_imm = true;
          arrival.imm = w.imm;
          q->second.push(arrival);
        }
      }
    } else {
      std::memcpy(local(w), it->second.addr + w.remote_off, w.len);
    }
    complete(w, c);
    return 1;
  }

  // 8-byte atomics, applied under the target's lock and as atomic operations besides.
  int post_atomic(const WorkRequest& w) {
    Hub& target = remote_hub_ ? *remote_hub_ : *hub_;
    HubLock lock(*hub_, target);
    Completion c{w.wr_id, w.op, kAtomicBytes};
    auto it = target.regions.find(remote_.key);
    if (it == target.regions.end()) {
      c = {w.wr_id, w.op, kAtomicBytes, WcStatus::remote_access, kErrBadKey};
    } else if (w.remote_off > it->second.len || kAtomicBytes > it->second.len - w.remote_off) {
      c = {w.wr_id, w.op, kAtomicBytes, WcStatus::remote_access, kErrOutOfBounds};
    } else if (w.remote_off % kAtomicBytes) {
      c = {w.wr_id, w.op, kAtomicBytes, WcStatus::remote_operation, kErrMisaligned};
    } else {
      std::atomic_ref<uint64_t> v(*reinterpret_cast<uint64_t*>(it->second.addr + w.remote_off));
      uint64_t old;
      if (w.op == Op::fadd) {
        old = v.fetch_add(w.operand);
      } else {
        old = w.compare;
        v.compare_exchange_strong(old, w.operand);
      }
      std::memcpy(local(w), &old, kAtomicBytes);
    }
    complete(w, c);
    return 1;
  }

  // Queues the initiator's completion: signaled ones, and every error. Caller holds hub_->mu.
  void complete(const WorkRequest& w, const Completion& c) {
    if ((w.flags & wr_flag::signal) || !c.ok()) hub_->queues[id_].push(c);
  }

  static uint8_t* local(const WorkRequest& w) { return static_cast<uint8_t*>(w.mr->addr()) + w.local_off; }

  std::shared_ptr<Hub> hub_;
  uint64_t id_, peer_ = 0;
  Hub* peer_hub_ = nullptr;    // the peer endpoint's domain, alive as long as the peer is
  Hub* remote_hub_ = nullptr;  // the domain the remote region is registered in
  uint32_t rx_cap_;
  RemoteRegion remote_;
  std::string err_;
};

class InprocDomain final : public Domain {
 public:
  InprocDomain() : hub_(std::make_shared<Hub>()) {
    caps_.write = caps_.read = caps_.send = true;
    caps_.max_msg = 1ull << 30;
    caps_.tx_depth = caps_.rx_depth = 4096;
    caps_.selective_completion = true;
    caps_.peer_sees_writes = true;
    caps_.peer_memory_readable = true;
    caps_.checks_bounds = true;
    caps_.checks_keys = true;
    caps_.atomics = caps_.imm_data = caps_.can_wait = true;
    info_ = {"inproc", "inproc", "in-process", "in-process", ""};
  }
  const Caps& caps() const override { return caps_; }
  const DomainInfo& info() const override { return info_; }
  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t len) override {
    std::lock_guard g(hub_->mu);
    uint64_t key = hub_->next_key++;
    hub_->regions[key] = {static_cast<uint8_t*>(addr), len};
    return std::unique_ptr<MemoryRegion>(new InprocMr(hub_, addr, len, key));
  }
  Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& o) override {
    std::lock_guard g(hub_->mu);
    uint64_t id = hub_->next_ep++;
    hub_->queues[id];
    return std::unique_ptr<Endpoint>(new InprocEp(hub_, id, o.rx_slots ? o.rx_slots : caps_.rx_depth));
  }

 private:
  std::shared_ptr<Hub> hub_;
  Caps caps_;
  DomainInfo info_;
};

}  // namespace

std::unique_ptr<Domain> open_domain() { return std::make_unique<InprocDomain>(); }

TransportEntry registry_entry() {
  TransportEntry e;
  e.name = "inproc";
  e.description = "in-process transport for unit tests: both sides in one process, keys and bounds checked like a NIC";
  e.test_only = true;
  e.test_variants = {""};
  e.open = [](const OpenArgs&) -> Result<std::unique_ptr<Domain>> { return std::unique_ptr<Domain>(open_domain()); };
  e.probe = [] {
    return std::vector<Availability>{{"inproc", false, "in-process, unit tests only (not usable between processes)"}};
  };
  return e;
}

}  // namespace rb::transport::inproc
