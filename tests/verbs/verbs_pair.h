/* Two RC QPs of one process connected to each other through plain verbs calls, for the verbs
 * programs of the tests and benchmarks (run through vrdma-run). */
#ifndef VERBS_PAIR_H
#define VERBS_PAIR_H
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE 65536

static int fail(const char *what) {
  printf("FAIL %s (errno %d: %s)\n", what, errno, strerror(errno));
  exit(1);
}
#define CHECK(cond, name) ((cond) ? (void)printf("ok %s\n", name) : (void)fail(name))

struct side {
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  struct ibv_mr *mr;
  uint8_t *buf;
};

static void make_side(struct ibv_context *ctx, struct ibv_pd *pd, struct side *s, struct ibv_srq *srq) {
  s->cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
  if (!s->cq) fail("create_cq");
  s->buf = aligned_alloc(4096, SIZE);
  memset(s->buf, 0, SIZE);
  s->mr = ibv_reg_mr(pd, s->buf, SIZE,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  if (!s->mr) fail("reg_mr");
  struct ibv_qp_init_attr_ex a = {0};
  a.send_cq = a.recv_cq = s->cq;
  a.srq = srq;
  a.cap.max_send_wr = a.cap.max_recv_wr = 16;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = 32;
  a.qp_type = IBV_QPT_RC;
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  a.pd = pd;
  a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
  s->qp = ibv_create_qp_ex(ctx, &a);
  if (!s->qp) fail("create_qp_ex");
}

static void connect_to(struct ibv_context *ctx, struct side *s, uint32_t peer_qpn) {
  struct ibv_qp_attr a = {0};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) fail("to INIT");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = peer_qpn;
  a.max_dest_rd_atomic = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  if (ibv_query_gid(ctx, 1, 0, &a.ah_attr.grh.dgid)) fail("query_gid");
  if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    fail("to RTR");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.max_rd_atomic = 1;
  a.timeout = 14; /* as ibv_rc_pingpong and perftest: 8 tries of 67 ms before a silent peer fails a request */
  a.retry_cnt = 7;
  if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                   IBV_QP_MAX_QP_RD_ATOMIC))
    fail("to RTS");
}

static struct ibv_wc wait_one(struct ibv_cq *cq) {
  struct ibv_wc wc;
  for (long spins = 0; spins < 100000000L; ++spins) {
    int n = ibv_poll_cq(cq, 1, &wc);
    if (n < 0) fail("poll_cq");
    if (n == 1) return wc;
  }
  errno = ETIMEDOUT;
  fail("a completion within the spin bound");
  return wc;
}

/* Two sides with their own QPs (no SRQ), connected to each other. */
static void make_pair(struct ibv_context *ctx, struct ibv_pd *pd, struct side *a, struct side *b) {
  make_side(ctx, pd, a, NULL);
  make_side(ctx, pd, b, NULL);
  connect_to(ctx, a, b->qp->qp_num);
  connect_to(ctx, b, a->qp->qp_num);
}

#endif
