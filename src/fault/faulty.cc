#include "fault/faulty.hh"

#include <optional>

namespace rb::transport::fault {
namespace {

constexpr uint64_t kShift = 64;  // how far a misplaced op lands: one granule of --validate's coverage

class FaultyEndpoint final : public Endpoint {
 public:
  FaultyEndpoint(std::unique_ptr<Endpoint> inner, const FaultPlan& plan) : inner_(std::move(inner)), plan_(plan) {}

  std::vector<uint8_t> address() const override { return inner_->address(); }
  Status connect(std::span<const uint8_t> peer) override { return inner_->connect(peer); }
  Status set_remote(const RemoteRegion& region) override {
    remote_len_ = region.len;
    return inner_->set_remote(region);
  }
  std::string describe_error(const Completion& c) const override { return inner_->describe_error(c); }
  const std::string& last_error() const override { return inner_->last_error(); }
  int arm_wait(WaitHandle& out) override { return owed_ ? 0 : inner_->arm_wait(out); }

  Status quiesce(double timeout_s) override {
    owed_.reset();  // a dropped op's completion is discarded like any other in flight
    watch_ = Watch::none;
    return inner_->quiesce(timeout_s);
  }

  int post(std::span<const WorkRequest> wrs) override {
    if (fired_) return inner_->post(wrs);
    size_t k = target_in(wrs);
    if (k == wrs.size()) return count(wrs, inner_->post(wrs));
    int a = k ? count(wrs, inner_->post(wrs.first(k))) : 0;
    if (a < 0 || size_t(a) < k) return a;
    int f = post_faulted(wrs[k]);
    if (f <= 0) return f < 0 ? f : int(k);
    int rest = inner_->post(wrs.subspan(k + 1));
    return rest < 0 ? rest : int(k) + 1 + rest;
  }

  int poll(std::span<Completion> out) override {
    if (owed_ && !out.empty()) {
      out[0] = *owed_;
      owed_.reset();
      return 1;
    }
    int n = inner_->poll(out);
    for (int i = 0; i < n && watch_ != Watch::none; ++i) on_completion(out[i]);
    return n;
  }

 private:
  // What poll still has to do for the faulted op once it completes.
  enum class Watch : uint8_t { none, flip_destination, restore_length };

  // Index of the nth op of the plan's kind within `wrs`, or wrs.size() when it is not there.
  size_t target_in(std::span<const WorkRequest> wrs) const {
    uint64_t seen = seen_;
    for (size_t i = 0; i < wrs.size(); ++i)
      if (wrs[i].op == plan_.op && ++seen == plan_.nth) return i;
    return wrs.size();
  }

  // Counts the plan's ops among the `accepted` first of `wrs`; returns `accepted`.
  int count(std::span<const WorkRequest> wrs, int accepted) {
    for (int i = 0; i < accepted; ++i) seen_ += wrs[size_t(i)].op == plan_.op;
    return accepted;
  }

  static uint8_t* local_byte(const WorkRequest& w) { return static_cast<uint8_t*>(w.mr->addr()) + w.local_off; }

  // Posts `w` damaged; 1 when taken (the fault is then spent), 0 when the queue is full, -1 on error.
  int post_faulted(const WorkRequest& w) {
    if (plan_.kind == Kind::drop) return swallow(w);
    if (plan_.kind == Kind::duplicate) return post_twice(w);
    WorkRequest f = w;
    if (plan_.kind == Kind::misplace) f.remote_off = misplaced(w);
    if (plan_.kind == Kind::truncate) f.len = w.len > 1 ? w.len - 1 : w.len;
    // The source byte stays flipped: the transport may read the buffer until the op completes, so
    // restoring it after the post would race with the transfer. Flipped once, so a refused post's
    // retry does not flip it back.
    if (plan_.kind == Kind::corrupt && w.op != Op::read && !flipped_) {
      *local_byte(w) ^= 0xff;
      flipped_ = true;
    }
    int a = inner_->post({&f, 1});
    if (a == 1) spend(w);
    return a;
  }

  void spend(const WorkRequest& w) {
    fired_ = true;
    watched_ = w;
    if (plan_.kind == Kind::truncate && (w.flags & wr_flag::signal)) watch_ = Watch::restore_length;
    if (plan_.kind == Kind::corrupt && w.op == Op::read) watch_ = Watch::flip_destination;
  }

  uint64_t misplaced(const WorkRequest& w) const {
    if (w.remote_off + kShift + w.len <= remote_len_) return w.remote_off + kShift;
    if (w.remote_off >= kShift) return w.remote_off - kShift;
    return w.remote_off;  // a region with no room beside the op: nowhere else to put it
  }

  int swallow(const WorkRequest& w) {
    if (w.flags & wr_flag::signal) owed_ = Completion{w.wr_id, w.op, w.len, WcStatus::success, 0};
    fired_ = true;
    return 1;
  }

  // The copy goes first and unsignaled, so it adds no completion (every transport has selective
  // completion); if the original is then refused, the caller's retry posts it undamaged.
  int post_twice(const WorkRequest& w) {
    WorkRequest copy = w;
    copy.flags = uint8_t(copy.flags & ~wr_flag::signal);
    int a = inner_->post({&copy, 1});
    if (a != 1) return a;
    fired_ = true;
    return inner_->post({&w, 1});
  }

  void on_completion(Completion& c) {
    if (c.op != watched_.op || !c.ok()) return;
    // An unsignaled read completes with a later signaled one, which then carries the damage.
    bool same = c.wr_id == watched_.wr_id || !(watched_.flags & wr_flag::signal);
    if (!same) return;
    if (watch_ == Watch::flip_destination) *local_byte(watched_) ^= 0xff;
    if (watch_ == Watch::restore_length) c.len = watched_.len;
    watch_ = Watch::none;
  }

  std::unique_ptr<Endpoint> inner_;
  const FaultPlan plan_;
  uint64_t seen_ = 0;  // ops of the plan's kind accepted so far
  uint64_t remote_len_ = 0;
  bool fired_ = false, flipped_ = false;
  WorkRequest watched_;
  Watch watch_ = Watch::none;
  std::optional<Completion> owed_;  // a dropped op's completion, for the next poll
};

class FaultyDomain final : public Domain {
 public:
  FaultyDomain(std::unique_ptr<Domain> inner, const FaultPlan& plan) : inner_(std::move(inner)), plan_(plan) {}

  const Caps& caps() const override { return inner_->caps(); }
  const DomainInfo& info() const override { return inner_->info(); }
  Result<std::unique_ptr<HostMemory>> allocate(size_t len) override { return inner_->allocate(len); }
  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t len) override {
    return inner_->register_memory(addr, len);
  }
  Result<std::unique_ptr<Endpoint>> open_endpoint(const EndpointOptions& opt) override {
    auto ep = inner_->open_endpoint(opt);
    if (!ep) return ep.status();
    return std::unique_ptr<Endpoint>(new FaultyEndpoint(std::move(ep.value()), plan_));
  }

 private:
  std::unique_ptr<Domain> inner_;
  const FaultPlan plan_;
};

}  // namespace

std::unique_ptr<Domain> with_faults(std::unique_ptr<Domain> inner, const FaultPlan& plan) {
  return std::make_unique<FaultyDomain>(std::move(inner), plan);
}

}  // namespace rb::transport::fault
