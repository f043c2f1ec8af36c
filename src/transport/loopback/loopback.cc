#include "transport/loopback/loopback.hh"

#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include <fmt/format.h>

namespace rb::transport::loopback {

struct Region {
  uint8_t* addr;
  size_t len;
};

struct Posted {  // a receive waiting for a message
  uint8_t* buf;
  uint32_t len;
  uint64_t wr_id;
};

struct Queue {  // one endpoint's receive side and completion queue
  std::deque<Posted> recvs;
  std::deque<Completion> cq;
};

class Hub {
 public:
  std::mutex mu;
  std::map<uint64_t, Region> regions;  // key -> region
  std::map<uint64_t, Queue> queues;    // endpoint id -> queue
  uint64_t next_key = 1, next_ep = 1;
};

std::shared_ptr<Hub> make_hub() { return std::make_shared<Hub>(); }

namespace {

class LoopMr final : public MemoryRegion {
 public:
  LoopMr(std::shared_ptr<Hub> hub, void* a, size_t l, uint64_t key) : hub_(std::move(hub)), addr_(a), len_(l), key_(key) {}
  ~LoopMr() override {
    std::lock_guard g(hub_->mu);
    hub_->regions.erase(key_);
  }
  void* addr() const override { return addr_; }
  size_t len() const override { return len_; }
  void* desc() const override { return nullptr; }
  RemoteRegion remote() const override { return {0, key_, len_}; }

 private:
  std::shared_ptr<Hub> hub_;
  void* addr_;
  size_t len_;
  uint64_t key_;
};

class LoopEp final : public Endpoint {
 public:
  LoopEp(std::shared_ptr<Hub> hub, uint64_t id, uint32_t rx_cap) : hub_(std::move(hub)), id_(id), rx_cap_(rx_cap) {}
  ~LoopEp() override {
    std::lock_guard g(hub_->mu);
    hub_->queues.erase(id_);
  }
  std::vector<uint8_t> address() const override {
    std::vector<uint8_t> a(8);
    std::memcpy(a.data(), &id_, 8);
    return a;
  }
  Status connect(std::span<const uint8_t> peer) override {
    if (peer.size() != 8) return {Errc::invalid_argument, "loopback: peer address must be 8 bytes"};
    std::memcpy(&peer_, peer.data(), 8);
    return {};
  }
  Status set_remote(const RemoteRegion& r) override {
    remote_ = r;
    return {};
  }

  int post(std::span<const WorkRequest> wrs) override {
    std::lock_guard g(hub_->mu);
    auto& mine = hub_->queues[id_];
    int n = 0;
    for (auto& w : wrs) {
      uint8_t* local = static_cast<uint8_t*>(w.mr->addr()) + w.local_off;
      Completion c{w.wr_id, w.op, w.len, 0};
      if (w.op == Op::recv) {
        if (mine.recvs.size() >= rx_cap_) break;
        mine.recvs.push_back({local, w.len, w.wr_id});
        ++n;
        continue;
      }
      if (w.op == Op::send) {
        auto it = hub_->queues.find(peer_);
        if (it == hub_->queues.end() || it->second.recvs.empty()) break;  // busy: no receive posted
        Posted r = it->second.recvs.front();
        it->second.recvs.pop_front();
        Completion rc{r.wr_id, Op::recv, w.len, 0};
        if (w.len > r.len) rc.err = c.err = kErrTruncated;
        else std::memcpy(r.buf, local, w.len);
        it->second.cq.push_back(rc);
      } else {
        auto it = hub_->regions.find(remote_.key);
        if (it == hub_->regions.end()) {
          c.err = kErrBadKey;
        } else if (w.remote_off > it->second.len || w.len > it->second.len - w.remote_off) {
          c.err = kErrOutOfBounds;
        } else if (w.op == Op::write) {
          std::memcpy(it->second.addr + w.remote_off, local, w.len);
        } else {
          std::memcpy(local, it->second.addr + w.remote_off, w.len);
        }
      }
      if ((w.flags & wr_flag::signal) || c.err) mine.cq.push_back(c);
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
  std::string describe_error(int err) const override {
    switch (err) {
      case kErrBadKey: return "remote key not registered";
      case kErrOutOfBounds: return "outside the registered region";
      case kErrTruncated: return "message longer than the posted receive";
    }
    return fmt::format("error {}", err);
  }
  const std::string& last_error() const override { return err_; }

 private:
  std::shared_ptr<Hub> hub_;
  uint64_t id_, peer_ = 0;
  uint32_t rx_cap_;
  RemoteRegion remote_;
  std::string err_;
};

class LoopDomain final : public Domain {
 public:
  explicit LoopDomain(std::shared_ptr<Hub> hub) : hub_(std::move(hub)) {
    caps_.write = caps_.read = caps_.send = true;
    caps_.max_msg = 1ull << 30;
    caps_.tx_depth = caps_.rx_depth = 4096;
    caps_.checks_bounds = true;
    info_ = {"loopback", "loopback", "in-process", "in-process", ""};
  }
  const Caps& caps() const override { return caps_; }
  const DomainInfo& info() const override { return info_; }
  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t len) override {
    std::lock_guard g(hub_->mu);
    uint64_t key = hub_->next_key++;
    hub_->regions[key] = {static_cast<uint8_t*>(addr), len};
    return std::unique_ptr<MemoryRegion>(new LoopMr(hub_, addr, len, key));
  }
  Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& o) override {
    std::lock_guard g(hub_->mu);
    uint64_t id = hub_->next_ep++;
    hub_->queues[id];
    return std::unique_ptr<Endpoint>(new LoopEp(hub_, id, o.rx_slots ? o.rx_slots : caps_.rx_depth));
  }

 private:
  std::shared_ptr<Hub> hub_;
  Caps caps_;
  DomainInfo info_;
};

}  // namespace

std::unique_ptr<Domain> open_domain(std::shared_ptr<Hub> hub) { return std::make_unique<LoopDomain>(std::move(hub)); }

TransportEntry registry_entry() {
  TransportEntry e;
  e.name = "loopback";
  e.description = "in-process transport for unit tests (both sides in one process)";
  e.options_help = "no options";
  e.open = [](const TransportOptions&) -> Result<std::unique_ptr<Domain>> {
    return Status(Errc::unsupported,
                  "-t loopback is in-process and only for unit tests; use -t ofi:shm for two processes on one host");
  };
  e.probe = [] {
    return std::vector<Availability>{{"loopback", false, "in-process, unit tests only (not usable between processes)"}};
  };
  return e;
}

}  // namespace rb::transport::loopback
