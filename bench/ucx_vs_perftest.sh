#!/usr/bin/env bash
# rdmabench -t ucx beside ucx_perftest (ucx-utils) over UCX's posix shared memory: 8 B put latency
# (ucp_put_lat against --op write --mode lat) and 64 B put message rate (ucp_put_bw against
# --op write --mode bw), with ofi:shm's and vrdma's WRITE beside them (vrdma: a vrdmad of its own,
# direct path). The tools take turns for ROUNDS rounds,
# client on CPU 0 and server on CPU 1 for every tool; the medians, and the ratio to ucx_perftest
# with its range over the rounds, go to bench/RESULTS.md.
#   bench/ucx_vs_perftest.sh [path/to/rdmabench]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/rdmabench}
ROUNDS=${ROUNDS:-9}
LAT_ITERS=${LAT_ITERS:-100000}
BW_ITERS=${BW_ITERS:-2000000}
# ucx_perftest keeps puts in flight with no completion per put; the closest rdmabench stream asks
# for one completion every 64 puts, posted 64 to a call, 256 in flight.
BW_FLAGS=(--signal 64 --batch 64 --depth 256)
PORT=${PORT:-13337}
OUT=bench/RESULTS.md
TMP=$(mktemp -d)
VRDMAD="$(dirname "$BIN")/vrdmad"
[ -x "$VRDMAD" ] || { echo "ucx_vs_perftest.sh: $VRDMAD not found (build it beside rdmabench)" >&2; exit 1; }
"$VRDMAD" --socket "$TMP/vrdma.sock" --quiet &
ROUTER=$!
trap 'kill $ROUTER 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 50); do [ -S "$TMP/vrdma.sock" ] && break; sleep 0.1; done

command -v ucx_perftest >/dev/null || { echo "ucx_vs_perftest.sh: ucx_perftest not found (apt-get install ucx-utils)" >&2; exit 1; }

perftest() {  # test size iters -> ucx_perftest's "Final:" line
  UCX_TLS=posix taskset -c 1 ucx_perftest -p "$PORT" >/dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  UCX_TLS=posix taskset -c 0 ucx_perftest 127.0.0.1 -p "$PORT" -t "$1" -s "$2" -n "$3" 2>/dev/null | grep '^Final:'
  wait "$srv" || true
}
perftest_lat() { perftest ucp_put_lat 8 "$LAT_ITERS" | awk '{print $3}'; }           # p50 of one-way latency, us
perftest_rate() { perftest ucp_put_bw 64 "$BW_ITERS" | awk '{print $NF / 1e6}'; }     # overall, Mops/s

ours() {  # transport mode size iters flags... -> "p50_us mops"
  local f="$TMP/r.jsonl"
  rm -f "$f"
  "$BIN" -t "$1" --op write --mode "$2" --size "$3" --iters "$4" --cpus 0 --server-cpus 1 "${@:5}" --json "$f" >/dev/null
  python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline())["results"]; print(r["lat_us"]["p50"], r["mops"])' "$f"
}
ours_lat() { ours "$1" lat 8 "$LAT_ITERS" | awk '{print $1}'; }
ours_rate() { ours "$1" bw 64 "$BW_ITERS" "${BW_FLAGS[@]}" | awk '{print $2}'; }

export VRDMA_SOCKET="$TMP/vrdma.sock"
declare -a PL UL OL VL PR UR OR VR
for ((r = 0; r < ROUNDS; r++)); do
  PL+=("$(perftest_lat)"); UL+=("$(ours_lat ucx:posix)"); OL+=("$(ours_lat ofi:shm)"); VL+=("$(ours_lat vrdma)")
  PR+=("$(perftest_rate)"); UR+=("$(ours_rate ucx:posix)"); OR+=("$(ours_rate ofi:shm)"); VR+=("$(ours_rate vrdma)")
  echo "round $((r + 1)): put lat p50 us: ucx_perftest ${PL[-1]}, ucx ${UL[-1]}, ofi:shm ${OL[-1]}, vrdma ${VL[-1]};" \
    "64 B rate Mops/s: ucx_perftest ${PR[-1]}, ucx ${UR[-1]}, ofi:shm ${OR[-1]}, vrdma ${VR[-1]}"
done

table=$(python3 - "${PL[*]}" "${UL[*]}" "${OL[*]}" "${VL[*]}" "${PR[*]}" "${UR[*]}" "${OR[*]}" "${VR[*]}" <<'PY'
import statistics, sys
pl, ul, ol, vl, pr, ur, orr, vr = ([float(x) for x in a.split()] for a in sys.argv[1:])
def row(tool, lat, rate):
    lr = [a / b for a, b in zip(lat, pl)]
    rr = [a / b for a, b in zip(rate, pr)]
    return (f"| {tool} | {statistics.median(lat):.3f} | {statistics.median(lr):.2f}x ({min(lr):.2f}-{max(lr):.2f}) "
            f"| {min(lat):.3f} | {min(lat) / min(pl):.2f}x "
            f"| {statistics.median(rate):.2f} | {statistics.median(rr):.2f}x ({min(rr):.2f}-{max(rr):.2f}) "
            f"| {max(rate):.2f} | {max(rate) / max(pr):.2f}x |")
print(row("ucx_perftest (posix)", pl, pr))
print(row("rdmabench -t ucx:posix", ul, ur))
print(row("rdmabench -t ofi:shm", ol, orr))
print(row("rdmabench -t vrdma (direct path)", vl, vr))
PY
)
echo "$table"
{
  echo "\`bench/ucx_vs_perftest.sh\` ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, UCX $(ucx_info -v | sed -n "s/^# Version //p")):"
  echo "8 B put latency (ucx_perftest \`ucp_put_lat\`, rdmabench \`--op write --mode lat --size 8\`, ${LAT_ITERS} iterations)"
  echo "and 64 B put message rate (\`ucp_put_bw\`, \`--op write --mode bw --size 64 ${BW_FLAGS[*]}\`, ${BW_ITERS} puts)."
  echo "Both tools use UCX's posix shared memory (UCX_TLS=posix, \`-t ucx:posix\`); ofi:shm is libfabric's shm"
  echo "provider on the same path, vrdma this project's virtual RDMA (a vrdmad of its own, direct path). Client on CPU 0, server on CPU 1 for every tool; the tools take turns for"
  echo "${ROUNDS} rounds. Latency is one-way (half the round trip) p50 in microseconds; rate is millions of puts"
  echo "per second; ratios are to ucx_perftest of the same round, median (min-max). This machine's two"
  echo "vCPUs move between a fast and a slow placement (one-way latency 0.075 or about 0.25 us for"
  echo "ucx_perftest alike), sometimes within a round, so the best of the rounds of each tool is set"
  echo "beside the medians. Goal for ucx: latency within 1.10x, rate at least 0.9x."
  echo
  echo "| tool | 8 B put p50 (us), median | vs ucx_perftest | best | vs best | 64 B puts (Mops/s), median | vs ucx_perftest | best | vs best |"
  echo "|---|---|---|---|---|---|---|---|---|"
  echo "$table"
} | python3 bench/results_md.py "## UCX: rdmabench -t ucx beside ucx_perftest (posix shared memory)" "$OUT"
echo "wrote $OUT"
