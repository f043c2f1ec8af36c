// The persistent kernel of `dma:cuda -o engine=sm`: a consumer of sm_ring.h (embedded ahead of
// this text at build time, see CMakeLists.txt), compiled at run time by NVRTC.
//
// Each warp claims 32 positions at once (one atomic per warp, not per descriptor); lane i owns
// position base + i. Every round the warp copies whatever of its 32 is filled by then, so a claim
// that runs ahead of the producers still hands back each filled slot at once.
//
// Why it is shaped this way (measured on an H200 over PCIe Gen5, bench/RESULTS.md): every read of
// the ring or of a host source is a PCIe round trip of about a microsecond, so what counts is how
// many reads are in flight at once, not how many instructions run:
//  - the filled copies of a round are cut into equal pieces (16 bytes where every address allows)
//    and the pieces dealt to the lanes, eight per lane loaded before any is stored, so 32 small
//    copies or one large one all travel together. A lane per copy, each copying alone, left a
//    256-byte copy 16 round trips long, and a warp per copy, in turn, one round trip per copy;
//  - a warp with nothing filled sleeps longer each round (up to SMR_MAX_NAP_NS): lanes polling
//    host memory every few nanoseconds flood the link and slow the warps that have work.

#define SMR_FULL_MASK 0xffffffffu
#define SMR_PIECES_IN_FLIGHT 8u  // per lane
#define SMR_MIN_NAP_NS 32u
#define SMR_MAX_NAP_NS 1024u
#define SMR_STOP_LOOK_EVERY 16u  // idle rounds between two looks at the stop flag

struct smr_v16 {
  smr_u64 a, b;
};

// The copies of the lanes with `mine` set, by the whole warp, in pieces of sizeof(T) (every
// address and length of these copies a multiple of it). All lanes call it.
template <typename T>
__device__ __forceinline__ void smr_copy_pieces(bool mine, smr_u64 src, smr_u64 dst, smr_u64 len, unsigned lane) {
  const smr_u64 count = mine ? len / sizeof(T) : 0;
  smr_u64 end = count;  // inclusive prefix sum: the pieces of lanes 0..lane
  for (unsigned o = 1; o < 32; o <<= 1) {
    const smr_u64 v = __shfl_up_sync(SMR_FULL_MASK, end, o);
    if (lane >= o) end += v;
  }
  const smr_u64 start = end - count, total = __shfl_sync(SMR_FULL_MASK, end, 31);
  for (smr_u64 first = 0; first < total; first += 32 * SMR_PIECES_IN_FLIGHT) {
    T piece[SMR_PIECES_IN_FLIGHT];
    T* to[SMR_PIECES_IN_FLIGHT];
#pragma unroll
    for (unsigned k = 0; k < SMR_PIECES_IN_FLIGHT; ++k) {
      const smr_u64 p = first + 32 * k + lane;
      const smr_u64 q = p < total ? p : total - 1;  // every lane shuffles: a shuffle some lanes skip hangs the warp
      unsigned owner = 0;                            // the lane whose copy holds piece q
      for (unsigned step = 16; step; step >>= 1)
        if (__shfl_sync(SMR_FULL_MASK, end, owner + step - 1) <= q) owner += step;
      const smr_u64 at = q - __shfl_sync(SMR_FULL_MASK, start, owner);
      const T* from = (const T*)__shfl_sync(SMR_FULL_MASK, src, owner) + at;
      T* into = (T*)__shfl_sync(SMR_FULL_MASK, dst, owner) + at;  // never under a branch: see above
      to[k] = p < total ? into : nullptr;
      if (to[k]) piece[k] = *from;
    }
#pragma unroll
    for (unsigned k = 0; k < SMR_PIECES_IN_FLIGHT; ++k)
      if (to[k]) *to[k] = piece[k];
  }
}

// The largest piece every filled copy of this round allows: 16, 8 or 1 byte.
__device__ __forceinline__ void smr_copy_round(bool mine, smr_u64 src, smr_u64 dst, smr_u64 len, unsigned lane) {
  const smr_u64 bits = src | dst | len;
  if (__all_sync(SMR_FULL_MASK, !mine || (bits & 15) == 0)) smr_copy_pieces<smr_v16>(mine, src, dst, len, lane);
  else if (__all_sync(SMR_FULL_MASK, !mine || (bits & 7) == 0)) smr_copy_pieces<smr_u64>(mine, src, dst, len, lane);
  else smr_copy_pieces<unsigned char>(mine, src, dst, len, lane);
}

extern "C" __global__ void smr_consume_kernel(smr_ring ring) {
  const unsigned lane = threadIdx.x & 31;
  const unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  smr_u64 copied_total = 0;
  for (;;) {
    smr_u64 base = 0;
    if (lane == 0) base = smr_claim(&ring, 32);
    const smr_u64 pos = __shfl_sync(SMR_FULL_MASK, base, 0) + lane;
    smr_slot* slot = smr_slot_at(&ring, pos);
    smr_u64 src = 0, dst = 0, len = 0;
    bool filled = false, copied = false;
    unsigned nap = SMR_MIN_NAP_NS, idle = 0;
    for (;;) {
      if (!filled && smr_load_acquire(&slot->seq) == pos + 1) {
        filled = true;
        src = slot->src, dst = slot->dst, len = slot->len;
      }
      const bool mine = filled && !copied;
      const unsigned ready = __ballot_sync(SMR_FULL_MASK, mine);
      if (ready) {
        smr_copy_round(mine, src, dst, len, lane);
        // smr_release's fence and store, split: a lane's copy was the whole warp's writes, so
        // every lane fences its part before the owner's store says done.
        smr_fence();
        __syncwarp();
        if (mine) smr_store_release(&slot->seq, pos + ring.capacity);
        copied = copied || mine;
        copied_total += __popc(ready);
        if (lane == 0) smr_publish_done(&ring, warp, copied_total);
        if (__all_sync(SMR_FULL_MASK, copied)) break;
        nap = SMR_MIN_NAP_NS;
        continue;
      }
      int stop = 0;
      if (lane == 0 && ++idle % SMR_STOP_LOOK_EVERY == 0) stop = smr_stopped(&ring);
      if (__shfl_sync(SMR_FULL_MASK, stop, 0)) return;
      __nanosleep(nap);
      nap = nap < SMR_MAX_NAP_NS ? 2 * nap : SMR_MAX_NAP_NS;
    }
  }
}
