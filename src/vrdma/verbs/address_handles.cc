// Address handles: plain data here, since RC QPs take their peer at modify_qp.
#include <new>

#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"

using namespace rb::verbs;

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
