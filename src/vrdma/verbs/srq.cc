// Shared receive queues: create, query, modify (what can be kept), destroy. Receives are posted
// through context->ops (post.cc). No SRQ-limit event is ever raised (vrdma0 has no asynchronous
// events), so arming one is refused rather than accepted and never kept.
#include <new>

#include "vrdma/verbs/export.hh"
#include "vrdma/verbs/objects.hh"

using namespace rb::verbs;

VERBS_EXPORT ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (attr->attr.max_sge > VRDMA_MAX_SGE) {
    say("create_srq: at most %d SGEs (asked for %u)", VRDMA_MAX_SGE, attr->attr.max_sge);
    return fail_null<ibv_srq>(EINVAL);
  }
  if (attr->attr.srq_limit) {
    say("create_srq: an SRQ limit (srq_limit %u) is not supported: vrdma0 raises no asynchronous events",
        attr->attr.srq_limit);
    return fail_null<ibv_srq>(EOPNOTSUPP);
  }
  auto* s = new (std::nothrow) Srq;
  if (!s) return fail_null<ibv_srq>(ENOMEM);
  s->v = vrdma_create_srq(ours<Pd>(pd)->v, attr->attr.max_wr);
  if (!s->v) {
    int err = errno;
    say("create_srq: %s", vrdma_last_error());
    delete s;
    return fail_null<ibv_srq>(err);
  }
  attr->attr.max_wr = vrdma_srq_capacity(s->v);
  attr->attr.max_sge = VRDMA_MAX_SGE;
  s->srq.context = pd->context;
  s->srq.srq_context = attr->srq_context;
  s->srq.pd = pd;
  pthread_mutex_init(&s->srq.mutex, nullptr);
  pthread_cond_init(&s->srq.cond, nullptr);
  return &s->srq;
}

VERBS_EXPORT int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  attr->max_wr = vrdma_srq_capacity(ours<Srq>(srq)->v);
  attr->max_sge = VRDMA_MAX_SGE;
  attr->srq_limit = 0;
  return 0;
}

// Resizing is not offered (the ring is shared memory of a fixed size), nor is the limit event.
VERBS_EXPORT int ibv_modify_srq(ibv_srq*, ibv_srq_attr* attr, int mask) {
  if (mask & IBV_SRQ_MAX_WR) say("modify_srq: resizing an SRQ (max_wr %u) is not supported", attr->max_wr);
  else if (mask & IBV_SRQ_LIMIT) say("modify_srq: an SRQ limit is not supported: vrdma0 raises no asynchronous events");
  else return 0;
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

VERBS_EXPORT int ibv_destroy_srq(ibv_srq* srq) {
  Srq* s = ours<Srq>(srq);
  if (int r = vrdma_destroy_srq(s->v); r < 0) {
    say("destroy_srq: %s", vrdma_last_error());
    return -r;
  }
  pthread_mutex_destroy(&srq->mutex);
  pthread_cond_destroy(&srq->cond);
  delete s;
  return 0;
}
