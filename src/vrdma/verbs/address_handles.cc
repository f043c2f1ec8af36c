// Address handles and where a peer's address leads: RC QPs take their peer's address at
// modify_qp (router_of), UD requests name a handle, which for another host's GID holds a libvrdma
// address handle of that host's router.
#include <cstring>
#include <new>
#include <optional>

#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"
#include "vrdma/verbs/ops.hh"

namespace rb::verbs {

// The router a peer's address names: ours when there is no GRH (a LID-only peer is on this host)
// or its GID is one of ours; else the router listening at that GID on our router's port, as every
// RoCE NIC listens on the same UDP port. Another host's link-local GID names no address to reach:
// nothing (the caller says so).
std::optional<vrdma_router_address> router_of(const Context& c, const ibv_ah_attr& ah) {
  vrdma_router_address at{};
  if (!ah.is_global) return at;
  for (const auto& g : c.gids)
    if (!std::memcmp(ah.grh.dgid.raw, g.raw, 16)) return at;
  if (ah.grh.dgid.raw[0] == 0xfe && (ah.grh.dgid.raw[1] & 0xc0) == 0x80) return std::nullopt;
  std::memcpy(at.ip, ah.grh.dgid.raw, 16);
  at.port = c.router.port;
  return at;
}

bool on_this_host(const vrdma_router_address& at) { return at.port == 0; }

}  // namespace rb::verbs

using namespace rb::verbs;

VERBS_EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  auto where = router_of(*Context::of(pd->context), *attr);
  if (!where) {
    say("create_ah: the GID is another host's link-local one (GID index 1), which names no router to reach; "
        "across hosts use GID index 0, the router's address");
    return fail_null<ibv_ah>(EINVAL);
  }
  auto* a = new (std::nothrow) Ah;
  if (!a) return fail_null<ibv_ah>(ENOMEM);
  if (!on_this_host(*where) && !(a->v = vrdma_create_ah(ours<Pd>(pd)->v, &*where))) {
    int err = errno;
    say("create_ah: %s", vrdma_last_error());
    delete a;
    return fail_null<ibv_ah>(err);
  }
  a->ah.context = pd->context;
  a->ah.pd = pd;
  a->attr = *attr;
  return &a->ah;
}

VERBS_EXPORT int ibv_destroy_ah(ibv_ah* ah) {
  Ah* a = ours<Ah>(ah);
  if (a->v) {
    if (int r = vrdma_destroy_ah(a->v); r < 0) return -r;
  }
  delete a;
  return 0;
}
