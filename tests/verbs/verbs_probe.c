/* A plain verbs program (it links libibverbs and knows nothing of vrdma), run through vrdma-run
 * by tests/e2e/test_verbs_interop.py: two RC QPs of one process connected to each other, each
 * check naming what it expects. It covers what perftest and ibv_rc_pingpong leave out: the
 * ibv_wr_* path, atomics' returned values, a wrong key's completion status, a shared receive
 * queue feeding two QPs, a peer that goes while requests wait for it, and the calls vrdma does not
 * offer failing cleanly. Prints "ok NAME" per
 * check; exits 1 at the first failure. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "verbs_pair.h"

static void post_text(struct side *s, const char *text) {
  struct ibv_sge g = {(uintptr_t)text, (uint32_t)strlen(text) + 1, 0};
  struct ibv_send_wr w = {.wr_id = 9, .sg_list = &g, .num_sge = 1, .opcode = IBV_WR_SEND,
                          .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE}, *bad;
  if (ibv_post_send(s->qp, &w, &bad)) fail("post_send SEND");
}

static void send_text(struct side *s, const char *text) {
  post_text(s, text);
  if (wait_one(s->cq).status != IBV_WC_SUCCESS) fail("a SEND to an SRQ's QP completes");
}

static void free_side(struct side *s) {
  if (ibv_destroy_qp(s->qp) || ibv_dereg_mr(s->mr) || ibv_destroy_cq(s->cq)) fail("side teardown");
  free(s->buf);
}

/* A shared receive queue: two QPs take their receives from it in the order they were posted, and
 * each completion names the QP that got the message. */
static void check_srq(struct ibv_context *ctx, struct ibv_pd *pd) {
  struct ibv_srq_init_attr sa = {0};
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  struct ibv_srq *srq = ibv_create_srq(pd, &sa);
  CHECK(srq && sa.attr.max_wr >= 4, "create_srq");
  struct side r1, r2, s1, s2;
  make_side(ctx, pd, &r1, srq);
  make_side(ctx, pd, &r2, srq);
  make_side(ctx, pd, &s1, NULL);
  make_side(ctx, pd, &s2, NULL);
  connect_to(ctx, &r1, s1.qp->qp_num);
  connect_to(ctx, &s1, r1.qp->qp_num);
  connect_to(ctx, &r2, s2.qp->qp_num);
  connect_to(ctx, &s2, r2.qp->qp_num);
  struct ibv_sge g[3];
  struct ibv_recv_wr w[3], *bad;
  for (int i = 0; i < 3; ++i) {
    g[i] = (struct ibv_sge){(uintptr_t)r1.buf + 1024 * i, 64, r1.mr->lkey};
    w[i] = (struct ibv_recv_wr){.wr_id = 100 + i, .next = i < 2 ? &w[i + 1] : NULL, .sg_list = &g[i], .num_sge = 1};
  }
  if (ibv_post_srq_recv(srq, &w[0], &bad)) fail("post_srq_recv");
  struct ibv_recv_wr own = w[2];
  own.next = NULL;
  CHECK(ibv_post_recv(r1.qp, &own, &bad) == EINVAL, "post_recv on a QP of an SRQ: EINVAL");
  const char *texts[3] = {"first", "second", "third"};
  struct side *to[3] = {&r1, &r2, &r1}, *from[3] = {&s1, &s2, &s1};
  int in_order = 1;
  for (int i = 0; i < 3; ++i) {
    send_text(from[i], texts[i]);
    struct ibv_wc wc = wait_one(to[i]->cq);
    in_order &= wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)(100 + i) && wc.qp_num == to[i]->qp->qp_num &&
                wc.byte_len == strlen(texts[i]) + 1 && !strcmp((char *)r1.buf + 1024 * i, texts[i]);
  }
  CHECK(in_order, "SENDs to two QPs take the SRQ's receives in order, each completing on its QP");
  errno = 0;
  CHECK(ibv_destroy_srq(srq) == EBUSY, "destroy_srq while QPs use it: EBUSY");
  struct ibv_srq_attr qa;
  CHECK(!ibv_query_srq(srq, &qa) && qa.max_wr >= 4 && qa.max_sge >= 1, "query_srq");
  qa.srq_limit = 1;
  CHECK(ibv_modify_srq(srq, &qa, IBV_SRQ_LIMIT) == EOPNOTSUPP, "arming an SRQ limit: EOPNOTSUPP");
  free_side(&r1);
  free_side(&r2);
  free_side(&s1);
  free_side(&s2);
  CHECK(!ibv_destroy_srq(srq), "destroy_srq once its QPs are gone");
}

/* An extended CQ (as UCX and libfabric make them) under a pair of QPs, and a SEND with immediate
 * data gathered from 8 SGEs (UCX asks for 5 send SGEs on RC, 6 on UD) into a receive of 8. */
static void check_cq_ex_and_eight_sges(struct ibv_context *ctx, struct ibv_pd *pd) {
  struct ibv_device_attr da;
  CHECK(!ibv_query_device(ctx, &da) && da.max_sge >= 8, "the device offers 8 SGEs");
  struct ibv_cq_init_attr_ex cqa = {.cqe = 16, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
                                                           IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP};
  struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &cqa);
  CHECK(cqx != NULL, "create_cq_ex with byte_len, imm, qp_num, src_qp");
  struct side a, b;
  make_side(ctx, pd, &a, NULL);
  make_side(ctx, pd, &b, NULL);
  struct ibv_qp_init_attr qa = {.send_cq = ibv_cq_ex_to_cq(cqx), .recv_cq = ibv_cq_ex_to_cq(cqx), .qp_type = IBV_QPT_RC};
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 8;
  struct ibv_qp *qa8 = ibv_create_qp(pd, &qa), *qb8 = ibv_create_qp(pd, &qa);
  CHECK(qa8 && qb8, "create_qp with 8 send and 8 receive SGEs");
  ibv_destroy_qp(a.qp);
  ibv_destroy_qp(b.qp);
  a.qp = qa8;
  b.qp = qb8;
  connect_to(ctx, &a, b.qp->qp_num);
  connect_to(ctx, &b, a.qp->qp_num);
  struct ibv_sge rs[8], ss[8];
  for (int i = 0; i < 8; ++i) {
    for (int k = 0; k < 100; ++k) a.buf[4096 * i + k] = (uint8_t)(i * 31 + k);
    ss[i] = (struct ibv_sge){(uintptr_t)a.buf + 4096 * i, 100, a.mr->lkey};
    rs[i] = (struct ibv_sge){(uintptr_t)b.buf + 200 * i, 100, b.mr->lkey};
  }
  struct ibv_recv_wr rw = {.wr_id = 81, .sg_list = rs, .num_sge = 8}, *rbad;
  struct ibv_send_wr sw = {.wr_id = 82, .sg_list = ss, .num_sge = 8, .opcode = IBV_WR_SEND_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(0xabcd)}, *sbad;
  if (ibv_post_recv(b.qp, &rw, &rbad) || ibv_post_send(a.qp, &sw, &sbad)) fail("post with 8 SGEs");
  int seen_send = 0, seen_recv = 0, right = 1;
  for (long spins = 0; spins < 100000000L && seen_send + seen_recv < 2; ++spins) {
    struct ibv_poll_cq_attr pa = {0};
    if (ibv_start_poll(cqx, &pa)) continue;
    do {
      right &= cqx->status == IBV_WC_SUCCESS;
      if (cqx->wr_id == 82) {
        seen_send = 1;
        right &= ibv_wc_read_opcode(cqx) == IBV_WC_SEND && ibv_wc_read_qp_num(cqx) == a.qp->qp_num;
      } else {
        seen_recv = 1;
        right &= cqx->wr_id == 81 && ibv_wc_read_opcode(cqx) == IBV_WC_RECV && ibv_wc_read_byte_len(cqx) == 800 &&
                 ibv_wc_read_qp_num(cqx) == b.qp->qp_num && (ibv_wc_read_wc_flags(cqx) & IBV_WC_WITH_IMM) &&
                 be32toh(ibv_wc_read_imm_data(cqx)) == 0xabcd;
      }
    } while (ibv_next_poll(cqx) == 0);
    ibv_end_poll(cqx);
  }
  CHECK(seen_send && seen_recv && right, "the extended CQ reads both completions' opcode, byte_len, qp_num and imm");
  int same = 1;
  for (int i = 0; i < 8; ++i) same &= !memcmp(a.buf + 4096 * i, b.buf + 200 * i, 100);
  CHECK(same, "8 gathered pieces landed in 8 scattered ones");
  if (ibv_destroy_qp(a.qp) || ibv_destroy_qp(b.qp) || ibv_dereg_mr(a.mr) || ibv_dereg_mr(b.mr)) fail("teardown");
  if (ibv_destroy_cq(a.cq) || ibv_destroy_cq(b.cq)) fail("destroy_cq");
  CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), "destroy an extended CQ with ibv_destroy_cq");
  free(a.buf);
  free(b.buf);
}

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A peer that goes away, the receiving side on an SRQ: on the router path, as an RC QP retries a
 * silent peer (timeout 14, retry count 7: 8 tries of 4.096 us x 2^14, 537 ms), the request
 * waiting for it fails no sooner than that, and not with success; on the direct path, where a
 * request completes inside post_send, at once. */
static void check_peer_gone(struct ibv_context *ctx, struct ibv_pd *pd, int router_path) {
  struct ibv_srq_init_attr sa = {0};
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  struct ibv_srq *srq = ibv_create_srq(pd, &sa);
  if (!srq) fail("create_srq");
  struct side r, s;
  make_side(ctx, pd, &r, srq);
  make_side(ctx, pd, &s, NULL);
  connect_to(ctx, &r, s.qp->qp_num);
  connect_to(ctx, &s, r.qp->qp_num);
  double gone = seconds_now();
  if (ibv_destroy_qp(r.qp)) fail("destroy_qp of the peer");
  post_text(&s, "too late");
  struct ibv_wc wc;
  int n = 0;
  while (n == 0 && seconds_now() - gone < 10) n = ibv_poll_cq(s.cq, 1, &wc);
  double waited = seconds_now() - gone;
  printf("# the SEND to a peer that went completed with status %d after %.3f s\n", n == 1 ? (int)wc.status : -1, waited);
  CHECK(n == 1 && wc.status == IBV_WC_REM_OP_ERR, "a SEND to a peer that went: IBV_WC_REM_OP_ERR");
  if (router_path)
    CHECK(waited >= 0.536 && waited < 5, "it fails once the QP's retries would have run out (537 ms), not before");
  else
    CHECK(waited < 0.5, "on the direct path it fails at once (the request completes inside post_send)");
  post_text(&s, "later still");
  n = 0;
  while (n == 0 && seconds_now() - gone < 20) n = ibv_poll_cq(s.cq, 1, &wc);
  CHECK(n == 1 && wc.status != IBV_WC_SUCCESS, "the QP is broken: the next request fails too");
  if (ibv_destroy_qp(s.qp) || ibv_dereg_mr(r.mr) || ibv_destroy_cq(r.cq) || ibv_dereg_mr(s.mr) || ibv_destroy_cq(s.cq))
    fail("teardown of the pair whose peer went");
  free(r.buf);
  free(s.buf);
  CHECK(!ibv_destroy_srq(srq), "destroy_srq after its QP went first");
}

/* A QP moved to error completes what has arrived before it flushes the rest, as a NIC's CQ holds
 * the arrival ahead of the flush (rdma_cm moves a QP to error on a disconnect, which once raced
 * a stream's last message and flushed the receive it had filled). */
static void check_arrivals_before_flush(struct ibv_context *ctx, struct ibv_pd *pd) {
  struct side r, s;
  make_pair(ctx, pd, &r, &s);
  for (int i = 0; i < 2; ++i) {
    struct ibv_sge g = {(uintptr_t)r.buf + 64 * i, 64, r.mr->lkey};
    struct ibv_recv_wr w = {.wr_id = 100 + i, .sg_list = &g, .num_sge = 1}, *bad;
    if (ibv_post_recv(r.qp, &w, &bad)) fail("post_recv");
  }
  send_text(&s, "last words");
  struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
  if (ibv_modify_qp(r.qp, &err, IBV_QP_STATE)) fail("modify_qp to ERR");
  struct ibv_wc first = wait_one(r.cq), second = wait_one(r.cq);
  CHECK(first.status == IBV_WC_SUCCESS && first.wr_id == 100 && !strcmp((char *)r.buf, "last words"),
        "a QP put in error completes the SEND that arrived before it");
  CHECK(second.status == IBV_WC_WR_FLUSH_ERR && second.wr_id == 101, "and then flushes the receive left");
  free_side(&r);
  free_side(&s);
}

/* UC QPs, carried as RC ones: a WRITE arrives; a READ, which UC does not have, is refused at post. */
static void check_uc(struct ibv_context *ctx, struct ibv_pd *pd, uint8_t *target, uint32_t rkey) {
  struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
  struct ibv_qp_init_attr uc = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UC};
  uc.cap.max_send_wr = uc.cap.max_recv_wr = 4;
  uc.cap.max_send_sge = uc.cap.max_recv_sge = 1;
  struct side x = {.cq = cq, .qp = cq ? ibv_create_qp(pd, &uc) : NULL}, y = {.cq = cq, .qp = cq ? ibv_create_qp(pd, &uc) : NULL};
  CHECK(x.qp && y.qp && x.qp->qp_type == IBV_QPT_UC, "UC QPs are made");
  connect_to(ctx, &x, y.qp->qp_num);
  connect_to(ctx, &y, x.qp->qp_num);
  static char text[] = "over UC";
  struct ibv_mr *mr = ibv_reg_mr(pd, text, sizeof text, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_sge g = {(uintptr_t)text, sizeof text, mr ? mr->lkey : 0};
  struct ibv_send_wr w = {.wr_id = 21, .sg_list = &g, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                          .send_flags = IBV_SEND_SIGNALED}, *bad;
  w.wr.rdma.remote_addr = (uintptr_t)target;
  w.wr.rdma.rkey = rkey;
  CHECK(mr && !ibv_post_send(x.qp, &w, &bad) && wait_one(cq).status == IBV_WC_SUCCESS && !strcmp((char *)target, text),
        "a WRITE over a UC QP arrives");
  w.opcode = IBV_WR_RDMA_READ;
  CHECK(ibv_post_send(x.qp, &w, &bad) == EINVAL && bad == &w, "a READ on a UC QP: EINVAL at post, as UC has none");
  if (ibv_destroy_qp(x.qp) || ibv_destroy_qp(y.qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq)) fail("UC teardown");
}

/* A UD QP through INIT (with `qkey`), RTR and RTS. */
static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t qkey) {
  struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD};
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  struct ibv_qp *qp = ibv_create_qp(pd, &ia);
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = qkey};
  if (!qp || ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) fail("UD to INIT");
  a.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) fail("UD to RTR");
  a.qp_state = IBV_QPS_RTS;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) fail("UD to RTS");
  return qp;
}

static void ud_send(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey, struct ibv_sge *g) {
  struct ibv_send_wr w = {.wr_id = 31, .sg_list = g, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED}, *bad;
  w.wr.ud.ah = ah;
  w.wr.ud.remote_qpn = qpn;
  w.wr.ud.remote_qkey = qkey;
  if (ibv_post_send(qp, &w, &bad)) fail("post_send UD");
}

/* Datagrams: a receive gets a 40 B routing header whose source GID is the sender's, then the
 * bytes; the completion names the sending QP; an address handle made from that completion
 * answers it; a datagram with another Q_Key is dropped (its sender is told success). */
static void check_ud(struct ibv_context *ctx, struct ibv_pd *pd) {
  struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  struct ibv_qp *x = ud_qp(pd, cq, 0x11), *y = ud_qp(pd, cq, 0x22);
  static uint8_t buf[2][40 + 64];
  struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  if (!mr) fail("reg_mr UD");
  struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
  if (ibv_query_gid(ctx, 1, 0, &aa.grh.dgid)) fail("query_gid");
  struct ibv_ah *ah = ibv_create_ah(pd, &aa);
  struct ibv_sge rg = {(uintptr_t)buf[1], sizeof buf[1], mr->lkey}, sg = {(uintptr_t)buf[0], 16, mr->lkey};
  struct ibv_recv_wr r = {.wr_id = 41, .sg_list = &rg, .num_sge = 1}, *rbad;
  memcpy(buf[0], "datagram payload", 16);
  if (!ah || ibv_post_recv(y, &r, &rbad)) fail("UD receive");
  ud_send(x, ah, y->qp_num, 0x23, &sg); /* another Q_Key: dropped */
  struct ibv_wc wc = wait_one(cq);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "a datagram with another Q_Key: its sender is told success");
  ud_send(x, ah, y->qp_num, 0x22, &sg);
  struct ibv_wc got[2];
  int n = 0;
  for (int spins = 0; n < 2 && spins < 10000000; ++spins) n += ibv_poll_cq(cq, 2 - n, got + n);
  struct ibv_wc *rx = n == 2 ? (got[0].opcode == IBV_WC_RECV ? &got[0] : &got[1]) : NULL;
  CHECK(rx && rx->status == IBV_WC_SUCCESS && rx->wr_id == 41 && rx->byte_len == 40 + 16 && rx->src_qp == x->qp_num &&
            (rx->wc_flags & IBV_WC_GRH) && !memcmp(buf[1] + 40, "datagram payload", 16) &&
            !memcmp(buf[1] + 8, aa.grh.dgid.raw, 16),
        "a datagram with its Q_Key: 40 B of GRH (the source GID), the bytes, the source QP");
  struct ibv_ah *back = rx ? ibv_create_ah_from_wc(pd, rx, (struct ibv_grh *)buf[1], 1) : NULL;
  r.wr_id = 42;
  rg.addr = (uintptr_t)buf[1];
  if (!back || ibv_post_recv(x, &r, &rbad)) fail("UD answer");
  ud_send(y, back, rx->src_qp, 0x80000000u | 0x11, &sg); /* high bit: wrong on purpose, means the QP's own (0x22) */
  n = 0;
  for (int spins = 0; n < 1 && spins < 10000000; ++spins) n += ibv_poll_cq(cq, 1, got);
  CHECK(n == 1 && got[0].opcode == IBV_WC_SEND, "a Q_Key with the high bit set is the sender's own: the answer to 0x11 is dropped");
  struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
  struct ibv_srq *srq = ibv_create_srq(pd, &sa);
  struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_UD};
  ia.cap.max_send_wr = 1;
  errno = 0;
  CHECK(srq && !ibv_create_qp(pd, &ia) && errno == EOPNOTSUPP, "a UD QP with an SRQ: EOPNOTSUPP");
  if (ibv_destroy_srq(srq) || ibv_destroy_ah(back) || ibv_destroy_ah(ah) || ibv_destroy_qp(x) || ibv_destroy_qp(y) ||
      ibv_dereg_mr(mr) || ibv_destroy_cq(cq))
    fail("UD teardown");
}

/* WRITEs `len` bytes of `from`'s buffer at `at` through `rkey`; the completion's status. */
static enum ibv_wc_status write_through(struct side *from, void *at, uint32_t rkey, uint32_t len) {
  struct ibv_sge g = {(uintptr_t)from->buf, len, from->mr->lkey};
  struct ibv_send_wr w = {.wr_id = 11, .sg_list = &g, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                          .send_flags = IBV_SEND_SIGNALED}, *bad;
  w.wr.rdma.remote_addr = (uintptr_t)at;
  w.wr.rdma.rkey = rkey;
  if (ibv_post_send(from->qp, &w, &bad)) fail("post_send WRITE");
  return wait_one(from->cq).status;
}

/* Regions over pages registered already, as real NICs allow and UCX does (a buffer twice, or
 * buffers that share pages): each region's WRITEs land in the program's memory, whichever
 * region came first or goes first, and nothing else moves. */
static void check_overlapping_regions(struct ibv_context *ctx, struct ibv_pd *pd) {
  struct side a, b;
  make_pair(ctx, pd, &a, &b);
  const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  uint8_t *buf = aligned_alloc(4096, 4 * 4096);
  memset(buf, 0x11, 4 * 4096);
  struct ibv_mr *page1 = ibv_reg_mr(pd, buf + 4096, 4096, rw);
  struct ibv_mr *twice = ibv_reg_mr(pd, buf + 4096, 4096, rw);
  struct ibv_mr *below = ibv_reg_mr(pd, buf + 100, 4096, rw);          /* pages 0 and 1 */
  struct ibv_mr *above = ibv_reg_mr(pd, buf + 2 * 4096 - 8, 16, rw);   /* pages 1 and 2 */
  CHECK(page1 && twice && below && above && twice->rkey != page1->rkey,
        "regions over pages registered already: the same buffer twice, one reaching below, one above");
  memset(a.buf, 0xa1, 64);
  CHECK(write_through(&a, buf + 4096, twice->rkey, 64) == IBV_WC_SUCCESS && buf[4096] == 0xa1 && buf[4096 + 63] == 0xa1,
        "a WRITE through the second region of a buffer lands in the program's memory");
  memset(a.buf, 0xb2, 64);
  CHECK(write_through(&a, buf + 100, below->rkey, 64) == IBV_WC_SUCCESS && buf[100] == 0xb2 && buf[99] == 0x11,
        "a WRITE through a region reaching below lands in the page it grew into");
  CHECK(!ibv_dereg_mr(page1) && !ibv_dereg_mr(twice), "the first regions go while later ones stay");
  memset(a.buf, 0xc3, 16);
  CHECK(write_through(&a, buf + 2 * 4096 - 8, above->rkey, 16) == IBV_WC_SUCCESS && buf[2 * 4096 - 8] == 0xc3 &&
            buf[2 * 4096 + 7] == 0xc3 && buf[2 * 4096 + 8] == 0x11,
        "a WRITE through a region reaching above, after the first went, lands in the program's memory");
  CHECK(write_through(&a, buf + 4096 + 100, above->rkey, 16) == IBV_WC_REM_ACCESS_ERR,
        "a region reaches only its own bytes, not the pages it shares");
  CHECK(!ibv_dereg_mr(below) && !ibv_dereg_mr(above) && buf[100] == 0xb2 && buf[4096] == 0xa1 && buf[2 * 4096] == 0xc3 &&
            buf[3 * 4096] == 0x11,
        "when the last region goes the memory keeps every byte written");
  /* Memory that is not the program's own private, writable memory is refused, not detached. */
  uint8_t *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uint8_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  uint8_t *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  munmap(gone, 4096);
  errno = 0;
  CHECK(!ibv_reg_mr(pd, ro, 64, 0) && errno == EOPNOTSUPP, "a region over a read-only page: EOPNOTSUPP, the page kept");
  errno = 0;
  CHECK(!ibv_reg_mr(pd, shared, 64, rw) && errno == EOPNOTSUPP, "a region over a shared mapping: EOPNOTSUPP");
  errno = 0;
  CHECK(!ibv_reg_mr(pd, gone, 64, rw) && errno == EFAULT, "a region over memory that is not mapped: EFAULT");
  munmap(ro, 4096);
  munmap(shared, 4096);
  uint8_t *gap = aligned_alloc(4096, 3 * 4096);
  struct ibv_mr *p0 = ibv_reg_mr(pd, gap, 4096, rw), *p2 = ibv_reg_mr(pd, gap + 2 * 4096, 4096, rw);
  errno = 0;
  CHECK(p0 && p2 && !ibv_reg_mr(pd, gap, 3 * 4096, rw) && errno == EOPNOTSUPP,
        "a region that would join two runs of registered pages: EOPNOTSUPP, with a line");
  if (ibv_dereg_mr(p0) || ibv_dereg_mr(p2)) fail("dereg_mr");
  free(gap);
  free(buf);
  free_side(&a);
  free_side(&b);
}

int main(int argc, char **argv) {
  /* "router": the tenant's QPs take the router path, which waits out a gone peer's retries. */
  int router_path = argc > 1 && !strcmp(argv[1], "router");
  int n;
  struct ibv_device **list = ibv_get_device_list(&n);
  CHECK(list && n == 1 && !strcmp(ibv_get_device_name(list[0]), "vrdma0"), "one device, vrdma0");
  struct ibv_context *ctx = ibv_open_device(list[0]);
  if (!ctx) fail("open_device");
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  if (!pd) fail("alloc_pd");
  struct side a, b;
  make_pair(ctx, pd, &a, &b);
  CHECK(a.qp->qp_num < (1u << 24) && b.qp->qp_num < (1u << 24), "QP numbers fit 24 bits");

  /* The ibv_wr_* path: a WRITE from a's buffer and an inline SEND into b's posted receive. */
  struct ibv_sge rsge = {(uintptr_t)b.buf + 8192, 64, b.mr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 77, .sg_list = &rsge, .num_sge = 1}, *rbad;
  if (ibv_post_recv(b.qp, &rwr, &rbad)) fail("post_recv");
  for (int i = 0; i < 4096; ++i) a.buf[i] = (uint8_t)(i * 7 + 1);
  struct ibv_qp_ex *x = ibv_qp_to_qp_ex(a.qp);
  ibv_wr_start(x);
  x->wr_id = 1;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf);
  ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 4096);
  x->wr_id = 2;
  ibv_wr_send(x);
  ibv_wr_set_inline_data(x, "inline hello", 13);
  if (ibv_wr_complete(x)) fail("wr_complete");
  struct ibv_wc wc = wait_one(a.cq);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 && wc.opcode == IBV_WC_RDMA_WRITE, "wr_* WRITE completes");
  wc = wait_one(a.cq);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 && wc.opcode == IBV_WC_SEND, "wr_* inline SEND completes");
  CHECK(!memcmp(a.buf, b.buf, 4096), "the WRITE's bytes landed at the remote address");
  wc = wait_one(b.cq);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 77 && wc.opcode == IBV_WC_RECV && wc.byte_len == 13 &&
            !strcmp((char *)b.buf + 8192, "inline hello"),
        "the SEND filled the posted receive");

  /* A batch with an op vrdma does not carry out posts nothing. */
  ibv_wr_start(x);
  x->wr_id = 3;
  ibv_wr_local_inv(x, 1234);
  CHECK(ibv_wr_complete(x) == EOPNOTSUPP, "wr_local_inv: EOPNOTSUPP");

  /* Atomics through ibv_post_send: fetch-add returns the old value and adds. */
  uint64_t *target = (uint64_t *)(b.buf + 16384);
  *target = 40;
  struct ibv_sge asge = {(uintptr_t)a.buf + 16384, 8, a.mr->lkey};
  struct ibv_send_wr swr = {0}, *sbad;
  swr.wr_id = 4;
  swr.sg_list = &asge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  swr.send_flags = IBV_SEND_SIGNALED;
  swr.wr.atomic.remote_addr = (uintptr_t)target;
  swr.wr.atomic.rkey = b.mr->rkey;
  swr.wr.atomic.compare_add = 2;
  if (ibv_post_send(a.qp, &swr, &sbad)) fail("post_send fetch-add");
  wc = wait_one(a.cq);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD && *(uint64_t *)(a.buf + 16384) == 40 &&
            *target == 42,
        "fetch-add returns 40 and leaves 42");

  /* A READ with a key the peer never gave: a remote access error, and the QP goes to error. */
  swr.wr_id = 5;
  swr.opcode = IBV_WR_RDMA_READ;
  swr.wr.rdma.remote_addr = (uintptr_t)b.buf;
  swr.wr.rdma.rkey = b.mr->rkey ^ 0x5a5a5a5a;
  asge.length = 64;
  if (ibv_post_send(a.qp, &swr, &sbad)) fail("post_send READ");
  wc = wait_one(a.cq);
  CHECK(wc.status == IBV_WC_REM_ACCESS_ERR && wc.wr_id == 5, "a wrong rkey: IBV_WC_REM_ACCESS_ERR");

  /* What vrdma does not offer fails cleanly. */
  check_ud(ctx, pd);
  check_uc(ctx, pd, b.buf, b.mr->rkey);
  struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1, .oflags = O_CREAT};
  errno = 0;
  CHECK(!ibv_open_xrcd(ctx, &xa) && errno == EOPNOTSUPP, "an XRC domain: EOPNOTSUPP");
  union ibv_gid g = {0};
  CHECK(ibv_attach_mcast(a.qp, &g, 0) == EOPNOTSUPP, "attach_mcast: EOPNOTSUPP");
  struct ibv_cq_init_attr_ex cqa = {.cqe = 4, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP};
  errno = 0;
  CHECK(!ibv_create_cq_ex(ctx, &cqa) && errno == EOPNOTSUPP, "create_cq_ex asking for timestamps: EOPNOTSUPP");

  check_overlapping_regions(ctx, pd);
  check_cq_ex_and_eight_sges(ctx, pd);
  check_srq(ctx, pd);
  check_peer_gone(ctx, pd, router_path);
  check_arrivals_before_flush(ctx, pd);

  if (ibv_destroy_qp(a.qp) || ibv_destroy_qp(b.qp)) fail("destroy_qp");
  if (ibv_dereg_mr(a.mr) || ibv_dereg_mr(b.mr)) fail("dereg_mr");
  if (ibv_destroy_cq(a.cq) || ibv_destroy_cq(b.cq)) fail("destroy_cq");
  if (ibv_dealloc_pd(pd) || ibv_close_device(ctx)) fail("teardown");
  ibv_free_device_list(list);
  printf("all checks passed\n");
  return 0;
}
