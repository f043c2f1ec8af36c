/* Registering memory while other threads use the same pages (run through vrdma-run by
 * tests/e2e/test_verbs_interop.py). vrdma maps shared memory under a registered buffer's whole
 * pages, copying them first; heap pages are shared by every thread (malloc's own records, other
 * buffers). Worker threads each register and deregister small malloc'd buffers, as rping's do,
 * while counter threads keep incrementing counters that live on heap pages next to them and check
 * each value they read back. Prints the counts; exits 1 if a registration failed, a counter went
 * back (a write lost to a remap) or a buffer changed under its registration.
 *
 *   verbs_reg_threads WORKERS SECONDS */
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 8

static struct ibv_pd *pd;
static volatile int stop;
static long regs[MAX_THREADS], failed, changed, lost;

static void *worker(void *arg) {
  long i = (long)arg;
  while (!stop) {
    char *p = malloc(64 + 16 * i);
    memset(p, (int)i + 1, 64);
    struct ibv_mr *mr = ibv_reg_mr(pd, p, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!mr) {
      __atomic_add_fetch(&failed, 1, __ATOMIC_RELAXED);
      free(p);
      continue;
    }
    for (int k = 0; k < 64; ++k)
      if (p[k] != (char)(i + 1)) {
        __atomic_add_fetch(&changed, 1, __ATOMIC_RELAXED);
        break;
      }
    ibv_dereg_mr(mr);
    free(p);
    ++regs[i];
  }
  return NULL;
}

/* A counter on the heap, among the workers' buffers: every increment must stay. */
static void *counter(void *arg) {
  volatile uint64_t *c = arg;
  for (uint64_t want = 1; !stop; ++want) {
    *c = want;
    if (*c != want) __atomic_add_fetch(&lost, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int workers = argc > 1 ? atoi(argv[1]) : 4, secs = argc > 2 ? atoi(argv[2]) : 3;
  if (workers < 1 || workers > MAX_THREADS - 2) workers = 4;
  struct ibv_device **list = ibv_get_device_list(NULL);
  struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
  pd = ctx ? ibv_alloc_pd(ctx) : NULL;
  if (!pd) {
    printf("FAIL no device or PD\n");
    return 1;
  }
  pthread_t t[MAX_THREADS];
  uint64_t *counters[2];
  for (int k = 0; k < 2; ++k) {
    counters[k] = malloc(sizeof(uint64_t));
    pthread_create(&t[workers + k], NULL, counter, counters[k]);
  }
  for (long i = 0; i < workers; ++i) pthread_create(&t[i], NULL, worker, (void *)i);
  sleep((unsigned)secs);
  stop = 1;
  long total = 0;
  for (int i = 0; i < workers + 2; ++i) pthread_join(t[i], NULL);
  for (int i = 0; i < workers; ++i) total += regs[i];
  printf("registrations %ld, failed %ld, buffers changed %ld, counter writes lost %ld\n", total, failed, changed, lost);
  return failed || changed || lost || total == 0 ? 1 : 0;
}
