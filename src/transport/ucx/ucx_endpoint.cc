#include "transport/ucx/ucx_endpoint.hh"

#include <sys/epoll.h>

#include <chrono>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "transport/ucx/log_capture.hh"
#include "transport/ucx/op_table.hh"
#include "transport/ucx/ucx_status.hh"
#include "transport/ucx/ucx_variants.hh"

namespace rb::transport::ucx {
namespace {

// The active message that announces a write with immediate data. Any id does: every endpoint
// has a worker of its own, and nothing else registers handlers on it.
constexpr unsigned kNoticeAm = 1;
constexpr double kCloseWaitS = 1;  // how long a closing endpoint waits for UCX to settle its ops

// A peer that polls a write's last byte (write latency, wr_flag::polled) must find the whole
// write there once it sees that byte. Over shared memory a put is UCX's memcpy into the peer's
// pages, and a memcpy of more than 32 bytes (rep movsb, or vector stores that end before the
// tail) promises no order among its stores, while up to 32 bytes every memcpy stores the tail
// last. Longer polled writes therefore put their last byte on its own, after the rest (fenced
// where the transports do not keep puts in order), as copy_last_byte_last does. Other writes are
// one put: the second call halved the 64 B put rate.
constexpr uint32_t kTailLastBytes = 32;

using Clock = std::chrono::steady_clock;

void on_done(void* request, ucs_status_t st, void* user) {
  auto* s = static_cast<Slot*>(user);
  s->table->finish(*s, st, s->len);
  ucp_request_free(request);
}

void on_received(void* request, ucs_status_t st, const ucp_tag_recv_info_t* info, void* user) {
  auto* s = static_cast<Slot*>(user);
  s->table->received(*s, st, info ? *info : ucp_tag_recv_info_t{});
  ucp_request_free(request);
}

// UCX reports a peer that died or stopped answering here (UCP_ERR_HANDLING_MODE_PEER); its
// requests then complete with the error.
void on_peer_failure(void* arg, ucp_ep_h, ucs_status_t st);

ucs_status_t on_notice(void* arg, const void* header, size_t header_len, void*, size_t, const ucp_am_recv_param_t*) {
  if (header_len != sizeof(ImmNotice)) return UCS_OK;
  ImmNotice n;
  std::memcpy(&n, header, sizeof n);
  static_cast<OpTable*>(arg)->arrived(n);
  return UCS_OK;
}

// Parameters that report the request's end to `s` through on_done. UCX reads only the fields
// op_attr_mask names, so the rest of the struct is left as it is (zeroing it costs every post).
ucp_request_param_t params_for(Slot& s) {
  ucp_request_param_t p;
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = on_done;
  p.user_data = &s;
  return p;
}

uint32_t slots_for(const EndpointOptions& o) { return std::max<uint32_t>(o.depth, 64) + o.rx_slots + 64; }

class UcxEp final : public Endpoint {
 public:
  UcxEp(std::shared_ptr<Context> ctx, const EndpointOptions& o, const EndpointConfig& cfg)
      : ctx_(std::move(ctx)), event_(o.event), cfg_(cfg), table_(slots_for(o)) {}
  ~UcxEp() override {
    cancel_receives();
    if (rkey_) ucp_rkey_destroy(rkey_);
    if (ep_) close_ep();
    bool settled = settle(kCloseWaitS);
    if (!worker_) return;
    // Ops a dead peer left hanging: UCX warns once per request it frees with the worker, a
    // screenful after the run has already said the peer is gone.
    std::optional<LogCapture> quiet;
    if (!settled) quiet.emplace();
    ucp_worker_destroy(worker_);
  }

  Status open() {
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;  // one thread drives this endpoint
    ucs_status_t st = ucp_worker_create(ctx_->get(), &wp, &worker_);
    if (st != UCS_OK) return fail("ucp_worker_create", st);
    ucp_address_t* a = nullptr;
    size_t len = 0;
    st = ucp_worker_get_address(worker_, &a, &len);
    if (st != UCS_OK) return fail("ucp_worker_get_address", st);
    address_.assign(reinterpret_cast<uint8_t*>(a), reinterpret_cast<uint8_t*>(a) + len);
    ucp_worker_release_address(worker_, a);
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = kNoticeAm;
    hp.cb = on_notice;
    hp.arg = &table_;
    st = ucp_worker_set_am_recv_handler(worker_, &hp);
    if (st != UCS_OK) return fail("ucp_worker_set_am_recv_handler", st);
    if (event_ && (st = ucp_worker_get_efd(worker_, &efd_)) != UCS_OK) return fail("ucp_worker_get_efd", st);
    return {};
  }

  std::vector<uint8_t> address() const override { return address_; }

  Status connect(std::span<const uint8_t> peer) override {
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                   UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.address = reinterpret_cast<const ucp_address_t*>(peer.data());
    p.err_mode = cfg_.peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    p.err_handler = {on_peer_failure, this};
    LogCapture log;  // UCX logs why it found no way to the peer: that goes into the error instead
    ucs_status_t st = ucp_ep_create(worker_, &p, &ep_);
    if (st == UCS_OK) return {};
    Status s = fail("ucp_ep_create", st);
    if (log.first().empty()) return s;
    err_ += ": " + log.first();
    return {Errc::unsupported, err_};
  }

  Status set_remote(const RemoteRegion& r) override {
    if (!ep_) return {Errc::internal, "ucx: set_remote before connect (an rkey is unpacked on its endpoint)"};
    if (r.handle.empty()) return {Errc::invalid_argument, "ucx: the peer's region carries no packed rkey"};
    ucp_rkey_h k = nullptr;
    ucs_status_t st = ucp_ep_rkey_unpack(ep_, r.handle.data(), &k);
    if (st != UCS_OK) return fail("ucp_ep_rkey_unpack", st);
    if (rkey_) ucp_rkey_destroy(rkey_);
    rkey_ = k;
    base_ = r.base;
    // Over shared memory UCP maps the peer's pages, and a short put is a store into them, done
    // inside ucp_put_nbx: what wr_flag::inject needs. Elsewhere (emulated or network RMA) a put
    // may be queued, so an inject write takes the ordinary path (a slot and its completion).
    void* mapped = nullptr;
    mapped_ = cfg_.puts_in_order && ucp_rkey_ptr(rkey_, base_, &mapped) == UCS_OK;
    return {};
  }

  void peer_failed(ucs_status_t st) {
    failed_ = st;
    err_ = "ucx: the connection to the peer failed: " + ucx_error(st);
  }

  int post(std::span<const WorkRequest> wrs) override {
    if (failed_ != UCS_OK) return -1;
    int n = 0;
    LocalBase base;
    for (const auto& w : wrs) {
      if (!can_post(w)) return n ? n : -1;
      if (((w.flags & wr_flag::inject) && inlines(w.op)) || stored_at_once(w)) {
        if (!post_inline(w, base.of(w.mr))) break;
        ++n;
        continue;
      }
      Slot* s = table_.acquire(w);
      if (!s) break;  // every slot is in flight: the caller polls and retries
      table_.starting(*s);
      table_.started(*s, start(w, *s));
      ++n;
    }
    send_notices();
    return n;
  }

  int poll(std::span<Completion> out) override {
    ucp_worker_progress(worker_);
    send_notices();
    size_t n = table_.take(out);
    if (n == 0 && failed_ != UCS_OK) return -1;  // the failed requests have been reported
    return int(n);
  }

  Status quiesce(double timeout_s) override {
    // No flush of the endpoint here: over tcp it needs the peer's worker to progress, and the
    // peer may be quiescing too. Writes whose data must be there asked for wr_flag::delivery.
    cancel_receives();
    bool settled = settle(timeout_s);
    table_.drop_completions();
    if (!settled)
      return {Errc::timeout,
              fmt::format("ucx: {} ops still in flight after {:.0f} s at the end of a phase", table_.in_flight(), timeout_s)};
    return {};
  }

  std::string describe_error(const Completion& c) const override {
    return fmt::format("{}: {}", wc_status_name(c.status), ucx_error(ucs_status_t(c.vendor_err)));
  }
  const std::string& last_error() const override { return err_; }

  // UCX's protocol for sleeping: progress until nothing is left, then arm; BUSY means events
  // came in between, so poll again.
  int arm_wait(WaitHandle& out) override {
    if (!event_) {
      err_ = "ucx: arm_wait on an endpoint opened without EndpointOptions::event";
      return -1;
    }
    while (ucp_worker_progress(worker_) != 0) {
    }
    send_notices();
    if (table_.has_completions() || table_.notices_waiting()) return 0;
    ucs_status_t st = ucp_worker_arm(worker_);
    if (st == UCS_ERR_BUSY) return 0;
    if (st != UCS_OK) {
      err_ = "ucp_worker_arm: " + ucx_error(st);
      return -1;
    }
    out = {efd_, EPOLLIN};
    return 1;
  }

 private:
  // The local region's address, asked of it once per post call: a batch's ops share a region, and
  // the virtual call per op was a tenth of the post.
  struct LocalBase {
    const MemoryRegion* mr = nullptr;
    const uint8_t* addr = nullptr;
    const uint8_t* of(const MemoryRegion* m) {
      if (m != mr) {
        mr = m;
        addr = static_cast<const uint8_t*>(m->addr());
      }
      return addr;
    }
  };

  bool can_post(const WorkRequest& w) {
    if (w.op == Op::remote_write) err_ = "ucx: remote-write is how a peer's write-imm arrives, not an op to post";
    else if (!ep_) err_ = "ucx: post before connect";
    else if (!rkey_ && w.op != Op::recv && w.op != Op::send && w.op != Op::send_imm) err_ = "ucx: RMA before set_remote";
    else return true;
    return false;
  }

  ucs_status_ptr_t start(const WorkRequest& w, Slot& s) {
    auto* local = static_cast<uint8_t*>(w.mr->addr()) + w.local_off;
    uint64_t remote = base_ + w.remote_off;
    ucp_request_param_t p = params_for(s);
    switch (w.op) {
      case Op::write:
        if (w.flags & wr_flag::delivery) return put_then_flush(local, w.len, remote, s);
        return put(local, w.len, tail_apart(w), remote, s, p);
      case Op::read: return ucp_get_nbx(ep_, local, w.len, remote, rkey_, &p);
      case Op::send:
      case Op::send_imm: return ucp_tag_send_nbx(ep_, local, w.len, tag_of(w), &p);
      case Op::recv:
        // UCX 1.13 leaves recv_info unset when a message that came first completes the receive
        // at once, so the callback always reports: it then runs inside this call.
        p.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        p.cb.recv = on_received;
        return ucp_tag_recv_nbx(worker_, local, w.len, 0, 0, &p);
      case Op::write_imm:
        s.stage = Stage::notify_after_flush;
        s.notice = {w.imm, w.len};
        return put_then_flush(local, w.len, remote, s);
      case Op::fadd:
      case Op::cswap: return atomic(w, local, remote, s, p);
      case Op::remote_write: break;
    }
    return UCS_STATUS_PTR(UCS_ERR_UNSUPPORTED);
  }

  // A write reported to `s`: one put, or two with the last byte on its own (kTailLastBytes);
  // the first is reported through started(), the second is returned.
  ucs_status_ptr_t put(const uint8_t* local, uint32_t len, bool tail_apart, uint64_t remote, Slot& s,
                       const ucp_request_param_t& p) {
    if (!tail_apart) return ucp_put_nbx(ep_, local, len, remote, rkey_, &p);
    table_.add_part(s);
    table_.started(s, ucp_put_nbx(ep_, local, len - 1, remote, rkey_, &p));
    fence();
    table_.starting(s);
    return ucp_put_nbx(ep_, local + len - 1, 1, remote + len - 1, rkey_, &p);
  }

  // Orders the puts before it with those after, where the transports do not already.
  void fence() {
    if (!cfg_.puts_in_order) ucp_worker_fence(worker_);
  }

  // One put with no report (write-imm and delivery writes: their target learns of them from a
  // completion, never by polling): UCP frees its request when done. `done` says whether the put
  // was finished inside its call.
  ucs_status_t put_quietly(const uint8_t* local, uint32_t len, uint64_t remote, bool& done) {
    ucs_status_ptr_t r = ucp_put_nbx(ep_, local, len, remote, rkey_, &quiet_);
    if (UCS_PTR_IS_ERR(r)) return UCS_PTR_STATUS(r);
    if (r) ucp_request_free(r);
    done = r == nullptr;
    return UCS_OK;
  }

  static bool tail_apart(const WorkRequest& w) { return (w.flags & wr_flag::polled) && w.len > kTailLastBytes; }

  // A short write into mapped pages is this thread's store, done inside ucp_put_nbx whether or
  // not inject was asked: it needs no slot, and the slot's bookkeeping cost more than the put.
  bool stored_at_once(const WorkRequest& w) const { return w.op == Op::write && mapped_ && w.len <= kInlineBytes; }

  // Ops that post_inline takes: sends always, writes where the peer's pages are mapped here.
  bool inlines(Op op) const { return op == Op::send || op == Op::send_imm || (op == Op::write && mapped_); }

  // wr_flag::inject: the payload must be copied before post returns. With
  // UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL, UCX sends it inline (a short put, an eager short message)
  // or refuses with UCS_ERR_NO_RESOURCE, which is "busy". Nothing is left in flight, so no slot.
  // A refused second put of a long write leaves the first done: the retry writes the same bytes.
  bool post_inline(const WorkRequest& w, const uint8_t* mr_base) {
    const uint8_t* local = mr_base + w.local_off;
    ucs_status_ptr_t r;
    if (w.op != Op::write) {
      r = ucp_tag_send_nbx(ep_, local, w.len, tag_of(w), &inline_);
    } else {
      uint64_t remote = base_ + w.remote_off;
      uint32_t head = tail_apart(w) ? w.len - 1 : w.len;
      r = ucp_put_nbx(ep_, local, head, remote, rkey_, &inline_);
      if (r == nullptr && head < w.len) r = ucp_put_nbx(ep_, local + head, 1, remote + head, rkey_, &inline_);
    }
    if (UCS_PTR_IS_PTR(r)) {  // not expected with FORCE_IMM_CMPL: UCX frees it when done
      ucp_request_free(r);
      table_.done_at_once(w, UCS_OK);
      return true;
    }
    ucs_status_t st = UCS_PTR_STATUS(r);
    if (st == UCS_ERR_NO_RESOURCE) return false;
    table_.done_at_once(w, st);
    return true;
  }

  // UCP completes a put once its source may be reused; only a flush of the endpoint says the
  // target has the data, and the flush reports for the puts. Where the peer's pages are mapped
  // here, a put finished inside its call is in them already (this thread's stores), and what
  // this thread stores next, such as a notice, is seen after it: no flush (it costs 200 ns).
  ucs_status_ptr_t put_then_flush(const uint8_t* local, uint32_t len, uint64_t remote, Slot& s) {
    bool done = false;
    ucs_status_t st = put_quietly(local, len, remote, done);
    if (st != UCS_OK) return UCS_STATUS_PTR(st);
    if (done && mapped_) return nullptr;
    ucp_request_param_t p = params_for(s);
    return ucp_ep_flush_nbx(ep_, &p);
  }

  // fadd: UCP adds `buffer` and returns the old value in reply_buffer. cswap: UCP compares with
  // `buffer` and swaps in what reply_buffer holds, which then receives the old value.
  ucs_status_ptr_t atomic(const WorkRequest& w, uint8_t* local, uint64_t remote, Slot& s, ucp_request_param_t& p) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    p.datatype = ucp_dt_make_contig(kAtomicBytes);
    p.reply_buffer = local;
    if (w.op == Op::fadd) {
      s.operand = w.operand;
      return ucp_atomic_op_nbx(ep_, UCP_ATOMIC_OP_ADD, &s.operand, 1, remote, rkey_, &p);
    }
    s.operand = w.compare;
    std::memcpy(local, &w.operand, kAtomicBytes);
    return ucp_atomic_op_nbx(ep_, UCP_ATOMIC_OP_CSWAP, &s.operand, 1, remote, rkey_, &p);
  }

  // Writes with immediate data whose flush is done: their notices go out, oldest first.
  void send_notices() {
    while (Slot* s = table_.next_notice()) {
      if (!ep_) {  // closed under it: the endpoint is going away
        table_.finish(*s, UCS_ERR_CANCELED, s->len);
        continue;
      }
      ucp_request_param_t p = params_for(*s);
      table_.starting(*s);
      table_.started(*s, ucp_am_send_nbx(ep_, kNoticeAm, &s->notice, sizeof s->notice, nullptr, 0, &p));
    }
  }

  void cancel_receives() {
    table_.for_each_in_flight([&](Slot& s) {
      if (s.op == Op::recv) ucp_request_cancel(worker_, s.request);
    });
  }

  // Drives progress until every op (and `extra`, a request without callback) is done, or
  // timeout_s passes; says whether everything finished.
  bool settle(double timeout_s, void* extra = nullptr) {
    auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (true) {
      if (extra && !UCS_PTR_IS_ERR(extra) && ucp_request_check_status(extra) != UCS_INPROGRESS) {
        ucp_request_free(extra);
        extra = nullptr;
      }
      if ((!extra || UCS_PTR_IS_ERR(extra)) && table_.in_flight() == 0) return true;
      if (Clock::now() > end) break;
      ucp_worker_progress(worker_);
      send_notices();
    }
    if (extra && !UCS_PTR_IS_ERR(extra)) ucp_request_free(extra);
    return false;
  }

  // With peer errors, closes the endpoint without waiting for the peer (which may be gone, or
  // closing too and not progressing this one): what is in flight is cancelled, and the peer's UCX
  // sees an error it handles. Without, UCX allows only a flush, which over shared memory needs
  // nothing from the peer; a peer that holds it up costs kCloseWaitS at most.
  void close_ep() {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = cfg_.peer_errors ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    settle(kCloseWaitS, ucp_ep_close_nbx(ep_, &p));
    ep_ = nullptr;
  }

  Status fail(const char* what, ucs_status_t st) {
    err_ = fmt::format("{}: {}", what, ucx_error(st));
    return {Errc::io, err_};
  }

  std::shared_ptr<Context> ctx_;
  bool event_;
  EndpointConfig cfg_;
  OpTable table_;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  ucp_rkey_h rkey_ = nullptr;
  uint64_t base_ = 0;
  bool mapped_ = false;  // the peer's region is mapped here (see set_remote)
  int efd_ = -1;
  ucs_status_t failed_ = UCS_OK;  // the peer's failure, once UCX reported it
  std::vector<uint8_t> address_;
  ucp_request_param_t quiet_{};  // no callback: requests UCP frees itself, or that are checked
  ucp_request_param_t inline_{UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL};  // done inside the call, or refused
  std::string err_;
};

void on_peer_failure(void* arg, ucp_ep_h, ucs_status_t st) { static_cast<UcxEp*>(arg)->peer_failed(st); }

}  // namespace

Result<std::unique_ptr<Endpoint>> open_endpoint(std::shared_ptr<Context> ctx, const EndpointOptions& o,
                                                const EndpointConfig& cfg) {
  auto ep = std::make_unique<UcxEp>(std::move(ctx), o, cfg);
  if (Status s = ep->open(); !s) return s;
  return std::unique_ptr<Endpoint>(std::move(ep));
}

}  // namespace rb::transport::ucx
