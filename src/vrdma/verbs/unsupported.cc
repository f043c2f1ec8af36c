// What vrdma does not offer fails cleanly with EOPNOTSUPP and a line saying so: multicast (a UD
// feature), Ethernet L2 resolution, XRC, ECE and object import.
#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"
#include "vrdma/verbs/ops.hh"

using namespace rb::verbs;

namespace {

int unsupported(const char* what) {
  say("%s is not supported", what);
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

}  // namespace

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
// XRC (ibv_xsrq_pingpong) starts with an XRC domain, which verbs.h opens through the context.
ibv_xrcd* rb::verbs::open_xrcd(ibv_context*, ibv_xrcd_init_attr*) {
  unsupported("XRC (open_xrcd)");
  return nullptr;
}

VERBS_EXPORT void ibv_unimport_pd(ibv_pd*) {}
VERBS_EXPORT void ibv_unimport_mr(ibv_mr*) {}
