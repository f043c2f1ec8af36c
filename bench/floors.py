#!/usr/bin/env python3
"""vrdma at its floors: each figure of vrdma beside its peer on this machine and the floor under
it, measured in one run, with the goal it is held to. The measurements take turns for ROUNDS
rounds; the table gives medians and the ratio's range over the rounds.

  direct path, 8 B put p50          ucx_perftest ucp_put_lat (UCX_TLS=posix)   <= 1.0x
  direct path, 64 B put rate        ucx_perftest ucp_put_bw (posix)            >= 1.0x
  router path, 64 B WRITE p50       the hand-off floor (handoff_floor: same core + two cores)  <= 1.2x;
                                    floor column: the relay hop (below)
  router path, 64 B WRITE p50, p99  kernel TCP SEND (-t tcp)                   <= 2x each;
                                    floor: the relay hop (relay_hop_floor: a relay between a client
                                    and a server, sleeping or spinning, whichever is less)
  --event, 64 B SEND p50            the wake-up floor (wakeup_floor: an eventfd ping-pong, CPUs 0 and 1)  <= 1.0x
  two hosts, 64 B WRITE p50         rdmabench -t ofi:tcp between the same hosts (the fabric)  <= 1.5x;
                                    floor: the relay floor (relay_floor: a message through a relay
                                    on each host, shared memory to it and TCP between them; relays
                                    polling or sleeping, whichever is less)
  two hosts, 1 MiB WRITE Gb/s       the same                                   >= 0.8x

The two hosts are network namespaces joined by a veth, a vrdmad in each linked over ofi:tcp
(needs root; without it those rows say why). With --loaded, two busy loops run throughout, one
pinned to each CPU: a loaded host, the normal case on two cores. Client on CPU 0, server on CPU 1.
The routers run at the priority the systemd unit gives them (Nice=-10; ROUTER_NICE=N to change it).
Writes "## vrdma at its floors" (or "..., loaded host") in bench/RESULTS.md.

    bench/floors.py [--loaded] [path/to/build]
"""
import contextlib
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
sys.path.insert(0, str(ROOT / "bench"))
import two_hosts  # noqa: E402

ARGS = [a for a in sys.argv[1:] if a != "--loaded"]
LOADED = "--loaded" in sys.argv[1:]
BUILD = Path(ARGS[0] if ARGS else ROOT / "build")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
ROUTER_NICE = int(os.environ.get("ROUTER_NICE", "-10"))  # packaging/systemd/vrdmad.service.in's Nice=
# Under the busy loops every process waits for its turn on a core: fewer iterations, same rows.
LAT_ITERS = int(os.environ.get("LAT_ITERS", "5000" if LOADED else "20000"))
RATE_ITERS = int(os.environ.get("RATE_ITERS", "200000" if LOADED else "2000000"))
TPUT_ITERS = 2000
PIN = ["--cpus", "0", "--server-cpus", "1"]
UCX_PORT = 13338
BENCH_PORT = 7471 + 48


def rdmabench(args, argv=lambda a: a, server=None):
    """results of one rdmabench run; `server` (argv) is started first and waited for."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl", dir="/tmp") as f:
        s = subprocess.Popen(server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if server else None
        try:
            if s:
                time.sleep(0.5)
            out = subprocess.run(argv([str(BUILD / "rdmabench"), *args, "--json", f.name]), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True, timeout=600)
            if out.returncode:
                raise SystemExit(f"rdmabench {' '.join(args)}: {out.stderr.strip()}")
            return json.loads(Path(f.name).read_text().splitlines()[0])["results"]
        finally:
            if s:
                s.wait(timeout=60)


def lat(transport, op, size, *flags):
    r = rdmabench(["-t", transport, "--op", op, "--mode", "lat", "--size", str(size), "--iters", str(LAT_ITERS),
                   *flags, *PIN])
    return r["lat_us"]


def ucx_perftest(test, size, iters):
    """ucx_perftest's "Final:" line, split; client on CPU 0, server on CPU 1."""
    env = dict(os.environ, UCX_TLS="posix")
    srv = subprocess.Popen(["taskset", "-c", "1", "ucx_perftest", "-p", str(UCX_PORT)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        out = subprocess.run(["taskset", "-c", "0", "ucx_perftest", "127.0.0.1", "-p", str(UCX_PORT), "-t", test,
                              "-s", str(size), "-n", str(iters)], env=env, capture_output=True, text=True, timeout=600)
    finally:
        srv.wait(timeout=60)
    final = [l.split() for l in out.stdout.splitlines() if l.startswith("Final:")]
    if not final:
        raise SystemExit(f"ucx_perftest -t {test}: {out.stdout[-500:]}{out.stderr[-500:]}")
    return final[0]


def floor_tool(name, *args):
    out = subprocess.run([str(BUILD / name), *args], check=True, capture_output=True, text=True, timeout=300)
    return [float(x) / 1000 for x in out.stdout.split()]  # ns -> us


def one_host_round():
    """{row: (vrdma, peer, floor)} for the rows measured on this host."""
    put = lat("vrdma", "write", 8)["p50"]
    ucx_put = float(ucx_perftest("ucp_put_lat", 8, LAT_ITERS)[2])
    rate = rdmabench(["-t", "vrdma", "--op", "write", "--mode", "bw", "--size", "64", "--iters", str(RATE_ITERS),
                      "--signal", "64", "--batch", "64", "--depth", "256", *PIN])["mops"]
    ucx_rate = float(ucx_perftest("ucp_put_bw", 64, RATE_ITERS)[-1]) / 1e6
    # Beside busy loops each spinning round trip waits out a loop's time slice: a few hundred do.
    same, cross = floor_tool("handoff_floor", *(["300"] if LOADED else []))
    routed = lat("vrdma:router", "write", 64)
    tcp = lat("tcp", "send", 64)
    event = lat("vrdma", "send", 64, "--event")["p50"]
    wake = floor_tool("wakeup_floor")[0]
    # Beside busy loops a relay that yields waits out their slices: a thousand round trips do.
    hop = floor_tool("relay_hop_floor", "1000" if LOADED else "20000")
    hop_p50, hop_p99 = min(hop[0], hop[2]), min(hop[1], hop[3])
    return {
        "direct path, 8 B put p50 (us)": (put, ucx_put, cross),
        "direct path, 64 B put rate (Mops/s)": (rate, ucx_rate, None),
        "router path, 64 B WRITE p50 (us), beside the hand-off floor": (routed["p50"], same + cross, hop_p50),
        "router path, 64 B WRITE p50 (us), beside kernel TCP SEND": (routed["p50"], tcp["p50"], hop_p50),
        "router path, 64 B WRITE p99 (us), beside kernel TCP SEND": (routed["p99"], tcp["p99"], hop_p99),
        "--event, 64 B SEND p50 (us)": (event, wake, wake),
    }


def two_host_round(a, b):
    """The cross-host rows: vrdma between the routers, ofi:tcp between the same namespaces."""
    addr = f"{a.addr}:{BENCH_PORT}"
    server = a.argv([str(BUILD / "rdmabench"), "--server", "--addr", addr, "--once"])

    def run(transport, *args):
        return rdmabench(["-t", transport, "--addr", addr, "--op", "write", *args], b.argv, server)

    small = ["--mode", "lat", "--size", "64", "--iters", str(LAT_ITERS)]
    big = ["--mode", "bw", "--size", "1M", "--iters", str(TPUT_ITERS)]
    v_lat, f_lat = run("vrdma", *small)["lat_us"]["p50"], run("ofi:tcp", *small)["lat_us"]["p50"]
    v_bw, f_bw = (run(t, *big)["gbytes_per_s"] * 8 for t in ("vrdma", "ofi:tcp"))
    return {
        "two hosts, 64 B WRITE p50 (us)": (v_lat, f_lat, relay_floor(a, b)),
        "two hosts, 1 MiB WRITE (Gb/s)": (v_bw, f_bw, f_bw),
    }


def relay_floor(a, b):
    """p50 one way (us) of relay_floor between the two hosts, the less of its two designs (relays
    polling, relays sleeping): the floor under any router per host."""
    best = None
    for design in ([], ["--sleeping"]):
        port = BENCH_PORT + 1
        relay = subprocess.Popen(a.argv([str(BUILD / "relay_floor"), "--serve", str(port)]), stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            trips = 300 if LOADED else LAT_ITERS  # beside busy loops each round trip may wait out their slices
            out = subprocess.run(b.argv([str(BUILD / "relay_floor"), f"{a.addr}:{port}", str(trips), *design]),
                                 capture_output=True, text=True, check=True, timeout=300)
        finally:
            relay.wait(timeout=60)
        p50 = float(out.stdout.split()[0]) / 1000
        best = p50 if best is None else min(best, p50)
    return best


# Per row: the goal as (comparison, ratio), against the peer.
GOALS = {
    "direct path, 8 B put p50 (us)": ("<=", 1.0),
    "direct path, 64 B put rate (Mops/s)": (">=", 1.0),
    "router path, 64 B WRITE p50 (us), beside the hand-off floor": ("<=", 1.2),
    "router path, 64 B WRITE p50 (us), beside kernel TCP SEND": ("<=", 2.0),
    "router path, 64 B WRITE p99 (us), beside kernel TCP SEND": ("<=", 2.0),
    "--event, 64 B SEND p50 (us)": ("<=", 1.0),
    "two hosts, 64 B WRITE p50 (us)": ("<=", 1.5),
    "two hosts, 1 MiB WRITE (Gb/s)": (">=", 0.8),
}
# Rows held to the spinning hand-off (handoff_floor), a floor only where nothing else wants the cores.
SPINNING_FLOORS = {"router path, 64 B WRITE p50 (us), beside the hand-off floor"}
PEERS = {
    "direct path, 8 B put p50 (us)": "ucx_perftest ucp_put_lat, posix",
    "direct path, 64 B put rate (Mops/s)": "ucx_perftest ucp_put_bw, posix",
    "router path, 64 B WRITE p50 (us), beside the hand-off floor": "the hand-off floor",
    "router path, 64 B WRITE p50 (us), beside kernel TCP SEND": "-t tcp SEND p50",
    "router path, 64 B WRITE p99 (us), beside kernel TCP SEND": "-t tcp SEND p99",
    "--event, 64 B SEND p50 (us)": "the wake-up floor",
    "two hosts, 64 B WRITE p50 (us)": "-t ofi:tcp, same hosts",
    "two hosts, 1 MiB WRITE (Gb/s)": "-t ofi:tcp, same hosts",
}


@contextlib.contextmanager
def busy_loops(on):
    """Two spinning processes, one pinned to each CPU, while `on`."""
    loops = [subprocess.Popen(["taskset", "-c", str(cpu), "sh", "-c", "while :; do :; done"]) for cpu in (0, 1)] if on else []
    try:
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()


def cell(xs):
    return f"{statistics.median(xs):.3g}" if xs else "-"


def row_line(label, runs):
    v, p, f = ([r[i] for r in runs if r[i] is not None] for i in range(3))
    op, goal = GOALS[label]
    ratios = [r[0] / r[1] for r in runs if r[1]]
    ratio = statistics.median(ratios)
    met = ratio <= goal if op == "<=" else ratio >= goal
    verdict = f"{op} {goal}x: {'met' if met else 'not met'}"
    if LOADED and label in SPINNING_FLOORS:  # beside busy loops a spinning hand-off waits out their slices
        verdict = "quiet machine only: beside busy loops the spinning hand-off is no floor, the wake-up floor is"
    elif not met and op == "<=" and f and len(f) == len(p) and statistics.median(a / b for a, b in zip(f, p)) > goal:
        verdict += f" (the floor itself is {statistics.median(a / b for a, b in zip(f, p)):.1f}x the peer)"
    floor = f"{cell(f)} ({statistics.median(a / b for a, b in zip(v, f)):.2f}x)" if f and len(f) == len(v) else "-"
    return (f"| {label} | {cell(v)} | {PEERS[label]}: {cell(p)} | {ratio:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) "
            f"| {verdict} | {floor} |")


def main():
    for tool in ("handoff_floor", "wakeup_floor", "relay_floor", "relay_hop_floor", "rdmabench", "vrdmad"):
        if not (BUILD / tool).exists():
            raise SystemExit(f"floors.py: {BUILD / tool} not found (build it first: make build)")
    if not shutil.which("ucx_perftest"):
        raise SystemExit("floors.py: ucx_perftest not found (apt-get install ucx-utils; make compare installs it)")
    runs = {}
    router_dir = Path(tempfile.mkdtemp(prefix="vrdma-floors-"))
    router = subprocess.Popen(["nice", "-n", str(ROUTER_NICE), str(BUILD / "vrdmad"), "--socket", str(router_dir / "s"),
                               "-q"])
    os.environ["VRDMA_SOCKET"] = str(router_dir / "s")
    two = None
    try:
        while not (router_dir / "s").exists():
            time.sleep(0.02)
        ok, why = two_hosts.testbed.available()
        two = two_hosts.Hosts(BUILD, ROUTER_NICE) if ok else None
        hosts = two.__enter__() if two else None
        with busy_loops(LOADED):
            for rnd in range(ROUNDS):
                measured = one_host_round()
                if hosts:
                    measured.update(two_host_round(*hosts))
                for label, got in measured.items():
                    runs.setdefault(label, []).append(got)
                print(f"round {rnd + 1}/{ROUNDS} done", file=sys.stderr)
    finally:
        if two:
            two.__exit__()
        router.kill()
        router.wait()
        shutil.rmtree(router_dir, ignore_errors=True)
    write_section(runs, None if two else why)


def write_section(runs, no_two_hosts):
    title = "## vrdma at its floors" + (", loaded host (two busy loops, one per CPU)" if LOADED else "")
    lines = [f"`bench/floors.py{' --loaded' if LOADED else ''}` ({time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}, "
             f"{os.cpu_count()} CPUs{', two busy loops pinned one per CPU throughout' if LOADED else ''}): each vrdma "
             f"figure beside its peer and the floor under it, {ROUNDS} rounds taking turns; medians, and the ratio to "
             "the peer with its range over the rounds. The floor column gives vrdma / floor. Client on CPU 0, server "
             f"on CPU 1; the routers at nice {ROUTER_NICE} (the systemd unit's). The two hosts are network namespaces "
             "joined by a veth, a vrdmad in each linked over ofi:tcp. "
             "The two-host latency's floor is `relay_floor`: a 64 B message through a relay on each host (shared "
             "memory to it, TCP between the relays; every process polling and yielding, or the relays sleeping "
             "until their socket or endpoint wakes them, whichever is less), the least any design with a router per "
             "host pays here. The router path's floor beside kernel TCP is `relay_hop_floor`: a relay "
             "between a client and a server on two CPUs that has no core of its own, parked on an eventfd or "
             "spinning, whichever is less.",
             "", "| figure | vrdma | beside it | ratio | goal | floor (vrdma / floor) |", "|---|---|---|---|---|---|"]
    lines += [row_line(label, r) for label, r in runs.items()]
    if no_two_hosts:
        lines += ["", f"The two-host rows were not measured: {no_two_hosts}."]
    text = "\n".join(lines) + "\n"
    print(text)
    subprocess.run([sys.executable, str(ROOT / "bench/results_md.py"), title, str(ROOT / "bench/RESULTS.md")],
                   input=text, text=True, check=True)


if __name__ == "__main__":
    main()
