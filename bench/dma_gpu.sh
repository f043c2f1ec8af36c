#!/usr/bin/env bash
# The DOCA DMA bench's payload table on the copy engines a machine has: dma:cuda (the GPU's copy
# engines, pinned host <-> device) for read and write, 1 and 4 threads, batch 1/16/64, payload
# 16 B..64 KiB, plus large-copy GB/s and the dma:cpu engine for reference. Writes JSON Lines and
# the GPU's PCIe link into DIR; bench/dma_table.py turns them into bench/RESULTS.md's section.
#   bench/dma_gpu.sh [path/to/rdmabench] [DIR]
set -euo pipefail
B=${1:-build/rdmabench}
DIR=${2:-bench/data/dma}
mkdir -p "$DIR"
rm -f "$DIR"/dma_cuda.jsonl "$DIR"/dma_cuda_gbs.jsonl "$DIR"/dma_cpu.jsonl
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,driver_version \
  --format=csv > "$DIR/gpu.csv"
for op in write read; do for t in 1 4; do for b in 1 16 64; do
  "$B" -t dma:cuda --op $op --size 16,64,256,1K,4K,16K,64K --threads $t --batch $b --depth 256 \
    --random-space 64M --thread-gap 16M --duration 0.4 --warmup 0.1s --json "$DIR/dma_cuda.jsonl" >/dev/null
done; done; done
"$B" -t dma:cuda --op write,read --size 256K,1M,4M,16M --threads 1 --batch 16 --depth 64 --random-space 256M \
  --duration 0.5 --warmup 0.1s --json "$DIR/dma_cuda_gbs.jsonl" >/dev/null
"$B" -t dma:cpu --op write,read --size 16,64,256,1K,4K,16K,64K --threads 1 --batch 16 --depth 256 \
  --random-space 64M --duration 0.3 --warmup 0.1s --json "$DIR/dma_cpu.jsonl" >/dev/null
echo "wrote $DIR"
