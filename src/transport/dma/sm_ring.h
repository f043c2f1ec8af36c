/* The descriptor ring of `dma:cuda -o engine=sm`: the engine's contract, in one place.
 *
 * CPU threads (producers) post copy descriptors {src, dst, len, id} into a ring in mapped pinned
 * host memory; consumers (GPU warps in the persistent kernel, CPU threads in the tests) claim
 * slots, copy, and mark them consumed. This file is plain C-like code that compiles as C++ (the
 * host side, the emulated consumers) and as CUDA under NVRTC (the kernel embeds this very text,
 * see sm_kernel.cu), so the protocol the tests exercise is the one the GPU runs.
 *
 * The protocol (a bounded MPMC queue with a sequence number per slot, after D. Vyukov):
 *  - slot i starts with seq = i. Position `pos` maps to slot pos & mask.
 *  - A producer may fill position pos when its slot's seq == pos. It claims pos by a
 *    compare-and-swap of ctrl->tail from pos to pos + 1, writes the fields, then publishes with a
 *    release store seq = pos + 1. seq < pos means the slot still holds the previous lap's
 *    descriptor: the ring is full (back-pressure; the producer gets SMR_FULL and may retry).
 *  - A consumer claims positions with a fetch-and-add on *head (n at a time: a warp takes 32). It
 *    waits for seq == pos + 1 (filled), copies, and releases with seq = pos + capacity, which is
 *    the value the producer of the next lap waits for. Claims never fail, so consumers wait on
 *    slots not yet filled; that is why head is apart from the ring: it lives in device memory,
 *    where the GPU's atomics are cheap, and no host atomics are needed across PCIe.
 *  - Completion: position pos is done when its slot's seq - (pos + capacity) >= 0 (seq only
 *    grows, so a slot already refilled by a later lap still reads as done for pos). Each consumer
 *    also publishes how many it has copied in its own counter ctrl->done[consumer], one writer
 *    per counter (no atomics across PCIe); their sum is the number of descriptors copied.
 *  - Shutdown: ctrl->stop = 1. Consumers waiting on an unfilled slot return; producers get
 *    SMR_STOPPED instead of waiting on a full ring.
 *  - Visibility: a consumer's copied bytes are fenced (system scope) before it releases the
 *    slot, so a producer that sees the slot done sees the bytes.
 */
#ifndef RDMABENCH_SM_RING_H
#define RDMABENCH_SM_RING_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SMR_CUDA 1
#define SMR_FN __device__ __forceinline__
/* NVRTC has no <stdint.h> (and some releases predefine its names): the protocol's own names. */
typedef unsigned long long smr_u64;
typedef long long smr_i64;
typedef unsigned long long smr_uptr;
#else
#include <sched.h>
#include <stdint.h>
#define SMR_FN static inline
typedef uint64_t smr_u64;
typedef int64_t smr_i64;
typedef uintptr_t smr_uptr;
#endif

#define SMR_MAX_CONSUMERS 256 /* done[] counters: one per warp (GPU) or thread (tests) */
#define SMR_LINE 64           /* keeps producer-, consumer- and flag-written words on their own lines */

enum { SMR_POSTED = 0, SMR_FULL = 1, SMR_STOPPED = 2 };

/* 32 bytes, two to a cache line: the host misses on a line the GPU last wrote (a slot's seq) on
 * every post and every completion it reads, and two slots a line halves those misses. */
typedef struct smr_slot {
  smr_u64 seq; /* the protocol's state of this slot; the other fields are valid after seq = pos + 1 */
  smr_u64 src, dst;
  unsigned int len; /* one copy is under 4 GiB (rdmabench's ops are) */
  unsigned int id;  /* the producer's tag, for the tests' accounting; the engine keeps its own */
} smr_slot;

typedef struct smr_counter {
  smr_u64 value;
  smr_u64 pad[SMR_LINE / 8 - 1];
} smr_counter;

/* What producers and consumers share besides the slots (host memory, mapped for the GPU). */
typedef struct smr_ctrl {
  smr_counter tail; /* next position a producer claims */
  smr_counter stop; /* nonzero: shut down */
  smr_counter done[SMR_MAX_CONSUMERS];
} smr_ctrl;

/* A view of one ring, passed by value (to the kernel as its argument). */
typedef struct smr_ring {
  smr_slot* slots;
  smr_u64 capacity; /* a power of two */
  smr_ctrl* ctrl;
  smr_u64* head; /* the consumers' claim counter: device memory on the GPU */
} smr_ring;

/* ---- memory order: the only lines that differ between the host and the GPU ---- */
#ifdef SMR_CUDA
SMR_FN smr_u64 smr_load_acquire(const smr_u64* p) {
  smr_u64 v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
SMR_FN void smr_store_release(smr_u64* p, smr_u64 v) {
  asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
SMR_FN smr_u64 smr_fetch_add(smr_u64* p, smr_u64 n) {
  return (smr_u64)atomicAdd((unsigned long long*)p, (unsigned long long)n);
}
SMR_FN void smr_fence(void) { __threadfence_system(); }
SMR_FN void smr_pause(void) { __nanosleep(64); }
#else
SMR_FN smr_u64 smr_load_acquire(const smr_u64* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
SMR_FN void smr_store_release(smr_u64* p, smr_u64 v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
SMR_FN smr_u64 smr_fetch_add(smr_u64* p, smr_u64 n) { return __atomic_fetch_add(p, n, __ATOMIC_ACQ_REL); }
SMR_FN void smr_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
/* Host waiters (blocked producers, the tests' emulated consumers) may outnumber the cores: give
 * the core away rather than spin through a whole time slice. */
SMR_FN void smr_pause(void) { sched_yield(); }
#endif

/* ---- both sides ---- */
SMR_FN smr_slot* smr_slot_at(const smr_ring* r, smr_u64 pos) { return &r->slots[pos & (r->capacity - 1)]; }
SMR_FN int smr_stopped(const smr_ring* r) { return smr_load_acquire(&r->ctrl->stop.value) != 0; }

/* Whether position `pos` has been copied (see "Completion" above). */
SMR_FN int smr_is_done(const smr_ring* r, smr_u64 pos) {
  smr_u64 seq = smr_load_acquire(&smr_slot_at(r, pos)->seq);
  return (smr_i64)(seq - (pos + r->capacity)) >= 0;
}

/* ---- consumer side ---- */
SMR_FN smr_u64 smr_claim(const smr_ring* r, smr_u64 n) { return smr_fetch_add(r->head, n); }

/* Waits for position pos to be filled and reads it: 1, or 0 when the ring is stopped first. */
SMR_FN int smr_wait_filled(const smr_ring* r, smr_u64 pos, smr_slot* out) {
  smr_slot* s = smr_slot_at(r, pos);
  for (unsigned spins = 0;; ++spins) {
    if (smr_load_acquire(&s->seq) == pos + 1) break;
    if ((spins & 63) == 63 && smr_stopped(r)) return 0;
    smr_pause();
  }
  out->src = s->src;
  out->dst = s->dst;
  out->len = s->len;
  out->id = s->id;
  return 1;
}

/* The copy itself: 8 bytes at a time where both ends allow it. */
SMR_FN void smr_copy(const smr_slot* d) {
  unsigned char* dst = (unsigned char*)(smr_uptr)d->dst;
  const unsigned char* src = (const unsigned char*)(smr_uptr)d->src;
  smr_u64 n = d->len, i = 0;
  if (((d->dst | d->src) & 7) == 0)
    for (; i + 8 <= n; i += 8) *(smr_u64*)(dst + i) = *(const smr_u64*)(src + i);
  for (; i < n; ++i) dst[i] = src[i];
}

/* Hands position pos back to the producers once its copy is visible to them. */
SMR_FN void smr_release(const smr_ring* r, smr_u64 pos) {
  smr_fence();
  smr_store_release(&smr_slot_at(r, pos)->seq, pos + r->capacity);
}

/* Publishes this consumer's running total of copies. It is the counter's only writer and keeps
 * the total itself, so publishing is one store (no read back across PCIe). */
SMR_FN void smr_publish_done(const smr_ring* r, unsigned consumer, smr_u64 total) {
  smr_store_release(&r->ctrl->done[consumer].value, total);
}

/* One descriptor start to finish, as one consumer thread (or GPU lane) does it: 1 copied, 0 stopped. */
SMR_FN int smr_consume_one(const smr_ring* r, smr_u64 pos) {
  smr_slot d;
  if (!smr_wait_filled(r, pos, &d)) return 0;
  smr_copy(&d);
  smr_release(r, pos);
  return 1;
}

/* ---- producer side (host only: producers are CPU threads) ---- */
#ifndef SMR_CUDA
/* Sets up the slots and the control block of an empty ring of `capacity` (a power of two). */
SMR_FN void smr_init(const smr_ring* r) {
  for (smr_u64 i = 0; i < r->capacity; ++i) r->slots[i].seq = i;
  r->ctrl->tail.value = 0;
  r->ctrl->stop.value = 0;
  for (unsigned c = 0; c < SMR_MAX_CONSUMERS; ++c) r->ctrl->done[c].value = 0;
  *r->head = 0;
  smr_fence();
}

/* Posts one descriptor without waiting: SMR_POSTED (its position in *pos_out), SMR_FULL, SMR_STOPPED. */
SMR_FN int smr_try_post(const smr_ring* r, smr_u64 src, smr_u64 dst, smr_u64 len, smr_u64 id, smr_u64* pos_out) {
  if (smr_stopped(r)) return SMR_STOPPED;
  smr_u64 pos = __atomic_load_n(&r->ctrl->tail.value, __ATOMIC_RELAXED);
  for (;;) {
    smr_slot* s = smr_slot_at(r, pos);
    smr_i64 diff = (smr_i64)(smr_load_acquire(&s->seq) - pos);
    if (diff < 0) return SMR_FULL; /* the previous lap's descriptor is still there */
    if (diff == 0 && __atomic_compare_exchange_n(&r->ctrl->tail.value, &pos, pos + 1, 0, __ATOMIC_ACQ_REL,
                                                 __ATOMIC_RELAXED)) {
      s->src = src;
      s->dst = dst;
      s->len = (unsigned int)len;
      s->id = (unsigned int)id;
      smr_store_release(&s->seq, pos + 1);
      *pos_out = pos;
      return SMR_POSTED;
    }
    if (diff > 0) pos = __atomic_load_n(&r->ctrl->tail.value, __ATOMIC_RELAXED); /* another producer took it */
  }
}

/* Posts one descriptor, waiting while the ring is full: SMR_POSTED or SMR_STOPPED (never hangs
 * after stop). */
SMR_FN int smr_post(const smr_ring* r, smr_u64 src, smr_u64 dst, smr_u64 len, smr_u64 id, smr_u64* pos_out) {
  for (;;) {
    int rc = smr_try_post(r, src, dst, len, id, pos_out);
    if (rc != SMR_FULL) return rc;
    smr_pause();
  }
}

SMR_FN void smr_stop(const smr_ring* r) { smr_store_release(&r->ctrl->stop.value, 1); }

/* Descriptors copied so far, summed over the consumers' counters. */
SMR_FN smr_u64 smr_done_total(const smr_ring* r) {
  smr_u64 sum = 0;
  for (unsigned c = 0; c < SMR_MAX_CONSUMERS; ++c) sum += smr_load_acquire(&r->ctrl->done[c].value);
  return sum;
}
#endif

#endif /* RDMABENCH_SM_RING_H */
