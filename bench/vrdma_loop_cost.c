/* The loops of loop_cost.h called on libvrdma directly, as rdmabench -t vrdma calls it (no verbs
 * layer in between): set beside verbs_loop_cost's figures by bench/verbs_vs_rdmabench.py, the
 * difference is what the verbs layer adds per loop. Needs VRDMA_SOCKET (or the default socket)
 * naming a running vrdmad; prints one line per loop:
 *   NAME ns_per_iteration */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vrdma/vrdma.h>

#define SIZE 65536

struct side {
  struct vrdma_cq *cq;
  struct vrdma_qp *qp;
  struct vrdma_mr *mr;
  uint8_t *buf;
};

static void fail(const char *what) {
  printf("FAIL %s (%s)\n", what, vrdma_last_error());
  exit(1);
}

static void make_side(struct vrdma_context *ctx, struct vrdma_pd *pd, struct side *s) {
  s->cq = vrdma_create_cq(ctx, 64);
  if (!s->cq) fail("create_cq");
  s->buf = aligned_alloc(4096, SIZE);
  if (!s->buf) fail("aligned_alloc");
  memset(s->buf, 0, SIZE);
  s->mr = vrdma_reg_mr(pd, s->buf, SIZE, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE);
  if (!s->mr) fail("reg_mr");
  struct vrdma_qp_init_attr a = {0};
  a.send_cq = a.recv_cq = s->cq;
  a.max_send_wr = a.max_recv_wr = 16;
  a.max_inline_data = 256; /* as rdmabench -t vrdma and the verbs layer ask */
  s->qp = vrdma_create_qp(pd, &a);
  if (!s->qp) fail("create_qp");
}

static void connect_pair(struct side *a, struct side *b) {
  uint8_t addr_a[VRDMA_ADDRESS_BYTES], addr_b[VRDMA_ADDRESS_BYTES];
  if (vrdma_qp_address(a->qp, addr_a, sizeof addr_a) < 0 || vrdma_qp_address(b->qp, addr_b, sizeof addr_b) < 0)
    fail("qp_address");
  if (vrdma_connect_qp(a->qp, addr_b, sizeof addr_b) || vrdma_connect_qp(b->qp, addr_a, sizeof addr_a))
    fail("connect_qp");
}

static struct vrdma_wc wait_one(struct vrdma_cq *cq) {
  struct vrdma_wc wc;
  for (long spins = 0; spins < 100000000L; ++spins) {
    int n = vrdma_poll_cq(cq, 1, &wc);
    if (n < 0) fail("poll_cq");
    if (n == 1) return wc;
  }
  fail("a completion within the spin bound");
  return wc;
}

static struct vrdma_send_wr wr;

static void post(struct side *s, int opcode, int signaled) {
  struct vrdma_send_wr *bad;
  wr.opcode = opcode;
  wr.send_flags = VRDMA_SEND_INLINE | (signaled ? VRDMA_SEND_SIGNALED : 0);
  if (vrdma_post_send(s->qp, &wr, &bad)) fail("post_send");
}

static void post_write(struct side *from, int signaled) { post(from, VRDMA_WR_RDMA_WRITE, signaled); }
static void post_message(struct side *from, int signaled) { post(from, VRDMA_WR_SEND, signaled); }

static void post_recv(struct side *s) {
  struct vrdma_sge g = {(uintptr_t)s->buf + 8192, 64, s->mr->lkey};
  struct vrdma_recv_wr w = {.wr_id = 7, .sg_list = &g, .num_sge = 1}, *bad;
  if (vrdma_post_recv(s->qp, &w, &bad)) fail("post_recv");
}

static void wait_ok(struct side *s, const char *what) {
  struct vrdma_wc c = wait_one(s->cq);
  if (c.status != VRDMA_WC_SUCCESS) {
    printf("FAIL %s: %s\n", what, vrdma_wc_status_str(c.status));
    exit(1);
  }
}

#include "loop_cost.h"

int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : 1000000;
  struct vrdma_context *ctx = vrdma_open(NULL);
  struct vrdma_pd *pd = ctx ? vrdma_alloc_pd(ctx) : NULL;
  if (!pd) fail("open, alloc_pd");
  struct side a, b;
  make_side(ctx, pd, &a);
  make_side(ctx, pd, &b);
  connect_pair(&a, &b);
  static struct vrdma_sge g;
  g = (struct vrdma_sge){(uintptr_t)a.buf, 64, a.mr->lkey};
  wr = (struct vrdma_send_wr){.wr_id = 1, .sg_list = &g, .num_sge = 1};
  wr.remote_addr = (uintptr_t)b.buf;
  wr.rkey = b.mr->rkey;
  run_loops(&a, &b, iters);
  return 0;
}
