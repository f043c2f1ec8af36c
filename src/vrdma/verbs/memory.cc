// Protection domains and memory regions. A region is the program's own buffer: libvrdma maps
// shared memory over its pages with the contents kept, so a peer's WRITE lands in it and a READ
// comes from it with no call from this process; regions over the same pages share that memory
// (lib/user_spans.hh). Remote addresses are this process's virtual addresses, as perftest and
// ibv_rc_pingpong hand them to their peers.
#include <unistd.h>

#include <cstdint>
#include <iterator>
#include <mutex>
#include <new>

#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using namespace rb::verbs;

namespace {

constexpr int kVrdmaAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
// Hints with no meaning here: a copy has no ordering to relax, and no memory windows are bound.
constexpr int kIgnoredAccess = IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_MW_BIND;
static_assert(int(IBV_ACCESS_LOCAL_WRITE) == int(VRDMA_ACCESS_LOCAL_WRITE) &&
              int(IBV_ACCESS_REMOTE_WRITE) == int(VRDMA_ACCESS_REMOTE_WRITE) &&
              int(IBV_ACCESS_REMOTE_READ) == int(VRDMA_ACCESS_REMOTE_READ) &&
              int(IBV_ACCESS_REMOTE_ATOMIC) == int(VRDMA_ACCESS_REMOTE_ATOMIC));

}  // namespace

VERBS_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  auto* p = new (std::nothrow) Pd;
  if (!p) return fail_null<ibv_pd>(ENOMEM);
  p->v = vrdma_alloc_pd(Context::of(ctx)->v);
  if (!p->v) {
    int err = errno;
    say("alloc_pd: %s", vrdma_last_error());
    delete p;
    return fail_null<ibv_pd>(err);
  }
  p->pd.context = ctx;
  return &p->pd;
}

VERBS_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  Pd* p = ours<Pd>(pd);
  if (int r = vrdma_dealloc_pd(p->v); r < 0) return -r;
  delete p;
  return 0;
}

VERBS_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  if (!addr || !length) return fail_null<ibv_mr>(EINVAL);
  if (iova != reinterpret_cast<uintptr_t>(addr)) {
    say("reg_mr: an iova other than the buffer's address is not supported");
    return fail_null<ibv_mr>(EOPNOTSUPP);
  }
  if (access & ~(kVrdmaAccess | kIgnoredAccess)) {
    say("reg_mr: access flags %#x are not supported (local/remote write, remote read and atomic are)",
        access & ~(kVrdmaAccess | kIgnoredAccess));
    return fail_null<ibv_mr>(EOPNOTSUPP);
  }
  auto* m = new (std::nothrow) Mr;
  vrdma_mr* v = m ? vrdma_reg_mr(ours<Pd>(pd)->v, addr, length, access & kVrdmaAccess)
                  : nullptr;
  if (!v) {
    int err = m ? errno : ENOMEM;
    if (m) say("reg_mr: %s", vrdma_last_error());
    delete m;
    return fail_null<ibv_mr>(err);
  }
  m->v = v;
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.lkey = v->lkey;
  m->mr.rkey = v->rkey;
  m->mr.handle = v->lkey;
  return &m->mr;
}

VERBS_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr), unsigned(access));
}

VERBS_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, unsigned(access));
}

VERBS_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  Mr* m = ours<Mr>(mr);
  if (int r = vrdma_dereg_mr(m->v); r < 0) return -r;
  delete m;
  return 0;
}

VERBS_EXPORT int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) {
  say("rereg_mr is not supported: deregister and register again");
  errno = EOPNOTSUPP;
  return IBV_REREG_MR_ERR_INPUT;
}

VERBS_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  say("reg_dmabuf_mr is not supported: vrdma registers host memory");
  return fail_null<ibv_mr>(EOPNOTSUPP);
}
