#!/usr/bin/env bash
# The EFA document's knobs on this machine: 64 B WRITE message rate over ofi:shm and ofi:tcp with
# batching, lazy posting and more rails. Each configuration alternates with its baseline (batch 1,
# depth 64, one rail) for ROUNDS rounds; medians of Mops/s and of the per-round ratio go to
# bench/RESULTS.md. The client runs on CPU 0 and the server on CPU 1.
#   bench/batch_lazy_rails.sh [path/to/rdmabench]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/rdmabench}
SECS=${SECS:-1}
ROUNDS=${ROUNDS:-3}
OUT=bench/RESULTS.md
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
CONFIGS=("--batch 1" "--batch 16" "--batch 16 --lazy" "--batch 16 --signal 16" "--rails 2 --batch 16" "--rails 2 --batch 16 --lazy")

mops() {  # transport, flags...
  local f="$TMP/r.jsonl"
  rm -f "$f"
  "$BIN" -t "$1" --op write --size 64 --depth 64 --duration "$SECS" --cpus 0 --server-cpus 1 "${@:2}" --json "$f" >/dev/null
  python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["results"]["mops"])' "$f"
}

rows=()
for t in ofi:shm ofi:tcp; do
  for c in "${CONFIGS[@]}"; do
    pairs=()
    for ((r = 0; r < ROUNDS; r++)); do
      base=$(mops "$t" --batch 1)
      # shellcheck disable=SC2086
      val=$(mops "$t" $c)
      pairs+=("$base,$val")
    done
    rows+=("$(python3 - "$t" "$c" "${pairs[@]}" <<'PY'
import statistics, sys
t, c, *pairs = sys.argv[1:]
b = [float(p.split(",")[0]) for p in pairs]
v = [float(p.split(",")[1]) for p in pairs]
ratio = statistics.median(y / x for x, y in zip(b, v))
print(f"| {t} | `{c}` | {statistics.median(b):.3f} | {statistics.median(v):.3f} | {ratio:.2f}x | {min(y / x for x, y in zip(b, v)):.2f}-{max(y / x for x, y in zip(b, v)):.2f} |")
PY
)")
    echo "${rows[-1]}"
  done
done
{
  echo "\`bench/batch_lazy_rails.sh\`: 64 B WRITE, depth 64 per endpoint, ${SECS} s per run, client on CPU 0 and"
  echo "server on CPU 1. Each configuration alternates ${ROUNDS} times with the baseline (batch 1, one rail); the"
  echo "table gives medians and the median per-round ratio, with the range of that ratio (the \`--batch 1\` row"
  echo "compares the baseline with itself, so its range is the noise). Rails here share one domain"
  echo "(this machine has one NIC): they add endpoints, not links."
  echo
  echo "| transport | flags | baseline Mops/s | Mops/s | ratio | ratio range |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Read against the \`--batch 1\` row of the same transport: a ratio inside its range is noise."
} | python3 bench/results_md.py "## Batching, lazy posting and rails (64 B WRITE message rate)" "$OUT"
echo "wrote $OUT"
