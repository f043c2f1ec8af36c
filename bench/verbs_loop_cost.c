/* What one side's loop costs per iteration in a 64 B ping-pong, as perftest's latency tests run
 * it and as rdmabench -t vrdma runs it, with the waiting for the peer left out (loop_cost.h),
 * through the verbs layer: run through vrdma-run by bench/verbs_vs_rdmabench.py, beside
 * vrdma_loop_cost (the same loops on libvrdma directly). Prints one line per loop:
 *   NAME ns_per_iteration */
#include "verbs_pair.h"

static struct ibv_send_wr wr;

static void post(struct side *s, enum ibv_wr_opcode op, int signaled) {
  struct ibv_send_wr *bad;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_INLINE | (signaled ? IBV_SEND_SIGNALED : 0);
  if (ibv_post_send(s->qp, &wr, &bad)) fail("post_send");
}

static void post_write(struct side *from, int signaled) { post(from, IBV_WR_RDMA_WRITE, signaled); }
static void post_message(struct side *from, int signaled) { post(from, IBV_WR_SEND, signaled); }

static void post_recv(struct side *s) {
  struct ibv_sge g = {(uintptr_t)s->buf + 8192, 64, s->mr->lkey};
  struct ibv_recv_wr w = {.wr_id = 7, .sg_list = &g, .num_sge = 1}, *bad;
  if (ibv_post_recv(s->qp, &w, &bad)) fail("post_recv");
}

static void wait_ok(struct side *s, const char *what) {
  if (wait_one(s->cq).status != IBV_WC_SUCCESS) fail(what);
}

#include "loop_cost.h"

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
  static struct ibv_sge g;
  g = (struct ibv_sge){(uintptr_t)a.buf, 64, a.mr->lkey};
  wr = (struct ibv_send_wr){.wr_id = 1, .sg_list = &g, .num_sge = 1};
  wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
  wr.wr.rdma.rkey = b.mr->rkey;
  run_loops(&a, &b, iters);
  return 0;
}
