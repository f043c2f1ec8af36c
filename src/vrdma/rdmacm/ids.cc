// Ids: made on a channel (or, without one, synchronous: each call waits for its own event), bound
// and resolved to vrdma0, and destroyed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "vrdma/rdmacm/state.hh"

namespace rb::rdmacm {
namespace {

socklen_t length_of(const sockaddr* a) {
  return a->sa_family == AF_INET ? sizeof(sockaddr_in) : a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : 0;
}

// A GID for an IP address: IPv4 mapped into IPv6, as RoCE v2 makes them.
ibv_gid gid_of(const sockaddr* a) {
  ibv_gid g{};
  if (a->sa_family == AF_INET6) {
    std::memcpy(g.raw, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, 16);
  } else {
    g.raw[10] = g.raw[11] = 0xff;
    std::memcpy(g.raw + 12, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, 4);
  }
  return g;
}

// A wildcard or loopback address names no device: rdma_cm leaves an id bound to one without a
// context until a connection gives it one, and programs (libfabric's verbs provider) look for
// the device's own addresses when they find none.
bool names_no_device(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr);
    return ip == INADDR_ANY || (ip >> 24) == 127;
  }
  const in6_addr& ip = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
  return IN6_IS_ADDR_UNSPECIFIED(&ip) || IN6_IS_ADDR_LOOPBACK(&ip) ||
         (IN6_IS_ADDR_V4MAPPED(&ip) && ip.s6_addr[12] == 127);
}

// The local address the host would send to `dst` from (the kernel's route, via a UDP socket that
// is connected and never used).
bool source_for(const sockaddr* dst, sockaddr_storage& src) {
  UniqueFd s(kernel_socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  socklen_t len = sizeof src;
  return s && connect(s.get(), dst, length_of(dst)) == 0 && getsockname(s.get(), reinterpret_cast<sockaddr*>(&src), &len) == 0;
}

}  // namespace
}  // namespace rb::rdmacm

using namespace rb::rdmacm;

RDMACM_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** out, void* context, rdma_port_space ps) {
  if (!out) return fail(EINVAL);
  if (ps == RDMA_PS_IPOIB) {
    say("rdma_create_id: IPoIB ids (RDMA_PS_IPOIB) are not supported on vrdma; RDMA_PS_TCP, RDMA_PS_IB and RDMA_PS_UDP are");
    return fail(EOPNOTSUPP);
  }
  auto* id = new Id();
  if (!channel) {
    Channel* own = make_channel();
    if (!own) {
      delete id;
      return -1;
    }
    own->sync_owner = id;
    id->sync = true;
    channel = &own->base;
  }
  id->channel = of(channel);
  id->base.channel = channel;
  id->base.context = context;
  id->base.ps = ps;
  id->base.qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
  *out = &id->base;
  return 0;
}

RDMACM_EXPORT int rdma_destroy_id(rdma_cm_id* cm_id) {
  if (!cm_id) return fail(EINVAL);
  Id& id = *of(cm_id);
  Channel* c = id.channel;
  {
    std::lock_guard lock(c->read_mu);
    if (id.sock && (id.state == State::connected || id.state == State::accepting)) {
      Message dreq;
      dreq.kind = Kind::dreq;
      send_message(id.sock.get(), dreq);
    }
    close_locked(id);
    while (!id.awaiting.empty()) drop_awaiting(*id.awaiting.front());  // never the program's
  }
  {
    std::lock_guard lock(c->mu);  // events not yet taken name an id that is gone
    std::erase_if(c->events, [&](Event* e) {
      bool mine = e->ev.id == cm_id;
      if (mine) {
        uint64_t n;
        (void)!read(c->queued.get(), &n, sizeof n);
        delete e;
      }
      return mine;
    });
  }
  if (id.base.event) rdma_ack_cm_event(id.base.event);
  bool own_channel = c->sync_owner == &id;
  delete &id;
  if (own_channel) destroy_channel(c);
  return 0;
}

RDMACM_EXPORT int rdma_bind_addr(rdma_cm_id* cm_id, sockaddr* addr) {
  if (!cm_id || !addr || !length_of(addr)) return fail(cm_id && addr ? EAFNOSUPPORT : EINVAL);
  Id& id = *of(cm_id);
  if (id.state != State::idle) return fail(EINVAL);
  ibv_context* ctx = device();
  if (!ctx) return -1;
  rb::UniqueFd s(kernel_socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  // Listening from the bind on: a program that binds, tells its peer the port, then listens
  // (qperf) would otherwise see its peer refused in between, where connects here come at once
  // (no address or route to look up first). Connections wait in the backlog until rdma_listen.
  if (!s || setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(s.get(), addr, length_of(addr)) != 0 || listen(s.get(), 128) != 0)
    return -1;
  socklen_t len = sizeof id.base.route.addr.src_storage;
  getsockname(s.get(), &id.base.route.addr.src_addr, &len);
  id.sock = std::move(s);
  id.base.verbs = names_no_device(addr) ? nullptr : ctx;
  id.base.port_num = 1;
  id.base.route.addr.addr.ibaddr.sgid = local_gid();
  id.state = State::bound;
  return 0;
}

RDMACM_EXPORT int rdma_resolve_addr(rdma_cm_id* cm_id, sockaddr* src, sockaddr* dst, int /*timeout_ms*/) {
  if (!cm_id || !dst) return fail(EINVAL);
  if (!length_of(dst) || (src && !length_of(src))) {
    say("rdma_resolve_addr: only IPv4 and IPv6 addresses are supported on vrdma");
    return fail(EAFNOSUPPORT);
  }
  Id& id = *of(cm_id);
  if (id.state != State::idle && id.state != State::bound) return fail(EINVAL);
  ibv_context* ctx = device();
  if (!ctx) return -1;
  rdma_addr& a = id.base.route.addr;
  std::memcpy(&a.dst_storage, dst, length_of(dst));
  if (id.state == State::idle) {
    if (src) std::memcpy(&a.src_storage, src, length_of(src));
    else if (!source_for(dst, a.src_storage)) return -1;
  }
  id.base.verbs = ctx;
  id.base.port_num = 1;
  a.addr.ibaddr.sgid = local_gid();
  a.addr.ibaddr.dgid = gid_of(dst);
  id.state = State::addr_resolved;
  post(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
  return id.sync ? wait_for(id, RDMA_CM_EVENT_ADDR_RESOLVED) : 0;
}

RDMACM_EXPORT int rdma_resolve_route(rdma_cm_id* cm_id, int /*timeout_ms*/) {
  if (!cm_id) return fail(EINVAL);
  Id& id = *of(cm_id);
  if (id.state != State::addr_resolved) return fail(EINVAL);
  id.state = State::route_resolved;
  post(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  return id.sync ? wait_for(id, RDMA_CM_EVENT_ROUTE_RESOLVED) : 0;
}

RDMACM_EXPORT uint16_t rdma_get_src_port(rdma_cm_id* cm_id) {
  const sockaddr* a = &cm_id->route.addr.src_addr;
  return a->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(a)->sin6_port
                                  : reinterpret_cast<const sockaddr_in*>(a)->sin_port;
}

RDMACM_EXPORT uint16_t rdma_get_dst_port(rdma_cm_id* cm_id) {
  const sockaddr* a = &cm_id->route.addr.dst_addr;
  return a->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(a)->sin6_port
                                  : reinterpret_cast<const sockaddr_in*>(a)->sin_port;
}

RDMACM_EXPORT int rdma_migrate_id(rdma_cm_id* cm_id, rdma_event_channel* channel) {
  if (!cm_id) return fail(EINVAL);
  Id& id = *of(cm_id);
  if (channel && of(channel) == id.channel) return 0;  // where it is already
  Channel* to = channel ? of(channel) : make_channel();
  if (!to) return -1;
  Channel* from = id.channel;
  unwatch(id);
  {
    std::scoped_lock lock(from->mu, to->mu);
    std::erase_if(from->events, [&](Event* e) {
      if (e->ev.id != cm_id) return false;
      uint64_t n = 1;
      (void)!read(from->queued.get(), &n, sizeof n);
      to->events.push_back(e);
      (void)!write(to->queued.get(), &n, sizeof n);
      return true;
    });
  }
  id.channel = to;
  id.base.channel = &to->base;
  id.sync = !channel;
  if (!channel) to->sync_owner = &id;
  if (from->sync_owner == &id) destroy_channel(from);  // its own, made for it: nobody else's
  if (id.sock) watch(id);
  return 0;
}

RDMACM_EXPORT int rdma_set_option(rdma_cm_id*, int level, int optname, void*, size_t) {
  // The options programs set (TOS, reuse of addresses, IPv6-only, ACK timeout) change nothing a
  // router-carried connection has; others are unknown here as they would be to an older kernel.
  if (level == RDMA_OPTION_ID || level == RDMA_OPTION_IB) return 0;
  (void)optname;
  return fail(ENOSYS);
}

RDMACM_EXPORT int rdma_notify(rdma_cm_id*, ibv_event_type) { return 0; }

RDMACM_EXPORT int rdma_join_multicast(rdma_cm_id*, sockaddr*, void*) {
  say("rdma_join_multicast: multicast (a UD feature) is not supported on vrdma");
  return fail(EOPNOTSUPP);
}

RDMACM_EXPORT int rdma_join_multicast_ex(rdma_cm_id*, rdma_cm_join_mc_attr_ex*, void*) {
  say("rdma_join_multicast_ex: multicast (a UD feature) is not supported on vrdma");
  return fail(EOPNOTSUPP);
}

RDMACM_EXPORT int rdma_leave_multicast(rdma_cm_id*, sockaddr*) { return fail(EADDRNOTAVAIL); }

RDMACM_EXPORT int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) {
  say("rdma_set_local_ece: ECE is not supported on vrdma");
  return fail(EOPNOTSUPP);
}

RDMACM_EXPORT int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) {
  say("rdma_get_remote_ece: ECE is not supported on vrdma");
  return fail(EOPNOTSUPP);
}
