/* Tenant isolation on libvrdma's C API, for the e2e tests.
 *
 *   vrdma_attack SOCKET victim FILE   registers 1 MiB of a pattern, writes "RKEY VA QPADDR" to FILE,
 *                                     waits for stdin to close, then prints the pattern's checksum
 *   vrdma_attack SOCKET attack FILE N reads FILE and, from another tenant, tries to connect to the
 *                                     victim's QP, then N writes and N reads with random and stolen
 *                                     keys and addresses on a QP of its own; prints what happened
 *
 * Lines printed: "connect errno=E", "writes ok=A failed=B", "reads ok=A failed=B",
 * "checksum X". Exit 0 unless the API itself misbehaved.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vrdma/vrdma.h>

enum { kLen = 1 << 20 };

static uint64_t checksum(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static int die(const char* what) {
  fprintf(stderr, "vrdma_attack: %s: %s\n", what, vrdma_last_error());
  return 1;
}

/* Two QPs of this process connected to each other: a tenant's own, legitimate connection. */
static int pair(struct vrdma_pd* pd, struct vrdma_cq* cq, struct vrdma_qp** a, struct vrdma_qp** b) {
  struct vrdma_qp_init_attr at = {cq, cq, 64, 64, 64, 0};
  unsigned char addr_a[VRDMA_ADDRESS_BYTES], addr_b[VRDMA_ADDRESS_BYTES];
  *a = vrdma_create_qp(pd, &at);
  *b = vrdma_create_qp(pd, &at);
  if (!*a || !*b) return -1;
  vrdma_qp_address(*a, addr_a, sizeof addr_a);
  vrdma_qp_address(*b, addr_b, sizeof addr_b);
  if (vrdma_connect_qp(*a, addr_b, sizeof addr_b) || vrdma_connect_qp(*b, addr_a, sizeof addr_a)) return -1;
  return 0;
}

static int victim(struct vrdma_context* ctx, const char* file) {
  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(ctx, 64) : NULL;
  unsigned acc = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE | VRDMA_ACCESS_REMOTE_READ;
  struct vrdma_mr* mr = cq ? vrdma_alloc_mr(pd, kLen, acc) : NULL;
  struct vrdma_qp *a, *b;
  if (!mr || pair(pd, cq, &a, &b)) return die("victim setup");
  unsigned char* p = mr->addr;
  for (size_t i = 0; i < kLen; ++i) p[i] = (unsigned char)(i * 31 + 7);
  unsigned char addr[VRDMA_ADDRESS_BYTES];
  vrdma_qp_address(a, addr, sizeof addr);
  FILE* f = fopen(file, "w");
  if (!f) return 1;
  fprintf(f, "%u %llu ", mr->rkey, (unsigned long long)(uintptr_t)mr->addr);
  for (int i = 0; i < VRDMA_ADDRESS_BYTES; ++i) fprintf(f, "%02x", addr[i]);
  fprintf(f, "\n");
  fclose(f);
  printf("checksum %016llx\n", (unsigned long long)checksum(p, kLen));
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
  printf("checksum %016llx\n", (unsigned long long)checksum(p, kLen));
  return 0;
}

static int attack(struct vrdma_context* ctx, const char* file, long n) {
  unsigned rkey;
  unsigned long long va;
  char hex[2 * VRDMA_ADDRESS_BYTES + 1];
  char format[32];
  snprintf(format, sizeof format, "%%u %%llu %%%ds", 2 * VRDMA_ADDRESS_BYTES);
  FILE* f = fopen(file, "r");
  if (!f || fscanf(f, format, &rkey, &va, hex) != 3) return 1;
  fclose(f);
  unsigned char addr[VRDMA_ADDRESS_BYTES];
  for (int i = 0; i < VRDMA_ADDRESS_BYTES; ++i) sscanf(hex + 2 * i, "%2hhx", &addr[i]);

  struct vrdma_pd* pd = vrdma_alloc_pd(ctx);
  struct vrdma_cq* cq = pd ? vrdma_create_cq(ctx, 64) : NULL;
  unsigned acc = VRDMA_ACCESS_LOCAL_WRITE | VRDMA_ACCESS_REMOTE_WRITE | VRDMA_ACCESS_REMOTE_READ;
  struct vrdma_mr* mr = cq ? vrdma_alloc_mr(pd, 4096, acc) : NULL;
  if (!mr) return die("attacker setup");
  struct vrdma_qp_init_attr at = {cq, cq, 64, 64, 64, 0};
  struct vrdma_qp* stray = vrdma_create_qp(pd, &at);
  if (!stray) return die("attacker QP");
  int r = vrdma_connect_qp(stray, addr, sizeof addr);
  printf("connect errno=%d\n", r ? -r : 0);

  struct vrdma_qp *a, *b;
  if (pair(pd, cq, &a, &b)) return die("attacker pair");
  memset(mr->addr, 0xee, 4096);
  srand(12345);
  for (int op = 0; op < 2; ++op) {
    long ok = 0, failed = 0;
    for (long i = 0; i < n; ++i) {
      struct vrdma_sge sge = {(uint64_t)(uintptr_t)mr->addr, 64, mr->lkey};
      struct vrdma_send_wr wr = {0};
      wr.wr_id = (uint64_t)i;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = op == 0 ? VRDMA_WR_RDMA_WRITE : VRDMA_WR_RDMA_READ;
      wr.send_flags = VRDMA_SEND_SIGNALED;
      /* Stolen key and address, a random key with the stolen address, random everything. */
      wr.rkey = i % 3 == 0 ? rkey : (unsigned)rand() * 2654435761u;
      wr.remote_addr = i % 3 == 2 ? ((uint64_t)rand() << 20) ^ (uint64_t)rand() : va + (uint64_t)(rand() % (kLen - 64));
      struct vrdma_send_wr* bad = NULL;
      if (vrdma_post_send(a, &wr, &bad)) return die("post_send");
      struct vrdma_wc wc;
      int got = vrdma_poll_cq(cq, 1, &wc);
      if (got != 1) return die("no completion");
      if (wc.status == VRDMA_WC_SUCCESS) ++ok;
      else ++failed;
      vrdma_recover_qp(a);
    }
    printf("%s ok=%ld failed=%ld\n", op == 0 ? "writes" : "reads", ok, failed);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: vrdma_attack SOCKET victim FILE | SOCKET attack FILE N\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct vrdma_context* ctx = vrdma_open(argv[1]);
  if (!ctx) return die("open");
  int rc = strcmp(argv[2], "victim") == 0 ? victim(ctx, argv[3]) : attack(ctx, argv[3], argc > 4 ? atol(argv[4]) : 1000);
  vrdma_close(ctx);
  return rc;
}
