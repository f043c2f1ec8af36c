#!/usr/bin/env bash
# A build with none of the optional libraries (libfabric, UCX, PMIx, MPI, libibverbs) still gives
# rdmabench with tcp, dma:cpu and vrdma, and vrdmad; --list and --help say what was left out and
# why, -t of a left-out transport says so, and vrdmad's --listen says it has no fabric.
#   usage: tests/layers/minimal_build.sh BUILD_DIR   (configured with RDMABENCH_WITHOUT)
set -euo pipefail
build=$(cd "$1" && pwd)
bench=$build/rdmabench
work=$(mktemp -d)
router_pid=""
cleanup() {
  [ -n "$router_pid" ] && kill "$router_pid" 2>/dev/null && wait "$router_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "minimal build: $*" >&2; exit 1; }

list=$("$bench" --list)
for t in ofi ucx; do
  grep -q "^$t .*left out of this build: built without" <<<"$list" || fail "--list does not say $t was left out"
done
"$bench" --list json | python3 -c 'import json,sys; l={m["name"] for m in json.load(sys.stdin)["left_out"]}; sys.exit(l != {"ofi","ucx"})' \
  || fail "--list json does not name ofi and ucx as left out"
"$bench" --help | grep -q "ucx  left out of this build" || fail "--help does not say ucx was left out"

set +e
err=$("$bench" -t ucx --size 64 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q "this build left ucx out" <<<"$err" || fail "-t ucx: rc=$rc, $err"

"$bench" -t tcp --size 64 --iters 200 >/dev/null || fail "a tcp run failed"
"$bench" -t dma:cpu --size 4K --iters 200 >/dev/null || fail "a dma:cpu run failed"

"$build/vrdmad" --socket "$work/vrdma.sock" --quiet & router_pid=$!
for _ in $(seq 100); do [ -S "$work/vrdma.sock" ] && break; sleep 0.05; done
"$bench" -t vrdma -o socket="$work/vrdma.sock" --op write,send --size 64,64K --iters 200 >/dev/null || fail "a vrdma run failed"

set +e
err=$(timeout 10 "$build/vrdmad" --socket "$work/other.sock" --listen 127.0.0.1:1 --insecure-link 2>&1); rc=$?
set -e
[ $rc != 0 ] && grep -q "built without libfabric" <<<"$err" || fail "vrdmad --listen without libfabric: rc=$rc, $err"
echo "minimal build: rdmabench (tcp, dma:cpu, vrdma) and vrdmad work without libfabric, UCX, PMIx, MPI and libibverbs"
