// A minimal transport, documented hook by hook. To add a transport:
//   1. copy src/transport/skeleton/ to src/transport/<name>/ and rename the namespace, and in
//      its CMakeLists.txt the target and the rb_transport_built(...) line;
//   2. add <name> to RB_TRANSPORT_FOLDERS in src/transport/CMakeLists.txt.
// --help, --list, the -o checks, the conformance suite and the e2e tests pick it up from there.
#include "transport/skeleton/skeleton.hh"

#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace rb::transport::skeleton {
namespace {

constexpr uint32_t kDepth = 256;  // completions an endpoint can hold: also its tx_depth

// REQUIRED: a capability record. Every field defaults to "no"; claim only what the code below
// really does, because the runner and the conformance suite act on it (spec_check.cc refuses a
// run the transport cannot do; checks_bounds turns on the protection test).
Caps skeleton_caps() {
  Caps c;
  c.write = c.read = true;  // no send: the suite skips its send tests when send is false
  c.max_msg = 1ull << 30;
  c.tx_depth = kDepth;
  c.virtual_addressing = true;    // RemoteRegion::base is the peer's virtual address
  c.selective_completion = true;  // unsignaled ops produce no completion (see complete())
  c.peer_sees_writes = c.peer_memory_readable = true;  // writes land in the peer's own memory
  c.checks_bounds = true;         // post() refuses ops outside the peer's region
  return c;
}

// REQUIRED: a memory region. remote() is what the peer needs to address it; the engine sends it
// over the control connection. `handle` may carry transport-specific bytes (unused here).
class SkeletonMr final : public MemoryRegion {
 public:
  SkeletonMr(void* a, size_t l) : a_(a), l_(l) {}
  void* addr() const override { return a_; }
  size_t len() const override { return l_; }
  void* desc() const override { return nullptr; }  // a NIC's local key would go here
  RemoteRegion remote() const override { return {reinterpret_cast<uint64_t>(a_), 0, l_, {}}; }

 private:
  void* a_;
  size_t l_;
};

// REQUIRED: an endpoint, used by one thread. post() and poll() are the hot path: they take
// spans, allocate nothing, throw nothing, and report a full queue as a short count.
class SkeletonEp final : public Endpoint {
 public:
  SkeletonEp() : cq_(kDepth) {}

  // The opaque bytes the peer passes to connect(). Here: this endpoint's address in memory.
  std::vector<uint8_t> address() const override {
    std::vector<uint8_t> a(sizeof(const void*));
    const void* self = this;
    std::memcpy(a.data(), &self, a.size());
    return a;
  }
  Status connect(std::span<const uint8_t> peer) override {
    if (peer.size() != sizeof(void*)) return {Errc::invalid_argument, "skeleton: peer address has the wrong size"};
    return {};  // a one-sided copy needs nothing from the peer endpoint itself
  }
  Status set_remote(const RemoteRegion& r) override {
    remote_ = r;
    return {};
  }

  // Takes a prefix of `wrs`. An op the peer's region cannot hold completes with remote_access
  // and touches nothing, as a NIC's protection check would.
  int post(std::span<const WorkRequest> wrs) override {
    int taken = 0;
    for (const auto& w : wrs) {
      if (w.op != Op::write && w.op != Op::read) {
        err_ = fmt::format("skeleton: {} is not supported (caps say write and read only)", op_name(w.op));
        return taken ? taken : -1;
      }
      if (count_ == kDepth) break;  // busy: the caller polls and retries the rest
      complete(w, copy(w));
      ++taken;
    }
    return taken;
  }

  int poll(std::span<Completion> out) override {
    size_t n = 0;
    for (; n < out.size() && count_ > 0; ++n, --count_) out[n] = cq_[(head_ + kDepth - count_) % kDepth];
    return int(n);
  }

  // Ops complete inside post(), so ending a phase only drops what was not polled yet.
  Status quiesce(double) override {
    count_ = 0;
    return {};
  }

  std::string describe_error(const Completion& c) const override {
    if (c.status == WcStatus::remote_access) return fmt::format("{}: outside the peer's registered region", wc_status_name(c.status));
    return wc_status_name(c.status);
  }
  const std::string& last_error() const override { return err_; }
  // Ops complete inside post(): nothing ever arrives later to wait for, so no wait object.
  int arm_wait(WaitHandle&) override {
    err_ = "skeleton: cannot wait (caps say no can_wait)";
    return -1;
  }

 private:
  WcStatus copy(const WorkRequest& w) {
    if (w.remote_off > remote_.len || w.len > remote_.len - w.remote_off) return WcStatus::remote_access;
    auto* local = static_cast<uint8_t*>(w.mr->addr()) + w.local_off;
    auto* remote = reinterpret_cast<uint8_t*>(remote_.base) + w.remote_off;
    // A peer polls a write's last byte to see it land (write latency): it must be stored last.
    if (w.op == Op::write) copy_last_byte_last(remote, local, w.len);
    else std::memcpy(local, remote, w.len);
    return WcStatus::success;
  }

  // Signaled ops and every failed op produce a completion; others none (selective completion).
  void complete(const WorkRequest& w, WcStatus status) {
    if (!(w.flags & wr_flag::signal) && status == WcStatus::success) return;
    cq_[head_] = {w.wr_id, w.op, w.len, status};
    head_ = (head_ + 1) % kDepth;
    ++count_;
  }

  RemoteRegion remote_;
  std::vector<Completion> cq_;  // a ring: count_ entries end at head_
  uint32_t head_ = 0, count_ = 0;
  std::string err_;
};

// REQUIRED: a domain, one process's handle on the fabric. OPTIONAL: allocate(), for transports
// that need special memory (shared, pinned); the default hands out page-aligned heap memory.
class SkeletonDomain final : public Domain {
 public:
  const Caps& caps() const override { return caps_; }
  const DomainInfo& info() const override { return info_; }
  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t len) override {
    return std::unique_ptr<MemoryRegion>(new SkeletonMr(addr, len));
  }
  Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& o) override {
    if (o.event) return Status(Errc::unsupported, "skeleton: no event endpoints (caps say no can_wait)");
    return std::unique_ptr<Endpoint>(new SkeletonEp());
  }

 private:
  Caps caps_ = skeleton_caps();
  DomainInfo info_{"skeleton", "skeleton", "in-process", "in-process", ""};
};

}  // namespace

// REQUIRED: the registry entry, the transport's only public symbol.
TransportEntry registry_entry() {
  TransportEntry e;
  e.name = "skeleton";                                       // required: -t skeleton
  e.description = "template transport: a memcpy within one process";  // required: one line
  e.test_only = true;  // in-process: keep it out of --help and --list, and out of -t
  // OPTIONAL, each empty or false when the transport has none:
  //   e.variant_help / e.variants / e.any_variant   -t NAME:VARIANT and what VARIANT picks
  //   e.domain_help                                 what --domain means (empty: --domain refused)
  //   e.options                                     typed -o KEY=VALUE; open() reads them typed
  //   e.is_default                                  the transport -t defaults to
  e.test_variants = {""};  // required to be tested: the instances the conformance suite opens
  // Required: open one domain. args.options holds every declared option, checked and typed.
  e.open = [](const OpenArgs&) -> Result<std::unique_ptr<Domain>> { return std::unique_ptr<Domain>(new SkeletonDomain()); };
  // Required: what --list says. Give the caps when they are known without opening.
  e.probe = [] {
    return std::vector<Availability>{{"skeleton", false, "in-process template, unit tests only", skeleton_caps()}};
  };
  return e;
}

}  // namespace rb::transport::skeleton
