#!/usr/bin/env bash
# perftest -e on this machine: 64 B SEND and WRITE-with-immediate ping-pong latency, and the CPU
# each side burns, with threads busy-polling their completion queues against threads sleeping on
# them (--event). Polling and event runs alternate for ROUNDS rounds; the medians of p50 latency
# and of cores used per side go to bench/RESULTS.md. Client on CPU 0, server on CPU 1.
#   bench/event_vs_poll.sh [path/to/rdmabench]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/rdmabench}
ITERS=${ITERS:-20000}
ROUNDS=${ROUNDS:-3}
OUT=bench/RESULTS.md
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The transports --list says can sleep on completions and carry immediate data.
mapfile -t TRANSPORTS < <("$BIN" --list json | python3 -c '
import json, sys
for t in json.load(sys.stdin)["transports"]:
    if t["test_only"]:
        continue
    for v in t["test_variants"]:
        name = t["name"]
        label = f"{name}:{v}" if v else name
        caps = [i.get("caps", {}) for i in t["instances"] if i["usable"] and (i["name"] == label or i["name"].startswith(label + ";"))]
        if caps and all(c.get("can_wait") and c.get("imm_data") and c.get("send") for c in caps):
            print(label)')

one() {  # transport op flags... -> "p50_us client_cores server_cores"
  local f="$TMP/r.jsonl"
  rm -f "$f"
  "$BIN" -t "$1" --op "$2" --mode lat --size 64 --iters "$ITERS" --cpu-util --cpus 0 --server-cpus 1 "${@:3}" \
    --json "$f" >/dev/null
  python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline())["results"]
print(r["lat_us"]["p50"], r["cpu"]["client"]["util"], r["cpu"]["server"]["util"])' "$f"
}

if [ "${#TRANSPORTS[@]}" = 0 ]; then
  echo "event_vs_poll.sh: no transport here can both sleep on completions and carry immediate data (rdmabench --list)" >&2
  exit 1
fi
rows=()
for t in "${TRANSPORTS[@]}"; do
  for op in send write-imm; do
    runs=()
    for ((r = 0; r < ROUNDS; r++)); do
      runs+=("$(one "$t" "$op") $(one "$t" "$op" --event)")
    done
    rows+=("$(python3 - "$t" "$op" "${runs[@]}" <<'PY'
import statistics, sys
t, op, *runs = sys.argv[1:]
cols = list(zip(*[[float(x) for x in r.split()] for r in runs]))
m = [statistics.median(c) for c in cols]
ratios = [e / p for p, e in zip(cols[0], cols[3])]
print(f"| {t} | {op} | {m[0]:.2f} | {m[3]:.2f} | {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) "
      f"| {m[1]:.2f} | {m[4]:.2f} | {m[2]:.2f} | {m[5]:.2f} |")
PY
)")
    echo "${rows[-1]}"
  done
done
{
  echo "\`bench/event_vs_poll.sh\` ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores): 64 B ping-pong, ${ITERS} iterations, one"
  echo "thread per side, client on CPU 0 and server on CPU 1. Polling and \`--event\` runs alternate ${ROUNDS} times;"
  echo "the table gives medians: one-way latency p50 in microseconds (half the round trip), the event/poll ratio"
  echo "of that p50 with its range over the rounds, and the cores each side used over the measured window"
  echo "(\`--cpu-util\`: user+sys time / wall time, so 1.00 is one core kept busy)."
  echo
  echo "| transport | op | p50 poll (us) | p50 event (us) | event/poll | client cores poll | client cores event | server cores poll | server cores event |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "A sleeping thread pays a wake-up (a system call and a scheduler hand-off) on every message, so"
  echo "latency rises, while the cores it would have spun are given back: perftest's \`-e\` trade."
} | python3 bench/results_md.py "## Event-driven completions vs busy polling (perftest -e)" "$OUT"
echo "wrote $OUT"
