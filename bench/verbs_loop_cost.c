/* What one side's loop costs per iteration in a 64 B ping-pong, as perftest's latency tests run
 * it and as rdmabench -t vrdma runs it, with the waiting for the peer left out: two QPs of one
 * process on vrdma's direct path, where a request has completed when ibv_post_send returns. Run
 * through vrdma-run by bench/verbs_vs_rdmabench.py; prints one line per loop:
 *   NAME ns_per_iteration
 * perftest signals every request and polls its completion (ib_write_lat, ib_send_lat); rdmabench
 * sends small payloads inline and unsignaled, the peer's answer being the completion. */
#include <time.h>

#include "verbs_pair.h"

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void post(struct side *s, struct ibv_send_wr *w) {
  struct ibv_send_wr *bad;
  if (ibv_post_send(s->qp, w, &bad)) fail("post_send");
}

static void post_recv(struct side *s) {
  struct ibv_sge g = {(uintptr_t)s->buf + 8192, 64, s->mr->lkey};
  struct ibv_recv_wr w = {.wr_id = 7, .sg_list = &g, .num_sge = 1}, *bad;
  if (ibv_post_recv(s->qp, &w, &bad)) fail("post_recv");
}

/* One iteration of each loop: a's share of the round trip. */
static void write_as_perftest(struct side *a, struct side *b, struct ibv_send_wr *w) {
  (void)b;
  w->opcode = IBV_WR_RDMA_WRITE;
  w->send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  post(a, w);
  if (wait_one(a->cq).status != IBV_WC_SUCCESS) fail("WRITE completion");
}

static void write_as_rdmabench(struct side *a, struct side *b, struct ibv_send_wr *w) {
  (void)b;
  w->opcode = IBV_WR_RDMA_WRITE;
  w->send_flags = IBV_SEND_INLINE;
  post(a, w);
}

static void send_as_perftest(struct side *a, struct side *b, struct ibv_send_wr *w) {
  post_recv(b);
  w->opcode = IBV_WR_SEND;
  w->send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  post(a, w);
  if (wait_one(a->cq).status != IBV_WC_SUCCESS) fail("SEND completion");
  if (wait_one(b->cq).status != IBV_WC_SUCCESS) fail("RECV completion");
}

static void send_as_rdmabench(struct side *a, struct side *b, struct ibv_send_wr *w) {
  post_recv(b);
  w->opcode = IBV_WR_SEND;
  w->send_flags = IBV_SEND_INLINE;
  post(a, w);
  if (wait_one(b->cq).status != IBV_WC_SUCCESS) fail("RECV completion");
}

typedef void (*loop_fn)(struct side *, struct side *, struct ibv_send_wr *);

static double time_loop(loop_fn f, struct side *a, struct side *b, struct ibv_send_wr *w, long iters) {
  for (long i = 0; i < iters / 10; ++i) f(a, b, w); /* warm-up, not timed */
  double t0 = now_ns();
  for (long i = 0; i < iters; ++i) f(a, b, w);
  return (now_ns() - t0) / (double)iters;
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : 1000000;
  int n;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n < 1) fail("a verbs device");
  struct ibv_context *ctx = ibv_open_device(list[0]);
  struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
  if (!pd) fail("open_device, alloc_pd");
  struct side a, b;
  make_pair(ctx, pd, &a, &b);
  struct ibv_sge g = {(uintptr_t)a.buf, 64, a.mr->lkey};
  struct ibv_send_wr w = {.wr_id = 1, .sg_list = &g, .num_sge = 1};
  w.wr.rdma.remote_addr = (uintptr_t)b.buf;
  w.wr.rdma.rkey = b.mr->rkey;
  struct {
    const char *name;
    loop_fn f;
  } loops[] = {{"write_perftest", write_as_perftest},
               {"write_rdmabench", write_as_rdmabench},
               {"send_perftest", send_as_perftest},
               {"send_rdmabench", send_as_rdmabench}};
  for (size_t i = 0; i < sizeof loops / sizeof loops[0]; ++i)
    printf("%s %.1f\n", loops[i].name, time_loop(loops[i].f, &a, &b, &w, iters));
  return 0;
}
