#!/usr/bin/env python3
"""perftest over vrdma (the unmodified Debian binaries, through vrdma-run and libvrdma-verbs.so)
beside rdmabench -t vrdma, for the same op and size, on one router of its own. The two take turns
for ROUNDS rounds, client on CPU 0 and server on CPU 1; the table gives each tool's median and
the ratio (perftest / rdmabench). Latency is perftest's t_typical (its median) against
rdmabench's p50, both one way (half the round trip) for WRITE and SEND and the full round trip
for READ and fetch-add; bandwidth is Gb/s (10^9 bits) from both. rdmabench is given perftest's
defaults for depth (128) and completion moderation (a signaled request every 100). Each round's
ratio pairs the two tools' back-to-back runs. Then build/verbs_loop_cost times what one side's
loop costs per iteration, waiting left out, as each tool runs its 64 B ping-pong (perftest signals
and polls every request; rdmabench sends inline and unsignaled). Writes the "## perftest over vrdma beside
rdmabench -t vrdma" section of bench/RESULTS.md; why rows differ is the hand-written section after
it, which no script rewrites.

    bench/verbs_vs_rdmabench.py [path/to/build]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build")
ROUNDS = int(os.environ.get("ROUNDS", "5"))
LAT_ITERS = 20000
BW_ITERS = 20000
PORT = 18515 + 31

# (label, perftest program and flags, rdmabench flags, figure)
ROWS = [
    ("WRITE 64 B latency [us]", ["ib_write_lat", "-s", "64"], ["--op", "write", "--mode", "lat", "--size", "64"], "lat"),
    ("SEND 64 B latency [us]", ["ib_send_lat", "-s", "64"], ["--op", "send", "--mode", "lat", "--size", "64"], "lat"),
    ("READ 64 B round trip [us]", ["ib_read_lat", "-s", "64"], ["--op", "read", "--mode", "lat", "--size", "64"], "lat"),
    ("fetch-add round trip [us]", ["ib_atomic_lat", "-A", "FETCH_AND_ADD"], ["--op", "fadd", "--mode", "lat"], "lat"),
    ("WRITE 64 KiB [Gb/s]", ["ib_write_bw", "-s", "65536"], ["--op", "write", "--mode", "bw", "--size", "64K"], "bw"),
    ("READ 64 KiB [Gb/s]", ["ib_read_bw", "-s", "65536"], ["--op", "read", "--mode", "bw", "--size", "64K"], "bw"),
    ("SEND 64 KiB [Gb/s]", ["ib_send_bw", "-s", "65536"], ["--op", "send", "--mode", "bw", "--size", "64K"], "bw"),
    ("WRITE 64 B rate [Mops/s]", ["ib_write_bw", "-s", "64"], ["--op", "write", "--mode", "bw", "--size", "64"], "rate"),
]


def perftest(sock, argv, figure):
    iters = LAT_ITERS if figure == "lat" else BW_ITERS
    env = {**os.environ, "VRDMA_SOCKET": sock}
    base = [str(BUILD / "vrdma-run"), *argv, "-p", str(PORT), "-n", str(iters)]
    if figure != "lat":
        base.append("--report_gbits")
    srv = subprocess.Popen(["taskset", "-c", "1", *base], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.4)
    out = subprocess.run(["taskset", "-c", "0", *base, "127.0.0.1"], env=env, capture_output=True, text=True, timeout=300)
    srv.wait(timeout=60)
    if out.returncode:
        raise SystemExit(f"{' '.join(argv)}: {out.stdout}{out.stderr}")
    row = [l.split() for l in out.stdout.splitlines() if l.strip()[:1].isdigit()][-1]
    # lat: bytes iters t_min t_max t_typical ...; bw: bytes iters peak average msgrate
    return float(row[4]) if figure == "lat" else float(row[3]) if figure == "bw" else float(row[4])


def rdmabench(sock, flags, figure):
    iters = LAT_ITERS if figure == "lat" else BW_ITERS
    extra = [] if figure == "lat" else ["--depth", "128", "--signal", "100"]
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        subprocess.run([str(BUILD / "rdmabench"), "-t", "vrdma", *flags, *extra, "--iters", str(iters), "--cpus", "0",
                        "--server-cpus", "1", "--json", f.name], env={**os.environ, "VRDMA_SOCKET": sock},
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
        res = json.loads(Path(f.name).read_text().splitlines()[0])["results"]
    return res["lat_us"]["p50"] if figure == "lat" else res["gbps"] if figure == "bw" else res["mops"]


def main():
    if not shutil.which("ib_write_bw") or not (BUILD / "vrdma-run").exists():
        raise SystemExit("needs perftest (apt-get install perftest libpci3) and vrdma-run (libibverbs-dev at build)")
    d = Path(tempfile.mkdtemp(prefix="verbs-bench-"))
    sock = str(d / "s")
    router = subprocess.Popen([str(BUILD / "vrdmad"), "--socket", sock, "-q"], stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    got = {label: {"perftest": [], "rdmabench": []} for label, *_ in ROWS}
    loops = {}
    try:
        for rnd in range(ROUNDS):
            for label, pargv, rflags, figure in ROWS:  # the two tools take turns, row by row
                got[label]["perftest"].append(perftest(sock, pargv, figure))
                got[label]["rdmabench"].append(rdmabench(sock, rflags, figure))
            print(f"round {rnd + 1}/{ROUNDS} done", file=sys.stderr)
        loops = loop_costs(sock)
    finally:
        router.kill()
        router.wait()
        shutil.rmtree(d, ignore_errors=True)
    write_section(got, loops)


def loop_costs(sock):
    """{loop name: [ns per iteration, one per run]} from build/verbs_loop_cost, on CPU 0."""
    prog = BUILD / "verbs_loop_cost"
    if not prog.exists():
        return {}
    costs = {}
    for _ in range(ROUNDS):
        out = subprocess.run(["taskset", "-c", "0", str(BUILD / "vrdma-run"), str(prog), "1000000"], capture_output=True,
                             text=True, timeout=300, env={**os.environ, "VRDMA_SOCKET": sock}, check=True).stdout
        for name, ns in (line.split() for line in out.splitlines() if line.strip()):
            costs.setdefault(name, []).append(float(ns))
    return costs


def loop_lines(loops):
    if not loops:
        return []
    lines = ["", f"One side's loop per iteration, waiting left out (`build/verbs_loop_cost`, through `vrdma-run`, direct",
             f"path, CPU 0, {ROUNDS} runs of 10^6 iterations; median and range, ns):", "",
             "| 64 B | as perftest runs it (signaled, completion polled) | as rdmabench runs it (inline, unsignaled) | difference |",
             "|---|---|---|---|"]
    for op in ("write", "send"):
        p, r = loops[f"{op}_perftest"], loops[f"{op}_rdmabench"]
        lines.append(f"| {op.upper()} | {statistics.median(p):.1f} ({min(p):.1f}-{max(p):.1f}) | "
                     f"{statistics.median(r):.1f} ({min(r):.1f}-{max(r):.1f}) | "
                     f"{statistics.median(p) - statistics.median(r):.1f} |")
    return lines


def paired(got, label):
    """Per-round ratios perftest / rdmabench (the two ran back to back), and best against best
    (lowest latency, highest rate), so a round that landed on a slow placement for one tool is
    seen as such rather than moving a median."""
    p, r = got[label]["perftest"], got[label]["rdmabench"]
    ratios = [a / b for a, b in zip(p, r)]
    lower_is_better = label.endswith("[us]")
    best = (min(p) / min(r)) if lower_is_better else (max(p) / max(r))
    return p, r, ratios, best


def write_section(got, loops):
    lines = [f"`bench/verbs_vs_rdmabench.py` (in `make compare`), {ROUNDS} rounds taking turns, one vrdmad, client on",
             "CPU 0 and server on CPU 1, this 2-core VM. perftest 4.5 runs unmodified through `vrdma-run`; rdmabench",
             "gets perftest's depth and moderation. Medians (range over rounds); ratio = perftest / rdmabench,",
             "paired by round (median, and its range), and best round against best round.", "",
             "| figure | perftest over vrdma | rdmabench -t vrdma | paired ratio | best vs best |",
             "|---|---|---|---|---|"]
    outside = []
    for label, *_ in ROWS:
        p, r, ratios, best = paired(got, label)
        ratio = statistics.median(ratios)
        lines.append(f"| {label} | {statistics.median(p):.3g} ({min(p):.3g}-{max(p):.3g}) | "
                     f"{statistics.median(r):.3g} ({min(r):.3g}-{max(r):.3g}) | "
                     f"{ratio:.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | {best:.2f} |")
        if abs(ratio - 1) > 0.15 and abs(best - 1) > 0.15:
            outside.append(f"{label} ({ratio:.2f}, best {best:.2f})")
    lines.append("")
    lines.append("Outside 15% by both the paired median and best against best: " +
                 (", ".join(outside) if outside else "none") + ".")
    lines += loop_lines(loops)
    text = "\n".join(lines) + "\n"
    print(text)
    subprocess.run([sys.executable, str(ROOT / "bench/results_md.py"), "## perftest over vrdma beside rdmabench -t vrdma",
                    str(ROOT / "bench/RESULTS.md")], input=text, text=True, check=True)


if __name__ == "__main__":
    main()
