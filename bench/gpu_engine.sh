#!/usr/bin/env bash
# dma:cuda's GPU-thread engine (-o engine=sm) beside its copy engines (-o engine=copy), on a GPU
# machine: first the byte checks of both engines (--validate: every byte each one moved), then
# Mreq/s by payload (16 B..64 KiB), op, thread count and, for sm, warps per queue; JSON Lines into
# DIR, then bench/gpu_engine_table.py writes bench/RESULTS.md's section (with the crossover size).
#   [SM_WARPS='4 8 16'] bench/gpu_engine.sh [path/to/rdmabench] [DIR]
# NVRTC must be there: a machine with no package registry needs the wheel brought along
# (`pip download nvidia-cuda-nvrtc-cu12==12.9.86`, unzip it); RDMABENCH_NVRTC points at its
# libnvrtc.so.12, and .venv's (`make nvrtc`) is used when set nowhere else. A machine with the CUDA
# toolkit has its own:
#   RDMABENCH_NVRTC=/usr/local/cuda-13.0/targets/x86_64-linux/lib/libnvrtc.so.13 (and RDMABENCH_CUDART
# likewise) served the 2026-11-27 runs. bench/gpu_stalls.py reads the waits out of DIR's histograms.
set -euo pipefail
B=${1:-build/rdmabench}
DIR=${2:-bench/data/gpu-engine}
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -z "${RDMABENCH_NVRTC:-}" ]; then
  RDMABENCH_NVRTC=$(ls "$HERE"/../.venv/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 2>/dev/null | head -1 || true)
  [ -n "$RDMABENCH_NVRTC" ] && export RDMABENCH_NVRTC
fi
"$B" --list | grep -E '^  dma:cuda' || true
if ! "$B" --list | grep -qE '^  dma:cuda engine=sm +usable'; then
  echo "gpu_engine.sh: dma:cuda -o engine=sm is not usable here (see the line above)" >&2
  exit 1
fi
mkdir -p "$DIR"
rm -f "$DIR"/*.jsonl
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current,driver_version --format=csv > "$DIR/gpu.csv"

# 1. Byte checks: both engines, both ops, small and large, one and several queues. Any wrong byte
#    fails the run. 24 and 61 B take the sm kernel's 8-byte and 1-byte pieces, the rest its 16-byte ones.
for engine in copy sm; do for t in 1 4; do
  echo "byte check: engine=$engine threads=$t"
  "$B" -t dma:cuda -o engine=$engine --op write,read --size 16,24,61,256,4K,64K --threads $t --batch 16 --depth 64 \
    --iters 2000 --random-space 4M --thread-gap 1M --validate >/dev/null
done; done
echo "byte checks passed: engine=copy and engine=sm"

# 2. The floor under the sm engine's tail: how often the GPU stops a persistent kernel on its own,
#    and when its warps poll host memory as the engine's do (bench/tools/gpu_pause_floor.cc).
PAUSE="$(dirname "$B")/gpu_pause_floor"
if [ -x "$PAUSE" ]; then
  { "$PAUSE" --seconds 2 && "$PAUSE" --seconds 2 --poll-host; } | tee "$DIR/pause.txt"
fi

# 3. Rates. Random addressing in 16 MiB per thread; batch 16, depth 256; 0.4 s a point.
measure() {  # OUT ARGS...
  local out=$1; shift
  for op in write read; do for t in 1 2 4 8 16; do
    "$B" -t dma:cuda "$@" --op $op --size 16,64,256,1K,4K,16K,64K --threads $t --batch 16 --depth 256 \
      --random-space $((16 * t))M --thread-gap 16M --duration 0.4 --warmup 0.1s --json "$DIR/$out" >/dev/null
  done; done
}
measure copy.jsonl -o engine=copy
for w in ${SM_WARPS:-4 8 16}; do measure sm_w$w.jsonl -o engine=sm -o sm_warps=$w; done
python3 "$HERE/gpu_engine_table.py" "$DIR"
echo "wrote $DIR and bench/RESULTS.md"
