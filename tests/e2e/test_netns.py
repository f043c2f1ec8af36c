"""Two hosts on one machine: server and client in separate network namespaces joined by veth pairs.

Needs root (skips otherwise). The bed (tests/netns/testbed.py) is deleted after every fixture, pass
or fail; a bed left by a killed pytest is reaped by the next run.
"""
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, run

sys.path.insert(0, str(ROOT / "tests" / "netns"))
import testbed  # noqa: E402

ITERS = 300
SIZES = [64, 65536]
CMD_TIMEOUT = 30   # any one client run; the whole file takes well under a minute


def _require_bed():
    ok, why = testbed.available()
    if not ok:
        pytest.skip(f"netns test bed: {why}")


@contextlib.contextmanager
def make_bed(rails):
    _require_bed()
    testbed.reap_stale()
    bed = testbed.Testbed(rails=rails)
    bed.up()          # cleans up after itself when it fails half-way
    try:
        yield bed
    finally:
        bed.down()    # kills what still runs inside, then deletes both namespaces (and so the veths)


@pytest.fixture(scope="module")
def bed():
    """One veth pair, shared by the runs that leave it intact."""
    with make_bed(1) as b:
        yield b


@pytest.fixture
def fresh_bed():
    """One veth pair for a single test (e.g. one that cuts the link)."""
    with make_bed(1) as b:
        yield b


@pytest.fixture
def bed2():
    """Two veth pairs: rail 1 on 10.77.1.0/24, rail 2 on 10.77.2.0/24."""
    with make_bed(2) as b:
        yield b


def wait_listening(proc, port, timeout=5.0):
    """Wait until proc (in its namespace) listens on port: /proc/PID/net/tcp is that namespace's table."""
    want = f":{port:04X}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited early with {proc.returncode}: {proc.stderr.read()}")
        for table in ("tcp", "tcp6"):
            try:
                lines = Path(f"/proc/{proc.pid}/net/{table}").read_text().splitlines()[1:]
            except OSError:
                continue
            if any(f[1].endswith(want) and f[3] == "0A" for f in (l.split() for l in lines)):
                return
        time.sleep(0.02)
    raise AssertionError(f"server not listening on port {port} after {timeout}s")


@contextlib.contextmanager
def server(bed, rdmabench, addr, extra=()):
    proc = subprocess.Popen(bed.exec_argv("a", [rdmabench, "--server", "--once", "-q", "--addr", addr, *extra]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(proc, int(addr.rsplit(":", 1)[1]))
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def load(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_records(recs, bed, rail, transport, op, mode):
    assert [r["size"] for r in recs] == SIZES
    for rec in recs:
        assert rec["op"] == op and rec["mode"] == mode
        assert rec["params"]["validate"] is True
        if transport == "tcp":
            assert rec["transport"] == "tcp"
        else:
            assert rec["transport"] == "ofi" and "tcp" in rec["provider"]
            assert rec["fabric"] == f"10.77.{rail}.0/24"
        # libfabric tcp's domain (and the kernel tcp transport's) is the interface carrying the address.
        assert rec["domain"] == bed.iface(rail, "b")
        res = rec["results"]
        assert res["iterations"] == ITERS
        assert res["bytes"] == ITERS * rec["size"]
        assert res["gbps"] > 0 and res["mops"] > 0


@pytest.mark.parametrize("mode", ["bw", "lat"])
@pytest.mark.parametrize("op", ["write", "read", "send"])
@pytest.mark.parametrize("transport", ["ofi:tcp", "tcp"])
def test_validated_run_across_namespaces(rdmabench, bed, tmp_path, free_port, transport, op, mode):
    out = tmp_path / "r.jsonl"
    addr = f"{bed.addr(1, 'a')}:{free_port}"
    before = bed.traffic(1, "b")
    with server(bed, rdmabench, addr) as srv:
        r = run(bed.exec_argv("b", [rdmabench, "--addr", addr, "-t", transport, "--op", op, "--mode", mode,
                                    "--size", ",".join(map(str, SIZES)), "--iters", str(ITERS), "--validate",
                                    "--timeout", "5", "--json", str(out)]), timeout=CMD_TIMEOUT)
        assert r.returncode == 0, r.stderr
        assert srv.wait(timeout=10) == 0, srv.stderr.read()
    recs = load(out)
    check_records(recs, bed, 1, transport, op, mode)
    # Every measured byte crossed the veth (warm-up, headers and acks only add to it).
    assert bed.traffic(1, "b") - before >= sum(r["results"]["bytes"] for r in recs)


@pytest.mark.parametrize("transport", ["ofi:tcp", "tcp"])
def test_second_rail_alone(rdmabench, bed2, tmp_path, free_port, transport):
    """The bed's second veth pair works on its own: a run addressed to 10.77.2.1 stays on rail 2."""
    out = tmp_path / "r.jsonl"
    addr = f"{bed2.addr(2, 'a')}:{free_port}"
    rail1 = bed2.traffic(1, "b")
    with server(bed2, rdmabench, addr) as srv:
        r = run(bed2.exec_argv("b", [rdmabench, "--addr", addr, "-t", transport, "--op", "write", "--mode", "bw",
                                     "--size", ",".join(map(str, SIZES)), "--iters", str(ITERS), "--validate",
                                     "--timeout", "5", "--json", str(out)]), timeout=CMD_TIMEOUT)
        assert r.returncode == 0, r.stderr
        assert srv.wait(timeout=10) == 0, srv.stderr.read()
    check_records(load(out), bed2, 2, transport, "write", "bw")
    assert bed2.traffic(1, "b") - rail1 < 64 * 1024   # rail 1 idle (at most neighbour discovery noise)


@pytest.mark.parametrize("server_picks", [False, True])
@pytest.mark.parametrize("transport", ["ofi:tcp", "tcp"])
@pytest.mark.parametrize("op", ["write", "read", "send"])
def test_two_rails(rdmabench, bed2, tmp_path, free_port, op, transport, server_picks):
    out = tmp_path / "r.jsonl"
    addr = f"{bed2.addr(1, 'a')}:{free_port}"
    server_domains = f"{bed2.iface(1, 'a')},{bed2.iface(2, 'a')}"
    client_domains = f"{bed2.iface(1, 'b')},{bed2.iface(2, 'b')}"
    before = [bed2.traffic(rail, "b") for rail in (1, 2)]
    # The server names its NICs, or finds for each rail its interface on the client's subnet.
    with server(bed2, rdmabench, addr, [] if server_picks else ["--domains", server_domains]) as srv:
        r = run(bed2.exec_argv("b", [rdmabench, "--addr", addr, "-t", transport, "--domains", client_domains,
                                     "--op", op, "--mode", "bw", "--threads", "2", "--size", "64K",
                                     "--iters", str(ITERS), "--validate", "--timeout", "5", "--json", str(out)]),
                timeout=CMD_TIMEOUT)
        assert r.returncode == 0, r.stderr
        assert srv.wait(timeout=10) == 0, srv.stderr.read()
    recs = load(out)
    assert len(recs) == 1
    rec = recs[0]
    assert rec["domains"] == client_domains.split(",")
    assert [x["rail"] for x in rec["results"]["per_rail"]] == [0, 1]
    res = rec["results"]
    assert res["iterations"] == 2 * ITERS   # two threads
    assert res["gbps"] > 0
    # Both rails carried a real share of the payload.
    moved = [bed2.traffic(rail, "b") - before[rail - 1] for rail in (1, 2)]
    assert all(m >= 0.25 * res["bytes"] for m in moved), moved


@pytest.mark.parametrize("how", ["kill-server", "cut-link"])
@pytest.mark.parametrize("transport", ["ofi:tcp", "tcp"])
def test_lost_peer_ends_the_run(rdmabench, fresh_bed, free_port, transport, how):
    bed = fresh_bed
    addr = f"{bed.addr(1, 'a')}:{free_port}"
    with server(bed, rdmabench, addr) as srv:
        client = subprocess.Popen(bed.exec_argv("b", [rdmabench, "--addr", addr, "-t", transport, "--op", "write",
                                                      "--mode", "bw", "--size", "4K", "--duration", "30",
                                                      "--timeout", "3"]),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.5)   # past connection set-up and warm-up, into the measured window
            assert client.poll() is None, client.communicate()
            if how == "kill-server":
                srv.kill()
            else:
                bed.cut(1)    # the peer vanishes without FIN or RST
            t0 = time.monotonic()
            _, err = client.communicate(timeout=15)
            elapsed = time.monotonic() - t0
        finally:
            client.kill()
            client.wait(timeout=10)
    assert client.returncode not in (0, None), err
    assert elapsed < 15, f"{transport} {how}: still running {elapsed:.1f}s after the peer was lost: {err}"
    assert err.strip(), "a lost peer must be reported on stderr"
