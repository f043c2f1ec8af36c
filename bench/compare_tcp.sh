#!/usr/bin/env bash
# Kernel TCP side by side with its peer tools, one after another on loopback: iperf3 (single
# stream Gbit/s) and sockperf (64 B ping-pong one-way latency) beside rdmabench -t tcp. Three
# interleaved rounds; medians and ratios go to bench/RESULTS.md.
#   bench/compare_tcp.sh [path/to/rdmabench]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/rdmabench}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-3}
OUT=bench/RESULTS.md
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; pkill -f "sockperf server -i 127.0.0.1 -p 1171" 2>/dev/null || true' EXIT
for t in iperf3 sockperf; do
  command -v $t >/dev/null || { echo "compare_tcp: $t missing: apt-get install $t" >&2; exit 1; }
done

iperf_gbps() {  # port
  iperf3 -s -1 -B 127.0.0.1 -p "$1" -A 1 >/dev/null 2>&1 &
  local srv=$!
  sleep 0.4
  iperf3 -c 127.0.0.1 -p "$1" -t "$SECS" -A 0 -J | python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9)'
  wait $srv || true
}

sockperf_p50() {  # port
  # Non-blocking sockets: sockperf busy-polls as rdmabench does (blocking, it measures wake-ups).
  taskset -c 1 sockperf server -i 127.0.0.1 -p "$1" --tcp --nonblocked >/dev/null 2>&1 &
  local srv=$!
  sleep 0.4
  taskset -c 0 sockperf ping-pong -i 127.0.0.1 -p "$1" --tcp --nonblocked -m 64 -t "$SECS" 2>&1 | awk '/percentile 50.000/ {print $NF}'
  kill $srv 2>/dev/null; wait $srv 2>/dev/null || true
}

rb() {  # args... -> prints the results field named by $FIELD
  local f="$TMP/r.jsonl"
  rm -f "$f"
  "$BIN" "$@" --cpus 0 --server-cpus 1 --json "$f" >/dev/null
  python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline())["results"]; print(eval(sys.argv[2], {}, r))' "$f" "$FIELD"
}

median() { python3 -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

ip=(); rs=(); sp=(); rl=()
port=11710
for ((r = 0; r < ROUNDS; r++)); do
  port=$((port + 1))
  ip+=("$(iperf_gbps $port)")
  rs+=("$(FIELD=gbps rb -t tcp --op send --mode bw --size 128K --depth 16 --duration "$SECS")")
  v=$(sockperf_p50 $((port + 500)))
  [ -n "$v" ] || { echo "compare_tcp: sockperf gave no p50 (port $((port + 500)) busy?)" >&2; exit 1; }
  sp+=("$v")
  rl+=("$(FIELD='lat_us["p50"]' rb -t tcp --op send --mode lat --size 64 --duration "$SECS")")
  echo "round $r: iperf3 ${ip[-1]} Gbps, rdmabench ${rs[-1]} Gbps; sockperf p50 ${sp[-1]} us, rdmabench p50 ${rl[-1]} us"
done
mi=$(median "${ip[@]}"); mr=$(median "${rs[@]}"); ms=$(median "${sp[@]}"); ml=$(median "${rl[@]}")
python3 - "$mi" "$mr" "$ms" "$ml" "$ROUNDS" "$SECS" <<'PY' | python3 bench/results_md.py "## Kernel TCP vs iperf3 and sockperf" "$OUT"
import sys
mi, mr, ms, ml = map(float, sys.argv[1:5])
rounds, secs = sys.argv[5], sys.argv[6]
print(f"""`bench/compare_tcp.sh`, loopback, {rounds} interleaved rounds of {secs} s each, medians; every tool's
client on CPU 0 and server on CPU 1. rdmabench
streams 128 KiB SEND messages (depth 16) for throughput and ping-pongs 64 B SENDs for latency;
iperf3 runs one stream and sockperf a TCP ping-pong on non-blocking (busy-polled) sockets, as
rdmabench polls; both report one-way latency as half the round trip. Goals: stream >= 0.9x iperf3, p50 <= 1.1x sockperf.

| measure | peer tool | rdmabench -t tcp | ratio |
|---|---|---|---|
| stream Gbit/s | iperf3 {mi:.2f} | {mr:.2f} | {mr / mi:.2f}x |
| 64 B one-way p50 us | sockperf {ms:.2f} | {ml:.2f} | {ml / ms:.2f}x |""")
PY
echo "wrote $OUT"
