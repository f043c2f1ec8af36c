// Queue pairs at the router: it checks who may connect to whom and grants mappings of regions
// (the direct path); the bytes themselves never pass through here on that path.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "vrdma/router/data_path.hh"
#include "vrdma/router/router.hh"

namespace rb::vrdma {

using proto::Type;

Router::Reply Router::create_qp(Session& s, const proto::Message& m, UniqueFd& fd, UniqueFd& doorbell) {
  auto req = m.as<proto::CreateQp>();
  if (!s.pds.count(req.pd)) return error(s, m, EINVAL, fmt::format("PD {:#x} is not one of this client's", req.pd));
  TenantUsage& u = usage_[s.tenant.name];
  if (s.tenant.max_qps && u.qps + 1 > s.tenant.max_qps)
    return error(s, m, ENOMEM, fmt::format("tenant {} has {} QPs, its max_qps", s.tenant.name, u.qps));
  if (std::string why; !host_allows(u, {1, 3}, &why)) return error(s, m, ENOMEM, why);
  if (!fd) return error(s, m, EINVAL, "create_qp came without the QP's memory");
  if (req.mem_len < sizeof(proto::QpHeader) || req.mem_len > (64ull << 20))
    return error(s, m, EINVAL, fmt::format("QP memory of {} B: give {} B to 64 MiB", req.mem_len, sizeof(proto::QpHeader)));
  if (std::string why; !memory_allowed(s, u, req.mem_len, "QP", &why)) return error(s, m, ENOMEM, why);
  // Checks the seals (the client cannot shrink it under us); not populated: the client touched it.
  auto map = Mapping::map(fd.get(), req.mem_len, false);
  if (!map) return error(s, m, EINVAL, "QP memory: " + map.status().message());
  if (reinterpret_cast<proto::QpHeader*>(map->data())->magic != proto::kQpMagic)
    return error(s, m, EINVAL, "QP memory is not laid out as a QP");
  std::shared_ptr<SrqEntry> srq;
  if (req.srq) {
    auto it = srqs_.find(req.srq);
    if (it == srqs_.end() || it->second->owner != s.id)
      return error(s, m, EINVAL, fmt::format("SRQ {:#x} is not one of this client's", req.srq));
    if (it->second->pd != req.pd) return error(s, m, EINVAL, fmt::format("SRQ {:#x} is of another PD", req.srq));
    srq = it->second;
  }
  int err = 0;
  std::string why;
  uint32_t num = issue_number(s, u, "QP", err, why);
  if (!num) return error(s, m, err, why);
  QpEntry q{num, req.pd, s.id, 0, false, std::move(fd), std::move(doorbell), {}, {}, std::move(*map), req.mem_len};
  q.fd_owner = s.owner;
  q.flags = q.header()->flags;  // read once: what the owner asked for at creation
  if (srq) ++srq->users;
  q.srq = std::move(srq);
  qps_.emplace(num, std::move(q));
  s.qps.insert(num);
  ++u.qps;
  u.ring_bytes += req.mem_len;
  return {proto::encode(Type::qp_created, m.h.seq, proto::QpCreated{num})};
}

Router::Reply Router::connect_qp(Session& s, const proto::Message& m) {
  auto req = m.as<proto::ConnectQp>();
  if (!s.qps.count(req.qp_num)) return error(s, m, EINVAL, fmt::format("QP {:#x} is not one of this client's", req.qp_num));
  QpEntry& mine = qps_.at(req.qp_num);
  if (mine.flags & proto::datagram) return ud_ready(s, m, mine, req.peer_qp_num);
  if (req.peer_router != router_id_) return connect_remote(s, m, req);
  auto peer = qps_.find(req.peer_qp_num);
  if (peer == qps_.end()) return error(s, m, ENOENT, fmt::format("no QP {:#x} at this router", req.peer_qp_num));
  const Session& owner = sessions_.at(peer->second.owner);
  // Tenants never meet: an address of another tenant's QP is as good as a wrong one.
  if (owner.tenant.name != s.tenant.name) return error(s, m, ENOENT, fmt::format("no QP {:#x} at this router", req.peer_qp_num));
  if (peer->second.flags & proto::datagram)
    return error(s, m, EINVAL, fmt::format("QP {:#x} is a datagram QP: a connected QP cannot connect to it", req.peer_qp_num));
  if (mine.peer_gone) return error(s, m, EISCONN, "the QP was connected, and its peer has gone; make a new QP");
  if (mine.peer && mine.peer != req.peer_qp_num) return error(s, m, EISCONN, "the QP is connected to another already");
  if (peer->second.peer && peer->second.peer != req.qp_num)
    return error(s, m, EISCONN, fmt::format("QP {:#x} is connected to another QP", req.peer_qp_num));
  // The router path where the tenant's config asks for it, where its rates are limited (QoS is
  // enforced there) or where either QP asked; both sides of a connection take the same one. A
  // QP with an SRQ may take either: the SRQ's consumers (peers' libraries, the router) claim.
  bool routed = !s.tenant.direct || s.tenant.rate_limited() || ((mine.flags | peer->second.flags) & proto::router_path);
  if (peer->second.peer == req.qp_num && peer->second.router_path != routed)
    return error(s, m, EINVAL, fmt::format("QP {:#x} connected on the {} path; both sides of a connection take the same path",
                                          req.peer_qp_num, peer->second.router_path ? "router" : "direct"));
  if (routed && mine.router_path) {  // connected already, to this peer: the same answer, nothing added
    proto::QpConnected c;
    c.router_path = 1;
    return {proto::encode(Type::qp_connected, m.h.seq, c), mine.kick.get()};
  }
  if (routed) {
    auto v = view_qp(mine.mem.bytes());
    if (!v) return error(s, m, EINVAL, v.status().message());
    mine.view.emplace(*v);
    if (!route_qp(mine, req.peer_qp_num)) return error(s, m, EMFILE, "the router is out of descriptors for the QP's kick");
    proto::QpConnected c;
    c.router_path = 1;
    return {proto::encode(Type::qp_connected, m.h.seq, c), mine.kick.get()};
  }
  mine.peer = req.peer_qp_num;
  proto::QpConnected c{peer->second.len};
  if (peer->second.srq) c.peer_srq_len = uint32_t(peer->second.srq->len);
  return {proto::encode(Type::qp_connected, m.h.seq, c), peer->second.fd.get(),
          peer->second.doorbell ? peer->second.doorbell.get() : -1};
}

// A datagram QP has no peer: ready, the router moves its SENDs to whichever QP each names, and
// keeps its Q_Key (the owner may not change what others are checked against behind its back).
Router::Reply Router::ud_ready(Session& s, const proto::Message& m, QpEntry& q, uint32_t qkey) {
  if (q.srq) return error(s, m, EINVAL, "a datagram QP takes its own receives, not an SRQ's");
  if (!q.router_path) {
    auto v = view_qp(q.mem.bytes());
    if (!v) return error(s, m, EINVAL, v.status().message());
    q.view.emplace(*v);
    if (!route_qp(q, 0)) return error(s, m, EMFILE, "the router is out of descriptors for the QP's kick");
  }
  q.qkey = qkey;
  proto::QpConnected c;
  c.router_path = 1;
  return {proto::encode(Type::qp_connected, m.h.seq, c), q.kick.get()};
}

// Cross-host QPs stay with the control thread (it owns the fabric); with data threads, a
// same-host QP goes to its peer's thread, or to the next in turn. Datagram QPs stay with the
// control thread too: any of them may fill any other's receives.
//
// The QP gets a kick eventfd of its own, which its owner writes after posting while the router
// sleeps: it is in the moving thread's epoll edge-triggered, and never read. The router reads no
// descriptor a client holds (a client can make a shared descriptor blocking; a read of it would
// then hang the router), and a client that floods or overflows its kick wakes or loses only its own.
bool Router::route_qp(QpEntry& q, uint32_t peer) {
  auto p = qps_.find(peer);
  bool srq = q.srq || (p != qps_.end() && p->second.srq);  // an SRQ has one consumer: the control thread
  int thread = data_.empty() || q.remote || srq || (q.flags & proto::datagram) ? -1
               : p != qps_.end() && p->second.thread >= 0 ? p->second.thread
                                                          : int(next_thread_ % data_.size());
  UniqueFd kick(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  epoll_event ev{EPOLLIN | EPOLLET, {.u64 = thread < 0 ? kKickTag : DataThread::kQpKickTag}};
  if (!kick || epoll_ctl(thread < 0 ? epoll_.get() : data_[thread]->epoll.get(), EPOLL_CTL_ADD, kick.get(), &ev) < 0)
    return false;
  q.kick = std::move(kick);
  q.router_path = true;
  q.peer = peer;
  q.thread = thread;
  if (thread < 0) {
    routed_.push_back(q.num);
    return true;
  }
  if (!(p != qps_.end() && p->second.thread >= 0)) ++next_thread_;
  data_[thread]->qps.push_back(q.num);
  // It may be parked, and this QP was not marked for it when it parked: wake it to look.
  uint64_t one = 1;
  (void)!write(data_[thread]->kick.get(), &one, sizeof one);
  return true;
}

Router::Reply Router::grant(Session& s, const proto::Message& m) {
  auto req = m.as<proto::GrantAsk>();
  if (!s.qps.count(req.qp_num)) return error(s, m, EINVAL, fmt::format("QP {:#x} is not one of this client's", req.qp_num));
  QpEntry& mine = qps_.at(req.qp_num);
  if (mine.router_path) return error(s, m, EPERM, "a QP on the router path is granted no mappings");
  // Only from the router's own records: the peer is connected back to this QP, in this tenant.
  // A QP whose peer has gone, or never connected back, gets the one answer "not connected".
  QpEntry* peer = connected_peer(mine);
  if (!peer) return error(s, m, ENOTCONN, "the QP is not connected");
  const Session& owner = sessions_.at(peer->owner);
  // A remote key names the region for WRITE, READ and atomics; the local key of a receive
  // buffer is what a SEND fills. Either must be a region of the peer QP's PD.
  auto own = owner.mrs.find(req.key);
  const MemoryRegionEntry* found = own != owner.mrs.end() ? &own->second : owner.region_by_rkey(req.key);
  if (found && found->pd == peer->pd) {
    const MemoryRegionEntry& mr = *found;
    proto::Granted g;
    g.va = mr.va;
    g.len = mr.len;
    g.map_len = mr.mem().mapped_size();
    g.offset = mr.mem().offset();
    g.first = mr.first;
    g.access = mr.rkey == req.key ? mr.access & ~proto::local_write : mr.access & proto::local_write;
    return {proto::encode(Type::granted, m.h.seq, g), mr.mem().fd()};
  }
  return error(s, m, EACCES, fmt::format("key {:#x} names no region of the peer QP's PD", req.key));
}

// The SRQ the connected peer's receives come from, for a QP on the direct path: from the router's
// own records, as a grant is (connected back, same tenant).
Router::Reply Router::peer_srq(Session& s, const proto::Message& m) {
  uint32_t num = m.as<proto::Handle>().id;
  if (!s.qps.count(num)) return error(s, m, EINVAL, fmt::format("QP {:#x} is not one of this client's", num));
  QpEntry& mine = qps_.at(num);
  if (mine.router_path) return error(s, m, EPERM, "a QP on the router path is granted no mappings");
  QpEntry* peer = connected_peer(mine);
  if (!peer) return error(s, m, ENOTCONN, "the QP is not connected");
  if (!peer->srq) return error(s, m, ENOENT, "the peer QP's receives are its own, not an SRQ's");
  return {proto::encode(Type::done, m.h.seq), peer->srq->fd.get()};
}

Router::Reply Router::destroy_qp(Session& s, const proto::Message& m) {
  uint32_t num = m.as<proto::Handle>().id;
  if (!s.qps.count(num)) return error(s, m, EINVAL, fmt::format("QP {:#x} is not one of this client's", num));
  release_qp(num);
  --usage_[s.tenant.name].qps;
  return {proto::encode(Type::done, m.h.seq)};
}

// The peer of a QP that goes away finds its QP broken (after its peer timeout, on the router
// path): its requests fail, its receives flush.
void Router::release_qp(uint32_t num) {
  auto it = qps_.find(num);
  if (it == qps_.end()) return;
  if (it->second.remote && it->second.peer) {  // its peer's router breaks the peer
    proto::LinkQpGone g{num, it->second.peer};
    link_send(it->second.remote->peer_at, proto::LinkType::qp_gone, 0, g);
  }
  if (it->second.remote)
    for (RemoteOut& o : it->second.remote->out)
      if (!o.done) keep_pulls_a_while(o);
  for (auto& [n, q] : qps_) {
    if (q.peer != num || q.remote) continue;
    peer_lost(q);  // breaks it (and wakes it) now or after its peer timeout
    q.peer = 0;    // and it forgets the number: nothing of it reaches a QP that number names
    q.peer_gone = true;
  }
  if (auto own = sessions_.find(it->second.owner); own != sessions_.end()) {
    own->second.qps.erase(num);
    usage_[own->second.tenant.name].ring_bytes -= it->second.len;
  }
  if (it->second.srq) --it->second.srq->users;
  routed_.erase(std::remove(routed_.begin(), routed_.end(), num), routed_.end());
  if (int t = it->second.thread; t >= 0) std::erase(data_[t]->qps, num);
  // Out of the epoll before it closes: the owner's copy would keep the registration alive.
  if (it->second.kick)
    epoll_ctl(it->second.thread >= 0 ? data_[it->second.thread]->epoll.get() : epoll_.get(), EPOLL_CTL_DEL,
              it->second.kick.get(), nullptr);
  // Its memory may be the last mapping of what the client touched: let go of it off the loop.
  closer_->drop_later(std::make_shared<Mapping>(std::move(it->second.mem)));
  closer_->drop_later(std::move(it->second.srq));
  closer_->close_later(std::move(it->second.fd));
  // Its owner has (or had) a copy of each of these eventfds, and may have left it in an epoll set
  // whose lock it holds: the last close of one, here, would wait for that lock (probe 25).
  for (UniqueFd* bell : {&it->second.kick, &it->second.doorbell, &it->second.send_doorbell})
    closer_->close_later(std::move(*bell), it->second.fd_owner);
  qps_.erase(it);
}

Router::Reply Router::create_srq(Session& s, const proto::Message& m, UniqueFd& fd) {
  auto req = m.as<proto::CreateSrq>();
  if (!s.pds.count(req.pd)) return error(s, m, EINVAL, fmt::format("PD {:#x} is not one of this client's", req.pd));
  TenantUsage& u = usage_[s.tenant.name];
  if (s.tenant.max_qps && u.srqs + 1 > s.tenant.max_qps)
    return error(s, m, ENOMEM, fmt::format("tenant {} has {} SRQs; max_qps caps SRQs too", s.tenant.name, u.srqs));
  if (std::string why; !host_allows(u, {1, 1}, &why)) return error(s, m, ENOMEM, why);
  if (!fd) return error(s, m, EINVAL, "create_srq came without the SRQ's memory");
  if (req.mem_len > (64ull << 20)) return error(s, m, EINVAL, fmt::format("SRQ memory of {} B: give at most 64 MiB", req.mem_len));
  if (std::string why; !memory_allowed(s, u, req.mem_len, "SRQ", &why)) return error(s, m, ENOMEM, why);
  auto map = Mapping::map(fd.get(), req.mem_len, false);  // sealed: the client cannot shrink it under us
  if (!map) return error(s, m, EINVAL, "SRQ memory: " + map.status().message());
  auto ring = SpscRing<proto::RecvEntry>::attach(map->bytes());
  if (!ring) return error(s, m, EINVAL, "SRQ memory is not a ring of receives: " + ring.status().message());
  auto e = std::make_shared<SrqEntry>();
  int err = 0;
  std::string why;
  e->num = issue_number(s, u, "SRQ", err, why);
  if (!e->num) return error(s, m, err, why);
  e->pd = req.pd;
  e->owner = s.id;
  e->mem.emplace(std::move(*map));
  e->ring.emplace(*ring);
  e->fd = std::move(fd);
  e->len = req.mem_len;
  srqs_.emplace(e->num, e);
  s.srqs.insert(e->num);
  ++u.srqs;
  u.ring_bytes += req.mem_len;
  return {proto::encode(Type::handle, m.h.seq, proto::Handle{e->num})};
}

Router::Reply Router::destroy_srq(Session& s, const proto::Message& m) {
  uint32_t num = m.as<proto::Handle>().id;
  if (!s.srqs.count(num)) return error(s, m, EINVAL, fmt::format("SRQ {:#x} is not one of this client's", num));
  if (uint32_t n = srqs_.at(num)->users)
    return error(s, m, EBUSY, fmt::format("SRQ {:#x} has {} QP{}; destroy them first", num, n, n == 1 ? "" : "s"));
  TenantUsage& u = usage_[s.tenant.name];
  u.ring_bytes -= srqs_.at(num)->len;
  closer_->drop_later(srqs_.at(num));
  srqs_.erase(num);
  s.srqs.erase(num);
  --u.srqs;
  return {proto::encode(Type::done, m.h.seq)};
}

Router::Reply Router::send_doorbell(Session& s, const proto::Message& m, UniqueFd& fd) {
  uint32_t num = m.as<proto::Handle>().id;
  if (!s.qps.count(num)) return error(s, m, EINVAL, fmt::format("QP {:#x} is not one of this client's", num));
  if (!fd) return error(s, m, EINVAL, "send_doorbell came without the eventfd");
  QpEntry& q = qps_.at(num);
  closer_->close_later(std::move(q.send_doorbell), q.fd_owner);  // a second one: the first closes off the loop
  q.send_doorbell = std::move(fd);
  return {proto::encode(Type::done, m.h.seq)};
}

// Both CQs of the owner: a broken QP wakes whichever it sleeps on.
void Router::ring(QpEntry& q) {
  ring_bell(q.doorbell, q.fd_owner);
  ring_bell(q.send_doorbell, q.fd_owner);
}

void Router::ring_bell(UniqueFd& bell, int64_t owner) {
  if (!bell || ring_doorbell(bell.get())) return;
  log_limited("doorbell", "a client made its CQ's eventfd blocking: the router rings it no more");
  closer_->close_later(std::move(bell), owner);
}

uint32_t Router::issue_number(const Session& s, TenantUsage& u, const char* what, int& err, std::string& why) {
  int64_t now = now_ns();
  err = EAGAIN;
  if (!u.qp_pace.take(now)) {
    why = fmt::format("tenant {} makes QPs and SRQs faster than {:.0f} a second; try again", s.tenant.name,
                      TenantUsage::kQpRate);
    return 0;
  }
  int tenants = int(std::count_if(usage_.begin(), usage_.end(), [](const auto& t) { return t.second.clients > 0; }));
  if (!qp_numbers_.take(u.qp_share, tenants, now)) {
    why = fmt::format("this router makes QPs and SRQs for all its tenants at most {:.0f} a second, and tenant {} has "
                      "had its share of late; try again", QpNumbers::kRate, s.tenant.name);
    return 0;
  }
  auto fresh = qp_numbers_.next();
  if (fresh) return *fresh;
  err = ENOSPC;
  why = fmt::format("this router has issued every {} number it has (2^24 - 1); restart it", what);
  return 0;
}

QpEntry* Router::connected_peer(QpEntry& q) {
  if (!q.peer || q.peer_gone || q.remote) return nullptr;
  auto it = qps_.find(q.peer);
  if (it == qps_.end()) return nullptr;
  QpEntry& p = it->second;
  // Connected back to q, or not connected yet (numbers are never reissued: it is the QP q was
  // checked against at connect); connected to any other, or gone, it is not q's peer.
  if ((p.peer && p.peer != q.num) || p.peer_gone || p.remote) return nullptr;
  auto mine = sessions_.find(q.owner), theirs = sessions_.find(p.owner);
  if (mine == sessions_.end() || theirs == sessions_.end() || mine->second.tenant.name != theirs->second.tenant.name)
    return nullptr;
  return &p;
}

void Router::revoke_grants_of(const Session& s) {
  for (auto& [n, q] : qps_)
    if (q.peer && s.qps.count(q.peer)) q.header()->grant_epoch.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace rb::vrdma
