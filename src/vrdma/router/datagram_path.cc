// The datagram path: a datagram (UD) QP's SENDs, each to the QP it names, moved by the control
// thread (any datagram QP may fill any other's receives, and the link to other hosts' routers is
// the control thread's). UD promises no more than this: a datagram arrives whole, after a
// routing header, or not at all. One that cannot arrive (no such datagram QP of this tenant,
// another Q_Key, no receive posted, no room for the notice) is dropped and its sender's
// completion says success, as a network would: so a sender learns nothing of QPs it may not
// reach. A SEND that names an address handle goes to the router the handle names, as a link
// message, and is delivered there by the same rules.
#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include <vrdma/vrdma.h>

#include "vrdma/proto/gid.hh"
#include "vrdma/proto/link.hh"
#include "vrdma/router/data_path.hh"

namespace rb::vrdma {
namespace {

struct Datagram {
  const Piece* msg;
  int n;
  uint64_t len;
  uint8_t opcode;
  uint32_t imm, src_qp;
  proto::Gid sgid, dgid;
};

// The routing header, then the message, into `to`'s next receive; false: dropped.
bool deliver_datagram(const Session& them, QpEntry& to, const Datagram& d) {
  proto::RecvEntry r;
  if (to.view->arrivals.size() >= to.view->arrivals.capacity() || !next_receive(to, r)) return false;
  proto::Arrival a;
  a.recv_seq = r.seq;
  a.kind = uint8_t(d.opcode == VRDMA_WR_SEND ? proto::ArrivalKind::send : proto::ArrivalKind::send_imm);
  a.imm = d.imm;
  a.src_qp = d.src_qp;
  a.byte_len = uint32_t(d.len + proto::kGrhBytes);
  Piece dst[proto::kMaxSge];
  uint32_t nd = std::min(r.nsge, proto::kMaxSge);
  uint64_t room = 0;
  for (uint32_t i = 0; i < nd && !a.status; ++i) {
    uint8_t* p = locate(them, to.pd, r.sge[i].lkey, false, r.sge[i].addr, r.sge[i].len, proto::local_write);
    if (!p) a.status = uint8_t(proto::ArrivalStatus::bad_buffer);
    dst[i] = {p, r.sge[i].len};
    room += r.sge[i].len;
  }
  if (!a.status && room < a.byte_len) a.status = uint8_t(proto::ArrivalStatus::too_long);
  if (!a.status) {
    uint8_t grh[proto::kGrhBytes];
    proto::write_grh(grh, d.sgid, d.dgid, uint32_t(d.len));
    Piece src[proto::kMaxSge + 1];
    src[0] = {grh, sizeof grh};
    std::copy(d.msg, d.msg + d.n, src + 1);
    copy_pieces(src, d.n + 1, dst, int(nd));
  }
  receive_ring(to).pop(r);
  announce(to, a);
  return true;
}

bool is_datagram_send(uint8_t op) { return op == VRDMA_WR_SEND || op == VRDMA_WR_SEND_WITH_IMM; }

}  // namespace

QpEntry* Router::datagram_target(const std::string& tenant, uint32_t num, uint32_t qkey) {
  auto it = qps_.find(num);
  if (it == qps_.end()) return nullptr;
  QpEntry& t = it->second;
  if (!(t.flags & proto::datagram) || !t.view || t.srq || t.qkey != qkey) return nullptr;
  auto owner = sessions_.find(t.owner);
  if (owner == sessions_.end() || owner->second.tenant.name != tenant) return nullptr;
  return &t;
}

bool Router::send_datagram(const Session& me, const QpEntry& q, const proto::SendEntry& e,
                           const proto::RouterAddress& to, const Piece* msg, int n, uint64_t len) {
  proto::LinkDatagram d;
  d.from_qp = q.num;
  d.to_qp = uint32_t(e.remote_addr);
  d.qkey = uint32_t(e.compare_add);
  d.imm = e.imm;
  d.opcode = e.opcode;
  d.len = uint32_t(len);
  proto::put_text(d.tenant, sizeof d.tenant, me.tenant.name);
  std::vector<uint8_t> payload(len);
  copy_pieces(msg, n, std::array<Piece, 1>{Piece{payload.data(), len}}.data(), 1);
  return link_send(to, proto::LinkType::datagram, 0, d, payload);
}

// A datagram's sender is answered as soon as it goes, so what holds a tenant back is the link:
// a datagram to another host goes while that router has fewer than kDatagramsInFlight of our
// messages in flight and all routers together fewer than kSendsInFlight; else it waits at the
// head of its QP's ring, as a NIC's send queue waits for a busy link (perftest -c UD counts
// every datagram) -- unless a message to that router failed lately: then it is dropped, as a
// network drops what goes to a host that is down, and the QP's datagrams to others go on.
// Queued in the router without bound, a flood to a router nobody runs held 650 MB and stalled
// every tenant.
bool Router::link_busy(const proto::RouterAddress& to) const {
  return fabric_->sends_in_flight(to) >= kDatagramsInFlight || fabric_->sends_in_flight() >= kSendsInFlight;
}

bool Router::failed_lately(const proto::RouterAddress& to) const {
  auto f = send_failed_ns_.find(proto::to_string(to));
  return f != send_failed_ns_.end() && now_ns() - f->second < kFailedLatelyNs;
}

bool Router::pump_datagrams(QpEntry& q, bool& deferred, TurnShare& share) {
  q.waiting = false;
  if (!q.view) return false;
  const Session& me = sessions_.at(q.owner);
  TenantUsage& u = *share.usage;
  const proto::Gid gid = proto::router_gid(opts_.listen.ip, opts_.listen.port);
  proto::SendEntry e;
  int done = 0;
  const int64_t began = now_ns();
  for (; done < std::min(kBatch, share.ops) && q.view->sends.peek(e); ++done) {
    if (q.view->cqes.size() >= q.view->cqes.capacity()) {  // the owner has not taken our answers
      deferred = q.waiting = true;
      break;
    }
    int64_t now = now_ns();
    if (done && now - began >= share.ns) break;  // its tenant's time in this turn is out (kTenantTurnNs)
    int status = VRDMA_WC_SUCCESS;
    uint32_t len = 0;
    auto ah = me.ahs.find(uint32_t(e.swap));  // 0: this host
    bool remote = e.swap && ah != me.ahs.end() && !(ah->second == opts_.listen);
    bool flushing = q.header()->router_error.load(std::memory_order_acquire) != 0;
    bool lost = false;  // to a router that is down: dropped
    if (!flushing && remote && link_busy(ah->second)) {
      lost = failed_lately(ah->second);
      if (!lost) {
        deferred = q.waiting = true;
        break;
      }
    }
    if (flushing) {
      status = VRDMA_WC_WR_FLUSH_ERR;
    } else {
      if (!tokens_ready(u, q, me.tenant, now)) {
        if (!q.throttled_since_ns) q.throttled_since_ns = now;
        deferred = q.waiting = true;
        break;
      }
      Piece msg[proto::kMaxSge];
      int n = 0;
      uint64_t total = 0;
      if (!is_datagram_send(e.opcode) || (e.swap && ah == me.ahs.end())) status = VRDMA_WC_LOC_QP_OP_ERR;
      else if (!gather_request(me, q.pd, e, 0, msg, n, total)) status = VRDMA_WC_LOC_PROT_ERR;
      else if (total > VRDMA_UD_MTU) status = VRDMA_WC_LOC_LEN_ERR;
      else {
        len = uint32_t(total);
        QpEntry* to = remote || e.remote_addr > proto::kQpNumMask
                          ? nullptr
                          : datagram_target(me.tenant.name, uint32_t(e.remote_addr), uint32_t(e.compare_add));
        if (remote && !lost) send_datagram(me, q, e, ah->second, msg, n, total);
        else if (to && deliver_datagram(sessions_.at(to->owner), *to, {msg, n, total, e.opcode, e.imm, q.num, gid, gid}))
          wake_recv(*to);
      }
      charge(u, q, me.tenant, now, len);
    }
    q.view->sends.pop(e);
    complete(q, u, e.wr_id, e.opcode, status, len, e.flags & VRDMA_SEND_SIGNALED);
  }
  share.ops -= done;  // a datagram is at most VRDMA_UD_MTU: its share is counted in requests
  if (done) wake_send(q);
  return done > 0;
}

// Another host's datagram: checked as one of ours would be, by the tenant its router names
// (routers holding the link key are trusted to name it truly).
void Router::link_datagram(const proto::LinkMessage& m) {
  auto d = m.as<proto::LinkDatagram>();
  if (!is_datagram_send(d.opcode)) return;
  QpEntry* to = datagram_target(proto::get_text(d.tenant, sizeof d.tenant), d.to_qp, d.qkey);
  if (!to) return;
  Piece msg{const_cast<uint8_t*>(m.tail.data()), m.tail.size()};
  Datagram dg{&msg, 1, m.tail.size(), d.opcode, d.imm, d.from_qp,
              proto::router_gid(m.h.from.ip, m.h.from.port), proto::router_gid(opts_.listen.ip, opts_.listen.port)};
  if (deliver_datagram(sessions_.at(to->owner), *to, dg)) wake_recv(*to);
}

// An address handle names another host's router for a tenant's datagrams. Bounded per client;
// a router with no --listen reaches no other host, and says so here rather than at each SEND.
// It is made once that router has proven the cluster's key (link_reach.cc), so a tenant's
// datagrams go to routers only; until then the client's call waits, as create_ah waits for a
// NIC's address resolution.
Router::Reply Router::create_ah(Session& s, const proto::Message& m) {
  auto req = m.as<proto::CreateAh>();
  req.at.pad = 0;  // an address is its IP and port: a pad the tenant set would make it another
  if (!fabric_) return error(s, m, EXDEV, "this router has no --listen address: its datagrams reach this host only");
  if (!req.at.port) return error(s, m, EINVAL, "an address handle names a router's --listen address and port");
  if (std::string why = no_room_for_ah(s); !why.empty()) return error(s, m, ENOMEM, why);
  int err = 0;
  std::string why;
  Reach r = req.at == opts_.listen ? Reach::ready : reach(s, req.at, &err, &why);
  if (r == Reach::refused) return error(s, m, err, why);
  if (r == Reach::probing) {
    connects_[next_req_++] = {PendingConnect::address_handle, false, s.id, m.h.seq, 0, 0, 0, req.at,
                              std::chrono::steady_clock::now() + std::chrono::milliseconds(800)};
    Reply later;
    later.later = true;
    return later;
  }
  return {proto::encode(proto::Type::handle, m.h.seq, proto::Handle{add_ah(s, req.at)})};
}

Router::Reply Router::destroy_ah(Session& s, const proto::Message& m) {
  uint32_t id = m.as<proto::Handle>().id;
  if (!s.ahs.erase(id)) return error(s, m, EINVAL, fmt::format("address handle {} is not one of this client's", id));
  --usage_[s.tenant.name].ahs;
  return {proto::encode(proto::Type::done, m.h.seq)};
}

std::string Router::no_room_for_ah(const Session& s) {
  if (s.ahs.size() >= Session::kMaxAhs) return fmt::format("this client holds {} address handles, the most it may", s.ahs.size());
  if (usage_[s.tenant.name].ahs >= TenantUsage::kMaxAhs)
    return fmt::format("tenant {} holds {} address handles, the most a tenant may", s.tenant.name, TenantUsage::kMaxAhs);
  return {};
}

uint32_t Router::add_ah(Session& s, const proto::RouterAddress& at) {
  uint32_t id = s.next_ah++;
  s.ahs.emplace(id, at);
  ++usage_[s.tenant.name].ahs;
  return id;
}

}  // namespace rb::vrdma
