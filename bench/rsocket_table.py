#!/usr/bin/env python3
"""The socket table: unmodified iperf3 and sockperf over the kernel's TCP, over rsockets on vrdma
busy-polling (VRDMA_RSOCKET_SPIN_US=1000000: a blocked call polls for up to a second) and over
rsockets on vrdma event-driven (VRDMA_RSOCKET_SPIN_US=0: a blocked call sleeps on its CQ's
channel at once, the "low CPU" row), on one host with a router of its own (vrdma-run --rsocket,
librspreload). The three take turns for ROUNDS rounds; the table gives medians and the spread.
iperf3: one stream, -l SIZE, 2 s, client on CPU 0 and server on CPU 1. sockperf: TCP ping-pong of
14 B (its smallest message) with poll(), p50 one way (half the round trip), 2 s, and the CPU
both ends used per second of it. 1 B: tests/rsocket/stream_check.c's ping-pong of one byte each
way (20,000 round trips, blocking sockets, TCP_NODELAY), half the median round trip, as sockperf
sends no less than 14 B. Beside each rsocket run, the bytes loopback carried, against the
bytes iperf3 moved: the kernel's TCP carries only the connection manager's handshake. Writes the
"## Sockets over rsocket on vrdma" section of bench/RESULTS.md.

    bench/rsocket_table.py [path/to/build]
"""
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_md import replace_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SIZES = [1024, 16384, 131072]
HEADING = "## Sockets over rsocket on vrdma"
MODES = [("kernel TCP", None), ("rsocket on vrdma, polling", "1000000"), ("rsocket on vrdma, event-driven", "0")]


def wrap(mode_spin, sock, argv, cpu):
    pin = ["taskset", "-c", str(cpu)]
    if mode_spin is None:
        return pin + argv, dict(os.environ)
    env = dict(os.environ, VRDMA_SOCKET=sock, VRDMA_RSOCKET_SPIN_US=mode_spin)
    return pin + [str(BUILD / "vrdma-run"), "--rsocket"] + argv, env


def lo_bytes():
    for line in Path("/proc/net/dev").read_text().splitlines():
        if line.strip().startswith("lo:"):
            return int(line.split(":")[1].split()[0])
    return 0


def cpu_of_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def iperf3(spin, sock, port, size):
    srv_argv, env = wrap(spin, sock, ["iperf3", "-s", "-1", "-p", str(port)], 1)
    srv = subprocess.Popen(srv_argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.7)
    before = lo_bytes()
    cli_argv, env = wrap(spin, sock, ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "2", "-l", str(size), "-J"], 0)
    out = subprocess.run(cli_argv, env=env, capture_output=True, text=True, timeout=60).stdout
    carried = lo_bytes() - before
    srv.wait(timeout=30)
    end = json.loads(out[out.index("{"):])["end"]["sum_received"]
    return end["bits_per_second"] / 1e9, end["bytes"], carried


def sockperf(spin, sock, port, feed):
    feed.write_text(f"T:127.0.0.1:{port}\n")
    srv_argv, env = wrap(spin, sock, ["sockperf", "server", "-f", str(feed), "-F", "p"], 1)
    cpu0, wall0 = cpu_of_children(), time.monotonic()
    srv = subprocess.Popen(srv_argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.7)
    cli_argv, env = wrap(spin, sock, ["sockperf", "ping-pong", "-f", str(feed), "-F", "p", "-t", "2", "-m", "14"], 0)
    out = subprocess.run(cli_argv, env=env, capture_output=True, text=True, timeout=60).stdout
    srv.terminate()
    srv.wait(timeout=10)
    cpu = (cpu_of_children() - cpu0) / (time.monotonic() - wall0)  # both ends' CPU seconds per second
    p50 = float(re.search(r"percentile 50\.000 =\s+([\d.]+)", out).group(1))
    return p50, cpu


def one_byte(spin, sock, port):
    check = str(BUILD / "stream_check")
    srv_argv, env = wrap(spin, sock, [check, "echo", str(port)], 1)
    srv = subprocess.Popen(srv_argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.7)
    cli_argv, env = wrap(spin, sock, [check, "pingpong", "127.0.0.1", str(port), "20000"], 0)
    out = subprocess.run(cli_argv, env=env, capture_output=True, text=True, timeout=60).stdout
    srv.wait(timeout=10)
    return float(re.search(r"p50_us ([\d.]+)", out).group(1))


def measure():
    got = {(m, k): [] for m, _ in MODES for k in [*SIZES, "lat", "one", "cpu", "proof"]}
    with tempfile.TemporaryDirectory(prefix="rsocket-bench-") as d:
        sock = str(Path(d) / "vrdma.sock")
        router = subprocess.Popen([str(BUILD / "vrdmad"), "--socket", sock, "--quiet"], stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        port = 18700
        try:
            for r in range(ROUNDS):
                for mode, spin in MODES:
                    for size in SIZES:
                        port += 1
                        gbps, moved, carried = iperf3(spin, sock, port, size)
                        got[(mode, size)].append(gbps)
                        if spin is not None:
                            got[(mode, "proof")].append((moved, carried))
                    port += 1
                    p50, cpu = sockperf(spin, sock, port, Path(d) / "feed.txt")
                    got[(mode, "lat")].append(p50)
                    got[(mode, "cpu")].append(cpu)
                    port += 1
                    got[(mode, "one")].append(one_byte(spin, sock, port))
                    print(f"round {r + 1} {mode}: " + ", ".join(f"{s}: {got[(mode, s)][-1]:.2f} Gbit/s" for s in SIZES)
                          + f", 14 B p50 {p50:.2f} us, {cpu:.2f} CPUs, 1 B p50 {got[(mode, 'one')][-1]:.2f} us",
                          flush=True)
        finally:
            router.terminate()
            router.wait(timeout=10)
    return got


def cell(values, digits=2):
    med = statistics.median(values)
    return f"{med:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def section(got):
    kernel = {k: statistics.median(got[("kernel TCP", k)]) for k in [*SIZES, "lat", "one"]}
    lines = [
        "`bench/rsocket_table.py`, one host, a router of its own, unmodified iperf3 3.12 and sockperf 3.7 through "
        f"`vrdma-run --rsocket` (librspreload), {ROUNDS} interleaved rounds, medians (min-max). iperf3: one stream, "
        "2 s, client on CPU 0, server on CPU 1. sockperf: TCP ping-pong of 14 B (its smallest message) with poll(), "
        "p50 one way; CPU: both ends' CPU seconds per second of the run. 1 B: stream_check's ping-pong of one byte, half the "
        "median round trip. Goals (issue 30): rsocket >= 1.0x kernel "
        "TCP's throughput, <= 0.5x its latency.",
        "",
        "| sockets | " + " | ".join(f"iperf3 -l {s // 1024} KiB [Gbit/s]" for s in SIZES)
        + " | 1 B p50 [us] | sockperf 14 B p50 [us] | CPUs (sockperf) |",
        "|---|" + "---|" * (len(SIZES) + 3),
    ]
    for mode, _ in MODES:
        row = [cell(got[(mode, s)]) for s in SIZES] + [cell(got[(mode, k)]) for k in ("one", "lat", "cpu")]
        lines.append(f"| {mode} | " + " | ".join(row) + " |")
    lines.append("")
    lines.append("| ratio to kernel TCP | " + " | ".join(f"iperf3 {s // 1024} KiB" for s in SIZES) + " | 1 B p50 | 14 B p50 |")
    lines.append("|---|" + "---|" * (len(SIZES) + 2))
    for mode, spin in MODES[1:]:
        ratios = [statistics.median(got[(mode, s)]) / kernel[s] for s in SIZES]
        ratios += [statistics.median(got[(mode, k)]) / kernel[k] for k in ("one", "lat")]
        lines.append(f"| {mode} | " + " | ".join(f"{r:.2f}x" for r in ratios) + " |")
    proofs = got[(MODES[1][0], "proof")] + got[(MODES[2][0], "proof")]
    moved = sum(m for m, _ in proofs)
    carried = max(c for _, c in proofs)
    lines += ["", f"No kernel TCP carried the data: over the rsocket iperf3 runs, loopback carried at most {carried:,} B "
              f"in one run (the connection manager's handshakes and iperf3's control connection's setup) while "
              f"iperf3 moved {moved / 1e9:.1f} GB in all."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    replace_section(ROOT / "bench" / "RESULTS.md", HEADING, section(measure()))
