#include "vrdma/router/ofi_fabric.hh"

#include "vrdma/router/link_auth.hh"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

// libfabric 1.17's tcp provider accepts --listen's connections with a plain accept(), which
// gives blocking sockets, and reads each one's connection request, header and then data, with
// recv(): a stranger that sent the 32-byte header and then nothing held the router's thread in
// that recv until the link guard shut the connection 5-6 s later, and every local client's call
// timed out meanwhile (probe 19). The router's own code accepts with accept4 and its own flags;
// this accept(), which the dynamic linker binds libfabric to ahead of libc's, makes the sockets
// libfabric accepts non-blocking, as the provider makes every other socket of its own: it then
// takes EAGAIN for "later", and a request whose data lags its header fails, closing only its own
// connection.
extern "C" int accept(int fd, sockaddr* __restrict addr, socklen_t* __restrict len) {
  return accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

namespace rb::vrdma {

std::string fi_error(int rc) { return fmt::format("{} ({})", fi_strerror(rc < 0 ? -rc : rc), rc); }

namespace {

// A message that finds no receive posted waits in the peer's socket (rxm's own buffers once grew
// by gigabytes in seconds under a flood, with 64 receives reaped 16 a turn). With these the
// router keeps up with a peer that sends as fast as it can.
constexpr int kRecvBuffers = 512;
constexpr int kCompletionsPerTurn = 256;
constexpr int64_t kPostBoundNs = 2'000'000'000;  // a post refused this long: the peer is unreachable

void close_fid(fid_t f) {
  if (f) fi_close(f);
}

// "tcp;ofi_rxm" (what --fabric ofi:tcp once meant) is its core provider: the router makes its own
// connections, which rxm's would not let it authenticate.
std::string core_provider(const std::string& provider) {
  std::string p = provider;
  if (size_t semi = p.find(";ofi_rxm"); semi != std::string::npos) p.erase(semi);
  return p;
}

}  // namespace

struct OfiFabric::Context {
  fi_context2 fc;  // first: libfabric hands this pointer back
  enum Kind { recv, send, rma } kind = recv;
  std::vector<uint8_t> bytes;   // a receive buffer, or a message being sent
  uint64_t cookie = 0;          // rma
  std::vector<std::shared_ptr<const void>> pins;  // rma: the local memory it reads or writes
  proto::RouterAddress to;      // send: for on_send_failed
  uint64_t dest = 0;            // send: its peer (peers_), for the peer's count of sends in flight
  // rma: what the post names, kept here so that a post that waits can be made later
  iovec iov[proto::kMaxSge] = {};
  void* desc[proto::kMaxSge] = {};
  fi_rma_iov remote{};
  fi_msg_rma msg{};
  std::shared_ptr<RmaGroup> group;  // rma: the op's other posts, when it took more than one
};

// The posts that carry one op between them.
struct OfiFabric::RmaGroup {
  size_t left = 0;  // posts not yet completed
  bool ok = true;   // false once any failed
};

int64_t OfiFabric::mono_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

OfiFabric::OfiFabric(LinkAuth& auth) : handshake_(auth) {}

OfiMr::~OfiMr() { close_fid(&mr_->fid); }
void* OfiMr::desc() const { return fi_mr_desc(mr_); }

Result<std::unique_ptr<OfiFabric>> OfiFabric::open(const std::string& provider, const proto::RouterAddress& listen,
                                                   LinkAuth& auth) {
  std::unique_ptr<OfiFabric> f(new OfiFabric(auth));
  f->provider_ = core_provider(provider);
  f->self_ = listen;
  fi_info* hints = fi_allocinfo();
  hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_MSG;
  hints->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
  // Keys the router draws (a provider's are counted from 1: a host that reaches the fabric could
  // guess them), addresses that are offsets into the region.
  hints->domain_attr->mr_mode = 0;
  // An op's notice must never overtake the WRITEs before it on the same link.
  hints->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_SAW | FI_ORDER_WAW | FI_ORDER_RAW;
  hints->fabric_attr->prov_name = strdup(f->provider_.c_str());
  std::string host = proto::to_string(listen);
  host = host.substr(0, host.rfind(':'));
  if (host.front() == '[') host = host.substr(1, host.size() - 2);
  std::string port = std::to_string(listen.port);
  int rc = fi_getinfo(FI_VERSION(1, 9), host.c_str(), port.c_str(), FI_SOURCE, hints, &f->info_);
  fi_freeinfo(hints);
  if (rc)
    return Status(Errc::unavailable,
                  fmt::format("--fabric {} --listen {}: fi_getinfo: {} (the link needs a provider with connected "
                              "endpoints, RMA, a shared receive context and keys the router chooses: ofi:tcp)",
                              provider, proto::to_string(listen), fi_error(rc)));
  fi_info* i = f->info_;
  f->virt_addr_ = i->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
  f->prov_key_ = i->domain_attr->mr_mode & FI_MR_PROV_KEY;
  f->iov_limit_ = i->tx_attr->iov_limit;
  f->key_bytes_ = std::min<size_t>(i->domain_attr->mr_key_size ? i->domain_attr->mr_key_size : 8, 8);
  if (Status s = f->open_passive(provider); !s) return s;
  for (int n = 0; n < kRecvBuffers; ++n) {
    auto c = std::make_unique<Context>();
    c->bytes.resize(kLinkPacket);
    if (Status s = f->post_recv(c.get()); !s) return s;
    f->recvs_.push_back(std::move(c));
  }
  return f;
}

// The domain, the CQ and shared receive context every connection uses, the EQ of their events,
// and the passive endpoint; one fd to wait on for both queues.
Status OfiFabric::open_passive(const std::string& provider) {
  auto fail = [&](const char* what, int r) {
    return Status(Errc::io, fmt::format("--fabric {}: {}: {}", provider, what, fi_error(r)));
  };
  fi_info* i = info_;
  int rc;
  if ((rc = fi_fabric(i->fabric_attr, &fabric_, nullptr))) return fail("fi_fabric", rc);
  if ((rc = fi_domain(fabric_, i, &domain_, nullptr))) return fail("fi_domain", rc);
  fi_cq_attr cq{};
  cq.format = FI_CQ_FORMAT_MSG;
  cq.wait_obj = FI_WAIT_FD;
  cq.size = 4 * (i->tx_attr->size + kRecvBuffers);
  if ((rc = fi_cq_open(domain_, &cq, &cq_, nullptr))) return fail("fi_cq_open", rc);
  if ((rc = fi_control(&cq_->fid, FI_GETWAIT, &cq_fd_))) return fail("fi_control(cq, FI_GETWAIT)", rc);
  fi_rx_attr rx = *i->rx_attr;
  rx.size = kRecvBuffers;
  if ((rc = fi_srx_context(domain_, &rx, &srx_, nullptr))) return fail("fi_srx_context", rc);
  if ((rc = fi_ep_bind(srx_, &cq_->fid, FI_RECV))) return fail("fi_ep_bind(srx, cq)", rc);
  fi_eq_attr eq{};
  eq.wait_obj = FI_WAIT_FD;
  if ((rc = fi_eq_open(fabric_, &eq, &eq_, nullptr))) return fail("fi_eq_open", rc);
  if ((rc = fi_control(&eq_->fid, FI_GETWAIT, &eq_fd_))) return fail("fi_control(eq, FI_GETWAIT)", rc);
  if ((rc = fi_passive_ep(fabric_, i, &pep_, nullptr))) return fail("fi_passive_ep", rc);
  if ((rc = fi_pep_bind(pep_, &eq_->fid, 0))) return fail("fi_pep_bind", rc);
  if ((rc = fi_listen(pep_))) return fail("fi_listen", rc);
  wait_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!wait_fd_) return Status(Errc::io, fmt::format("epoll_create1: {}", std::strerror(errno)));
  for (int fd : {cq_fd_, eq_fd_}) {
    epoll_event ev{EPOLLIN, {.fd = fd}};
    if (epoll_ctl(wait_fd_.get(), EPOLL_CTL_ADD, fd, &ev) < 0)
      return Status(Errc::io, fmt::format("epoll_ctl: {}", std::strerror(errno)));
  }
  return {};
}

OfiFabric::~OfiFabric() {
  for (auto& [raw, l] : links_) close_fid(&l->ep->fid);
  links_.clear();
  close_fid(pep_ ? &pep_->fid : nullptr);
  in_flight_.clear();  // the registrations its RMAs pinned close while the domain is open
  close_fid(srx_ ? &srx_->fid : nullptr);
  close_fid(cq_ ? &cq_->fid : nullptr);
  close_fid(eq_ ? &eq_->fid : nullptr);
  close_fid(domain_ ? &domain_->fid : nullptr);
  close_fid(fabric_ ? &fabric_->fid : nullptr);
  if (info_) fi_freeinfo(info_);
}

Status OfiFabric::post_recv(Context* c) {
  ssize_t rc = fi_recv(srx_, c->bytes.data(), c->bytes.size(), nullptr, FI_ADDR_UNSPEC, &c->fc);
  if (rc) return Status(Errc::io, "fi_recv: " + fi_error(int(rc)));
  return {};
}

// libfabric 1.17's tcp provider reads errno after a recv() that returned 0 or a short header on
// a connection being accepted, and takes a stale EAGAIN (the router's own sockets leave one) for
// "try later": the dead connection then stays in CLOSE-WAIT, readable for ever, and the router
// spins on it (raw connections to --listen that close before the handshake did it). Fixed
// upstream in 2.2 ("prov/tcp: handle the error correctly"); until then errno is cleared before
// each call that drives the provider's progress.
bool OfiFabric::try_wait() {
  errno = 0;
  events_due_ = true;  // what wakes a parked router may be a connection's event
  fid* f[2] = {&cq_->fid, &eq_->fid};
  return fi_trywait(fabric_, f, 2) == FI_SUCCESS;
}

int OfiFabric::poll(LinkSink& sink) {
  int handled = 0;
  if (events_due_ || connecting_ || (++turns_ & 31) == 0) handle_connections();
  if (!waiting_.empty() && !reading_) post_waiting(sink);
  if (!reading_) {  // what a post's retry read while a handler ran comes first, in order
    std::vector<Event> backlog;
    backlog.swap(backlog_);
    for (Event& ev : backlog) dispatch(ev, sink);
    handled += int(backlog.size());
  }
  fi_cq_msg_entry e[kCompletionsPerTurn];
  errno = 0;  // see try_wait
  ssize_t n = fi_cq_read(cq_, e, kCompletionsPerTurn);
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    if (fi_cq_readerr(cq_, &err, 0) != 1) return handled;
    auto* c = static_cast<Context*>(err.op_context);
    last_failure_ = fmt::format("{} (provider error {})", fi_error(err.err), err.prov_errno);
    if (c && c->kind == Context::recv) {  // a truncated or failed receive: drop it, keep the buffer
      (void)post_recv(c);
    } else if (c) {
      deliver(c, false, {}, sink);
    }
    return handled + 1;
  }
  if (n <= 0) return handled;
  for (ssize_t k = 0; k < n; ++k) {
    auto* c = static_cast<Context*>(e[k].op_context);
    if (c->kind == Context::recv) {
      deliver(c, true, {c->bytes.data(), std::min(e[k].len, c->bytes.size())}, sink);
      (void)post_recv(c);
    } else {
      deliver(c, true, {}, sink);
    }
  }
  return handled + int(n);
}

// A completion to the sink now, or into the backlog when a handler is running (a post it made
// is retrying): handlers never run inside each other, so ops of a QP keep their order.
void OfiFabric::deliver(Context* c, bool ok, std::span<const uint8_t> msg, LinkSink& sink) {
  Event ev;
  if (c->kind == Context::recv) {
    ev.kind = Event::message;
    ev.bytes.assign(msg.begin(), msg.end());
  } else {
    auto it = in_flight_.find(c);
    if (it == in_flight_.end()) return;
    auto owned = std::move(it->second);
    forget(owned.get());
    in_flight_.erase(it);
    if (owned->kind == Context::send && ok) return;
    if (owned->group) {
      owned->group->ok = owned->group->ok && ok;
      if (--owned->group->left) return;
      ok = owned->group->ok;
    }
    ev.kind = owned->kind == Context::rma ? Event::rma : Event::send_failed;
    ev.ok = ok;
    ev.cookie = owned->cookie;
    ev.to = owned->to;
  }
  if (reading_) {
    backlog_.push_back(std::move(ev));
    return;
  }
  dispatch(ev, sink);
}

void OfiFabric::dispatch(Event& ev, LinkSink& sink) {
  reading_ = true;
  switch (ev.kind) {
    case Event::message: sink.on_message(ev.bytes); break;
    case Event::rma: sink.on_rma(ev.cookie, ev.ok); break;
    case Event::send_failed: sink.on_send_failed(ev.to); break;
  }
  reading_ = false;
}

// The peer's number here: its connections, posts and counts are kept under it.
Result<uint64_t> OfiFabric::peer_of(const proto::RouterAddress& a) {
  std::vector<uint8_t> k(reinterpret_cast<const uint8_t*>(&a), reinterpret_cast<const uint8_t*>(&a) + sizeof a);
  if (auto it = addrs_.find(k); it != addrs_.end()) return it->second;
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (info_->addr_format == FI_SOCKADDR_IN && std::memcmp(a.ip, kMapped, 12) != 0)
    return Status(Errc::invalid_argument, fmt::format("router {} is IPv6; this fabric speaks IPv4", proto::to_string(a)));
  uint64_t peer = next_peer_++;
  addrs_.emplace(std::move(k), peer);
  peers_[peer].at = a;
  return peer;
}

Status OfiFabric::post_or_wait(uint64_t peer, Context* c, const char* what, Post post) {
  auto w = waiting_.find(peer);
  if (w == waiting_.end()) {
    fid_ep* ep = out_ep(peer);
    ssize_t rc = ep ? post(ep) : -FI_EAGAIN;
    if (rc == 0) return {};
    if (rc != -FI_EAGAIN) {
      forget(c);
      in_flight_.erase(c);
      return Status(Errc::io, fmt::format("{}: {}", what, fi_error(int(rc))));
    }
  }
  waiting_[peer].push_back({c, std::move(post), mono_ns() + kPostBoundNs});
  return {};
}

// Each peer's waiting posts, in order, until the provider refuses one again; one that waited
// past the bound fails (its peer is unreachable), as does one the provider refuses outright.
void OfiFabric::post_waiting(LinkSink& sink) {
  int64_t now = mono_ns();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto& q = it->second;
    while (!q.empty()) {
      Waiting& w = q.front();
      fid_ep* ep = out_ep(it->first);
      ssize_t rc = ep ? w.post(ep) : -FI_EAGAIN;
      if (rc == -FI_EAGAIN && now < w.until_ns) break;
      Context* c = w.c;
      q.pop_front();
      if (rc == -FI_EAGAIN)
        last_failure_ = ep ? fmt::format("the provider took no post for {} ms", kPostBoundNs / 1'000'000)
                           : fmt::format("no connection to router {} came up within {} ms",
                                         proto::to_string(peers_[it->first].at), kPostBoundNs / 1'000'000);
      else if (rc != 0) last_failure_ = fi_error(int(rc));
      if (rc != 0) deliver(c, false, {}, sink);
    }
    it = q.empty() ? waiting_.erase(it) : std::next(it);
  }
}

void OfiFabric::forget(Context* c) {
  if (c->kind != Context::send) return;
  --sends_;
  if (auto n = sends_to_.find(c->dest); n != sends_to_.end() && --n->second == 0) sends_to_.erase(n);
}

size_t OfiFabric::sends_in_flight(const proto::RouterAddress& to) const {
  std::vector<uint8_t> k(reinterpret_cast<const uint8_t*>(&to), reinterpret_cast<const uint8_t*>(&to) + sizeof to);
  auto a = addrs_.find(k);
  if (a == addrs_.end()) return 0;
  auto n = sends_to_.find(a->second);
  return n == sends_to_.end() ? 0 : n->second;
}

bool OfiFabric::forget_address(const proto::RouterAddress& to) {
  std::vector<uint8_t> k(reinterpret_cast<const uint8_t*>(&to), reinterpret_cast<const uint8_t*>(&to) + sizeof to);
  auto a = addrs_.find(k);
  // No RMA names it: RMA goes only to the peers of connected QPs, whose routers proved the key.
  if (a == addrs_.end()) return true;
  uint64_t peer = a->second;
  if (sends_to_.count(peer) || waiting_.count(peer)) return false;
  std::vector<Link*> its;
  for (auto& [raw, l] : links_)
    if (l->peer == peer) its.push_back(raw);
  for (Link* l : its) close_link(l, "");
  peers_.erase(peer);
  addrs_.erase(a);
  return true;
}

Status OfiFabric::send(const proto::RouterAddress& to, std::span<const uint8_t> bytes, LinkSink&) {
  auto peer = peer_of(to);
  if (!peer) return peer.status();
  auto c = std::make_unique<Context>();
  c->kind = Context::send;
  c->bytes.assign(bytes.begin(), bytes.end());
  c->to = to;
  c->dest = *peer;
  Context* raw = c.get();
  in_flight_.emplace(raw, std::move(c));
  ++sends_to_[*peer];
  ++sends_;
  return post_or_wait(*peer, raw, "fi_send", [raw](fid_ep* ep) {
    return fi_send(ep, raw->bytes.data(), raw->bytes.size(), nullptr, FI_ADDR_UNSPEC, &raw->fc);
  });
}

// One op's RMA: a post of up to iov_limit_ local pieces each (tcp takes 4, an op may name
// 8), at consecutive remote addresses. The op completes once, when the last post does.
Status OfiFabric::rma(bool is_write, const proto::RouterAddress& to, std::span<const LocalPiece> local, uint64_t addr,
                   uint64_t key, uint64_t cookie, LinkSink&) {
  auto peer = peer_of(to);
  if (!peer) return peer.status();
  local = local.first(std::min(local.size(), size_t(proto::kMaxSge)));
  size_t per = std::max<size_t>(iov_limit_, 1);
  size_t posts = local.empty() ? 1 : (local.size() + per - 1) / per;
  auto group = posts > 1 ? std::make_shared<RmaGroup>(RmaGroup{posts, true}) : nullptr;
  for (size_t p = 0; p < posts; ++p) {
    auto part = local.subspan(std::min(p * per, local.size()));
    part = part.first(std::min(part.size(), per));
    Status s = post_rma(is_write, *peer, to, part, addr, key, cookie, group);
    if (!s && p == 0) return s;
    if (!s) {  // the posts made complete the op, failed; those never made count as done
      group->ok = false;
      group->left -= posts - p;
      return {};
    }
    for (const LocalPiece& l : part) addr += l.len;
  }
  return {};
}

Status OfiFabric::post_rma(bool is_write, uint64_t peer, const proto::RouterAddress& to,
                           std::span<const LocalPiece> local, uint64_t addr, uint64_t key, uint64_t cookie,
                           std::shared_ptr<RmaGroup> group) {
  auto c = std::make_unique<Context>();
  c->kind = Context::rma;
  c->cookie = cookie;
  c->to = to;
  c->group = std::move(group);
  size_t total = 0;
  for (size_t k = 0; k < local.size(); ++k) {
    c->iov[k] = {local[k].p, local[k].len};
    c->desc[k] = local[k].desc;
    c->pins.push_back(local[k].pin);
    total += local[k].len;
  }
  c->remote = {addr, total, key};
  Context* raw = c.get();
  c->msg = {raw->iov, raw->desc, local.size(), FI_ADDR_UNSPEC, &raw->remote, 1, &raw->fc, 0};
  in_flight_.emplace(raw, std::move(c));
  if (is_write)
    return post_or_wait(peer, raw, "fi_writemsg", [raw](fid_ep* ep) {
      return fi_writemsg(ep, &raw->msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
    });
  return post_or_wait(peer, raw, "fi_readmsg", [raw](fid_ep* ep) { return fi_readmsg(ep, &raw->msg, FI_COMPLETION); });
}

Status OfiFabric::write(const proto::RouterAddress& to, std::span<const LocalPiece> local, uint64_t addr, uint64_t key,
                     uint64_t cookie, LinkSink& sink) {
  return rma(true, to, local, addr, key, cookie, sink);
}

Status OfiFabric::read(const proto::RouterAddress& to, std::span<const LocalPiece> local, uint64_t addr, uint64_t key,
                    uint64_t cookie, LinkSink& sink) {
  return rma(false, to, local, addr, key, cookie, sink);
}

Result<std::unique_ptr<FabricMr>> OfiFabric::register_region(void* p, size_t len, uint32_t region_access) {
  fid_mr* mr = nullptr;
  // Other routers may read or write only where the region grants remote read or write.
  uint64_t access = FI_READ | FI_WRITE;
  if (region_access & proto::remote_read) access |= FI_REMOTE_READ;
  if (region_access & proto::remote_write) access |= FI_REMOTE_WRITE;
  int rc = -FI_ENOKEY;
  for (int tries = 0; rc == -FI_ENOKEY && tries < 8; ++tries) {  // a drawn key may be in use: draw again
    uint64_t key = 0;
    if (!prov_key_ && getrandom(&key, key_bytes_, 0) != ssize_t(key_bytes_))
      return Status(Errc::io, "getrandom for a registration key failed");
    rc = fi_mr_reg(domain_, p, len, access, 0, prov_key_ ? 0 : key, 0, &mr, nullptr);
  }
  if (rc) return Status(Errc::io, fmt::format("fi_mr_reg of {} B: {}", len, fi_error(rc)));
  return std::unique_ptr<FabricMr>(std::make_unique<OfiMr>(mr, fi_mr_key(mr), virt_addr_ ? reinterpret_cast<uint64_t>(p) : 0));
}

}  // namespace rb::vrdma

namespace rb::vrdma {

Result<std::unique_ptr<Fabric>> open_fabric(const std::string& provider, const proto::RouterAddress& listen,
                                            LinkAuth& auth) {
  auto f = OfiFabric::open(provider, listen, auth);
  if (!f) return f.status();
  return std::unique_ptr<Fabric>(std::move(*f));
}

}  // namespace rb::vrdma
