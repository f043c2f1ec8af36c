/* A hostile or buggy tenant of vrdmad, for the e2e security tests: each mode does one thing the
 * router must survive, and prints what came of it, one "key=value ..." line. Written against
 * the public C header; the ring scribbles find the QP's memory the way any process can, in
 * /proc/self/maps.
 *
 *   vrdma_hostile SOCKET qp-churn N [FILE] create and destroy N QPs (waiting out EAGAIN, the
 *                                          router's pace): "issued=N distinct=D"; FILE gets
 *                                          the numbers, one a line
 *   vrdma_hostile SOCKET reg BYTES         one region: "reg errno=E ms=T"
 *   vrdma_hostile SOCKET mr-churn N BYTES  N register/deregister cycles: "cycles=N failed=F errno=E"
 *   vrdma_hostile SOCKET bad-opcode        a router-path request with opcode 99 written into the
 *                                          send ring, then a good WRITE: "status=S next=S2"
 *   vrdma_hostile SOCKET huge-write        a router-path WRITE of 4 GiB + 4 KiB (two SGEs over
 *                                          one 2 GiB region): "status=S ms=T"
 *   vrdma_hostile SOCKET big-writes N BYTES  N router-path WRITEs of BYTES each, posted at once:
 *                                          "ok=N ms=T"
 *   vrdma_hostile SOCKET touch-and-free BYTES  a region of BYTES touched page by page, then its
 *                                          view unmapped (the router's mapping is the last) and
 *                                          deregistered: "freed errno=E"
 *   vrdma_hostile SOCKET srq-mix           two 4 MiB SENDs at once to two QPs of one SRQ (each
 *                                          takes several turns): "mixed=M" receives holding both
 *   vrdma_hostile SOCKET bell SECONDS      write-imm floods with both CQ eventfds full, made
 *                                          blocking again and again and the QPs' armed flags
 *                                          kept set: "posted=N"
 *   vrdma_hostile SOCKET flood SECONDS     router-path WRITEs posted as fast as they complete for
 *                                          SECONDS (a throttled tenant): "ops=N"
 *   vrdma_hostile SOCKET stuck SECONDS     router-path WRITEs to a QP that never connects back, left
 *                                          waiting for SECONDS: "posted=N"
 *   vrdma_hostile SOCKET connect-nowhere PORT N  N QPs each connected to a QP of a router said to
 *                                          listen at 127.0.0.1:PORT+i, where nothing does:
 *                                          "failed=F worst_ms=W errno=E"
 *   vrdma_hostile SOCKET hold N SECONDS    up to N regions of 4 KiB, registered and held for SECONDS:
 *                                          "held=K errno=E" (E: why the K+1st failed, 0 if none)
 *                                          printed as soon as they are held
 *   vrdma_hostile SOCKET stray-send        direct-path QPs: Z connected to X while X was free, then X
 *                                          and Y to each other; X posts one receive, Z SENDs to X, then Y does:
 *                                          "stray=S real=S2 len=L" (the statuses of Z's and of X's
 *                                          receive, and its byte count)
 *   vrdma_hostile SOCKET withdrawn         two router-path QPs A -> B; B's header says every receive
 *                                          was withdrawn and its receive ring claims 2^62 of them;
 *                                          A SENDs once: "status=S" (S -1: no completion in 3 s)
 *   vrdma_hostile SOCKET withdrawn-many PAIRS SECONDS  as withdrawn, with PAIRS pairs whose
 *                                          receivers have 65,536-slot rings, each sender keeping
 *                                          one SEND waiting for SECONDS: "sends=N"
 *   vrdma_hostile SOCKET many-regions PAIRS REGIONS SECONDS  REGIONS regions of 4 KiB, then PAIRS
 *                                          router-path pairs each keeping 32 1-byte WRITEs in
 *                                          flight to its own region: "ops=N"
 *   vrdma_hostile SOCKET qp-memory COUNT    COUNT QPs of 65,536 receives each (about 11 MiB of
 *                                          memory apiece): "made=N errno=E" (E 0: all made)
 *   vrdma_hostile SOCKET remote-keys SOCKET_B SECONDS  a QP here connected to one at the router
 *                                          of SOCKET_B (another host's), WRITEs each naming a new
 *                                          rkey for SECONDS (or until SIGUSR1): "ops=N
 *                                          refused=F other_status=S worst_gap_ms=G" (F: remote access
 *                                          errors; S: the first other status, 0 if none; G: the
 *                                          longest wait for a completion)
 *   vrdma_hostile SOCKET ud-flood SOCKET_B QPS BYTES SECONDS  QPS datagram QPs here, each keeping
 *                                          200 SENDs of BYTES in flight through an address handle of
 *                                          SOCKET_B's router (another host's), to QP numbers at random
 *                                          there, for SECONDS (or until SIGUSR1); it naps 200 us when
 *                                          nothing completed, so its own CPU is not what others wait
 *                                          for: "posted=N done=D failed=F"
 *   vrdma_hostile SOCKET wide PAIRS BYTES SECONDS  PAIRS router-path pairs, each QP keeping one
 *                                          WRITE of BYTES in flight for SECONDS (one region apiece
 *                                          for all): "pairs=P" once made, then "ops=N"
 *   vrdma_hostile SOCKET wide-remote SOCKET_B PAIRS BYTES DEPTH SECONDS [fadd]  PAIRS QPs here,
 *                                          each connected to one at the router of SOCKET_B
 *                                          (another host's), each keeping DEPTH WRITEs of BYTES
 *                                          (or fetch-adds) in flight for SECONDS: "pairs=P" once
 *                                          made, then "ops=N"
 *   vrdma_hostile SOCKET tenants-remote SOCKET_B FIRST_UID TENANTS BYTES SECONDS  (as root) TENANTS
 *                                          tenants, uids FIRST_UID on (the connections are made
 *                                          under each uid in turn), each with a QP here connected
 *                                          to one at SOCKET_B's router keeping a WRITE of BYTES in
 *                                          flight for SECONDS: "tenants=T" once made, then "ops=N
 *                                          failed=F"
 *   vrdma_hostile SOCKET abandon-sends SOCKET_B PAIRS BYTES  PAIRS QPs here, each connected to
 *                                          one at SOCKET_B's router with a receive of BYTES posted
 *                                          there; on each in turn a SEND of BYTES, and its QP
 *                                          destroyed 30 ms later: "pairs=P" once made, "sent=P"
 *   vrdma_hostile SOCKET rnr-sends SOCKET_B PAIRS SENDS BYTES  PAIRS QPs here, each connected to
 *                                          one at SOCKET_B's router with ONE receive of BYTES posted
 *                                          there; SENDS SENDs of BYTES posted on each at once, all
 *                                          answered within 30 s: "success=S rnr=R flushed=F other=O
 *                                          received=V ms=T" (O: any other status; V: the receives
 *                                          that completed; T: until the last answer), then the first
 *                                          QP recovered and one more receive and SEND on it:
 *                                          "recovered=S" (its status, -1: none in 5 s)
 *   vrdma_hostile SOCKET pinned-dereg SOCKET_B BYTES  a QP here connected to one at SOCKET_B's
 *                                          router; "ready", then after a line on stdin (SOCKET_B's
 *                                          router stopped meanwhile) a SEND of BYTES from a region
 *                                          of BYTES, deregistered at once, and a new region of BYTES
 *                                          tried every 100 ms: "again_ms=T errno=E" (T: when one
 *                                          was had, -1: not in 15 s; E: why the first try failed);
 *                                          exits after another line
 *   vrdma_hostile SOCKET fail-then-sends SOCKET_B KIND  a QP here connected to one at SOCKET_B's
 *                                          router with 4 receives posted there; posted at once: a
 *                                          1 MiB WRITE, a request that fails (KIND badlkey: a local
 *                                          key that is no region's; oob: a WRITE past the target
 *                                          region; atomic: a misaligned fetch-add, which fails at
 *                                          the target), then 3 SENDs: "statuses=S0,S1,S2,S3,S4
 *                                          received=R" (R: receives that completed with success)
 *   vrdma_hostile SOCKET epoch-wrap SOCKET_B N  a QP here connected to one at SOCKET_B's router: a
 *                                          misaligned fetch-add (fails at the target), then N
 *                                          requests with a bad local key (fail here), the QP
 *                                          recovered after each failure, then a SEND to a posted
 *                                          receive: "send=S received=R" (S its status)
 *   vrdma_hostile SOCKET withdraw-race SOCKET_B FLAGS DELAY_US  a QP here (FLAGS: its and its peer's
 *                                          vrdma_qp_flags; the sender stays ready after a failure)
 *                                          connected to one at SOCKET_B's router (may be SOCKET);
 *                                          10 times: 64 receives of 16 KiB there, 64 SENDs of
 *                                          12,000 B, the receives withdrawn DELAY_US later:
 *                                          "written=W recv_ok=R send_ok=S" (W: receives completed
 *                                          flushed whose buffer got bytes, 300 ms on)
 *   vrdma_hostile SOCKET remote-ping SOCKET_B SECONDS  the well-behaved tenant across hosts: a QP
 *                                          here connected to one at SOCKET_B's router, a 64 B
 *                                          WRITE every millisecond, timed: "rounds=N failed=F
 *                                          worst_ms=W" (F: requests that failed or took 10 s)
 *   vrdma_hostile SOCKET held-kick FILE SECONDS  two router-path QPs whose kick eventfds (the
 *                                          router's, passed to this process) an epoll set watches
 *                                          while a thread holds the set's lock (its epoll_wait
 *                                          copies a ready event into a page of FILE, which faults
 *                                          on a READ never answered); this process closes its
 *                                          copies, prints "armed", and destroys the QPs: the
 *                                          router's close of each kick is the last; waits SECONDS
 *   vrdma_hostile SOCKET ping SECONDS      the well-behaved tenant: every millisecond a new
 *                                          connection, a PD and a router-path WRITE, timed:
 *                                          "rounds=N failed=F worst_ms=W"
 *
 * Exit 0 when the mode ran (whatever the router answered), 1 when the API misbehaved.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <vrdma/vrdma.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int die(const char* what) {
  fprintf(stderr, "vrdma_hostile: %s: %s\n", what, vrdma_last_error());
  return 1;
}

static int cmp_u32(const void* a, const void* b) {
  uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
  return x < y ? -1 : x > y;
}

static int qp_churn(struct vrdma_context* ctx, long n, const char* file) {
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(ctx, 16) : NULL;
  if (!cq) return die("setup");
  uint32_t* nums = calloc((size_t)n, sizeof *nums);
  struct vrdma_qp_init_attr at = {cq, cq, 4, 4, 0, 0, 0, NULL};
  for (long i = 0; i < n; ++i) {
    struct vrdma_qp* qp = vrdma_create_qp(pd, &at);
    if (!qp && errno == EAGAIN) {  /* faster than the router paces QP numbers */
      usleep(1000);
      --i;
      continue;
    }
    if (!qp) return die("create_qp");
    nums[i] = vrdma_qp_num(qp);
    vrdma_destroy_qp(qp);
  }
  FILE* out = file ? fopen(file, "w") : NULL;
  for (long i = 0; out && i < n; ++i) fprintf(out, "%x\n", nums[i]);
  if (out) fclose(out);
  qsort(nums, (size_t)n, sizeof *nums, cmp_u32);
  long distinct = n > 0;
  for (long i = 1; i < n; ++i) distinct += nums[i] != nums[i - 1];
  printf("issued=%ld distinct=%ld\n", n, distinct);
  return 0;
}

static int reg(struct vrdma_context* ctx, size_t bytes) {
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  if (!pd) return die("pd");
  double t0 = now_ms();
  struct vrdma_mr* mr = vrdma_alloc_mr(pd, bytes, VRDMA_ACCESS_LOCAL_WRITE);
  printf("reg errno=%d ms=%.1f why=%s\n", mr ? 0 : errno, now_ms() - t0, mr ? "" : vrdma_last_error());
  return 0;
}

static int mr_churn(struct vrdma_context* ctx, long n, size_t bytes) {
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  if (!pd) return die("pd");
  long failed = 0;
  int last = 0;
  for (long i = 0; i < n; ++i) {
    struct vrdma_mr* mr = vrdma_alloc_mr(pd, bytes, VRDMA_ACCESS_LOCAL_WRITE);
    if (!mr) {
      ++failed;
      last = errno;
      continue;
    }
    vrdma_dereg_mr(mr);
  }
  printf("cycles=%ld failed=%ld errno=%d\n", n, failed, last);
  return 0;
}

struct pair {
  struct vrdma_pd* pd;
  struct vrdma_cq* cq;
  struct vrdma_qp *a, *b;
};

/* Two router-path QPs of this process connected to each other. */
/* Connects `first` to `second`, then `second` to `first`: 0, or -1 with vrdma_last_error() set. */
static int connect_both(struct vrdma_qp* first, struct vrdma_qp* second) {
  unsigned char af[VRDMA_ADDRESS_BYTES], as[VRDMA_ADDRESS_BYTES];
  vrdma_qp_address(first, af, sizeof af);
  vrdma_qp_address(second, as, sizeof as);
  return vrdma_connect_qp(first, as, sizeof as) || vrdma_connect_qp(second, af, sizeof af) ? -1 : 0;
}

static int router_pair(struct vrdma_context* ctx, struct pair* p, uint32_t depth) {
  p->pd = vrdma_alloc_pd(ctx);
  p->cq = p->pd ? vrdma_create_cq(ctx, (int)depth * 2) : NULL;
  if (!p->cq) return -1;
  struct vrdma_qp_init_attr at = {p->cq, p->cq, depth, depth, 0, 0, VRDMA_QP_ROUTER_PATH, NULL};
  p->a = vrdma_create_qp(p->pd, &at);
  p->b = vrdma_create_qp(p->pd, &at);
  if (!p->a || !p->b) return -1;
  return connect_both(p->a, p->b);
}

static int wait_one(struct vrdma_cq* cq, struct vrdma_wc* wc) {
  double until = now_ms() + 10000;
  while (now_ms() < until) {
    int n = vrdma_poll_cq(cq, 1, wc);
    if (n < 0) return -1;
    if (n == 1) return 0;
  }
  return -1;
}

/* A signaled WRITE of `sge` (n of them) into `dst`. */
static int post_write_sges(struct vrdma_qp* qp, struct vrdma_sge* sge, int n, struct vrdma_mr* dst, uint64_t id) {
  struct vrdma_send_wr wr = {0};
  wr.wr_id = id;
  wr.sg_list = sge;
  wr.num_sge = n;
  wr.opcode = VRDMA_WR_RDMA_WRITE;
  wr.send_flags = VRDMA_SEND_SIGNALED;
  wr.remote_addr = (uint64_t)(uintptr_t)dst->addr;
  wr.rkey = dst->rkey;
  struct vrdma_send_wr* bad = NULL;
  return vrdma_post_send(qp, &wr, &bad);
}

static int post_write(struct vrdma_qp* qp, struct vrdma_mr* src, struct vrdma_mr* dst, uint32_t len, uint64_t id) {
  struct vrdma_sge sge = {(uint64_t)(uintptr_t)src->addr, len, src->lkey};
  return post_write_sges(qp, &sge, 1, dst, id);
}

/* The send ring, laid out as src/vrdma/proto/qp_layout.hh and src/core/spsc_ring.hh say, of the
 * QP memory in this process whose ring has had `pushed` requests: what an owner may scribble on. */
struct ring {
  volatile uint64_t *head, *tail;
  uint8_t* slots;
  uint64_t capacity, slot;
};

static int find_send_ring(struct ring* r, uint64_t pushed) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  int found = -1;
  while (f && found && fgets(line, sizeof line, f)) {
    if (!strstr(line, "memfd:vrdma-qp")) continue;
    uint8_t* base = (uint8_t*)(uintptr_t)strtoull(line, NULL, 16);
    uint64_t send_off;
    memcpy(&send_off, base + 64, 8); /* QpHeader.send_ring_off */
    uint8_t* ring = base + send_off;
    uint32_t slot_size;
    memcpy(&slot_size, ring + 8, 4);
    memcpy(&r->capacity, ring + 16, 8);
    r->slot = slot_size;
    r->head = (volatile uint64_t*)(ring + 64);
    r->tail = (volatile uint64_t*)(ring + 128);
    r->slots = ring + 192;
    if (*r->tail == pushed) found = 0;
  }
  if (f) fclose(f);
  return found;
}

static int bad_opcode(struct vrdma_context* ctx) {
  struct pair p;
  if (router_pair(ctx, &p, 16)) return die("pair");
  struct vrdma_mr* mr = vrdma_alloc_mr(p.pd, 4096, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE |
                                                        VRDMA_ACCESS_REMOTE_ATOMIC);
  if (!mr) return die("mr");
  /* One good WRITE on A first: A's ring is then the one that has had a request. */
  struct vrdma_wc w0, w1, w2;
  if (post_write(p.a, mr, mr, 64, 76) || wait_one(p.cq, &w0)) return die("first write");
  struct ring r;
  if (find_send_ring(&r, 1)) return die("no QP memory in /proc/self/maps");
  uint64_t t = *r.tail;
  uint8_t* e = r.slots + (t & (r.capacity - 1)) * r.slot;
  memset(e, 0, r.slot);
  uint64_t wr_id = 77;
  memcpy(e, &wr_id, 8);
  /* Laid out as a compare-and-swap on our own region would be, but with opcode 99, none of
   * vrdma's: a router that took it for an atomic would carry it out. */
  uint64_t remote = (uint64_t)(uintptr_t)mr->addr + 8, local = (uint64_t)(uintptr_t)mr->addr + 16;
  uint32_t rkey = mr->rkey, lkey = mr->lkey, nsge = 1, len = 8;
  memcpy(e + 8, &remote, 8);  /* remote_addr */
  memcpy(e + 32, &rkey, 4);   /* rkey */
  memcpy(e + 40, &nsge, 4);   /* nsge */
  e[44] = 99;                 /* opcode */
  e[45] = 1;                  /* signaled */
  memcpy(e + 48, &local, 8);  /* sge[0] */
  memcpy(e + 56, &len, 4);
  memcpy(e + 60, &lkey, 4);
  __atomic_store_n(r.tail, t + 1, __ATOMIC_RELEASE);
  if (post_write(p.a, mr, mr, 64, 78)) return die("post_send");
  if (wait_one(p.cq, &w1) || wait_one(p.cq, &w2)) return die("no completion");
  printf("status=%d next=%d wr_id=%llu\n", w1.status, w2.status, (unsigned long long)w1.wr_id);
  return 0;
}

/* One store: the send ring's tail 2^63 past its head, so the ring claims more requests than it
 * holds, and a kick; then `seconds` taking whatever completions come, a millisecond apart (the
 * router must not carry out requests that are not there). */
static int ring_tail(struct vrdma_context* ctx, double seconds) {
  struct pair p;
  if (router_pair(ctx, &p, 16)) return die("pair");
  struct vrdma_mr* mr = vrdma_alloc_mr(p.pd, 4096, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE);
  struct vrdma_wc w0;
  if (!mr || post_write(p.a, mr, mr, 64, 1) || wait_one(p.cq, &w0)) return die("first write");
  struct ring r;
  if (find_send_ring(&r, 1)) return die("no QP memory in /proc/self/maps");
  __atomic_store_n(r.tail, *r.head + (1ull << 63), __ATOMIC_RELEASE);
  post_write(p.a, mr, mr, 64, 2); /* a post kicks the router (the ring looks full: it may be refused) */
  long completions = 0;
  for (long ms = 0; ms < (long)(seconds * 1000); ++ms) {
    struct vrdma_wc wc[16];
    int n = vrdma_poll_cq(p.cq, 16, wc);
    completions += n > 0 ? n : 0;
    usleep(1000);
  }
  printf("completions=%ld\n", completions);
  return 0;
}

/* A READ (opcode 4) or fetch-add (6) written into the send ring with inline bytes and no local
 * buffer, against our own region's first 8 bytes (0). Prints its status and what the target
 * holds afterwards. */
static int inline_op(struct vrdma_context* ctx, int opcode) {
  struct pair p;
  if (router_pair(ctx, &p, 16)) return die("pair");
  struct vrdma_mr* mr = vrdma_alloc_mr(p.pd, 4096, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE |
                                                        VRDMA_ACCESS_REMOTE_READ | VRDMA_ACCESS_REMOTE_ATOMIC);
  struct vrdma_wc w0, w1;
  if (!mr || post_write(p.a, mr, mr, 64, 1) || wait_one(p.cq, &w0)) return die("first write");
  memset(mr->addr, 0, 64);
  struct ring r;
  if (find_send_ring(&r, 1)) return die("no QP memory in /proc/self/maps");
  uint64_t t = *r.tail;
  uint8_t* e = r.slots + (t & (r.capacity - 1)) * r.slot;
  memset(e, 0, r.slot);
  uint64_t wr_id = 9, remote = (uint64_t)(uintptr_t)mr->addr, add = 5;
  uint16_t inline_len = 8;
  memcpy(e, &wr_id, 8);
  memcpy(e + 8, &remote, 8);  /* remote_addr */
  memcpy(e + 16, &add, 8);    /* compare_add */
  memcpy(e + 32, &mr->rkey, 4);
  e[44] = (uint8_t)opcode;
  e[45] = 1;                  /* signaled */
  memcpy(e + 46, &inline_len, 2);
  __atomic_store_n(r.tail, t + 1, __ATOMIC_RELEASE);
  if (post_write(p.a, mr, mr, 0, 10)) return die("post_send"); /* kicks the router */
  if (wait_one(p.cq, &w1)) return die("no completion");
  uint64_t now;
  memcpy(&now, mr->addr, 8);
  printf("status=%d wr_id=%llu target=%llu\n", w1.status, (unsigned long long)w1.wr_id, (unsigned long long)now);
  return 0;
}

static int huge_write(struct vrdma_context* ctx) {
  struct pair p;
  if (router_pair(ctx, &p, 16)) return die("pair");
  size_t half = (2ull << 30) + 2048;
  struct vrdma_mr* src = vrdma_alloc_mr(p.pd, half, VRDMA_ACCESS_LOCAL_WRITE);
  struct vrdma_mr* dst = src ? vrdma_alloc_mr(p.pd, 2 * half, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE) : NULL;
  if (!dst) return die("regions");
  struct vrdma_sge sge[2] = {{(uint64_t)(uintptr_t)src->addr, (uint32_t)half, src->lkey},
                             {(uint64_t)(uintptr_t)src->addr, (uint32_t)half, src->lkey}};
  double t0 = now_ms();
  if (post_write_sges(p.a, sge, 2, dst, 1)) return die("post_send");
  struct vrdma_wc w;
  if (wait_one(p.cq, &w)) return die("no completion");
  printf("status=%d ms=%.0f byte_len=%u\n", w.status, now_ms() - t0, w.byte_len);
  return 0;
}

static int big_writes(struct vrdma_context* ctx, int n, size_t bytes) {
  struct pair p;
  if (router_pair(ctx, &p, 64)) return die("pair");
  struct vrdma_mr* src = vrdma_alloc_mr(p.pd, bytes, VRDMA_ACCESS_LOCAL_WRITE);
  struct vrdma_mr* dst = src ? vrdma_alloc_mr(p.pd, bytes, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE) : NULL;
  if (!dst) return die("regions");
  memset(src->addr, 0x5a, bytes);
  double t0 = now_ms();
  for (int i = 0; i < n; ++i)
    if (post_write(p.a, src, dst, (uint32_t)bytes, (uint64_t)i)) return die("post_send");
  int ok = 0;
  for (int i = 0; i < n; ++i) {
    struct vrdma_wc w;
    if (wait_one(p.cq, &w)) return die("no completion");
    ok += w.status == VRDMA_WC_SUCCESS;
  }
  printf("ok=%d ms=%.0f\n", ok, now_ms() - t0);
  return 0;
}

static int touch_and_free(struct vrdma_context* ctx, size_t bytes) {
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_mr* mr = pd ? vrdma_alloc_mr(pd, bytes, VRDMA_ACCESS_LOCAL_WRITE) : NULL;
  if (!mr) return die("alloc_mr");
  for (size_t off = 0; off < bytes; off += 4096) ((volatile char*)mr->addr)[off] = 1;
  munmap(mr->addr, bytes);  /* our view goes: the router's mapping is the last */
  int rc = vrdma_dereg_mr(mr);
  printf("freed errno=%d\n", rc ? errno : 0);
  return 0;
}

/* Two router-path pairs whose receiving QPs share one SRQ. */
static int srq_pairs(struct vrdma_pd* pd, struct vrdma_srq* srq, struct vrdma_cq* cq,
                     struct vrdma_qp* senders[2]) {
  for (int i = 0; i < 2; ++i) {
    struct vrdma_qp_init_attr st = {cq, cq, 16, 16, 0, 0, VRDMA_QP_ROUTER_PATH, NULL};
    struct vrdma_qp_init_attr rt = {cq, cq, 16, 16, 0, 0, VRDMA_QP_ROUTER_PATH, srq};
    struct vrdma_qp* s = vrdma_create_qp(pd, &st);
    struct vrdma_qp* r = vrdma_create_qp(pd, &rt);
    if (!s || !r) return -1;
    unsigned char as[VRDMA_ADDRESS_BYTES], ar[VRDMA_ADDRESS_BYTES];
    vrdma_qp_address(s, as, sizeof as);
    vrdma_qp_address(r, ar, sizeof ar);
    if (vrdma_connect_qp(s, ar, sizeof ar) || vrdma_connect_qp(r, as, sizeof as)) return -1;
    senders[i] = s;
  }
  return 0;
}

static int srq_mix(struct vrdma_context* ctx) {
  enum { kMsg = 4 << 20 };
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(ctx, 64) : NULL;
  struct vrdma_srq* srq = cq ? vrdma_create_srq(pd, 16) : NULL;
  struct vrdma_qp* senders[2];
  if (!srq || srq_pairs(pd, srq, cq, senders)) return die("setup");
  struct vrdma_mr* src = vrdma_alloc_mr(pd, 2 * kMsg, VRDMA_ACCESS_LOCAL_WRITE);
  struct vrdma_mr* dst = src ? vrdma_alloc_mr(pd, 2 * kMsg, VRDMA_ACCESS_LOCAL_WRITE) : NULL;
  if (!dst) return die("regions");
  memset(src->addr, 0x11, kMsg);
  memset((char*)src->addr + kMsg, 0x22, kMsg);
  for (int i = 0; i < 2; ++i) {
    struct vrdma_sge s = {(uint64_t)(uintptr_t)dst->addr + (uint64_t)i * kMsg, kMsg, dst->lkey};
    struct vrdma_recv_wr r = {100 + (uint64_t)i, NULL, &s, 1}, *bad;
    if (vrdma_post_srq_recv(srq, &r, &bad)) return die("post_srq_recv");
  }
  for (int i = 0; i < 2; ++i) {
    struct vrdma_sge s = {(uint64_t)(uintptr_t)src->addr + (uint64_t)i * kMsg, kMsg, src->lkey};
    struct vrdma_send_wr w = {0}, *bad;
    w.wr_id = (uint64_t)i;
    w.sg_list = &s;
    w.num_sge = 1;
    w.opcode = VRDMA_WR_SEND;
    w.send_flags = VRDMA_SEND_SIGNALED;
    if (vrdma_post_send(senders[i], &w, &bad)) return die("post_send");
  }
  for (int i = 0; i < 4; ++i) {
    struct vrdma_wc w;
    if (wait_one(cq, &w) || w.status != VRDMA_WC_SUCCESS) return die("completion");
  }
  int mixed = 0;
  for (int i = 0; i < 2; ++i) {
    const unsigned char* b = (const unsigned char*)dst->addr + (size_t)i * kMsg;
    for (size_t k = 1; k < kMsg; ++k)
      if (b[k] != b[0]) {
        ++mixed;
        break;
      }
  }
  printf("mixed=%d\n", mixed);
  return 0;
}

static volatile int bell_stop;
static int bells[2];
static uint8_t* bell_headers[8];
static int nbell_headers;

/* Keeps the doorbells blocking and the QPs armed, as fast as it can. */
static void* bell_spoiler(void* unused) {
  (void)unused;
  while (!bell_stop) {
    for (int i = 0; i < 2; ++i) fcntl(bells[i], F_SETFL, 0);
    for (int i = 0; i < nbell_headers; ++i) {
      __atomic_store_n((uint32_t*)(bell_headers[i] + 56), 1, __ATOMIC_RELAXED); /* armed */
      __atomic_store_n((uint32_t*)(bell_headers[i] + 88), 1, __ATOMIC_RELAXED); /* send_armed */
    }
  }
  return NULL;
}

static int bell(struct vrdma_context* ctx, double seconds) {
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(ctx, 256) : NULL;
  struct vrdma_cq* cq2 = cq ? vrdma_create_cq(ctx, 256) : NULL;
  struct vrdma_mr* mr = cq2 ? vrdma_alloc_mr(pd, 4096, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE) : NULL;
  if (!mr) return die("setup");
  struct vrdma_qp_init_attr at = {cq, cq, 64, 64, 0, 0, VRDMA_QP_ROUTER_PATH, NULL};
  struct vrdma_qp_init_attr bt = {cq2, cq2, 64, 64, 0, 0, VRDMA_QP_ROUTER_PATH | VRDMA_QP_IMM_WITHOUT_RECV, NULL};
  struct vrdma_qp* a = vrdma_create_qp(pd, &at);
  struct vrdma_qp* b = vrdma_create_qp(pd, &bt);
  if (!a || !b) return die("qps");
  if (connect_both(a, b)) return die("connect");
  bells[0] = vrdma_cq_event_fd(cq);
  bells[1] = vrdma_cq_event_fd(cq2);
  for (int i = 0; i < 2; ++i) {
    uint64_t full = 0xfffffffffffffffeull;
    if (write(bells[i], &full, 8) != 8) return die("fill");
  }
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  while (f && nbell_headers < 8 && fgets(line, sizeof line, f))
    if (strstr(line, "memfd:vrdma-qp")) bell_headers[nbell_headers++] = (uint8_t*)(uintptr_t)strtoull(line, NULL, 16);
  if (f) fclose(f);
  pthread_t t;
  pthread_create(&t, NULL, bell_spoiler, NULL);
  long posted = 0;
  double until = now_ms() + seconds * 1000;
  struct vrdma_sge sge = {(uint64_t)(uintptr_t)mr->addr, 8, mr->lkey};
  while (now_ms() < until) {
    for (int k = 0; k < 32; ++k) {
      struct vrdma_send_wr wr = {0}, *bad;
      wr.wr_id = (uint64_t)posted;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = VRDMA_WR_RDMA_WRITE_WITH_IMM;
      wr.send_flags = VRDMA_SEND_SIGNALED;
      wr.remote_addr = sge.addr;
      wr.rkey = mr->rkey;
      if (vrdma_post_send(a, &wr, &bad)) break;
      ++posted;
    }
    struct vrdma_wc w[64];
    while (vrdma_poll_cq(cq, 64, w) > 0) {
    }
    while (vrdma_poll_cq(cq2, 64, w) > 0) {
    }
    usleep(100);
  }
  bell_stop = 1;
  pthread_join(t, NULL);
  printf("posted=%ld\n", posted);
  return 0;
}

static int flood(struct vrdma_context* ctx, double seconds) {
  struct pair p;
  if (router_pair(ctx, &p, 64)) return die("pair");
  struct vrdma_mr* mr = vrdma_alloc_mr(p.pd, 4096, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE);
  if (!mr) return die("mr");
  long ops = 0, out = 0;
  double until = now_ms() + seconds * 1000;
  while (now_ms() < until) {
    while (out < 32 && post_write(p.a, mr, mr, 64, (uint64_t)ops) == 0) ++out;
    struct vrdma_wc w[32];
    int n = vrdma_poll_cq(p.cq, 32, w);
    if (n < 0) return die("poll");
    out -= n;
    ops += n;
    if (n == 0) usleep(200); /* a real program would sleep on its CQ: this one leaves the core alone */
  }
  printf("ops=%ld\n", ops);
  return 0;
}

/* A tenant with many regions keeps the router busy finding them: each WRITE names an rkey. */
static int many_regions(struct vrdma_context* ctx, int pairs, long regions, double seconds) {
  enum { kMaxPairs = 64 };
  if (pairs < 1 || pairs > kMaxPairs) return die("pairs: 1 to 64");
  struct pair p[kMaxPairs];
  struct vrdma_mr* dst[kMaxPairs];
  for (int i = 0; i < pairs; ++i)
    if (router_pair(ctx, &p[i], 64)) return die("pair");
  for (long k = 0; k + pairs < regions; ++k)
    if (!vrdma_alloc_mr(p[0].pd, 4096, VRDMA_ACCESS_LOCAL_WRITE)) return die("filler region");
  for (int i = 0; i < pairs; ++i)
    if (!(dst[i] = vrdma_alloc_mr(p[i].pd, 4096, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE)))
      return die("region");
  long ops = 0, out[kMaxPairs] = {0};
  double until = now_ms() + seconds * 1000;
  while (now_ms() < until) {
    int moved = 0;
    for (int i = 0; i < pairs; ++i) {
      while (out[i] < 32 && post_write(p[i].a, dst[i], dst[i], 1, (uint64_t)ops) == 0) ++out[i];
      struct vrdma_wc w[32];
      int n = vrdma_poll_cq(p[i].cq, 32, w);
      if (n < 0) return die("poll");
      out[i] -= n;
      ops += n;
      moved += n;
    }
    if (!moved) usleep(200);
  }
  printf("ops=%ld\n", ops);
  return 0;
}

static int qp_memory(struct vrdma_context* ctx, long count) {
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(ctx, 16) : NULL;
  if (!cq) return die("setup");
  long made = 0;
  int err = 0;
  for (; made < count; ++made) {
    struct vrdma_qp_init_attr at = {cq, cq, 16, 65536, 0, 0, 0, NULL};
    if (!vrdma_create_qp(pd, &at)) {
      err = errno;
      fprintf(stderr, "%s\n", vrdma_last_error());
      break;
    }
  }
  printf("made=%ld errno=%d\n", made, err);
  return 0;
}

static int stuck(struct vrdma_context* ctx, double seconds) {
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(ctx, 64) : NULL;
  struct vrdma_mr* mr = cq ? vrdma_alloc_mr(pd, 4096, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE) : NULL;
  if (!mr) return die("setup");
  struct vrdma_qp_init_attr at = {cq, cq, 16, 16, 0, 0, VRDMA_QP_ROUTER_PATH, NULL};
  struct vrdma_qp* a = vrdma_create_qp(pd, &at);
  struct vrdma_qp* b = vrdma_create_qp(pd, &at);
  if (!a || !b) return die("qps");
  /* A connects to B; B never connects back: A's requests wait for a peer that never comes. */
  unsigned char ab[VRDMA_ADDRESS_BYTES];
  vrdma_qp_address(b, ab, sizeof ab);
  if (vrdma_connect_qp(a, ab, sizeof ab)) return die("connect");
  long posted = 0;
  for (int i = 0; i < 16 && post_write(a, mr, mr, 64, (uint64_t)i) == 0; ++i) ++posted;
  usleep((useconds_t)(seconds * 1e6));
  printf("posted=%ld\n", posted);
  return 0;
}

static int hold(struct vrdma_context* ctx, long n, double seconds) {
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  if (!pd) return die("pd");
  long held = 0;
  int err = 0;
  for (; held < n; ++held) {
    if (!vrdma_alloc_mr(pd, 4096, VRDMA_ACCESS_LOCAL_WRITE)) {
      err = errno;
      break;
    }
  }
  printf("held=%ld errno=%d\n", held, err);
  fflush(stdout);
  usleep((useconds_t)(seconds * 1e6));
  return 0;
}

/* The first QP memory this process mapped: call it right after the one QP made so far. */
static uint8_t* only_qp_memory(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  uint8_t* p = NULL;
  while (f && !p && fgets(line, sizeof line, f))
    if (strstr(line, "memfd:vrdma-qp")) p = (uint8_t*)(uintptr_t)strtoull(line, NULL, 16);
  if (f) fclose(f);
  return p;
}

/* A signaled SEND of `sge`. */
static struct vrdma_send_wr signaled_send(struct vrdma_sge* sge) {
  struct vrdma_send_wr wr = {0};
  wr.sg_list = sge;
  wr.num_sge = 1;
  wr.opcode = VRDMA_WR_SEND;
  wr.send_flags = VRDMA_SEND_SIGNALED;
  return wr;
}

static int withdrawn(struct vrdma_context* ctx) {
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(ctx, 64) : NULL;
  struct vrdma_mr* mr = cq ? vrdma_alloc_mr(pd, 4096, VRDMA_ACCESS_LOCAL_WRITE) : NULL;
  if (!mr) return die("setup");
  struct vrdma_qp_init_attr at = {cq, cq, 16, 16, 0, 0, VRDMA_QP_ROUTER_PATH, NULL};
  struct vrdma_qp* b = vrdma_create_qp(pd, &at);
  uint8_t* bm = b ? only_qp_memory() : NULL;
  struct vrdma_qp* a = bm ? vrdma_create_qp(pd, &at) : NULL;
  if (!a) return die("qps");
  if (connect_both(a, b)) return die("connect");
  uint64_t recv_off;
  memcpy(&recv_off, bm + 8, 8); /* QpHeader.recv_ring_off */
  volatile uint64_t* below = (volatile uint64_t*)(bm + 48); /* QpHeader.withdrawn_below */
  volatile uint64_t* head = (volatile uint64_t*)(bm + recv_off + 64);
  volatile uint64_t* tail = (volatile uint64_t*)(bm + recv_off + 128);
  *below = UINT64_MAX;
  *tail = *head + (1ull << 62);
  struct vrdma_sge sge = {(uint64_t)(uintptr_t)mr->addr, 8, mr->lkey};
  struct vrdma_send_wr wr = signaled_send(&sge), *bad;
  if (vrdma_post_send(a, &wr, &bad)) return die("post");
  struct vrdma_wc wc;
  int status = -1;
  double until = now_ms() + 3000;
  while (status < 0 && now_ms() < until)
    if (vrdma_poll_cq(cq, 1, &wc) == 1) status = (int)wc.status;
  printf("status=%d\n", status);
  return 0;
}

/* The memory of the QP made last: the one QP mapping of this process not among the `n` known. */
static uint8_t* new_qp_memory(uint8_t* const* known, int n) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  uint8_t* found = NULL;
  while (f && !found && fgets(line, sizeof line, f)) {
    if (!strstr(line, "memfd:vrdma-qp")) continue;
    uint8_t* p = (uint8_t*)(uintptr_t)strtoull(line, NULL, 16);
    int seen = 0;
    for (int i = 0; i < n; ++i) seen |= known[i] == p;
    if (!seen) found = p;
  }
  if (f) fclose(f);
  return found;
}

/* Each receiver's ring claims 2^62 withdrawn receives; each sender keeps a SEND waiting on it. */
static int withdrawn_many(struct vrdma_context* ctx, int pairs, double seconds) {
  enum { kMaxPairs = 64 };
  if (pairs < 1 || pairs > kMaxPairs) return die("pairs: 1 to 64");
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(ctx, 4 * kMaxPairs) : NULL;
  struct vrdma_mr* mr = cq ? vrdma_alloc_mr(pd, 4096, VRDMA_ACCESS_LOCAL_WRITE) : NULL;
  if (!mr) return die("setup");
  uint8_t* mem[2 * kMaxPairs];
  int nmem = 0;
  struct vrdma_qp* senders[kMaxPairs];
  for (int i = 0; i < pairs; ++i) {
    struct vrdma_qp_init_attr rt = {cq, cq, 16, 65536, 0, 0, VRDMA_QP_ROUTER_PATH, NULL};
    struct vrdma_qp_init_attr st = {cq, cq, 16, 16, 0, 0, VRDMA_QP_ROUTER_PATH | VRDMA_QP_NO_ERROR_STATE, NULL};
    struct vrdma_qp* b = vrdma_create_qp(pd, &rt);
    uint8_t* bm = b ? new_qp_memory(mem, nmem) : NULL;
    if (!bm) return die("receiver");
    mem[nmem++] = bm;
    struct vrdma_qp* a = vrdma_create_qp(pd, &st);
    uint8_t* am = a ? new_qp_memory(mem, nmem) : NULL;
    if (!am || connect_both(a, b)) return die("sender");
    mem[nmem++] = am;
    uint64_t recv_off;
    memcpy(&recv_off, bm + 8, 8); /* QpHeader.recv_ring_off */
    *(volatile uint64_t*)(bm + 48) = UINT64_MAX;  /* QpHeader.withdrawn_below */
    *(volatile uint64_t*)(bm + recv_off + 128) = *(volatile uint64_t*)(bm + recv_off + 64) + (1ull << 62);
    senders[i] = a;
  }
  struct vrdma_sge sge = {(uint64_t)(uintptr_t)mr->addr, 8, mr->lkey};
  struct vrdma_send_wr wr = signaled_send(&sge), *bad;
  long sends = 0;
  for (int i = 0; i < pairs; ++i, ++sends)
    if (vrdma_post_send(senders[i], &wr, &bad)) return die("post");
  double until = now_ms() + seconds * 1000;
  struct vrdma_wc wc;
  while (now_ms() < until) {  /* each SEND fails after its wait for a receive: post another */
    if (vrdma_poll_cq(cq, 1, &wc) != 1) {
      usleep(1000);
      continue;
    }
    for (int i = 0; i < pairs; ++i)
      if (vrdma_qp_num(senders[i]) == wc.qp_num && vrdma_post_send(senders[i], &wr, &bad) == 0) ++sends;
  }
  printf("sends=%ld\n", sends);
  return 0;
}

static volatile sig_atomic_t told_to_stop;
static void stop_now(int sig) {
  (void)sig;
  told_to_stop = 1;
}

/* SIGUSR1 ends the run early: the totals are still printed. */
static int remote_keys(struct vrdma_context* a, const char* sock_b, double seconds) {
  signal(SIGUSR1, stop_now);
  struct vrdma_context* b = vrdma_open(sock_b);
  if (!b) return die("open the other router");
  struct vrdma_pd *pa = vrdma_alloc_pd(a), *pb = vrdma_alloc_pd(b);
  struct vrdma_cq *ca = pa ? vrdma_create_cq(a, 128) : NULL, *cb = pb ? vrdma_create_cq(b, 16) : NULL;
  struct vrdma_mr* ma = ca ? vrdma_alloc_mr(pa, 4096, VRDMA_ACCESS_LOCAL_WRITE) : NULL;
  if (!ma || !cb) return die("setup");
  struct vrdma_qp_init_attr at = {ca, ca, 64, 64, 0, 0, VRDMA_QP_NO_ERROR_STATE, NULL};
  struct vrdma_qp_init_attr bt = {cb, cb, 16, 16, 0, 0, 0, NULL};
  struct vrdma_qp *qa = vrdma_create_qp(pa, &at), *qb = vrdma_create_qp(pb, &bt);
  if (!qa || !qb) return die("qps");
  if (connect_both(qb, qa)) return die("connect");
  long ops = 0, refused = 0, inflight = 0;
  int first_other = 0; /* the first status other than a refusal */
  uint32_t rkey = 1;
  double until = now_ms() + seconds * 1000, last = now_ms(), worst_gap = 0;
  while (now_ms() < until && !told_to_stop) {
    for (; inflight < 32; ++inflight) {
      struct vrdma_sge sge = {(uint64_t)(uintptr_t)ma->addr, 64, ma->lkey};
      struct vrdma_send_wr wr = {0}, *bad;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = VRDMA_WR_RDMA_WRITE;
      wr.send_flags = VRDMA_SEND_SIGNALED;
      wr.remote_addr = 4096;
      wr.rkey = rkey++;
      if (vrdma_post_send(qa, &wr, &bad)) break;
    }
    struct vrdma_wc wc[32];
    int n = vrdma_poll_cq(ca, 32, wc);
    if (n < 0) return die("poll");
    if (n > 0) {
      double t = now_ms();
      if (t - last > worst_gap) worst_gap = t - last;
      last = t;
    }
    for (int i = 0; i < n; ++i, --inflight, ++ops) {
      refused += wc[i].status == VRDMA_WC_REM_ACCESS_ERR;
      if (wc[i].status != VRDMA_WC_REM_ACCESS_ERR && !first_other) first_other = wc[i].status;
    }
    if (!n) usleep(50);
  }
  printf("ops=%ld refused=%ld other_status=%d worst_gap_ms=%.0f\n", ops, refused, first_other, worst_gap);
  return 0;
}

static int ud_flood(struct vrdma_context* a, const char* sock_b, int nq, unsigned bytes, double seconds) {
  signal(SIGUSR1, stop_now);
  struct vrdma_context* b = vrdma_open(sock_b);
  struct vrdma_router_address there;
  if (!b || vrdma_query_router(b, &there)) return die("the other router");
  struct vrdma_pd* pd = vrdma_alloc_pd(a);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(a, 4096) : NULL;
  struct vrdma_ah* ah = cq ? vrdma_create_ah(pd, &there) : NULL;
  struct vrdma_mr* mr = ah ? vrdma_alloc_mr(pd, VRDMA_UD_MTU, VRDMA_ACCESS_LOCAL_WRITE) : NULL;
  if (!mr) return die("setup");
  if (nq < 1 || nq > 16 || bytes > VRDMA_UD_MTU) return die("QPS is 1 to 16 and BYTES at most VRDMA_UD_MTU");
  struct vrdma_qp* qp[16];
  int out[16] = {0};
  for (int i = 0; i < nq; ++i) {
    struct vrdma_qp_init_attr at = {cq, cq, 256, 4, 64, 0, VRDMA_QP_DATAGRAM, NULL};
    qp[i] = vrdma_create_qp(pd, &at);
    if (!qp[i] || vrdma_ud_ready(qp[i], 0x1234)) return die("datagram qp");
  }
  long posted = 0, done = 0, failed = 0;
  for (double until = now_ms() + seconds * 1000; now_ms() < until && !told_to_stop;) {
    for (int i = 0; i < nq; ++i)
      for (; out[i] < 200; ++out[i], ++posted) {
        struct vrdma_sge sge = {(uint64_t)(uintptr_t)mr->addr, bytes, mr->lkey};
        struct vrdma_send_wr wr = {0}, *bad;
        wr.wr_id = (uint64_t)i;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = VRDMA_WR_SEND;
        wr.send_flags = VRDMA_SEND_SIGNALED;
        wr.remote_qpn = (uint32_t)rand() & 0xffffff;
        wr.remote_qkey = 0x1234;
        wr.remote_ah = ah;
        if (vrdma_post_send(qp[i], &wr, &bad)) break;
      }
    struct vrdma_wc wc[256];
    int n = vrdma_poll_cq(cq, 256, wc);
    if (n < 0) return die("poll");
    if (n == 0) usleep(200);
    for (int k = 0; k < n; ++k, ++done) {
      --out[wc[k].wr_id];
      failed += wc[k].status != VRDMA_WC_SUCCESS;
    }
  }
  printf("posted=%ld done=%ld failed=%ld\n", posted, done, failed);
  return 0;
}

static int connect_nowhere(struct vrdma_context* ctx, int port, long n) {
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(ctx, 16) : NULL;
  if (!cq) return die("setup");
  struct vrdma_qp_init_attr at = {cq, cq, 4, 4, 0, 0, 0, NULL};
  long failed = 0;
  int last = 0;
  double worst = 0;
  for (long i = 0; i < n; ++i) {
    struct vrdma_qp* qp = vrdma_create_qp(pd, &at);
    if (!qp) return die("create_qp");
    struct vrdma_router_address there = {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1}, (uint16_t)(port + i)};
    double t0 = now_ms();
    int rc = vrdma_connect_qp_at(qp, &there, 1);
    double dt = now_ms() - t0;
    if (dt > worst) worst = dt;
    if (rc) {
      ++failed;
      last = rc < 0 ? -rc : rc;
    }
    vrdma_destroy_qp(qp);
  }
  printf("failed=%ld worst_ms=%.1f errno=%d\n", failed, worst, last);
  return 0;
}

/* A tenant with many QPs, each with a large request in flight: the router moves each QP's share
 * every turn, and a turn must not grow with the number of QPs a tenant has. */
static int wide(struct vrdma_context* ctx, int pairs, size_t bytes, double seconds) {
  const unsigned rw = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE;
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(ctx, 2 * pairs + 16) : NULL;
  struct vrdma_mr* src = cq ? vrdma_alloc_mr(pd, bytes, rw) : NULL;
  struct vrdma_mr* dst = src ? vrdma_alloc_mr(pd, bytes, rw) : NULL;
  struct vrdma_qp** a = calloc((size_t)pairs, sizeof *a);
  if (!dst || !a) return die("setup");
  for (int i = 0; i < pairs; ++i) {
    struct vrdma_qp_init_attr at = {cq, cq, 4, 4, 0, 0, VRDMA_QP_ROUTER_PATH, NULL};
    struct vrdma_qp* b = NULL;
    while (!(a[i] = vrdma_create_qp(pd, &at)) && errno == EAGAIN) usleep(2000); /* the router's pace */
    while (a[i] && !(b = vrdma_create_qp(pd, &at)) && errno == EAGAIN) usleep(2000);
    if (!b || connect_both(a[i], b)) return die("pair");
  }
  printf("pairs=%d\n", pairs);
  long ops = 0;
  for (int i = 0; i < pairs; ++i)
    if (post_write(a[i], src, dst, (uint32_t)bytes, (uint64_t)i)) return die("post");
  double until = now_ms() + seconds * 1000;
  while (now_ms() < until) {
    struct vrdma_wc w[64];
    int n = vrdma_poll_cq(cq, 64, w);
    if (n < 0) return die("poll");
    for (int k = 0; k < n; ++k, ++ops)
      if (post_write(a[w[k].wr_id], src, dst, (uint32_t)bytes, w[k].wr_id)) return die("post");
    if (n == 0) usleep(100);
  }
  printf("ops=%ld\n", ops);
  return 0;
}

/* A QP here connected to one at `b` (another host's router), that one in *qb_out when asked for:
 * 0, or -1 with vrdma_last_error(). */
static int remote_pair(struct vrdma_pd* pa, struct vrdma_cq* ca, struct vrdma_pd* pb, struct vrdma_cq* cb,
                       uint32_t depth, struct vrdma_qp** qa, struct vrdma_qp** qb_out) {
  struct vrdma_qp_init_attr at = {ca, ca, depth, 4, 0, 0, 0, NULL}, bt = {cb, cb, 4, 4, 0, 0, 0, NULL};
  struct vrdma_qp* qb = NULL;
  while (!(*qa = vrdma_create_qp(pa, &at)) && errno == EAGAIN) usleep(2000); /* the router's pace */
  while (*qa && !(qb = vrdma_create_qp(pb, &bt)) && errno == EAGAIN) usleep(2000);
  if (qb_out) *qb_out = qb;
  return qb ? connect_both(qb, *qa) : -1;
}

/* A signaled fetch-add of 1 on the first 8 bytes of `dst`, its old value into `src`. */
static int post_fadd(struct vrdma_qp* qp, struct vrdma_mr* src, struct vrdma_mr* dst, uint64_t id) {
  struct vrdma_sge sge = {(uint64_t)(uintptr_t)src->addr, 8, src->lkey};
  struct vrdma_send_wr wr = {0}, *bad = NULL;
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = VRDMA_WR_ATOMIC_FETCH_AND_ADD;
  wr.send_flags = VRDMA_SEND_SIGNALED;
  wr.remote_addr = (uint64_t)(uintptr_t)dst->addr;
  wr.rkey = dst->rkey;
  wr.compare_add = 1;
  return vrdma_post_send(qp, &wr, &bad);
}

/* A signaled SEND of the first `len` bytes of `src`. */
static int post_send_of(struct vrdma_qp* qp, struct vrdma_mr* src, uint32_t len, uint64_t id) {
  struct vrdma_sge sge = {(uint64_t)(uintptr_t)src->addr, len, src->lkey};
  struct vrdma_send_wr wr = {0}, *bad = NULL;
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = VRDMA_WR_SEND;
  wr.send_flags = VRDMA_SEND_SIGNALED;
  return vrdma_post_send(qp, &wr, &bad);
}

/* One tenant's bulk WRITEs (or a flood of small atomics) across hosts: the link is every
 * tenant's, and its queue is not. */
static int wide_remote(struct vrdma_context* a, const char* sock_b, int pairs, size_t bytes, int depth, double seconds,
                       int fadd) {
  const unsigned rw = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE | VRDMA_ACCESS_REMOTE_ATOMIC;
  struct vrdma_context* b = vrdma_open(sock_b);
  struct vrdma_pd *pa = b ? vrdma_alloc_pd(a) : NULL, *pb = pa ? vrdma_alloc_pd(b) : NULL;
  struct vrdma_cq* ca = pb ? vrdma_create_cq(a, pairs * depth + 16) : NULL;
  struct vrdma_cq* cb = ca ? vrdma_create_cq(b, 16) : NULL;
  struct vrdma_mr* src = cb ? vrdma_alloc_mr(pa, bytes, rw) : NULL;
  struct vrdma_mr* dst = src ? vrdma_alloc_mr(pb, bytes, rw) : NULL;
  struct vrdma_qp** qa = calloc((size_t)pairs, sizeof *qa);
  if (!dst || !qa) return die("setup");
  for (int i = 0; i < pairs; ++i)
    if (remote_pair(pa, ca, pb, cb, (uint32_t)depth, &qa[i], NULL)) return die("pair");
  printf("pairs=%d\n", pairs);
#define POST(i) (fadd ? post_fadd(qa[i], src, dst, (uint64_t)(i)) : post_write(qa[i], src, dst, (uint32_t)bytes, (uint64_t)(i)))
  for (int i = 0; i < pairs; ++i)
    for (int k = 0; k < depth; ++k)
      if (POST(i)) return die("post");
  long ops = 0;
  double until = now_ms() + seconds * 1000;
  while (now_ms() < until) {
    struct vrdma_wc w[64];
    int n = vrdma_poll_cq(ca, 64, w);
    if (n < 0) return die("poll");
    for (int k = 0; k < n; ++k, ++ops)
      if (w[k].status == VRDMA_WC_SUCCESS && POST(w[k].wr_id)) return die("post");
    if (n == 0) usleep(100);
  }
  printf("ops=%ld\n", ops);
  return 0;
#undef POST
}

/* Many tenants' bulk WRITEs across hosts at once, from one process that makes each tenant's
 * connections under its uid (a user with subordinate uids can do as much): each tenant within its
 * own share of the links, all together past any one's. */
static int tenants_remote(const char* sock_a, const char* sock_b, uid_t first, int tenants, size_t bytes,
                          double seconds) {
  const unsigned rw = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE;
  struct tenant {
    struct vrdma_cq* cq;
    struct vrdma_qp* qp;
    struct vrdma_mr *src, *dst;
  }* t = calloc((size_t)tenants, sizeof *t);
  if (!t) return die("calloc");
  for (int i = 0; i < tenants; ++i) {
    if (seteuid(first + (uid_t)i)) return die("seteuid");
    struct vrdma_context *a = vrdma_open(sock_a), *b = a ? vrdma_open(sock_b) : NULL;
    struct vrdma_pd *pa = b ? vrdma_alloc_pd(a) : NULL, *pb = pa ? vrdma_alloc_pd(b) : NULL;
    struct vrdma_cq* cb = pb ? vrdma_create_cq(b, 4) : NULL;
    t[i].cq = cb ? vrdma_create_cq(a, 4) : NULL;
    t[i].src = t[i].cq ? vrdma_alloc_mr(pa, bytes, rw) : NULL;
    t[i].dst = t[i].src ? vrdma_alloc_mr(pb, bytes, rw) : NULL;
    if (!t[i].dst || remote_pair(pa, t[i].cq, pb, cb, 2, &t[i].qp, NULL)) return die("tenant");
    if (seteuid(0)) return die("seteuid");
  }
  printf("tenants=%d\n", tenants);
  for (int i = 0; i < tenants; ++i)
    if (post_write(t[i].qp, t[i].src, t[i].dst, (uint32_t)bytes, 0)) return die("post");
  long ops = 0, failed = 0;
  double until = now_ms() + seconds * 1000;
  while (now_ms() < until) {
    int any = 0;
    for (int i = 0; i < tenants; ++i) {
      struct vrdma_wc w;
      int n = vrdma_poll_cq(t[i].cq, 1, &w);
      if (n < 0) return die("poll");
      if (n == 0) continue;
      any = 1;
      ++ops;
      if (w.status != VRDMA_WC_SUCCESS) ++failed;
      else if (post_write(t[i].qp, t[i].src, t[i].dst, (uint32_t)bytes, 0)) return die("post");
    }
    if (!any) usleep(500);
  }
  printf("ops=%ld failed=%ld\n", ops, failed);
  return 0;
}

/* Large SENDs across hosts whose QPs go right after posting: the target's router pulls such a
 * payload from here, and a destroyed QP gave its tenant's link share back while the pulls went on,
 * so the next SEND started at once beside them. */
static int abandon_sends(struct vrdma_context* a, const char* sock_b, int pairs, size_t bytes) {
  const unsigned rw = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE;
  struct vrdma_context* b = vrdma_open(sock_b);
  struct vrdma_pd *pa = b ? vrdma_alloc_pd(a) : NULL, *pb = pa ? vrdma_alloc_pd(b) : NULL;
  struct vrdma_cq *ca = pb ? vrdma_create_cq(a, 4 * pairs + 16) : NULL, *cb = ca ? vrdma_create_cq(b, 4 * pairs + 16) : NULL;
  struct vrdma_mr* src = cb ? vrdma_alloc_mr(pa, bytes, rw) : NULL;
  struct vrdma_mr* dst = src ? vrdma_alloc_mr(pb, bytes, rw) : NULL;
  struct vrdma_qp **qa = calloc((size_t)pairs, sizeof *qa), *qb = NULL;
  if (!dst || !qa) return die("setup");
  for (int i = 0; i < pairs; ++i) {
    struct vrdma_sge sge = {(uint64_t)(uintptr_t)dst->addr, (uint32_t)bytes, dst->lkey};
    struct vrdma_recv_wr rw_ = {0}, *bad = NULL;
    rw_.wr_id = (uint64_t)i;
    rw_.sg_list = &sge;
    rw_.num_sge = 1;
    if (remote_pair(pa, ca, pb, cb, 4, &qa[i], &qb) || vrdma_post_recv(qb, &rw_, &bad)) return die("pair");
  }
  printf("pairs=%d\n", pairs);
  for (int i = 0; i < pairs; ++i) {
    struct vrdma_sge sge = {(uint64_t)(uintptr_t)src->addr, (uint32_t)bytes, src->lkey};
    struct vrdma_send_wr wr = {0}, *bad = NULL;
    wr.wr_id = (uint64_t)i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = VRDMA_WR_SEND;
    wr.send_flags = VRDMA_SEND_SIGNALED;
    if (vrdma_post_send(qa[i], &wr, &bad)) return die("send");
    usleep(30000);
    if (vrdma_destroy_qp(qa[i])) return die("destroy_qp");
  }
  printf("sent=%d\n", pairs);
  return 0;
}

/* SENDs across hosts to QPs with one receive each: after the first, each QP's next SEND waits for
 * a receive (RNR) at the target's router, and the rest must fail with it as on RC, not wait their
 * turn there one RNR bound after another while their tenant's link share stays taken. */
static int rnr_sends(struct vrdma_context* a, const char* sock_b, int pairs, int sends, size_t bytes) {
  const unsigned rw = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE;
  struct vrdma_context* b = vrdma_open(sock_b);
  struct vrdma_pd *pa = b ? vrdma_alloc_pd(a) : NULL, *pb = pa ? vrdma_alloc_pd(b) : NULL;
  int total = pairs * sends;
  struct vrdma_cq *ca = pb ? vrdma_create_cq(a, total + 16) : NULL, *cb = ca ? vrdma_create_cq(b, pairs + 16) : NULL;
  struct vrdma_mr* src = cb ? vrdma_alloc_mr(pa, bytes, rw) : NULL;
  struct vrdma_mr* dst = src ? vrdma_alloc_mr(pb, bytes * (size_t)pairs, rw) : NULL;
  struct vrdma_qp **qa = calloc((size_t)pairs, sizeof *qa), *qb0 = NULL, *qb = NULL;
  if (!dst || !qa) return die("setup");
#define RECV(q, i)                                                                                     \
  do {                                                                                                 \
    struct vrdma_sge sge = {(uint64_t)(uintptr_t)dst->addr + bytes * (size_t)(i), (uint32_t)bytes, dst->lkey}; \
    struct vrdma_recv_wr r = {0}, *bad = NULL;                                                         \
    r.wr_id = (uint64_t)(i);                                                                           \
    r.sg_list = &sge;                                                                                  \
    r.num_sge = 1;                                                                                     \
    if (vrdma_post_recv(q, &r, &bad)) return die("recv");                                              \
  } while (0)
  for (int i = 0; i < pairs; ++i) {
    if (remote_pair(pa, ca, pb, cb, (uint32_t)sends, &qa[i], &qb)) return die("pair");
    if (!i) qb0 = qb;
    RECV(qb, i);
  }
  double t0 = now_ms();
  for (int i = 0; i < pairs; ++i)
    for (int k = 0; k < sends; ++k)
      if (post_send_of(qa[i], src, (uint32_t)bytes, (uint64_t)i)) return die("send");
  int answered = 0, received = 0, count[256] = {0};
  double last = t0;
  while ((answered < total || received < pairs) && now_ms() - t0 < 30000) {
    struct vrdma_wc w[64], v[64];
    int n = vrdma_poll_cq(ca, 64, w), m = vrdma_poll_cq(cb, 64, v);
    if (n < 0 || m < 0) return die("poll");
    for (int k = 0; k < n; ++k) ++count[w[k].status & 255];
    for (int k = 0; k < m; ++k) received += v[k].status == VRDMA_WC_SUCCESS;
    answered += n;
    if (n) last = now_ms();
    if (!n && !m) usleep(200);
  }
  int other = answered - count[VRDMA_WC_SUCCESS] - count[VRDMA_WC_RNR_RETRY_EXC_ERR] - count[VRDMA_WC_WR_FLUSH_ERR];
  printf("success=%d rnr=%d flushed=%d other=%d received=%d ms=%.0f\n", count[VRDMA_WC_SUCCESS],
         count[VRDMA_WC_RNR_RETRY_EXC_ERR], count[VRDMA_WC_WR_FLUSH_ERR], other + (total - answered), received, last - t0);
  if (vrdma_recover_qp(qa[0])) return die("recover");
  RECV(qb0, 0);
  if (post_send_of(qa[0], src, (uint32_t)bytes, 0)) return die("send");
  int recovered = -1;
  for (double until = now_ms() + 5000; recovered < 0 && now_ms() < until;) {
    struct vrdma_wc w;
    int n = vrdma_poll_cq(ca, 1, &w);
    if (n < 0) return die("poll");
    if (n) recovered = w.status;
    else usleep(200);
  }
  printf("recovered=%d\n", recovered);
  return 0;
#undef RECV
}

/* A region deregistered while a pulled SEND from it is in flight to a router that never answers:
 * the SEND fails at the op bound, and its pieces stay pinned a while for that router's pulls.
 * The region counts against its tenant as long as it is pinned, not only for its grace. */
static int pinned_dereg(struct vrdma_context* a, const char* sock_b, size_t bytes) {
  const unsigned rw = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE;
  struct vrdma_context* b = vrdma_open(sock_b);
  struct vrdma_pd *pa = b ? vrdma_alloc_pd(a) : NULL, *pb = pa ? vrdma_alloc_pd(b) : NULL;
  struct vrdma_cq *ca = pb ? vrdma_create_cq(a, 16) : NULL, *cb = ca ? vrdma_create_cq(b, 16) : NULL;
  struct vrdma_mr* src = cb ? vrdma_alloc_mr(pa, bytes, rw) : NULL;
  struct vrdma_qp* qa = NULL;
  if (!src || remote_pair(pa, ca, pb, cb, 4, &qa, NULL)) return die("setup");
  char line[16];
  printf("ready\n");
  if (!fgets(line, sizeof line, stdin)) return die("stdin");
  if (post_send_of(qa, src, (uint32_t)bytes, 0)) return die("send");
  double t0 = now_ms();
  usleep(100000); /* the router has taken it */
  if (vrdma_dereg_mr(src)) return die("dereg");
  int first_errno = 0;
  double again = -1;
  while (again < 0 && now_ms() - t0 < 15000) {
    struct vrdma_mr* mr = vrdma_alloc_mr(pa, bytes, rw);
    if (mr) again = now_ms() - t0;
    else if (!first_errno) first_errno = errno;
    if (!mr) usleep(100000);
  }
  printf("again_ms=%.0f errno=%d\n", again, first_errno);
  if (!fgets(line, sizeof line, stdin)) return die("stdin");
  return 0;
}

/* Requests behind one that failed, across hosts: as on RC they flush, never reaching the peer. */
static int fail_then_sends(struct vrdma_context* a, const char* sock_b, const char* kind) {
  const unsigned rw = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE | VRDMA_ACCESS_REMOTE_ATOMIC;
  const size_t big = 1 << 20;
  struct vrdma_context* b = vrdma_open(sock_b);
  struct vrdma_pd *pa = b ? vrdma_alloc_pd(a) : NULL, *pb = pa ? vrdma_alloc_pd(b) : NULL;
  struct vrdma_cq *ca = pb ? vrdma_create_cq(a, 16) : NULL, *cb = ca ? vrdma_create_cq(b, 16) : NULL;
  struct vrdma_mr* src = cb ? vrdma_alloc_mr(pa, big, rw) : NULL;
  struct vrdma_mr* dst = src ? vrdma_alloc_mr(pb, big, rw) : NULL;
  struct vrdma_qp *qa = NULL, *qb = NULL;
  if (!dst || remote_pair(pa, ca, pb, cb, 8, &qa, &qb)) return die("setup");
  for (int i = 0; i < 4; ++i) {
    struct vrdma_sge sge = {(uint64_t)(uintptr_t)dst->addr + 4096u * (unsigned)i, 4096, dst->lkey};
    struct vrdma_recv_wr r = {0}, *bad = NULL;
    r.wr_id = (uint64_t)i;
    r.sg_list = &sge;
    r.num_sge = 1;
    if (vrdma_post_recv(qb, &r, &bad)) return die("recv");
  }
  if (post_write(qa, src, dst, (uint32_t)big, 0)) return die("write");
  struct vrdma_sge sge = {(uint64_t)(uintptr_t)src->addr, 64, src->lkey};
  struct vrdma_send_wr wr = {0}, *bad = NULL;
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = VRDMA_SEND_SIGNALED;
  wr.opcode = VRDMA_WR_RDMA_WRITE;
  wr.rkey = dst->rkey;
  wr.remote_addr = (uint64_t)(uintptr_t)dst->addr;
  if (strcmp(kind, "badlkey") == 0) sge.lkey = src->lkey ^ 0x5a5a5a;
  else if (strcmp(kind, "oob") == 0) wr.remote_addr += big - 32;
  else {
    wr.opcode = VRDMA_WR_ATOMIC_FETCH_AND_ADD;
    sge.length = 8;
    wr.remote_addr += 4;
    wr.compare_add = 1;
  }
  if (vrdma_post_send(qa, &wr, &bad)) return die("failing request");
  for (int i = 2; i < 5; ++i)
    if (post_send_of(qa, src, 64, (uint64_t)i)) return die("send");
  int status[5] = {-1, -1, -1, -1, -1}, got = 0, received = 0;
  for (double until = now_ms() + 8000; got < 5 && now_ms() < until;) {
    struct vrdma_wc w;
    int n = vrdma_poll_cq(ca, 1, &w);
    if (n < 0) return die("poll");
    if (n && w.wr_id < 5) status[w.wr_id] = w.status, ++got;
    if (!n) usleep(200);
  }
  usleep(300000); /* anything delivered by now has arrived */
  struct vrdma_wc v[8];
  int m = vrdma_poll_cq(cb, 8, v);
  for (int k = 0; k < m; ++k) received += v[k].status == VRDMA_WC_SUCCESS;
  printf("statuses=%d,%d,%d,%d,%d received=%d\n", status[0], status[1], status[2], status[3], status[4], received);
  return 0;
}

/* One signaled request of `opcode` (8 bytes from `src` under `lkey`, to `dst` + `off`), its
 * status (-1: none in 10 s). */
static int one_request(struct vrdma_qp* qp, struct vrdma_cq* cq, int opcode, struct vrdma_mr* src, uint32_t lkey,
                       struct vrdma_mr* dst, uint64_t off) {
  struct vrdma_sge sge = {(uint64_t)(uintptr_t)src->addr, 8, lkey};
  struct vrdma_send_wr wr = {0}, *bad = NULL;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = VRDMA_SEND_SIGNALED;
  wr.remote_addr = (uint64_t)(uintptr_t)dst->addr + off;
  wr.rkey = dst->rkey;
  wr.compare_add = 1;
  struct vrdma_wc w;
  return vrdma_post_send(qp, &wr, &bad) || wait_one(cq, &w) ? -1 : (int)w.status;
}

/* The error epoch across hosts is 16 bits: failures that never leave this router must not bring
 * it round to one the target still holds failed, or a later SEND is flushed there. */
static int epoch_wrap(struct vrdma_context* a, const char* sock_b, long n) {
  const unsigned rw = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE | VRDMA_ACCESS_REMOTE_ATOMIC;
  struct vrdma_context* b = vrdma_open(sock_b);
  struct vrdma_pd *pa = b ? vrdma_alloc_pd(a) : NULL, *pb = pa ? vrdma_alloc_pd(b) : NULL;
  struct vrdma_cq *ca = pb ? vrdma_create_cq(a, 16) : NULL, *cb = ca ? vrdma_create_cq(b, 16) : NULL;
  struct vrdma_mr* src = cb ? vrdma_alloc_mr(pa, 4096, rw) : NULL;
  struct vrdma_mr* dst = src ? vrdma_alloc_mr(pb, 4096, rw) : NULL;
  struct vrdma_qp *qa = NULL, *qb = NULL;
  if (!dst || remote_pair(pa, ca, pb, cb, 8, &qa, &qb)) return die("setup");
  if (one_request(qa, ca, VRDMA_WR_ATOMIC_FETCH_AND_ADD, src, src->lkey, dst, 4) != VRDMA_WC_REM_ACCESS_ERR)
    return die("the misaligned fetch-add did not fail at the target");
  for (long i = 0; i <= n; ++i) {
    if (vrdma_recover_qp(qa)) return die("recover");
    if (i < n && one_request(qa, ca, VRDMA_WR_RDMA_WRITE, src, src->lkey ^ 0x5a5a5a, dst, 0) != VRDMA_WC_LOC_PROT_ERR)
      return die("a bad local key did not fail");
  }
  struct vrdma_sge sge = {(uint64_t)(uintptr_t)dst->addr, 64, dst->lkey};
  struct vrdma_recv_wr r = {0}, *bad = NULL;
  r.sg_list = &sge;
  r.num_sge = 1;
  if (vrdma_post_recv(qb, &r, &bad)) return die("recv");
  int send = one_request(qa, ca, VRDMA_WR_SEND, src, src->lkey, dst, 0);
  struct vrdma_wc w;
  int received = wait_one(cb, &w) == 0 && w.status == VRDMA_WC_SUCCESS;
  printf("send=%d received=%d\n", send, received);
  return 0;
}

/* Receives withdrawn while SENDs fill them: each either completes by its arrival, bytes and all,
 * or is flushed and never written, and the sender's successes are the receiver's. */
static int post_recvs(struct vrdma_qp* qp, struct vrdma_mr* mr, int first, int count, uint32_t slot) {
  for (int i = first; i < first + count; ++i) {
    struct vrdma_sge sge = {(uint64_t)(uintptr_t)mr->addr + (uint64_t)i * slot, slot, mr->lkey};
    struct vrdma_recv_wr r = {0}, *bad = NULL;
    r.wr_id = (uint64_t)i;
    r.sg_list = &sge;
    r.num_sge = 1;
    if (vrdma_post_recv(qp, &r, &bad)) return -1;
  }
  return 0;
}

/* A SEND from a QP the receiver is not connected to must not take the receiver's receive. */
static int stray_send(struct vrdma_context* ctx) {
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_cq* cx = pd ? vrdma_create_cq(ctx, 16) : NULL;
  struct vrdma_cq* cy = cx ? vrdma_create_cq(ctx, 16) : NULL;
  struct vrdma_cq* cz = cy ? vrdma_create_cq(ctx, 16) : NULL;
  struct vrdma_mr* mr = cz ? vrdma_alloc_mr(pd, 4096, VRDMA_ACCESS_LOCAL_WRITE) : NULL;
  if (!mr) return die("setup");
  struct vrdma_qp_init_attr ax = {cx, cx, 4, 4, 0, 0, 0, NULL}, ay = {cy, cy, 4, 4, 0, 0, 0, NULL},
                            az = {cz, cz, 4, 4, 0, 0, 0, NULL};
  struct vrdma_qp *x = vrdma_create_qp(pd, &ax), *y = vrdma_create_qp(pd, &ay), *z = vrdma_create_qp(pd, &az);
  if (!x || !y || !z) return die("qps");
  unsigned char xa[VRDMA_ADDRESS_BYTES];
  vrdma_qp_address(x, xa, sizeof xa);
  /* Z first, while X is free (the router refuses a connect to a QP connected elsewhere). */
  if (vrdma_connect_qp(z, xa, sizeof xa)) return die("connect z");
  if (connect_both(x, y)) return die("connect x and y");
  if (post_recvs(x, mr, 0, 1, 64)) return die("recv");
  uint8_t* bytes = mr->addr;
  memcpy(bytes + 1024, "stray", 6);
  memcpy(bytes + 2048, "real!", 6);
  struct vrdma_sge zs = {(uint64_t)(uintptr_t)(bytes + 1024), 6, mr->lkey}, ys = {(uint64_t)(uintptr_t)(bytes + 2048), 6, mr->lkey};
  struct vrdma_send_wr zw = signaled_send(&zs), yw = signaled_send(&ys), *bad;
  struct vrdma_wc wz = {0}, wx = {0}, wy = {0};
  if (vrdma_post_send(z, &zw, &bad) || wait_one(cz, &wz)) return die("stray send");
  if (vrdma_post_send(y, &yw, &bad) || wait_one(cy, &wy) || wait_one(cx, &wx)) return die("real send");
  printf("stray=%d real=%d len=%u text=%s\n", (int)wz.status, (int)wx.status, wx.byte_len, (char*)bytes);
  return 0;
}

static int withdraw_race(struct vrdma_context* a, const char* sock_b, unsigned flags, int delay_us) {
  enum { kSends = 64, kSlot = 16384, kLen = 12000, kCycles = 20 };
  const unsigned rw = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE;
  struct vrdma_context* b = vrdma_open(sock_b);
  struct vrdma_pd *pa = b ? vrdma_alloc_pd(a) : NULL, *pb = pa ? vrdma_alloc_pd(b) : NULL;
  struct vrdma_cq *ca = pb ? vrdma_create_cq(a, 256) : NULL, *cb = ca ? vrdma_create_cq(b, 256) : NULL;
  struct vrdma_mr* src = cb ? vrdma_alloc_mr(pa, kLen, rw) : NULL;
  struct vrdma_mr* dst = src ? vrdma_alloc_mr(pb, 2 * kSends * (size_t)kSlot, rw) : NULL;  /* then fresh ones */
  struct vrdma_qp_init_attr at = {ca, ca, 128, 4, 0, 0, flags | VRDMA_QP_NO_ERROR_STATE, NULL},
                            bt = {cb, cb, 4, 256, 0, 0, flags, NULL};
  struct vrdma_qp *qa = dst ? vrdma_create_qp(pa, &at) : NULL, *qb = qa ? vrdma_create_qp(pb, &bt) : NULL;
  if (!qb || connect_both(qb, qa)) return die("setup");
  memset(src->addr, 0xab, kLen);
  long written = 0, recv_ok = 0, send_ok = 0;
  for (int c = 0; c < kCycles; ++c) {
    uint8_t* base = dst->addr;
    memset(base, 0, 2 * kSends * (size_t)kSlot);
    char flushed[2 * kSends] = {0};
    if (post_recvs(qb, dst, 0, kSends, kSlot)) return die("recv");
    for (int i = 0; i < kSends; ++i)
      if (post_send_of(qa, src, kLen, (uint64_t)i)) return die("send");
    usleep((useconds_t)delay_us);
    if (vrdma_withdraw_recvs(qb) || post_recvs(qb, dst, kSends, kSends, kSlot)) return die("withdraw");
    int answered = 0;
    for (double until = now_ms() + 10000; answered < kSends && now_ms() < until;) {
      struct vrdma_wc w[64];
      int n = vrdma_poll_cq(cb, 64, w);
      if (n < 0) return die("poll");
      for (int k = 0; k < n; ++k) {
        if (w[k].status == VRDMA_WC_SUCCESS) ++recv_ok;
        else if (w[k].wr_id < 2 * kSends) flushed[w[k].wr_id] = 1;
      }
      int m = vrdma_poll_cq(ca, 64, w);
      if (m < 0) return die("poll");
      for (int k = 0; k < m; ++k, ++answered) send_ok += w[k].status == VRDMA_WC_SUCCESS;
      if (!n && !m) usleep(200);
    }
    usleep(300000); /* a late write shows by now */
    for (int i = 0; i < 2 * kSends; ++i)
      for (int j = 0; flushed[i] && j < kSlot; j += 64)
        if (base[(size_t)i * kSlot + j]) {
          ++written;
          break;
        }
    struct vrdma_wc w[256];
    int n;
    while ((n = vrdma_poll_cq(cb, 256, w)) > 0) /* the fresh receives left: flushed before the next round */
      for (int k = 0; k < n; ++k) recv_ok += w[k].status == VRDMA_WC_SUCCESS;
    if (vrdma_withdraw_recvs(qb)) return die("withdraw");
    while ((n = vrdma_poll_cq(cb, 256, w)) > 0) {
    }
  }
  printf("written=%ld recv_ok=%ld send_ok=%ld\n", written, recv_ok, send_ok);
  return 0;
}

static int remote_ping(struct vrdma_context* a, const char* sock_b, double seconds) {
  const unsigned rw = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE;
  struct vrdma_context* b = vrdma_open(sock_b);
  struct vrdma_pd *pa = b ? vrdma_alloc_pd(a) : NULL, *pb = pa ? vrdma_alloc_pd(b) : NULL;
  struct vrdma_cq *ca = pb ? vrdma_create_cq(a, 16) : NULL, *cb = ca ? vrdma_create_cq(b, 16) : NULL;
  struct vrdma_mr* src = cb ? vrdma_alloc_mr(pa, 4096, rw) : NULL;
  struct vrdma_mr* dst = src ? vrdma_alloc_mr(pb, 4096, rw) : NULL;
  struct vrdma_qp* qa = NULL;
  if (!dst || remote_pair(pa, ca, pb, cb, 16, &qa, NULL)) return die("setup");
  long rounds = 0, failed = 0;
  double worst = 0, until = now_ms() + seconds * 1000;
  while (now_ms() < until) {
    double t0 = now_ms();
    struct vrdma_wc w;
    int ok = post_write(qa, src, dst, 64, (uint64_t)rounds) == 0 && wait_one(ca, &w) == 0 && w.status == VRDMA_WC_SUCCESS;
    double dt = now_ms() - t0;
    if (dt > worst) worst = dt;
    failed += !ok;
    ++rounds;
    if (!ok) break; /* a QP that failed is broken: the rest would fail too */
    usleep(1000);
  }
  printf("rounds=%ld failed=%ld worst_ms=%.1f\n", rounds, failed, worst);
  return 0;
}

static int ping(struct vrdma_context* ctx, const char* sock, double seconds) {
  struct pair p;
  if (router_pair(ctx, &p, 16)) return die("pair");
  struct vrdma_mr* mr = vrdma_alloc_mr(p.pd, 4096, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE);
  if (!mr) return die("mr");
  long rounds = 0, failed = 0;
  double worst = 0, until = now_ms() + seconds * 1000;
  while (now_ms() < until) {
    double t0 = now_ms();
    struct vrdma_context* c2 = vrdma_open(sock);
    struct vrdma_pd* pd = c2 ? vrdma_alloc_pd(c2) : NULL;
    struct vrdma_wc w;
    int ok = pd && post_write(p.a, mr, mr, 64, (uint64_t)rounds) == 0 && wait_one(p.cq, &w) == 0 &&
             w.status == VRDMA_WC_SUCCESS;
    if (pd) vrdma_dealloc_pd(pd);
    if (c2) vrdma_close(c2);
    double dt = now_ms() - t0;
    if (dt > worst) worst = dt;
    failed += !ok;
    ++rounds;
    usleep(1000);
  }
  printf("rounds=%ld failed=%ld worst_ms=%.1f\n", rounds, failed, worst);
  return 0;
}

/* The eventfds this process has open, by number: fds[n] set for each. */
static void eventfds(char* fds, int max) {
  memset(fds, 0, (size_t)max);
  DIR* d = opendir("/proc/self/fd");
  struct dirent* e;
  while (d && (e = readdir(d))) {
    int fd = atoi(e->d_name);
    char path[64], link[64] = "";
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (fd >= 0 && fd < max && readlink(path, link, sizeof link - 1) > 0 && strcmp(link, "anon_inode:[eventfd]") == 0)
      fds[fd] = 1;
  }
  if (d) closedir(d);
}

struct held_set {
  int ep;
  void* page;
};

static void* wait_into_page(void* arg) {
  struct held_set* h = arg;
  epoll_wait(h->ep, h->page, 1, -1);  /* faults copying the event out, holding the set's lock */
  return NULL;
}

static int held_kick(struct vrdma_context* ctx, const char* file, double seconds) {
  enum { kMaxFd = 4096 };
  static char before[kMaxFd], after[kMaxFd];
  eventfds(before, kMaxFd);
  struct pair p;
  if (router_pair(ctx, &p, 16)) return die("pair");
  eventfds(after, kMaxFd);
  struct held_set h = {epoll_create1(0), NULL};
  int pv[2];
  if (h.ep < 0 || pipe(pv) || write(pv[1], "x", 1) != 1) return die("epoll");
  struct epoll_event ready = {EPOLLIN, {.fd = pv[0]}};
  epoll_ctl(h.ep, EPOLL_CTL_ADD, pv[0], &ready);
  int kicks = 0;
  for (int fd = 0; fd < kMaxFd; ++fd) {
    if (!after[fd] || before[fd]) continue;
    struct epoll_event ev = {EPOLLIN, {.fd = fd}};
    kicks += epoll_ctl(h.ep, EPOLL_CTL_ADD, fd, &ev) == 0;
  }
  int f = open(file, O_RDONLY);
  h.page = f >= 0 ? mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, f, 0) : MAP_FAILED;
  if (h.page == MAP_FAILED) return die("mmap");
  pthread_t t;
  pthread_create(&t, NULL, wait_into_page, &h);
  usleep(500000);
  for (int fd = 0; fd < kMaxFd; ++fd)
    if (after[fd] && !before[fd]) close(fd);  /* the library's copies: the router's are the last */
  printf("armed kicks=%d\n", kicks);
  vrdma_destroy_qp(p.a);
  vrdma_destroy_qp(p.b);
  usleep((useconds_t)(seconds * 1e6));
  _exit(0);  /* its thread waits in the fault until the filesystem ends */
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: vrdma_hostile SOCKET MODE [ARGS]\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct vrdma_context* ctx = vrdma_open(argv[1]);
  if (!ctx) return die("open");
  const char* mode = argv[2];
  const char* a1 = argc > 3 ? argv[3] : "1";
  int rc;
  if (strcmp(mode, "qp-churn") == 0) rc = qp_churn(ctx, atol(a1), argc > 4 ? argv[4] : NULL);
  else if (strcmp(mode, "reg") == 0) rc = reg(ctx, strtoull(a1, NULL, 10));
  else if (strcmp(mode, "mr-churn") == 0) rc = mr_churn(ctx, atol(a1), argc > 4 ? strtoull(argv[4], NULL, 10) : 65536);
  else if (strcmp(mode, "bad-opcode") == 0) rc = bad_opcode(ctx);
  else if (strcmp(mode, "huge-write") == 0) rc = huge_write(ctx);
  else if (strcmp(mode, "ring-tail") == 0) rc = ring_tail(ctx, atof(a1));
  else if (strcmp(mode, "inline-op") == 0) rc = inline_op(ctx, atoi(a1));
  else if (strcmp(mode, "big-writes") == 0) rc = big_writes(ctx, atoi(a1), argc > 4 ? strtoull(argv[4], NULL, 10) : 1 << 20);
  else if (strcmp(mode, "touch-and-free") == 0) rc = touch_and_free(ctx, strtoull(a1, NULL, 10));
  else if (strcmp(mode, "srq-mix") == 0) rc = srq_mix(ctx);
  else if (strcmp(mode, "bell") == 0) rc = bell(ctx, atof(a1));
  else if (strcmp(mode, "flood") == 0) rc = flood(ctx, atof(a1));
  else if (strcmp(mode, "stuck") == 0) rc = stuck(ctx, atof(a1));
  else if (strcmp(mode, "connect-nowhere") == 0) rc = connect_nowhere(ctx, atoi(a1), argc > 4 ? atol(argv[4]) : 1);
  else if (strcmp(mode, "withdrawn") == 0) rc = withdrawn(ctx);
  else if (strcmp(mode, "stray-send") == 0) rc = stray_send(ctx);
  else if (strcmp(mode, "qp-memory") == 0) rc = qp_memory(ctx, atol(a1));
  else if (strcmp(mode, "many-regions") == 0)
    rc = many_regions(ctx, atoi(a1), argc > 4 ? atol(argv[4]) : 1, argc > 5 ? atof(argv[5]) : 1);
  else if (strcmp(mode, "withdrawn-many") == 0) rc = withdrawn_many(ctx, atoi(a1), argc > 4 ? atof(argv[4]) : 1);
  else if (strcmp(mode, "hold") == 0) rc = hold(ctx, atol(a1), argc > 4 ? atof(argv[4]) : 1);
  else if (strcmp(mode, "remote-keys") == 0) rc = remote_keys(ctx, a1, argc > 4 ? atof(argv[4]) : 1);
  else if (strcmp(mode, "ud-flood") == 0 && argc > 6)
    rc = ud_flood(ctx, a1, atoi(argv[4]), (unsigned)strtoul(argv[5], NULL, 10), atof(argv[6]));
  else if (strcmp(mode, "wide") == 0)
    rc = wide(ctx, atoi(a1), argc > 4 ? strtoull(argv[4], NULL, 10) : 1 << 20, argc > 5 ? atof(argv[5]) : 1);
  else if (strcmp(mode, "tenants-remote") == 0 && argc > 7)
    rc = tenants_remote(argv[1], a1, (uid_t)atol(argv[4]), atoi(argv[5]), strtoull(argv[6], NULL, 10), atof(argv[7]));
  else if (strcmp(mode, "wide-remote") == 0 && argc > 7)
    rc = wide_remote(ctx, a1, atoi(argv[4]), strtoull(argv[5], NULL, 10), atoi(argv[6]), atof(argv[7]),
                     argc > 8 && strcmp(argv[8], "fadd") == 0);
  else if (strcmp(mode, "abandon-sends") == 0 && argc > 5)
    rc = abandon_sends(ctx, a1, atoi(argv[4]), strtoull(argv[5], NULL, 10));
  else if (strcmp(mode, "rnr-sends") == 0 && argc > 6)
    rc = rnr_sends(ctx, a1, atoi(argv[4]), atoi(argv[5]), strtoull(argv[6], NULL, 10));
  else if (strcmp(mode, "pinned-dereg") == 0 && argc > 4)
    rc = pinned_dereg(ctx, a1, strtoull(argv[4], NULL, 10));
  else if (strcmp(mode, "fail-then-sends") == 0 && argc > 4) rc = fail_then_sends(ctx, a1, argv[4]);
  else if (strcmp(mode, "epoch-wrap") == 0 && argc > 4) rc = epoch_wrap(ctx, a1, atol(argv[4]));
  else if (strcmp(mode, "withdraw-race") == 0 && argc > 5)
    rc = withdraw_race(ctx, a1, (unsigned)atoi(argv[4]), atoi(argv[5]));
  else if (strcmp(mode, "remote-ping") == 0) rc = remote_ping(ctx, a1, argc > 4 ? atof(argv[4]) : 1);
  else if (strcmp(mode, "ping") == 0) rc = ping(ctx, argv[1], atof(a1));
  else if (strcmp(mode, "held-kick") == 0) rc = held_kick(ctx, a1, argc > 4 ? atof(argv[4]) : 30);
  else {
    fprintf(stderr, "vrdma_hostile: unknown mode %s\n", mode);
    rc = 2;
  }
  vrdma_close(ctx);
  return rc;
}
