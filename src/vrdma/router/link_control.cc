// QPs across hosts, the control half: a client's connect to a QP whose address names another
// router is asked of that router over the fabric (same tenant, QP free), and answered when it
// answers (or after a bound); keys of a peer's regions are looked up once and forgotten when
// the region goes; a QP that goes breaks its peer on the other host.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "vrdma/ipc/seqpacket.hh"
#include "vrdma/router/data_path.hh"

namespace rb::vrdma {
namespace {

constexpr auto kConnectBound = std::chrono::milliseconds(800);  // inside the client's 1 s per call

}  // namespace

using proto::LinkType;

void Router::answer(Session& s, const Reply& r) {
  if (!r.bytes.empty() && !ipc::send_packet(s.sock.get(), r.bytes, r.fd, r.fd2)) drop(s.id);
}

bool Router::link_send(const proto::RouterAddress& to, LinkType t, uint64_t req, std::span<const uint8_t> body,
                       std::span<const uint8_t> tail) {
  if (!fabric_) return false;
  proto::LinkHeader h;
  h.from_router = router_id_;
  h.from = opts_.listen;
  h.req = req;
  std::vector<uint8_t> bytes;
  proto::encode_link(bytes, h, t, body, tail);
  auth_.seal(bytes, to);
  Status st = fabric_->send(to, bytes, *this);
  if (!st) {
    // Limited: a tenant's datagrams may name any address, and each would say it again.
    log_limited("link send", fmt::format("router {}: {}", proto::to_string(to), st.message()));
    on_send_failed(to);
  }
  return bool(st);
}

Router::Reply Router::connect_remote(Session& s, const proto::Message& m, proto::ConnectQp req) {
  req.peer_at.pad = 0;  // an address is its IP and port: a pad the tenant set would make it another
  if (!fabric_)
    return error(s, m, EXDEV, "the peer QP is on another host and this router has no --listen address to reach it");
  if (!req.peer_at.port) return error(s, m, EXDEV, "the peer QP is on another host whose router has no --listen address");
  QpEntry& mine = qps_.at(req.qp_num);
  if (mine.peer || mine.peer_gone) return error(s, m, EISCONN, "the QP is connected to another already");
  for (const auto& [id, pc] : connects_)
    if (pc.qp == req.qp_num) return error(s, m, EALREADY, "the QP's connect to another host is under way");
  auto v = view_qp(mine.mem.bytes());
  if (!v) return error(s, m, EINVAL, v.status().message());
  int err = 0;
  std::string why;
  Reach reach_it = reach(s, req.peer_at, &err, &why);
  if (reach_it == Reach::refused) return error(s, m, err, why);
  uint64_t id = next_req_++;
  PendingConnect pc{PendingConnect::connect, false, s.id, m.h.seq, req.qp_num, req.peer_qp_num, req.peer_router,
                    req.peer_at, std::chrono::steady_clock::now() + kConnectBound};
  if (reach_it == Reach::ready && !send_connect(id, pc, s.tenant.name))
    return error(s, m, EHOSTUNREACH, fmt::format("router {} cannot be reached", proto::to_string(req.peer_at)));
  connects_[id] = pc;
  Reply r;
  r.later = true;
  return r;
}

// Asks the router at pc.peer_at to connect our QP to its QP; its answer comes as connect_reply.
bool Router::send_connect(uint64_t id, PendingConnect& pc, const std::string& tenant) {
  proto::LinkConnect c{pc.qp, pc.peer_qp};
  proto::put_text(c.tenant, sizeof c.tenant, tenant);
  pc.sent = link_send(pc.peer_at, LinkType::connect, id, c);
  return pc.sent;
}

void Router::expire_connects() {
  auto now = std::chrono::steady_clock::now();
  for (auto it = connects_.begin(); it != connects_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    PendingConnect pc = it->second;
    it = connects_.erase(it);
    // The same answer whether the connect went or its address never proved the key.
    if (auto s = sessions_.find(pc.session); s != sessions_.end()) {
      proto::Message m;
      m.h.seq = pc.seq;
      answer(s->second, error(s->second, m, ETIMEDOUT,
                              fmt::format("router {} did not answer within {} ms", proto::to_string(pc.peer_at),
                                          kConnectBound.count())));
    }
  }
}

void Router::on_message(std::span<const uint8_t> bytes) {
  // Nothing of a message is used before its trailer proves the cluster's key: the sender's id
  // and address it claims are inside what the MAC covers.
  std::string why;
  proto::LinkHeader claimed;
  if (bytes.size() < sizeof claimed) return log_limited("link short", "link: a message shorter than a header; dropped");
  std::memcpy(&claimed, bytes.data(), sizeof claimed);
  auto opened = auth_.open(bytes, claimed.from_router, opts_.listen, &why);
  if (!opened)
    return log_limited("link auth", fmt::format("link: refused a message claiming to be from router {}: {}",
                                                proto::to_string(claimed.from), why));
  auto m = proto::parse_link(*opened, &why);
  if (!m) return log_limited("link parse", "link: " + why);
  note_peer(*m);
  switch (m->type()) {
    case LinkType::hello: return link_hello(*m);
    case LinkType::hello_reply: return;
    case LinkType::connect: return link_connect(*m);
    case LinkType::connect_reply: return link_connected(*m);
    case LinkType::key_ask: return link_key_ask(*m);
    case LinkType::key_reply: return link_key(*m);
    case LinkType::op: return link_op(*m);
    case LinkType::op_reply: return link_op_reply(*m);
    case LinkType::revoke: return link_revoke(*m);
    case LinkType::qp_gone: return link_qp_gone(*m);
    case LinkType::datagram: return link_datagram(*m);
    case LinkType::conn_proof: return link_conn_proof(*m);
  }
}

// A router that proved the key names the connections it made to our port: the guard keeps them.
void Router::link_conn_proof(const proto::LinkMessage& m) {
  auto p = m.as<proto::LinkConnProof>();
  if (!link_guard_) return;
  int64_t now = now_ns();
  for (uint32_t i = 0; i < std::min(p.count, proto::LinkConnProof::kMaxEnds); ++i) link_guard_->vouch(p.ends[i], now);
}

// Tells each router we made connections to which of them are ours (their guards shut the rest).
// Only routers this one talks to: a peer, or an address being greeted.
void Router::vouch_for_made_connections() {
  uint64_t n;
  (void)!read(link_guard_->changed_fd(), &n, sizeof n);
  std::map<std::string, std::pair<proto::RouterAddress, proto::LinkConnProof>> by_peer;
  for (const MadeConn& c : link_guard_->made()) {
    std::string name = proto::to_string(c.peer);
    if (!peers_.count(name) && !probes_.count(name)) continue;
    auto& [at, proof] = by_peer[name];
    at = c.peer;
    if (proof.count < proto::LinkConnProof::kMaxEnds) proof.ends[proof.count++] = c.self;
  }
  for (const auto& [name, p] : by_peer) link_send(p.first, LinkType::conn_proof, 0, p.second);
}

void Router::link_connect(const proto::LinkMessage& m) {
  auto c = m.as<proto::LinkConnect>();
  proto::LinkStatus st;
  auto q = qps_.find(c.to_qp);
  if (q == qps_.end() || sessions_.at(q->second.owner).tenant.name != proto::get_text(c.tenant, sizeof c.tenant)) {
    st.err = ENOENT;  // another tenant's QP is as good as a wrong number
    proto::put_text(st.message, sizeof st.message, fmt::format("no QP {:#x} at router {}", c.to_qp, proto::to_string(opts_.listen)));
  } else if (q->second.flags & proto::datagram) {  // as on one host (probe 8 D3: accepted, then every op failed)
    st.err = EINVAL;
    proto::put_text(st.message, sizeof st.message,
                    fmt::format("QP {:#x} is a datagram QP: a connected QP cannot connect to it", c.to_qp));
  } else if (q->second.peer && !(q->second.remote && q->second.peer == c.from_qp &&
                                 q->second.remote->peer_router == m.h.from_router)) {
    st.err = EISCONN;
    proto::put_text(st.message, sizeof st.message, fmt::format("QP {:#x} is connected to another QP", c.to_qp));
  }
  link_send(m.h.from, LinkType::connect_reply, m.h.req, st);
}

void Router::link_connected(const proto::LinkMessage& m) {
  auto it = connects_.find(m.h.req);
  if (it == connects_.end() || !it->second.sent || !(it->second.peer_at == m.h.from))
    return;  // expired (the client has its answer), or not asked of that router
  PendingConnect pc = it->second;
  connects_.erase(it);
  auto s = sessions_.find(pc.session);
  auto q = qps_.find(pc.qp);
  if (s == sessions_.end() || q == qps_.end()) return;
  auto st = m.as<proto::LinkStatus>();
  proto::Message req;
  req.h.seq = pc.seq;
  if (st.err) return answer(s->second, error(s->second, req, st.err, proto::get_text(st.message, sizeof st.message)));
  if (q->second.peer) return answer(s->second, error(s->second, req, EISCONN, "the QP is connected to another already"));
  auto v = view_qp(q->second.mem.bytes());
  if (!v) return answer(s->second, error(s->second, req, EINVAL, v.status().message()));
  q->second.view.emplace(*v);
  q->second.remote = std::make_unique<RemoteQp>();
  q->second.remote->peer_at = pc.peer_at;
  q->second.remote->peer_router = m.h.from_router;
  if (!route_qp(q->second, pc.peer_qp))
    return answer(s->second, error(s->second, req, EMFILE, "the router is out of descriptors for the QP's kick"));
  log(fmt::format("QP {:#x} connected to QP {:#x} at router {}", pc.qp, pc.peer_qp, proto::to_string(pc.peer_at)));
  proto::QpConnected c;
  c.router_path = 1;
  answer(s->second, {proto::encode(proto::Type::qp_connected, pc.seq, c), q->second.kick.get()});
}

// Our QP `qp`, when it is connected to `from_qp` at router `from_router`; else null.
QpEntry* Router::remote_peer_of(uint32_t qp, uint64_t from_router, uint32_t from_qp) {
  auto q = qps_.find(qp);
  if (q == qps_.end() || !q->second.remote || q->second.peer != from_qp ||
      q->second.remote->peer_router != from_router)
    return nullptr;
  return &q->second;
}

void Router::link_key_ask(const proto::LinkMessage& m) {
  auto a = m.as<proto::LinkKeyAsk>();
  proto::LinkKey k;
  k.err = EACCES;
  if (QpEntry* q = remote_peer_of(a.to_qp, m.h.from_router, a.from_qp)) {
    const MemoryRegionEntry* mr = sessions_.at(q->owner).region_by_rkey(a.rkey);
    if (mr && mr->pd == q->pd && mr->fabric())
      k = {0, mr->access, mr->va, mr->len, mr->fabric()->key(), mr->fabric()->base()};
  }
  link_send(m.h.from, LinkType::key_reply, m.h.req, k);
}

void Router::link_key(const proto::LinkMessage& m) {
  // req: our QP number above the rkey asked about.
  uint32_t qp = uint32_t(m.h.req >> 32), rkey = uint32_t(m.h.req);
  auto q = qps_.find(qp);
  if (q == qps_.end() || !q->second.remote || q->second.remote->key_asked != rkey) return;
  RemoteQp& r = *q->second.remote;
  r.key_asked = 0;
  // The owner names the rkeys, so it could name a new one each time: the cache is bounded, and
  // an error is kept only until the op that asked fails with it (remote_path.cc).
  if (r.keys.size() >= RemoteQp::kKeysCached) r.keys.clear();
  r.keys[rkey] = m.as<proto::LinkKey>();
}

// The peer's router no longer has the region: its key goes, and an RMA to it still in flight
// fails (it may have landed in the zero pages the region left, see blank_for_peers; one that
// landed before, in the region, was answered before this came: the link keeps order).
void Router::link_revoke(const proto::LinkMessage& m) {
  uint32_t rkey = m.as<proto::LinkRevoke>().rkey;
  for (auto& [n, q] : qps_) {
    if (!q.remote || q.remote->peer_router != m.h.from_router) continue;
    q.remote->keys.erase(rkey);
    for (RemoteOut& o : q.remote->out) {
      if (o.done || !o.one_sided || o.rkey != rkey) continue;
      o.key_revoked = true;
      if (!o.cut) continue;
      o.cut->failed = true;  // no more of its pieces go
      if (o.cut->in_flight) continue;
      o.fail(VRDMA_WC_REM_ACCESS_ERR);
    }
  }
}

void Router::tell_peers_revoked(const Session& s, uint32_t rkey) {
  std::vector<proto::RouterAddress> told;
  for (uint32_t n : s.qps) {
    auto q = qps_.find(n);
    if (q == qps_.end() || !q->second.remote) continue;
    const proto::RouterAddress& to = q->second.remote->peer_at;
    if (std::find(told.begin(), told.end(), to) != told.end()) continue;
    told.push_back(to);
    link_send(to, LinkType::revoke, 0, proto::LinkRevoke{rkey});
  }
}

void Router::link_qp_gone(const proto::LinkMessage& m) {
  auto g = m.as<proto::LinkQpGone>();
  if (QpEntry* q = remote_peer_of(g.peer_qp, m.h.from_router, g.qp)) peer_lost(*q);
}

// The peer QP has gone (destroyed, or its owner died): as an RC QP keeps retrying a peer that no
// longer answers, a router-path QP goes on as if it were there for its owner's peer timeout, then
// breaks. Its requests wait meanwhile (pump_qp, pump_remote), so a program whose peer exits while
// replies are still on their way (ibv_srq_pingpong does) finishes first, as on hardware.
void Router::peer_lost(QpEntry& q) {
  if (!q.router_path || !q.header()->peer_timeout_ns.load(std::memory_order_relaxed)) return break_qp(q);
  if (!q.peer_lost_ns) {
    q.peer_lost_ns = now_ns();
    log(fmt::format("QP {:#x}: its peer QP {:#x} has gone; it breaks in {} ms, its peer timeout", q.num, q.peer,
                    (peer_lost_until(q) - q.peer_lost_ns) / 1'000'000));
  }
  deferred_ = true;
}

// The peer is gone: the owner's requests fail, its receives flush (as on one host).
void Router::break_qp(QpEntry& q) {
  q.header()->state.store(uint32_t(proto::QpState::error), std::memory_order_release);
  ring(q);
}

// The table of linked routers is bounded: past kMaxPeers, a learned router with no QP that was
// heard from least recently makes room (a --peer, or one with QPs, stays).
void Router::note_peer(const proto::LinkMessage& m) {
  std::string name = proto::to_string(m.h.from);
  auto it = peers_.find(name);
  if (it == peers_.end() && peers_.size() >= kMaxPeers) {
    auto victim = peers_.end();
    for (auto p = peers_.begin(); p != peers_.end(); ++p) {
      bool has_qps = false;
      for (const auto& [n, q] : qps_) has_qps = has_qps || (q.remote && q.remote->peer_at == p->second.at);
      if (p->second.configured || has_qps) continue;
      if (victim == peers_.end() || p->second.heard < victim->second.heard) victim = p;
    }
    if (victim == peers_.end()) return;  // every entry is needed: this one is not remembered
    peers_.erase(victim);
  }
  PeerLink& p = peers_[name];
  p.at = m.h.from;
  p.router_id = m.h.from_router;
  p.unreachable = false;
  p.heard = std::chrono::steady_clock::now();
  if (!probes_.empty() || !connects_.empty()) on_proven(m.h.from);
}

void Router::link_hello(const proto::LinkMessage& m) {
  link_send(m.h.from, LinkType::hello_reply, m.h.req, proto::LinkHello{});
}

void Router::greet_peers() {
  for (const proto::RouterAddress& at : opts_.peers) {
    PeerLink& p = peers_[proto::to_string(at)];
    p.at = at;
    p.configured = true;
    link_send(at, LinkType::hello, 0, proto::LinkHello{});
  }
}

std::vector<LinkFigures> Router::links_figures() const {
  std::vector<LinkFigures> out;
  auto now = std::chrono::steady_clock::now();
  for (const auto& [name, p] : peers_) {
    LinkFigures l{name, p.configured, std::nullopt, p.unreachable, 0};
    for (const auto& [n, q] : qps_) l.qps += q.remote && q.remote->peer_at == p.at;
    if (p.router_id) l.heard_s_ago = std::chrono::duration<double>(now - p.heard).count();
    out.push_back(std::move(l));
  }
  return out;
}

void Router::on_send_failed(const proto::RouterAddress& to) {
  if (send_failed_ns_.size() >= kMaxPeers) send_failed_ns_.clear();  // addresses a tenant names: bounded
  send_failed_ns_[proto::to_string(to)] = now_ns();
  if (auto p = peers_.find(proto::to_string(to)); p != peers_.end()) p->second.unreachable = true;
  for (auto& [n, q] : qps_)
    if (q.remote && q.remote->peer_at == to) break_qp(q);
}

}  // namespace rb::vrdma
