#!/usr/bin/env python3
"""perftest's ib_write_lat over vrdma across two hosts (two network namespaces joined by a veth,
a vrdmad in each, linked over libfabric's tcp provider), beside rdmabench -t vrdma on the same two
routers. The tools take turns for ROUNDS rounds. A third row runs perftest at nice 10: it says how
much of perftest's tail is its two processes spinning on both cores while the routers wait for a
turn on them (a router that is runnable behind a spinner that never yields waits for the
scheduler's next tick, 4 ms at this kernel's HZ=250). Writes the "## perftest over vrdma across
two hosts" section of bench/RESULTS.md. Needs root (network namespaces).

    bench/verbs_two_hosts.py [path/to/build]
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
sys.path.insert(0, str(ROOT / "bench"))
import two_hosts  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
ITERS = 5000
SIZES = [64, 4096]
PERFTEST_PORT = 18515 + 32
BENCH_PORT = 7471 + 32


def perftest(srv, cli, size, nice=0):
    """(t_typical, t_avg, 99%) in us from ib_write_lat -s size."""
    base = [str(BUILD / "vrdma-run"), "ib_write_lat", "-s", str(size), "-n", str(ITERS), "-p", str(PERFTEST_PORT)]
    s = subprocess.Popen(srv.argv(base, nice), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.7)
    out = subprocess.run(cli.argv([*base, srv.addr], nice), capture_output=True, text=True, timeout=300)
    s.wait(timeout=60)
    if out.returncode:
        raise SystemExit(f"ib_write_lat -s {size}: {out.stdout}{out.stderr}")
    row = [l.split() for l in out.stdout.splitlines() if l.strip()[:1].isdigit()][-1]
    # bytes iters t_min t_max t_typical t_avg t_stdev 99% 99.9%
    return float(row[4]), float(row[5]), float(row[7])


def rdmabench(srv, cli, size):
    """(p50, avg, p99) in us, one way, from rdmabench -t vrdma --op write --mode lat."""
    addr = f"{srv.addr}:{BENCH_PORT}"
    s = subprocess.Popen(srv.argv([str(BUILD / "rdmabench"), "--server", "--addr", addr, "--once"]),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    with tempfile.NamedTemporaryFile(suffix=".jsonl", dir="/tmp") as f:
        subprocess.run(cli.argv([str(BUILD / "rdmabench"), "-t", "vrdma", "--addr", addr, "--op", "write", "--mode", "lat",
                                 "--size", str(size), "--iters", str(ITERS), "--json", f.name]),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
        lat = json.loads(Path(f.name).read_text().splitlines()[0])["results"]["lat_us"]
    s.wait(timeout=60)
    return lat["p50"], lat["avg"], lat["p99"]


ROWS = [
    ("perftest ib_write_lat (t_typical / t_avg / 99%)", lambda a, b, size: perftest(a, b, size)),
    ("rdmabench -t vrdma --op write --mode lat (p50 / avg / p99)", lambda a, b, size: rdmabench(a, b, size)),
    ("perftest ib_write_lat at nice 10", lambda a, b, size: perftest(a, b, size, nice=10)),
]


def main():
    if not shutil.which("ib_write_lat") or not (BUILD / "vrdma-run").exists():
        raise SystemExit("needs perftest (apt-get install perftest libpci3) and vrdma-run (libibverbs-dev at build)")
    got = {(label, size): [] for label, _ in ROWS for size in SIZES}
    with two_hosts.Hosts(BUILD) as hosts:
        for rnd in range(ROUNDS):
            for size in SIZES:
                for label, run in ROWS:  # the rows take turns
                    got[(label, size)].append(run(hosts[0], hosts[1], size))
            print(f"round {rnd + 1}/{ROUNDS} done", file=sys.stderr)
    write_section(got)


def cell(runs):
    med = [statistics.median(r[i] for r in runs) for i in range(3)]
    return f"{med[0]:.1f} / {med[1]:.1f} / {med[2]:.0f} (typical {min(r[0] for r in runs):.1f}-{max(r[0] for r in runs):.1f})"


def write_section(got):
    lines = [f"`bench/verbs_two_hosts.py` ({time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}, this 2-core VM): two "
             "network namespaces joined by a veth, a vrdmad in each linked over `ofi:tcp`; perftest 4.5 unmodified through "
             f"`vrdma-run` on both. {ROUNDS} rounds taking turns, {ITERS} iterations each; one-way WRITE latency in us, "
             "median of the rounds' median / mean / 99th percentile (the range of the median over rounds). Four processes "
             "share the two cores: two routers and the two ends.", "",
             "| tool | " + " | ".join(f"{s} B" for s in SIZES) + " |", "|---|" + "---|" * len(SIZES)]
    for label, _ in ROWS:
        lines.append(f"| {label} | " + " | ".join(cell(got[(label, s)]) for s in SIZES) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    subprocess.run([sys.executable, str(ROOT / "bench/results_md.py"), "## perftest over vrdma across two hosts",
                    str(ROOT / "bench/RESULTS.md")], input=text, text=True, check=True)


if __name__ == "__main__":
    main()
