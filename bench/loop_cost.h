/* One side's share of a 64 B ping-pong, timed per iteration with the waiting for the peer left
 * out, as perftest's latency tests run it and as rdmabench -t vrdma runs it. Two QPs of one
 * process on vrdma's direct path, where a request has completed when its post returns, so
 * each loop's figure is the calls' own cost. Included by verbs_loop_cost.c (through the verbs
 * layer) and vrdma_loop_cost.c (libvrdma directly), which define before including it:
 *   struct side;                                   one QP with its CQ and buffer
 *   static void post_write(struct side *from, int signaled);   64 B inline WRITE to the peer
 *   static void post_message(struct side *from, int signaled); 64 B inline SEND to the peer
 *   static void post_recv(struct side *s);                     one 64 B receive
 *   static void wait_ok(struct side *s, const char *what);     one successful completion
 *
 * What lies on the measured path differs between the two tools:
 * - perftest (ib_write_lat, ib_send_lat) signals every request and polls its completion, and
 *   ib_send_lat reposts the receive it consumed before it sends: everything between two of its
 *   posts is in its figure (half the time between consecutive posts).
 * - rdmabench sends small payloads inline and unsignaled (the peer's answer is the completion);
 *   its client posts the receive for the answer before it starts the clock, and its server
 *   answers before it reposts. So no receive post lies on its timed path: its SEND loop posts
 *   the block's receives untimed, then times the sends and arrivals. */
#ifndef LOOP_COST_H
#define LOOP_COST_H
#include <stdio.h>
#include <time.h>

/* Receives posted ahead of a block of rdmabench's SEND loop; within the QPs' 16. */
#define BLOCK 16

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void write_as_perftest(struct side *a, struct side *b) {
  (void)b;
  post_write(a, 1);
  wait_ok(a, "WRITE completion");
}

static void write_as_rdmabench(struct side *a, struct side *b) {
  (void)b;
  post_write(a, 0);
}

static void send_as_perftest(struct side *a, struct side *b) {
  post_recv(b);
  post_message(a, 1);
  wait_ok(a, "SEND completion");
  wait_ok(b, "RECV completion");
}

static void send_as_rdmabench(struct side *a, struct side *b) {
  post_message(a, 0);
  wait_ok(b, "RECV completion");
}

static void post_block_of_recvs(struct side *b) {
  for (int i = 0; i < BLOCK; ++i) post_recv(b);
}

typedef void (*loop_fn)(struct side *, struct side *);

/* ns per iteration over `iters`, timed in blocks of BLOCK iterations (every loop alike, so the
 * clock's own cost is the same in each figure); `untimed` runs before each block, off the clock. */
static double time_loop(loop_fn f, void (*untimed)(struct side *), struct side *a, struct side *b, long iters) {
  long warm_up = iters / 10 / BLOCK, timed = iters / BLOCK;
  double total = 0;
  for (long block = 0; block < warm_up + timed; ++block) {
    if (untimed) untimed(b);
    double t0 = now_ns();
    for (int i = 0; i < BLOCK; ++i) f(a, b);
    if (block >= warm_up) total += now_ns() - t0;
  }
  return total / (double)(timed * BLOCK);
}

/* Prints one line per loop: NAME ns_per_iteration. */
static void run_loops(struct side *a, struct side *b, long iters) {
  printf("write_perftest %.1f\n", time_loop(write_as_perftest, NULL, a, b, iters));
  printf("write_rdmabench %.1f\n", time_loop(write_as_rdmabench, NULL, a, b, iters));
  printf("send_perftest %.1f\n", time_loop(send_as_perftest, NULL, a, b, iters));
  printf("send_rdmabench %.1f\n", time_loop(send_as_rdmabench, post_block_of_recvs, a, b, iters));
}

#endif
