#!/usr/bin/env bash
# Side by side with the peer tool, one after another on this machine: fi_pingpong (libfabric's
# fabtests) and rdmabench, SEND ping-pong over the same provider and size. Three interleaved
# rounds; the medians and their ratio go to bench/RESULTS.md.
#   bench/compare.sh [path/to/rdmabench]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/rdmabench}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-20000}
OUT=bench/RESULTS.md
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; pkill -f "fi_pingpong -p .* -B 476" 2>/dev/null || true' EXIT
command -v fi_pingpong >/dev/null || { echo "compare: fi_pingpong missing: apt-get install libfabric-bin" >&2; exit 1; }

# fi_pingpong prints one row per size; usec/xfer is the one-way time (mean over the run).
pingpong() {  # provider size port
  local dom=() ; [ "$1" = tcp ] && dom=(-d lo)
  timeout 60 fi_pingpong -p "$1" "${dom[@]}" -e rdm -I "$ITERS" -S "$2" -B "$3" >/dev/null 2>&1 &
  local srv=$!
  sleep 0.5
  timeout 60 fi_pingpong -p "$1" "${dom[@]}" -e rdm -I "$ITERS" -S "$2" -P "$3" 127.0.0.1 | awk 'NF==8 && $1 != "bytes" {print $7}'
  wait $srv || true
}

rdmabench_lat() {  # provider size -> "p50 avg" in us
  local f="$TMP/r.jsonl"
  rm -f "$f"
  "$BIN" -t "ofi:$1" --op send --mode lat --size "$2" --iters "$ITERS" --json "$f" >/dev/null
  python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline())["results"]["lat_us"]; print(r["p50"], r["avg"])' "$f"
}

median() { python3 -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

rows=()
port=47610
for prov in shm tcp; do
  for size in 64 4096; do
    pp=(); p50=(); avg=()
    for ((r = 0; r < ROUNDS; r++)); do
      port=$((port + 1))
      pp+=("$(pingpong "$prov" "$size" "$port")")
      read -r a b < <(rdmabench_lat "$prov" "$size")
      p50+=("$a"); avg+=("$b")
    done
    mp=$(median "${pp[@]}"); m50=$(median "${p50[@]}"); mavg=$(median "${avg[@]}")
    rows+=("$(python3 -c 'import sys; p,a,b=map(float,sys.argv[4:7]); print(f"| ofi:{sys.argv[1]} | {sys.argv[2]} | {sys.argv[3]} | {p:.3f} | {a:.3f} | {b:.3f} | {a/p:.2f}x | {b/p:.2f}x |")' \
      "$prov" "$size" "$ROUNDS" "$mp" "$m50" "$mavg")")
    echo "${rows[-1]}"
  done
done

{
  echo "Written by \`bench/compare.sh\` ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, libfabric $(fi_info --version | awk '/^libfabric:/ {print $2}'))."
  echo "Numbers move from run to run on this shared 2-core machine; the ratios, measured side by side in"
  echo "one run, are what to read."
  echo
  echo "One-way latency in microseconds (half the round trip), $ITERS iterations, medians of $ROUNDS interleaved"
  echo "rounds. fi_pingpong's usec/xfer is a mean over its run; rdmabench gives p50 and mean from its histogram."
  echo "Goal: rdmabench p50 within 1.10x of fi_pingpong over ofi:shm."
  echo
  echo "| provider | bytes | rounds | fi_pingpong usec/xfer | rdmabench p50 | rdmabench avg | p50 / fi_pingpong | avg / fi_pingpong |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | python3 bench/results_md.py "## SEND ping-pong latency vs fi_pingpong" "$OUT"
echo "wrote $OUT"
