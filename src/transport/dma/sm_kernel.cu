// The persistent kernel of `dma:cuda -o engine=sm`: a thin consumer of sm_ring.h (embedded ahead
// of this text at build time, see CMakeLists.txt), compiled at run time by NVRTC.
//
// Each warp claims 32 positions at once (one atomic per warp, not per descriptor); lane i copies
// position base + i. A lane waits alone for its slot to be filled, so a warp whose claim runs
// ahead of the producers still hands back every filled slot at once. The warp exits when the
// ring is stopped; its lane 0 keeps the warp's running total and publishes it in the warp's own
// completion counter.
extern "C" __global__ void smr_consume_kernel(smr_ring ring) {
  const unsigned lane = threadIdx.x & 31;
  const unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  smr_u64 copied_total = 0;
  for (;;) {
    smr_u64 base = 0;
    if (lane == 0) base = smr_claim(&ring, 32);
    base = __shfl_sync(0xffffffffu, base, 0);
    int copied = smr_consume_one(&ring, base + lane);
    unsigned all = __ballot_sync(0xffffffffu, copied);
    copied_total += (smr_u64)__popc(all);
    if (lane == 0) smr_publish_done(&ring, warp, copied_total);
    if (all != 0xffffffffu) return;  // some lane saw the stop flag
  }
}
