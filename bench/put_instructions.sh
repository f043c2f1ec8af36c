#!/usr/bin/env bash
# Instructions per 64 B WRITE on vrdma's direct path, run as bench/floors.py's put-rate row runs it
# (rdmabench -t vrdma, batch 64, depth 256, signal 64): the client under callgrind at two run
# lengths, the difference divided by the difference in ops, so start-up cancels out. Counted, not
# timed: the count is the same on a loaded machine, where timings on this 2-core VM swing, so it
# is the guide for trimming the hot path. Prints instructions per op, then where they go (the
# functions of the longer run, per op). Needs valgrind.
#   bench/put_instructions.sh [BUILD]
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
command -v valgrind >/dev/null || { echo "put_instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
T=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
"$B/vrdmad" --socket "$T/s" -q &
for _ in $(seq 50); do [ -S "$T/s" ] && break; sleep 0.1; done
export VRDMA_SOCKET=$T/s
PORT=$((20000 + RANDOM % 20000))
ops=()
for n in 100000 300000; do
  "$B/rdmabench" --server --addr 127.0.0.1:$PORT --once >/dev/null 2>&1 &
  sleep 0.5
  valgrind --tool=callgrind --callgrind-out-file="$T/cg.$n" "$B/rdmabench" --addr 127.0.0.1:$PORT -t vrdma \
    --op write --mode bw --size 64 --iters $n --warmup 1000 --signal 64 --batch 64 --depth 256 >/dev/null 2>&1
  wait %2 2>/dev/null || true
  ops+=("$(callgrind_annotate "$T/cg.$n" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')")
done
per_op=$(( (ops[1] - ops[0]) / 200000 ))
echo "instructions per 64 B WRITE (direct path, as rdmabench posts it): $per_op"
callgrind_annotate --auto=no "$T/cg.300000" | awk -v n=301000 '/^[ 0-9,]+\(/ && /rdmabench\]|libvrdma|memcpy|memmove/ {
  c = $1; gsub(",", "", c); if (c / n >= 3) { sub(/^[ 0-9,]+\([ 0-9.%]+\) +/, ""); printf "%8.1f  %s\n", c / n, substr($0, 1, 150) } }'
