/* Datagram (UD) QPs on libvrdma's C API, for the e2e tests: who may reach whom.
 *
 *   vrdma_datagram SOCKET listen FILE SECONDS  makes a datagram QP with Q_Key 0x1234 and 64
 *                                              receives, writes "QPN" and its router's address
 *                                              (IP bytes in hex, port) to FILE, takes datagrams
 *                                              for SECONDS and prints "received N" and, for each
 *                                              sender QP, "from QPN"
 *   vrdma_datagram SOCKET send FILE N [BYTES]  sends N datagrams of 64 B (or BYTES) to the QP in FILE with
 *                                              its Q_Key, N with another Q_Key and N to the next
 *                                              QP number (through an address handle when FILE
 *                                              names another router), each after the one before
 *                                              completed; prints "from QPN", "sent ok=A
 *                                              failed=B" and the microseconds from post to
 *                                              completion: "p50_us=X p99_us=Y worst_us=Z"
 *   vrdma_datagram SOCKET rc-to FILE 0         connects an RC QP to the datagram QP in FILE (at
 *                                              its router, on this host or another); prints
 *                                              "connect errno=E" (0: it connected)
 *
 * Exit 0 unless the API itself misbehaved.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vrdma/vrdma.h>

enum { kQkey = 0x1234, kSlots = 64, kSlot = VRDMA_GRH_BYTES + 64 };

static int die(const char* what) {
  fprintf(stderr, "vrdma_datagram: %s: %s\n", what, vrdma_last_error());
  return 1;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static struct vrdma_qp* datagram_qp(struct vrdma_pd* pd, struct vrdma_cq* cq) {
  struct vrdma_qp_init_attr at = {cq, cq, kSlots, kSlots, 64, 1, VRDMA_QP_DATAGRAM, NULL};
  struct vrdma_qp* qp = vrdma_create_qp(pd, &at);
  if (qp && vrdma_ud_ready(qp, kQkey)) return NULL;
  return qp;
}

static int post_recv(struct vrdma_qp* qp, struct vrdma_mr* mr, int slot) {
  struct vrdma_sge sge = {(uint64_t)(uintptr_t)mr->addr + (uint64_t)slot * kSlot, kSlot, mr->lkey};
  struct vrdma_recv_wr wr = {(uint64_t)slot, NULL, &sge, 1};
  struct vrdma_recv_wr* bad;
  return vrdma_post_recv(qp, &wr, &bad);
}

static int listen_for(struct vrdma_context* ctx, struct vrdma_pd* pd, struct vrdma_cq* cq, const char* file,
                      double seconds) {
  struct vrdma_mr* mr = vrdma_alloc_mr(pd, kSlots * kSlot, VRDMA_ACCESS_LOCAL_WRITE);
  struct vrdma_qp* qp = mr ? datagram_qp(pd, cq) : NULL;
  if (!qp) return die("listen setup");
  for (int i = 0; i < kSlots; ++i)
    if (post_recv(qp, mr, i)) return die("post_recv");
  FILE* f = fopen(file, "w");
  if (!f) return 1;
  struct vrdma_router_address at;
  vrdma_query_router(ctx, &at);
  fprintf(f, "%u %u ", vrdma_qp_num(qp), (unsigned)at.port);
  for (int i = 0; i < 16; ++i) fprintf(f, "%02x", at.ip[i]);
  fprintf(f, "\n");
  fclose(f);
  long received = 0;
  uint32_t senders[16];
  int nsenders = 0;
  for (double end = now_s() + seconds; now_s() < end;) {
    struct vrdma_wc wc[16];
    int n = vrdma_poll_cq(cq, 16, wc);
    if (n < 0) return die("poll_cq");
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != VRDMA_WC_SUCCESS || !(wc[i].wc_flags & VRDMA_WC_GRH)) continue;
      ++received;
      int known = 0;
      for (int k = 0; k < nsenders; ++k) known |= senders[k] == wc[i].src_qp;
      if (!known && nsenders < 16) senders[nsenders++] = wc[i].src_qp;
      if (post_recv(qp, mr, (int)wc[i].wr_id)) return die("post_recv");
    }
  }
  printf("received %ld\n", received);
  for (int k = 0; k < nsenders; ++k) printf("from %u\n", senders[k]);
  return 0;
}

/* The datagram QP and router a listener wrote to FILE. */
static int read_listener(const char* file, unsigned* qpn, struct vrdma_router_address* at) {
  unsigned port = 0;
  char hex[33] = {0};
  FILE* f = fopen(file, "r");
  if (!f || fscanf(f, "%u %u %32s", qpn, &port, hex) != 3) return -1;
  fclose(f);
  memset(at, 0, sizeof *at);
  at->port = (uint16_t)port;
  for (int i = 0; i < 16; ++i) sscanf(hex + 2 * i, "%2hhx", &at->ip[i]);
  return 0;
}

static int rc_to(struct vrdma_pd* pd, struct vrdma_cq* cq, const char* file) {
  unsigned qpn;
  struct vrdma_router_address at;
  if (read_listener(file, &qpn, &at)) return 1;
  struct vrdma_qp_init_attr attr = {cq, cq, 4, 4, 0, 1, 0, NULL};
  struct vrdma_qp* qp = vrdma_create_qp(pd, &attr);
  if (!qp) return die("create_qp");
  int r = vrdma_connect_qp_at(qp, &at, qpn);
  printf("connect errno=%d\n", r < 0 ? -r : 0);
  return 0;
}

static int send_to(struct vrdma_context* ctx, struct vrdma_pd* pd, struct vrdma_cq* cq, const char* file, long n,
                   uint32_t bytes) {
  unsigned qpn = 0;
  struct vrdma_router_address there, here;
  if (read_listener(file, &qpn, &there)) return 1;
  vrdma_query_router(ctx, &here);
  struct vrdma_ah* ah = NULL;  /* another host's router: an address handle of it */
  if ((here.port != there.port || memcmp(here.ip, there.ip, 16)) && !(ah = vrdma_create_ah(pd, &there)))
    return die("create_ah");
  struct vrdma_mr* mr = vrdma_alloc_mr(pd, VRDMA_UD_MTU, VRDMA_ACCESS_LOCAL_WRITE);
  struct vrdma_qp* qp = mr ? datagram_qp(pd, cq) : NULL;
  if (!qp) return die("send setup");
  printf("from %u\n", vrdma_qp_num(qp));
  long ok = 0, failed = 0, sent = 0;
  double* took_us = malloc(sizeof(double) * (size_t)(3 * n + 1));
  if (!took_us) return die("memory");
  struct { uint32_t qpn, qkey; } to[3] = {{qpn, kQkey}, {qpn, kQkey + 1}, {(qpn + 1) & 0xffffff, kQkey}};
  for (int kind = 0; kind < 3; ++kind) {
    for (long i = 0; i < n; ++i) {
      struct vrdma_sge sge = {(uint64_t)(uintptr_t)mr->addr, bytes, mr->lkey};
      struct vrdma_send_wr wr = {0};
      wr.wr_id = (uint64_t)i;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = VRDMA_WR_SEND;
      wr.send_flags = VRDMA_SEND_SIGNALED;
      wr.remote_qpn = to[kind].qpn;
      wr.remote_qkey = to[kind].qkey;
      wr.remote_ah = ah;
      struct vrdma_send_wr* bad;
      double posted = now_s();
      if (vrdma_post_send(qp, &wr, &bad)) return die("post_send");
      struct vrdma_wc wc;
      int got;
      while ((got = vrdma_poll_cq(cq, 1, &wc)) == 0) {
      }
      if (got < 0) return die("poll_cq");
      took_us[sent++] = (now_s() - posted) * 1e6;
      wc.status == VRDMA_WC_SUCCESS ? ++ok : ++failed;
    }
  }
  printf("sent ok=%ld failed=%ld\n", ok, failed);
  if (sent) {
    qsort(took_us, (size_t)sent, sizeof(double), by_value);
    printf("p50_us=%.1f p99_us=%.1f worst_us=%.1f\n", took_us[sent / 2], took_us[sent * 99 / 100], took_us[sent - 1]);
  }
  free(took_us);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: vrdma_datagram SOCKET listen FILE SECONDS | SOCKET send FILE N\n");
    return 2;
  }
  struct vrdma_context* ctx = vrdma_open(argv[1]);
  if (!ctx) return die("open");
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(ctx, 256) : NULL;
  if (!cq) return die("setup");
  int rc = strcmp(argv[2], "listen") == 0  ? listen_for(ctx, pd, cq, argv[3], atof(argv[4]))
           : strcmp(argv[2], "rc-to") == 0 ? rc_to(pd, cq, argv[3])
                                           : send_to(ctx, pd, cq, argv[3], atol(argv[4]),
                                                     argc > 5 ? (uint32_t)atoi(argv[5]) : 64);
  vrdma_close(ctx);
  return rc;
}
