// The rest of the verbs entry points that receive our objects: address handles (plain data
// here: RC QPs take their peer at modify_qp), asynchronous events (none happen), and what vrdma
// does not offer, which fails cleanly with EOPNOTSUPP and a line saying so: multicast (a UD
// feature), UD address resolution, ECE and object import.
#include <unistd.h>

#include <new>

#include "verbs/export.hh"
#include "verbs/objects.hh"

using namespace rb::verbs;

namespace {

int unsupported(const char* what) {
  say("%s is not supported", what);
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

}  // namespace

VERBS_EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  auto* a = new (std::nothrow) Ah;
  if (!a) return fail_null<ibv_ah>(ENOMEM);
  a->ah.context = pd->context;
  a->ah.pd = pd;
  a->attr = *attr;
  return &a->ah;
}

VERBS_EXPORT int ibv_destroy_ah(ibv_ah* ah) {
  delete ours<Ah>(ah);
  return 0;
}

VERBS_EXPORT int ibv_init_ah_from_wc(ibv_context*, uint8_t, ibv_wc*, ibv_grh*, ibv_ah_attr*) {
  return unsupported("init_ah_from_wc (UD)") ? -1 : 0;
}

VERBS_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd*, ibv_wc*, ibv_grh*, uint8_t) {
  unsupported("create_ah_from_wc (UD)");
  return nullptr;
}

VERBS_EXPORT int ibv_attach_mcast(ibv_qp*, const union ibv_gid*, uint16_t) { return unsupported("multicast (attach_mcast)"); }
VERBS_EXPORT int ibv_detach_mcast(ibv_qp*, const union ibv_gid*, uint16_t) { return unsupported("multicast (detach_mcast)"); }

VERBS_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t[6], uint16_t*) {
  return unsupported("resolve_eth_l2_from_gid") ? -1 : 0;
}

VERBS_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return unsupported("ECE (set_ece)"); }
VERBS_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return unsupported("ECE (query_ece)"); }

VERBS_EXPORT ibv_context* ibv_import_device(int) {
  unsupported("import_device");
  return nullptr;
}
VERBS_EXPORT ibv_pd* ibv_import_pd(ibv_context*, uint32_t) {
  unsupported("import_pd");
  return nullptr;
}
VERBS_EXPORT ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) {
  unsupported("import_mr");
  return nullptr;
}
VERBS_EXPORT void ibv_unimport_pd(ibv_pd*) {}
VERBS_EXPORT void ibv_unimport_mr(ibv_mr*) {}

// No asynchronous events happen on vrdma0: a reader waits as it would on a quiet NIC, and a
// signal interrupts it with EINTR.
VERBS_EXPORT int ibv_get_async_event(ibv_context* ctx, ibv_async_event*) {
  uint64_t v;
  if (read(ctx->async_fd, &v, sizeof v) < 0) return -1;
  errno = EAGAIN;
  return -1;
}

VERBS_EXPORT void ibv_ack_async_event(ibv_async_event*) {}

// librdmacm (perftest -R and -z, rsocket) is outside vrdma: its first calls say so, rather than
// failing later in ways that name a device problem.
VERBS_EXPORT void* rdma_create_event_channel() {
  say("librdmacm is not supported on vrdma (perftest -R/-z, rsocket): connect with the programs' TCP exchange");
  errno = EOPNOTSUPP;
  return nullptr;
}

VERBS_EXPORT int rsocket(int, int, int) {
  say("rsocket (librdmacm) is not supported on vrdma");
  errno = EOPNOTSUPP;
  return -1;
}
