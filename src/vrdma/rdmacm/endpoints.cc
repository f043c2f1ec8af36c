// librdmacm's simpler interface (rdma_server, rdma_client and programs like them): addresses from
// rdma_getaddrinfo, synchronous ids made whole by rdma_create_ep, requests taken with
// rdma_get_request.
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

#include "vrdma/rdmacm/state.hh"

using namespace rb::rdmacm;

namespace {

sockaddr* copy_addr(const sockaddr* a, socklen_t len) {
  auto* c = static_cast<sockaddr*>(malloc(len));
  if (c) std::memcpy(c, a, len);
  return c;
}

// TCP's port space and RC QPs, or UDP's and UD QPs (udaddy) where the hints ask for them.
void set_space(rdma_addrinfo& out, const rdma_addrinfo* hints) {
  bool ud = hints && (hints->ai_port_space == RDMA_PS_UDP || hints->ai_qp_type == IBV_QPT_UD);
  out.ai_qp_type = ud ? IBV_QPT_UD : IBV_QPT_RC;
  out.ai_port_space = ud ? RDMA_PS_UDP : RDMA_PS_TCP;
}

// With no node and no service, the addresses are the hints' own (libfabric's verbs provider asks so).
int addrinfo_of_hints(const rdma_addrinfo& hints, rdma_addrinfo** res) {
  if (!hints.ai_src_addr && !hints.ai_dst_addr) return fail(EINVAL);
  auto* out = static_cast<rdma_addrinfo*>(calloc(1, sizeof(rdma_addrinfo)));
  if (!out) return fail(ENOMEM);
  out->ai_flags = hints.ai_flags;
  set_space(*out, &hints);
  if (hints.ai_src_addr) {
    out->ai_src_addr = copy_addr(hints.ai_src_addr, hints.ai_src_len);
    out->ai_src_len = hints.ai_src_len;
    out->ai_family = hints.ai_src_addr->sa_family;
  }
  if (hints.ai_dst_addr) {
    out->ai_dst_addr = copy_addr(hints.ai_dst_addr, hints.ai_dst_len);
    out->ai_dst_len = hints.ai_dst_len;
    out->ai_family = hints.ai_dst_addr->sa_family;
  }
  *res = out;
  return 0;
}

}  // namespace

RDMACM_EXPORT int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo** res) {
  if (!res || (!node && !service && !hints)) return fail(EINVAL);
  if (hints && hints->ai_port_space == RDMA_PS_IPOIB) {
    say("rdma_getaddrinfo: IPoIB (RDMA_PS_IPOIB) is not supported on vrdma");
    return fail(EOPNOTSUPP);
  }
  addrinfo h{};
  if (!node && !service) return addrinfo_of_hints(*hints, res);
  h.ai_socktype = SOCK_STREAM;
  h.ai_family = hints && hints->ai_family ? hints->ai_family : AF_UNSPEC;
  bool passive = hints && (hints->ai_flags & RAI_PASSIVE);
  if (passive) h.ai_flags |= AI_PASSIVE;
  if (hints && (hints->ai_flags & RAI_NUMERICHOST)) h.ai_flags |= AI_NUMERICHOST;
  addrinfo* ai = nullptr;
  if (int r = getaddrinfo(node, service, &h, &ai); r != 0) return fail(r == EAI_SYSTEM ? errno : EADDRNOTAVAIL);
  auto* out = static_cast<rdma_addrinfo*>(calloc(1, sizeof(rdma_addrinfo)));
  if (!out) {
    freeaddrinfo(ai);
    return fail(ENOMEM);
  }
  out->ai_flags = hints ? hints->ai_flags : 0;
  out->ai_family = ai->ai_family;
  set_space(*out, hints);
  if (passive) {
    out->ai_src_addr = copy_addr(ai->ai_addr, ai->ai_addrlen);
    out->ai_src_len = ai->ai_addrlen;
  } else {
    out->ai_dst_addr = copy_addr(ai->ai_addr, ai->ai_addrlen);
    out->ai_dst_len = ai->ai_addrlen;
    if (hints && hints->ai_src_addr && hints->ai_src_len) {
      out->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
      out->ai_src_len = hints->ai_src_len;
    }
  }
  freeaddrinfo(ai);
  *res = out;
  return 0;
}

RDMACM_EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* next = res->ai_next;
    free(res->ai_src_addr);
    free(res->ai_dst_addr);
    free(res->ai_src_canonname);
    free(res->ai_dst_canonname);
    free(res->ai_route);
    free(res->ai_connect);
    free(res);
    res = next;
  }
}

RDMACM_EXPORT int rdma_create_ep(rdma_cm_id** out, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!out || !res) return fail(EINVAL);
  rdma_cm_id* cm_id = nullptr;
  if (rdma_create_id(nullptr, &cm_id, nullptr, rdma_port_space(res->ai_port_space ? res->ai_port_space : RDMA_PS_TCP)) != 0)
    return -1;
  Id& id = *of(cm_id);
  if (qp_init_attr) qp_init_attr->qp_type = ibv_qp_type(res->ai_qp_type ? res->ai_qp_type : IBV_QPT_RC);
  auto undo = [&] {
    int err = errno;
    rdma_destroy_id(cm_id);
    return fail(err);
  };
  if (res->ai_flags & RAI_PASSIVE) {
    if (rdma_bind_addr(cm_id, res->ai_src_addr) != 0) return undo();
    if (qp_init_attr) id.child_qp = *qp_init_attr;  // each request's id gets a QP like it
    id.child_pd = pd;
    *out = cm_id;
    return 0;
  }
  if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) != 0) return undo();
  if (rdma_resolve_route(cm_id, 2000) != 0) return undo();
  if (pd) id.base.pd = pd;
  if (qp_init_attr && rdma_create_qp(cm_id, pd, qp_init_attr) != 0) return undo();
  *out = cm_id;
  return 0;
}

RDMACM_EXPORT void rdma_destroy_ep(rdma_cm_id* cm_id) {
  if (!cm_id) return;
  rdma_destroy_qp(cm_id);
  rdma_destroy_srq(cm_id);
  rdma_destroy_id(cm_id);
}

RDMACM_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** out) {
  if (!listen || !out) return fail(EINVAL);
  Id& l = *of(listen);
  if (!l.sync) return fail(EINVAL);
  if (l.base.event) rdma_ack_cm_event(l.base.event);
  l.base.event = nullptr;
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(l.base.channel, &e) != 0) return -1;
  if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    int status = e->status ? e->status : EPROTO;
    rdma_ack_cm_event(e);
    return fail(status < 0 ? -status : status);
  }
  rdma_cm_id* child = e->id;
  if (rdma_migrate_id(child, nullptr) != 0) {  // a synchronous id of its own, as its listener is
    rdma_ack_cm_event(e);
    return -1;
  }
  child->event = e;
  if (l.child_qp) {
    ibv_qp_init_attr a = *l.child_qp;
    if (rdma_create_qp(child, l.child_pd, &a) != 0) {
      int err = errno;
      rdma_reject(child, nullptr, 0);
      rdma_destroy_id(child);
      return fail(err);
    }
  }
  *out = child;
  return 0;
}
