#!/usr/bin/env bash
# The EFA document's knobs on this machine: 64 B WRITE message rate over ofi:shm and ofi:tcp with
# batching, lazy posting and more rails, each row run right after its baseline, as a table of
# Mops/s and the ratio to the baseline (batch 1, depth 64, one rail) in bench/RESULTS.md.
#   bench/batch_lazy_rails.sh [path/to/rdmabench]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/rdmabench}
SECS=${SECS:-1}
OUT=bench/RESULTS.md
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
CONFIGS=("--batch 1" "--batch 16" "--batch 16 --lazy" "--batch 16 --signal 16" "--rails 2 --batch 16" "--rails 2 --batch 16 --lazy")

mops() {  # transport, flags...
  local f="$TMP/r.jsonl"
  rm -f "$f"
  "$BIN" -t "$1" --op write --size 64 --depth 64 --duration "$SECS" "${@:2}" --json "$f" >/dev/null
  python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["results"]["mops"])' "$f"
}

rows=()
for t in ofi:shm ofi:tcp; do
  for c in "${CONFIGS[@]}"; do
    base=$(mops "$t" --batch 1)
    # shellcheck disable=SC2086
    val=$(mops "$t" $c)
    rows+=("$(python3 -c 'import sys; b,v=float(sys.argv[3]),float(sys.argv[4]); print(f"| {sys.argv[1]} | `{sys.argv[2]}` | {b:.3f} | {v:.3f} | {v/b:.2f}x |")' "$t" "$c" "$base" "$val")")
    echo "${rows[-1]}"
  done
done
{
  echo "\`bench/batch_lazy_rails.sh\`: 64 B WRITE, depth 64 per endpoint, ${SECS} s per run; each configuration runs right"
  echo "after a fresh baseline (batch 1, one rail), and the ratio is to that baseline. Rails here share one domain"
  echo "(this machine has one NIC): they add endpoints, not links."
  echo
  echo "| transport | flags | baseline Mops/s | Mops/s | ratio |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | python3 bench/results_md.py "## Batching, lazy posting and rails (64 B WRITE message rate)" "$OUT"
echo "wrote $OUT"
