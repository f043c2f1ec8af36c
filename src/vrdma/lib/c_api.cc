// The C API over Context: C structs that own their C++ objects, errno and a per-thread message
// for every failure.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include <vrdma/vrdma.h>
#include "vrdma/lib/ah.hh"
#include "vrdma/lib/context.hh"
#include "vrdma/lib/cq.hh"
#include "vrdma/lib/qp.hh"
#include "vrdma/lib/srq.hh"

struct vrdma_context {
  std::unique_ptr<rb::vrdma::Context> impl;
};

struct vrdma_pd {
  vrdma_context* ctx;
  uint32_t id;
};

struct vrdma_cq {
  vrdma_context* ctx;
  rb::vrdma::Cq impl;
};

struct vrdma_qp {
  vrdma_pd* pd;
  std::unique_ptr<rb::vrdma::Qp> impl;
};

struct vrdma_srq {
  vrdma_pd* pd;
  std::unique_ptr<rb::vrdma::Srq> impl;
};

namespace {

struct MrBox {
  vrdma_mr pub;  // first: the public pointer is this struct's
  std::unique_ptr<rb::vrdma::Region> region;
};

thread_local std::string last_error;
thread_local std::string default_socket;

int set_error(int err, std::string message) {
  last_error = std::move(message);
  errno = err;
  return -err;
}

template <class T>
bool failed(const rb::vrdma::Call<T>& c) {
  if (c.ok()) return false;
  set_error(c.error.err, c.error.message);
  return true;
}

// A region the router granted, as the public struct a caller holds.
template <class R>
vrdma_mr* boxed(vrdma_pd* pd, rb::vrdma::Call<R> r, size_t length) {
  if (failed(r)) return nullptr;
  auto* box = new (std::nothrow) MrBox{};
  if (!box) {
    set_error(ENOMEM, "out of memory");
    return nullptr;
  }
  box->region = std::move(*r.value);
  box->pub = {pd, box->region->base, length, box->region->lkey, box->region->rkey};
  return &box->pub;
}

}  // namespace

extern "C" {

const char* vrdma_version(void) { return VRDMA_VERSION_STRING; }

const char* vrdma_last_error(void) { return last_error.c_str(); }

const char* vrdma_default_socket(void) {
  default_socket = rb::vrdma::default_socket_path();
  return default_socket.c_str();
}

vrdma_context* vrdma_open(const char* socket_path) {
  auto c = rb::vrdma::Context::open(socket_path ? socket_path : rb::vrdma::default_socket_path());
  if (failed(c)) return nullptr;
  return new (std::nothrow) vrdma_context{std::move(*c.value)};
}

int vrdma_close(vrdma_context* ctx) {
  delete ctx;  // closing the socket releases what the context still held, at the router
  return 0;
}

const char* vrdma_tenant(const vrdma_context* ctx) { return ctx->impl->tenant().c_str(); }

int vrdma_tenant_routed(const vrdma_context* ctx) { return ctx->impl->direct_allowed() ? 0 : 1; }

int vrdma_cm_sign(vrdma_context* ctx, const void* bytes, size_t len, unsigned char mac[32]) {
  auto r = ctx->impl->cm_sign({static_cast<const uint8_t*>(bytes), len});
  if (failed(r)) return -r.error.err;
  std::memcpy(mac, r.value->data(), 32);
  return 0;
}

vrdma_pd* vrdma_alloc_pd(vrdma_context* ctx) {
  auto r = ctx->impl->alloc_pd();
  if (failed(r)) return nullptr;
  return new (std::nothrow) vrdma_pd{ctx, *r.value};
}

int vrdma_dealloc_pd(vrdma_pd* pd) {
  auto r = pd->ctx->impl->dealloc_pd(pd->id);
  if (failed(r)) return -r.error.err;
  delete pd;
  return 0;
}

vrdma_mr* vrdma_alloc_mr(vrdma_pd* pd, size_t length, unsigned access) {
  return boxed(pd, pd->ctx->impl->alloc_mr(pd->id, length, access), length);
}

vrdma_mr* vrdma_reg_mr(vrdma_pd* pd, void* addr, size_t length, unsigned access) {
  return boxed(pd, pd->ctx->impl->reg_mr(pd->id, addr, length, access), length);
}

int vrdma_dereg_mr(vrdma_mr* mr) {
  auto* box = reinterpret_cast<MrBox*>(mr);
  auto r = mr->pd->ctx->impl->dereg_mr(*box->region);
  if (failed(r)) return -r.error.err;
  delete box;
  return 0;
}

char* vrdma_router_stats(vrdma_context* ctx) {
  auto r = ctx->impl->stats(rb::vrdma::proto::StatsFormat::text);
  if (failed(r)) return nullptr;
  return strdup(r.value->c_str());
}

char* vrdma_router_stats_json(vrdma_context* ctx) {
  auto r = ctx->impl->stats(rb::vrdma::proto::StatsFormat::json);
  if (failed(r)) return nullptr;
  return strdup(r.value->c_str());
}

const char* vrdma_wc_status_str(int status) {
  switch (status) {
    case VRDMA_WC_SUCCESS: return "success";
    case VRDMA_WC_LOC_LEN_ERR: return "local length error";
    case VRDMA_WC_LOC_PROT_ERR: return "local protection error";
    case VRDMA_WC_WR_FLUSH_ERR: return "work request flushed";
    case VRDMA_WC_REM_ACCESS_ERR: return "remote access error";
    case VRDMA_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    case VRDMA_WC_REM_INV_REQ_ERR: return "remote invalid request";
    case VRDMA_WC_REM_OP_ERR: return "remote operation error (peer gone)";
    case VRDMA_WC_LOC_QP_OP_ERR: return "local QP operation error (a request the QP cannot carry out)";
    case VRDMA_WC_RETRY_EXC_ERR: return "transport retry counter exceeded (the peer QP is not connected to this one)";
    default: return "general error";
  }
}

vrdma_cq* vrdma_create_cq(vrdma_context* ctx, int cqe) {
  if (cqe < 1) {
    set_error(EINVAL, "a CQ needs at least one entry");
    return nullptr;
  }
  auto* cq = new (std::nothrow) vrdma_cq{ctx, rb::vrdma::Cq(cqe)};
  if (cq) ctx->impl->add_wake_fd(cq->impl.event_fd());
  return cq;
}

int vrdma_destroy_cq(vrdma_cq* cq) {
  if (cq->impl.has_qps()) return set_error(EBUSY, "the CQ still has QPs");
  cq->ctx->impl->remove_wake_fd(cq->impl.event_fd());
  delete cq;
  return 0;
}

int vrdma_cq_event_fd(const vrdma_cq* cq) { return cq->impl.event_fd(); }

int vrdma_req_notify_cq(vrdma_cq* cq) { return cq->ctx->impl->router_gone() ? 1 : cq->impl.arm(); }

namespace {
constexpr const char* kForkedAway = "a child of fork() cannot use its parent's QPs, CQs or SRQs";

// A post on a context the process inherited at fork: refused whole (bad names the first), since
// the rings it would write are the parent's.
extern "C++" template <class Wr>
int refuse_in_fork_child(Wr* wr, Wr** bad) {
  if (bad) *bad = wr;
  return -set_error(ECONNRESET, kForkedAway);
}

// A post the QP refused, out of the posting path (its message is a string to build).
[[gnu::cold, gnu::noinline]] int refused_post(int err, const char* what) {
  return -set_error(err, std::string(what) + ": a work request was refused (bad_wr names it)");
}
}  // namespace

int vrdma_poll_cq(vrdma_cq* cq, int n, vrdma_wc* wc) {
  if (n < 0) return set_error(EINVAL, "negative count");
  if (cq->ctx->impl->forked_away()) return set_error(ECONNRESET, kForkedAway);
  int got = cq->impl.poll(n, wc);
  // What completed is delivered first; then a gone router is an error of the CQ itself.
  if (got == 0 && cq->ctx->impl->router_gone()) return set_error(ECONNRESET, "the vrdma router is gone");
  return got;
}

vrdma_qp* vrdma_create_qp(vrdma_pd* pd, const vrdma_qp_init_attr* a) {
  rb::vrdma::QpAttr attr;
  attr.pd = pd->id;
  attr.send_cq = a->send_cq ? &a->send_cq->impl : nullptr;
  attr.recv_cq = a->recv_cq ? &a->recv_cq->impl : nullptr;
  attr.max_send_wr = a->max_send_wr;
  attr.max_recv_wr = a->max_recv_wr;
  attr.max_inline = a->max_inline_data;
  attr.sig_all = a->sq_sig_all != 0;
  attr.flags = a->flags & (VRDMA_QP_IMM_WITHOUT_RECV | VRDMA_QP_ROUTER_PATH | VRDMA_QP_NO_ERROR_STATE | VRDMA_QP_KEEP_RECVS |
                         VRDMA_QP_DATAGRAM);
  if (a->srq && a->srq->pd != pd) {
    set_error(EINVAL, "create_qp: the SRQ is of another PD");
    return nullptr;
  }
  attr.srq = a->srq ? a->srq->impl.get() : nullptr;
  auto q = rb::vrdma::Qp::create(*pd->ctx->impl, attr);
  if (failed(q)) return nullptr;
  return new (std::nothrow) vrdma_qp{pd, std::move(*q.value)};
}

uint32_t vrdma_qp_num(const vrdma_qp* qp) { return qp->impl->num(); }

int vrdma_qp_router_path(const vrdma_qp* qp) { return qp->impl->router_path() ? 1 : 0; }

int vrdma_qp_address(const vrdma_qp* qp, void* buf, size_t len) {
  if (len < VRDMA_ADDRESS_BYTES) return set_error(EINVAL, "a QP address needs VRDMA_ADDRESS_BYTES");
  qp->impl->address(static_cast<uint8_t*>(buf));
  return VRDMA_ADDRESS_BYTES;
}

int vrdma_connect_qp(vrdma_qp* qp, const void* address, size_t len) {
  auto r = qp->impl->connect(static_cast<const uint8_t*>(address), len);
  return failed(r) ? -r.error.err : 0;
}

int vrdma_query_router(const vrdma_context* ctx, vrdma_router_address* out) {
  const auto& a = ctx->impl->router_at();
  std::memcpy(out->ip, a.ip, sizeof out->ip);
  out->port = a.port;
  return 0;
}

int vrdma_connect_qp_at(vrdma_qp* qp, const vrdma_router_address* at, uint32_t peer_qp_num) {
  rb::vrdma::proto::RouterAddress peer;
  std::memcpy(peer.ip, at->ip, sizeof peer.ip);
  peer.port = at->port;
  auto r = qp->impl->connect_at(peer, peer_qp_num);
  return failed(r) ? -r.error.err : 0;
}

int vrdma_ud_ready(vrdma_qp* qp, uint32_t qkey) {
  auto r = qp->impl->ud_ready(qkey);
  return failed(r) ? -r.error.err : 0;
}

int vrdma_destroy_qp(vrdma_qp* qp) {
  auto r = qp->pd->ctx->impl->destroy_qp(qp->impl->num());
  if (failed(r)) return -r.error.err;
  delete qp;
  return 0;
}

int vrdma_post_send(vrdma_qp* qp, vrdma_send_wr* wr, vrdma_send_wr** bad) {
  if (qp->pd->ctx->impl->forked_away()) return refuse_in_fork_child(wr, bad);
  int r = qp->impl->post_send(wr, bad);
  return r ? refused_post(r, "post_send") : 0;
}

int vrdma_recover_qp(vrdma_qp* qp) {
  if (!qp->impl->recover()) return set_error(ECONNRESET, "the peer QP is gone");
  return 0;
}

int vrdma_set_peer_timeout(vrdma_qp* qp, uint64_t ns) {
  if (ns > VRDMA_MAX_PEER_TIMEOUT_NS)
    return set_error(EINVAL, "peer timeout of " + std::to_string(ns) + " ns: give at most " +
                                 std::to_string(VRDMA_MAX_PEER_TIMEOUT_NS) + " ns");
  qp->impl->set_peer_timeout(ns);
  return 0;
}

int vrdma_withdraw_recvs(vrdma_qp* qp) {
  qp->impl->withdraw_recvs();
  return 0;
}

int vrdma_post_recv(vrdma_qp* qp, vrdma_recv_wr* wr, vrdma_recv_wr** bad) {
  if (qp->pd->ctx->impl->forked_away()) return refuse_in_fork_child(wr, bad);
  int r = qp->impl->post_recv(wr, bad);
  return r ? refused_post(r, "post_recv") : 0;
}

vrdma_srq* vrdma_create_srq(vrdma_pd* pd, uint32_t max_wr) {
  auto s = rb::vrdma::Srq::create(*pd->ctx->impl, pd->id, max_wr);
  if (failed(s)) return nullptr;
  return new (std::nothrow) vrdma_srq{pd, std::move(*s.value)};
}

uint32_t vrdma_srq_capacity(const vrdma_srq* srq) { return srq->impl->capacity(); }

int vrdma_post_srq_recv(vrdma_srq* srq, vrdma_recv_wr* wr, vrdma_recv_wr** bad) {
  if (srq->pd->ctx->impl->forked_away()) return refuse_in_fork_child(wr, bad);
  int r = srq->impl->post(wr, bad);
  return r ? set_error(r, "post_srq_recv: a work request was refused (bad_wr names it)") * -1 : 0;
}

vrdma_ah* vrdma_create_ah(vrdma_pd* pd, const vrdma_router_address* at) {
  rb::vrdma::proto::RouterAddress a;
  std::memcpy(a.ip, at->ip, sizeof a.ip);
  a.port = at->port;
  auto r = pd->ctx->impl->create_ah(a);
  if (failed(r)) return nullptr;
  return new (std::nothrow) vrdma_ah{pd->ctx->impl.get(), *r.value};
}

int vrdma_destroy_ah(vrdma_ah* ah) {
  auto r = ah->ctx->destroy_ah(ah->id);
  if (failed(r)) return -r.error.err;
  delete ah;
  return 0;
}

int vrdma_destroy_srq(vrdma_srq* srq) {
  auto d = srq->pd->ctx->impl->destroy_srq(srq->impl->num());
  if (failed(d)) return -errno;
  delete srq;
  return 0;
}

}  // extern "C"
