/* A client of libvrdma for the e2e tests, written against the public C header alone.
 *
 *   vrdma_client SOCKET STEP...
 *
 * Steps run in order: pd (allocate a PD), mr:LEN (allocate a region of LEN bytes on the last PD,
 * write a pattern into it and read it back), dereg (the last region), dealloc (the last PD),
 * user:LEN (register a page-aligned buffer of its own holding a pattern, check the pattern
 * survived, change it, deregister, check the change survived), stats (print the router's
 * counters), qp (a CQ and an RC QP on the last PD), timeout:NS (vrdma_set_peer_timeout on the last
 * QP), wait:FILE (create FILE, then block until stdin closes), zero, zero-router and
 * zero-remote:SOCKET (a pair of QPs: on the direct path, on the router path, or with the peer at
 * the router of SOCKET; zero-length WRITE, READ and WRITE with immediate under rkey 0, each of
 * which must succeed as on InfiniBand, and the immediate must arrive), sges, sges-router and
 * sges-remote:SOCKET (the same three placements: a WRITE gathered from 8 SGEs, a READ scattered
 * into 8, a SEND of 8 into a receive of 8, every byte checked), path, path-router and
 * path-remote:SOCKET (the same placements: vrdma_qp_router_path says 0, 1 and 1 once connected, 0
 * before).
 * A step prefixed with '!' must fail. Each step prints one line: "ok STEP" or
 * "fail STEP errno=N: why". Exit 0 when every step did as expected, 1 when one did not.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vrdma/vrdma.h>

enum { kMaxObjects = 64 };

static struct vrdma_pd* pds[kMaxObjects];
static struct vrdma_mr* mrs[kMaxObjects];
static struct vrdma_qp* qps[kMaxObjects];
static int npd, nmr, nqp;

static int fill_and_check(struct vrdma_mr* mr) {
  unsigned char* p = mr->addr;
  for (size_t i = 0; i < mr->length; ++i)
    if (p[i] != 0) return -EIO; /* a fresh region is zeroed */
  for (size_t i = 0; i < mr->length; ++i) p[i] = (unsigned char)(i * 7 + 3);
  for (size_t i = 0; i < mr->length; ++i)
    if (p[i] != (unsigned char)(i * 7 + 3)) return -EIO;
  return 0;
}

/* A QP on context `a` connected to one on `b`, each with a PD, a CQ and a region of `len` bytes
 * with `access`: the two ends the data steps below use (left to the process's end). */
struct two_ends {
  struct vrdma_pd *pa, *pb;
  struct vrdma_cq *ca, *cb;
  struct vrdma_mr *ma, *mb;
  struct vrdma_qp *qa, *qb;
};

static int connect_ends(struct vrdma_context* a, struct vrdma_context* b, unsigned flags, size_t len, unsigned access,
                        struct two_ends* e) {
  e->pa = vrdma_alloc_pd(a), e->pb = vrdma_alloc_pd(b);
  e->ca = e->pa ? vrdma_create_cq(a, 16) : NULL, e->cb = e->pb ? vrdma_create_cq(b, 16) : NULL;
  e->ma = e->cb ? vrdma_alloc_mr(e->pa, len, access) : NULL;
  e->mb = e->ma ? vrdma_alloc_mr(e->pb, len, access) : NULL;
  if (!e->mb) return -errno;
  struct vrdma_qp_init_attr at = {e->ca, e->ca, 8, 8, 0, 0, flags, NULL}, bt = {e->cb, e->cb, 8, 8, 0, 0, flags, NULL};
  e->qa = vrdma_create_qp(e->pa, &at), e->qb = vrdma_create_qp(e->pb, &bt);
  if (!e->qa || !e->qb) return -errno;
  unsigned char aa[VRDMA_ADDRESS_BYTES], ab[VRDMA_ADDRESS_BYTES];
  vrdma_qp_address(e->qa, aa, sizeof aa);
  vrdma_qp_address(e->qb, ab, sizeof ab);
  return vrdma_connect_qp(e->qb, aa, sizeof aa) || vrdma_connect_qp(e->qa, ab, sizeof ab) ? -errno : 0;
}

/* Zero-length WRITE, READ and WRITE with immediate, under rkey 0 and address 0, from a QP on
 * `a` to its peer on `b`: each must complete with success, and the immediate must arrive. */
static int zero_length_ops(struct vrdma_context* a, struct vrdma_context* b, unsigned flags) {
  struct two_ends e;
  if (connect_ends(a, b, flags, 64, VRDMA_ACCESS_LOCAL_WRITE, &e)) return -errno;
  struct vrdma_qp *qa = e.qa, *qb = e.qb;
  struct vrdma_cq *ca = e.ca, *cb = e.cb;
  struct vrdma_mr* mb = e.mb;
  struct vrdma_sge rs = {(uint64_t)(uintptr_t)mb->addr, 64, mb->lkey};
  struct vrdma_recv_wr rw = {7, NULL, &rs, 1}, *rbad;
  if (vrdma_post_recv(qb, &rw, &rbad)) return -errno;
  const int ops[] = {VRDMA_WR_RDMA_WRITE, VRDMA_WR_RDMA_READ, VRDMA_WR_RDMA_WRITE_WITH_IMM};
  for (int i = 0; i < 3; ++i) {
    struct vrdma_send_wr wr = {0}, *bad;
    wr.wr_id = (uint64_t)i;
    wr.opcode = ops[i];
    wr.send_flags = VRDMA_SEND_SIGNALED;
    wr.imm_data = 0x2a;
    if (vrdma_post_send(qa, &wr, &bad)) return -errno;
    struct vrdma_wc wc;
    int n = 0;
    for (int spins = 0; n == 0 && spins < 20000; ++spins, usleep(n ? 0 : 100)) n = vrdma_poll_cq(ca, 1, &wc);
    if (n != 1 || wc.status != VRDMA_WC_SUCCESS || wc.byte_len != 0) return -EIO;
  }
  struct vrdma_wc got;
  int n = 0;
  for (int spins = 0; n == 0 && spins < 20000; ++spins, usleep(n ? 0 : 100)) n = vrdma_poll_cq(cb, 1, &got);
  return n == 1 && got.status == VRDMA_WC_SUCCESS && got.wr_id == 7 && got.imm_data == 0x2a ? 0 : -EIO;
}

/* A pair of QPs from `a` to `b`: vrdma_qp_router_path says 0 before connecting and `expected` after,
 * on both ends. */
static int path_of(struct vrdma_context* a, struct vrdma_context* b, unsigned flags, int expected) {
  struct two_ends e;
  if (connect_ends(a, b, flags, 64, VRDMA_ACCESS_LOCAL_WRITE, &e)) return -errno;
  struct vrdma_pd* pd = vrdma_alloc_pd(a);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(a, 4) : NULL;
  struct vrdma_qp_init_attr at = {cq, cq, 4, 4, 0, 0, flags, NULL};
  struct vrdma_qp* fresh = cq ? vrdma_create_qp(pd, &at) : NULL;
  if (!fresh || vrdma_qp_router_path(fresh) != 0) return -EPROTO;
  return vrdma_qp_router_path(e.qa) == expected && vrdma_qp_router_path(e.qb) == expected ? 0 : -EPROTO;
}

static int wait_wc(struct vrdma_cq* cq, struct vrdma_wc* wc) {
  int n = 0;
  for (int spins = 0; n == 0 && spins < 20000; ++spins, usleep(n ? 0 : 100)) n = vrdma_poll_cq(cq, 1, wc);
  return n == 1 && wc->status == VRDMA_WC_SUCCESS ? 0 : -EIO;
}

/* One request of 8 SGEs at `base`, pieces of 100 B every 512 B, to `raddr`/`rkey`. */
static int post8(struct vrdma_qp* qp, struct vrdma_mr* mr, size_t base, int opcode, uint64_t raddr, uint32_t rkey) {
  struct vrdma_sge g[8];
  for (int i = 0; i < 8; ++i) g[i] = (struct vrdma_sge){(uint64_t)(uintptr_t)mr->addr + base + 512 * i, 100, mr->lkey};
  struct vrdma_send_wr wr = {0}, *bad;
  wr.opcode = opcode;
  wr.sg_list = g;
  wr.num_sge = 8;
  wr.send_flags = VRDMA_SEND_SIGNALED;
  wr.remote_addr = raddr;
  wr.rkey = rkey;
  return vrdma_post_send(qp, &wr, &bad) ? -errno : 0;
}

/* Whether the 8 pieces at `base` of `p` hold, end to end, the 800 bytes at `q`. */
static int same8(const unsigned char* p, size_t base, const unsigned char* q) {
  for (int i = 0; i < 8; ++i)
    if (memcmp(p + base + 512 * i, q + 100 * i, 100)) return 0;
  return 1;
}

/* A WRITE gathered from 8 SGEs, a READ scattered into 8 and a SEND of 8 into a receive of 8, from
 * a QP on `a` to its peer on `b` (the fabric between routers takes fewer pieces a post). */
static int eight_sge_ops(struct vrdma_context* a, struct vrdma_context* b, unsigned flags) {
  const unsigned rw = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE | VRDMA_ACCESS_REMOTE_READ;
  struct two_ends e;
  if (connect_ends(a, b, flags, 16384, rw, &e)) return -errno;
  struct vrdma_qp *qa = e.qa, *qb = e.qb;
  struct vrdma_cq *ca = e.ca, *cb = e.cb;
  struct vrdma_mr *ma = e.ma, *mb = e.mb;
  unsigned char *pa_ = ma->addr, *pb_ = mb->addr;
  for (int i = 0; i < 16384; ++i) pa_[i] = (unsigned char)(i * 7 + 1), pb_[i] = (unsigned char)(i * 3 + 5);
  struct vrdma_wc wc;
  /* WRITE: a's 8 pieces at 0 land end to end at b's 0. */
  if (post8(qa, ma, 0, VRDMA_WR_RDMA_WRITE, (uint64_t)(uintptr_t)pb_, mb->rkey) || wait_wc(ca, &wc)) return -EIO;
  if (!same8(pa_, 0, pb_)) return -EBADMSG;
  /* READ: b's 800 B at 8192 scatter into a's 8 pieces at 4096. */
  if (post8(qa, ma, 4096, VRDMA_WR_RDMA_READ, (uint64_t)(uintptr_t)pb_ + 8192, mb->rkey) || wait_wc(ca, &wc)) return -EIO;
  if (!same8(pa_, 4096, pb_ + 8192)) return -EBADMSG;
  /* SEND: a's 8 pieces at 8192 into b's receive of 8 pieces at 12288 (the receive is 8 x 100 B). */
  struct vrdma_sge rs[8];
  for (int i = 0; i < 8; ++i) rs[i] = (struct vrdma_sge){(uint64_t)(uintptr_t)pb_ + 12288 + 512 * i, 100, mb->lkey};
  struct vrdma_recv_wr rwr = {9, NULL, rs, 8}, *rbad;
  if (vrdma_post_recv(qb, &rwr, &rbad)) return -errno;
  if (post8(qa, ma, 8192, VRDMA_WR_SEND, 0, 0) || wait_wc(ca, &wc) || wait_wc(cb, &wc)) return -EIO;
  unsigned char sent[800];
  for (int i = 0; i < 8; ++i) memcpy(sent + 100 * i, pa_ + 8192 + 512 * i, 100);
  return wc.byte_len == 800 && same8(pb_, 12288, sent) ? 0 : -EBADMSG;
}

/* The completion of the next request on `cq`, which must have `status`. */
static int wait_status(struct vrdma_cq* cq, int status) {
  struct vrdma_wc wc;
  int n = 0;
  for (int spins = 0; n == 0 && spins < 20000; ++spins, usleep(n ? 0 : 100)) n = vrdma_poll_cq(cq, 1, &wc);
  return n == 1 && wc.status == status ? 0 : -EIO;
}

/* The library keeps what it checked of the last local region and the last peer key a QP used:
 * a request naming either after its deregistration must fail all the same (LOC_PROT_ERR for the
 * local one, whose memory is unmapped by then; REM_ACCESS_ERR for the peer's). */
static int stale_keys(struct vrdma_context* a, struct vrdma_context* b) {
  const unsigned rw = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE | VRDMA_ACCESS_REMOTE_READ;
  struct two_ends e;
  if (connect_ends(a, b, VRDMA_QP_NO_ERROR_STATE, 4096, rw, &e)) return -errno;
  struct vrdma_mr* gone = vrdma_alloc_mr(e.pa, 4096, rw);
  if (!gone) return -errno;
  uint64_t to = (uint64_t)(uintptr_t)e.mb->addr;
  if (post8(e.qa, gone, 0, VRDMA_WR_RDMA_WRITE, to, e.mb->rkey) || wait_status(e.ca, VRDMA_WC_SUCCESS)) return -EIO;
  struct vrdma_mr was = *gone;
  if (vrdma_dereg_mr(gone)) return -errno;
  if (post8(e.qa, &was, 0, VRDMA_WR_RDMA_WRITE, to, e.mb->rkey) || wait_status(e.ca, VRDMA_WC_LOC_PROT_ERR))
    return -EPERM;
  if (post8(e.qa, e.ma, 0, VRDMA_WR_RDMA_WRITE, to, e.mb->rkey) || wait_status(e.ca, VRDMA_WC_SUCCESS)) return -EIO;
  uint32_t rkey = e.mb->rkey;
  if (vrdma_dereg_mr(e.mb)) return -errno;
  if (post8(e.qa, e.ma, 0, VRDMA_WR_RDMA_WRITE, to, rkey) || wait_status(e.ca, VRDMA_WC_REM_ACCESS_ERR)) return -EACCES;
  return 0;
}

/* A child of fork() writes its copies of a registered buffer and of a vrdma_alloc_mr region
 * (after checking it sees what the parent wrote): the parent's bytes must stay as they were. */
static int fork_copies(struct vrdma_context* ctx) {
  enum { kLen = 1 << 16 };
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  unsigned char* buf = aligned_alloc(4096, kLen);
  if (!pd || !buf) return -ENOMEM;
  memset(buf, 'P', kLen);
  struct vrdma_mr* user = vrdma_reg_mr(pd, buf, kLen, VRDMA_ACCESS_LOCAL_WRITE);
  struct vrdma_mr* owned = user ? vrdma_alloc_mr(pd, kLen, VRDMA_ACCESS_LOCAL_WRITE) : NULL;
  if (!owned) return -errno;
  memset(owned->addr, 'P', kLen);
  pid_t child = fork();
  if (child < 0) return -errno;
  if (child == 0) {
    unsigned char* o = owned->addr;
    int saw = buf[kLen - 1] == 'P' && o[kLen - 1] == 'P';
    memset(buf, 'C', kLen);
    memset(o, 'C', kLen);
    _exit(saw ? 0 : 3);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) return -errno;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -ECHILD;
  for (size_t i = 0; i < kLen; ++i)
    if (buf[i] != 'P' || ((unsigned char*)owned->addr)[i] != 'P') return -EBADMSG;
  return vrdma_dereg_mr(owned) || vrdma_dereg_mr(user) ? -errno : 0;
}

/* fork() where the child cannot have its copy of a registered buffer (its address space is
 * capped, RLIMIT_AS, below what the copy needs): the child must neither share the parent's pages
 * nor see zeros in their place, nor hang; its first touch of them ends it with SIGSEGV. */
static int fork_starved(struct vrdma_context* ctx) {
  enum { kLen = 1 << 20 };
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  unsigned char* buf = aligned_alloc(4096, kLen);
  if (!pd || !buf) return -ENOMEM;
  memset(buf, 'P', kLen);
  struct vrdma_mr* mr = vrdma_reg_mr(pd, buf, kLen, VRDMA_ACCESS_LOCAL_WRITE);
  if (!mr) return -errno;
  unsigned long pages = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%lu", &pages) != 1) return -EIO;
  fclose(f);
  struct rlimit was, cap;
  getrlimit(RLIMIT_AS, &was);
  cap = was;
  cap.rlim_cur = pages * (unsigned long)sysconf(_SC_PAGESIZE) + kLen / 2;
  if (setrlimit(RLIMIT_AS, &cap)) return -errno;
  pid_t child = fork();
  setrlimit(RLIMIT_AS, &was);
  if (child < 0) return -errno;
  if (child == 0) _exit(buf[kLen / 2] == 'P' ? 4 : 3); /* 4: shared or copied after all; 3: zeros */
  int status = 0;
  for (int i = 0; i < 1000 && waitpid(child, &status, WNOHANG) == 0; ++i) usleep(10000);
  if (waitpid(child, &status, WNOHANG) == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    return -ETIMEDOUT;
  }
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV) {
    printf("child: %s %d\n", WIFSIGNALED(status) ? "signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return -ECHILD;
  }
  for (size_t i = 0; i < kLen; ++i)
    if (buf[i] != 'P') return -EBADMSG;
  return vrdma_dereg_mr(mr) ? -errno : 0;
}

/* A child of fork() calls on what it inherited: each call must fail, never act for the parent (a
 * child's dereg deregistered the parent's region at the router; its poll took the parent's
 * completions). The parent then goes on with all of it. */
/* The child maps every vrdma memfd it inherited and writes all of it (a deliberate act). */
static void write_inherited_memfds(void) {
  DIR* d = opendir("/proc/self/fd");
  struct dirent* e;
  while (d && (e = readdir(d))) {
    char path[300], target[256];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(path, target, sizeof target - 1);
    struct stat st;
    if (n <= 0 || (target[n] = 0, !strstr(target, "memfd:vrdma-user")) || fstat(atoi(e->d_name), &st) || st.st_size == 0)
      continue;
    void* p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, atoi(e->d_name), 0);
    if (p != MAP_FAILED) memset(p, 'C', (size_t)st.st_size);
  }
  if (d) closedir(d);
}

static int fork_orphan(struct vrdma_context* ctx) {
  enum { kLen = 1 << 16 };
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_mr* mr = pd ? vrdma_alloc_mr(pd, 4096, VRDMA_ACCESS_LOCAL_WRITE) : NULL;
  struct vrdma_cq* cq = mr ? vrdma_create_cq(ctx, 16) : NULL;
  unsigned char* buf = aligned_alloc(4096, kLen);
  if (!cq || !buf) return -errno;
  memset(buf, 'P', kLen);
  struct vrdma_mr* user = vrdma_reg_mr(pd, buf, kLen, VRDMA_ACCESS_LOCAL_WRITE);
  if (!user) return -errno;
  pid_t child = fork();
  if (child < 0) return -errno;
  if (child == 0) {
    struct vrdma_wc wc;
    int acted = (vrdma_dereg_mr(mr) == 0) | (vrdma_alloc_pd(ctx) != NULL) << 1 | (vrdma_poll_cq(cq, 1, &wc) >= 0) << 2;
    write_inherited_memfds();
    _exit(acted ? 10 + acted : 0);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) return -errno;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    printf("child: %s %d\n", WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return -ECHILD;
  }
  for (size_t i = 0; i < kLen; ++i)
    if (buf[i] != 'P') return -EBADMSG;
  struct vrdma_wc wc;
  if (vrdma_poll_cq(cq, 1, &wc) != 0) return -EIO;
  if (vrdma_dereg_mr(user) || vrdma_dereg_mr(mr) || vrdma_destroy_cq(cq) || vrdma_dealloc_pd(pd)) return -errno;
  return 0;
}

static int step(struct vrdma_context* ctx, const char* s) {
  if (strcmp(s, "pd") == 0) {
    if (npd == kMaxObjects) return -ENOSPC;
    struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
    if (!pd) return -errno;
    pds[npd++] = pd;
    return 0;
  }
  if (strncmp(s, "mr:", 3) == 0) {
    if (npd == 0 || nmr == kMaxObjects) return -EINVAL;
    unsigned access = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE | VRDMA_ACCESS_REMOTE_READ;
    struct vrdma_mr* mr = vrdma_alloc_mr(pds[npd - 1], strtoull(s + 3, NULL, 0), access);
    if (!mr) return -errno;
    mrs[nmr++] = mr;
    return fill_and_check(mr);
  }
  if (strncmp(s, "user:", 5) == 0) {
    if (npd == 0) return -EINVAL;
    size_t len = strtoull(s + 5, NULL, 0);
    unsigned char* buf = NULL;
    if (posix_memalign((void**)&buf, 4096, len)) return -ENOMEM;
    for (size_t i = 0; i < len; ++i) buf[i] = (unsigned char)(i * 13 + 1);
    struct vrdma_mr* mr = vrdma_reg_mr(pds[npd - 1], buf, len, VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE);
    if (!mr) return -errno;
    int r = mr->addr == buf ? 0 : -EFAULT;
    for (size_t i = 0; r == 0 && i < len; ++i)
      if (buf[i] != (unsigned char)(i * 13 + 1)) r = -EIO; /* registration kept the contents */
    for (size_t i = 0; i < len; ++i) buf[i] = (unsigned char)(i * 5 + 2);
    if (vrdma_dereg_mr(mr)) return -errno;
    for (size_t i = 0; r == 0 && i < len; ++i)
      if (buf[i] != (unsigned char)(i * 5 + 2)) r = -EIO; /* and so did deregistration */
    free(buf);
    return r;
  }
  if (strcmp(s, "dereg") == 0) return nmr ? vrdma_dereg_mr(mrs[--nmr]) : -EINVAL;
  if (strcmp(s, "dealloc") == 0) {
    if (npd == 0) return -EINVAL;
    int r = vrdma_dealloc_pd(pds[npd - 1]);
    if (r == 0) --npd;
    return r;
  }
  if (strcmp(s, "qp") == 0) {
    if (npd == 0 || nqp == kMaxObjects) return -EINVAL;
    struct vrdma_cq* cq = vrdma_create_cq(ctx, 16);
    if (!cq) return -errno;
    struct vrdma_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .max_send_wr = 16, .max_recv_wr = 16};
    struct vrdma_qp* qp = vrdma_create_qp(pds[npd - 1], &a);
    if (!qp) return -errno;
    qps[nqp++] = qp;
    return 0;
  }
  if (strncmp(s, "timeout:", 8) == 0) return nqp ? vrdma_set_peer_timeout(qps[nqp - 1], strtoull(s + 8, NULL, 0)) : -EINVAL;
  if (strcmp(s, "stats") == 0) {
    char* text = vrdma_router_stats(ctx);
    if (!text) return -errno;
    fputs(text, stdout);
    free(text);
    return 0;
  }
  if (strncmp(s, "wait:", 5) == 0) {
    FILE* f = fopen(s + 5, "w");
    if (!f) return -errno;
    fclose(f);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
    return 0;
  }
  if (strcmp(s, "zero") == 0) return zero_length_ops(ctx, ctx, 0);
  if (strcmp(s, "zero-router") == 0) return zero_length_ops(ctx, ctx, VRDMA_QP_ROUTER_PATH);
  if (strncmp(s, "zero-remote:", 12) == 0) {
    struct vrdma_context* other = vrdma_open(s + 12);
    if (!other) return -errno;
    return zero_length_ops(ctx, other, 0);  /* the other context is left to the process's end */
  }
  if (strcmp(s, "path") == 0) return path_of(ctx, ctx, 0, 0);
  if (strcmp(s, "path-router") == 0) return path_of(ctx, ctx, VRDMA_QP_ROUTER_PATH, 1);
  if (strncmp(s, "path-remote:", 12) == 0) {
    struct vrdma_context* other = vrdma_open(s + 12);
    if (!other) return -errno;
    return path_of(ctx, other, 0, 1);
  }
  if (strcmp(s, "stale-keys") == 0) return stale_keys(ctx, ctx);
  if (strcmp(s, "fork-copies") == 0) return fork_copies(ctx);
  if (strcmp(s, "fork-starved") == 0) return fork_starved(ctx);
  if (strcmp(s, "fork-orphan") == 0) return fork_orphan(ctx);
  if (strcmp(s, "sges") == 0) return eight_sge_ops(ctx, ctx, 0);
  if (strcmp(s, "sges-router") == 0) return eight_sge_ops(ctx, ctx, VRDMA_QP_ROUTER_PATH);
  if (strncmp(s, "sges-remote:", 12) == 0) {
    struct vrdma_context* other = vrdma_open(s + 12);
    if (!other) return -errno;
    return eight_sge_ops(ctx, other, 0);
  }
  fprintf(stderr, "vrdma_client: unknown step %s\n", s);
  exit(2);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: vrdma_client SOCKET STEP...\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct vrdma_context* ctx = vrdma_open(argv[1]);
  if (!ctx) {
    printf("fail open errno=%d: %s\n", errno, vrdma_last_error());
    return 1;
  }
  printf("ok open tenant=%s\n", vrdma_tenant(ctx));
  int status = 0;
  for (int i = 2; i < argc; ++i) {
    int must_fail = argv[i][0] == '!';
    const char* s = argv[i] + must_fail;
    int r = step(ctx, s);
    if (r == 0) printf("ok %s\n", s);
    else printf("fail %s errno=%d: %s\n", s, -r, vrdma_last_error());
    if ((r != 0) != must_fail) status = 1;
  }
  vrdma_close(ctx);
  return status;
}
