"""vrdma across two hosts: a router daemon in each of two network namespaces joined by veth
(tests/netns/testbed.py), linked over libfabric's tcp provider (--listen, --fabric). rdmabench's
server runs on host a's router and its client on host b's; every op crosses the veth as RMA
between the routers or as ops the target's router carries out. Needs root (skips otherwise)."""
import contextlib
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT, cluster_config, rdmabench_path, run, wait_for_text

sys.path.insert(0, str(ROOT / "tests" / "netns"))
import testbed  # noqa: E402

VRDMAD = str(Path(rdmabench_path()).parent / "vrdmad")
CTL = str(Path(rdmabench_path()).parent / "vrdmactl")
ATTACK = str(Path(rdmabench_path()).parent / "vrdma_attack")
NOBODY = 65534
ROUTER_PORT = 7480
ITERS = 300
CMD_TIMEOUT = 60


class Hosts:
    """The bed, a router per namespace, and how to run a program on either host."""

    def __init__(self, bed, d):
        self.bed, self.dir, self.routers = bed, d, {}

    def start_router(self, side):
        sock, log = self.dir / f"{side}.sock", self.dir / f"{side}.log"
        log.write_text("")
        argv = [VRDMAD, "--socket", str(sock), "--listen", f"{self.bed.addr(1, side)}:{ROUTER_PORT}",
                "--fabric", "ofi:tcp", "--config", str(self.config())]
        self.routers[side] = subprocess.Popen(self.bed.exec_argv(side, argv), stderr=open(log, "a"),
                                              stdout=subprocess.DEVNULL)
        wait_for_text(log, "serving on")

    def config(self):
        path = self.dir / "cluster.toml"
        if not path.exists():
            path.write_text(cluster_config(self.dir))
        return path

    def log(self, side):
        return (self.dir / f"{side}.log").read_text()

    def argv(self, side, argv):
        return self.bed.exec_argv(side, ["env", f"VRDMA_SOCKET={self.dir / f'{side}.sock'}", *argv])

    def stop(self):
        for p in self.routers.values():
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)


@pytest.fixture(scope="module")
def hosts():
    ok, why = testbed.available()
    if not ok:
        pytest.skip(f"netns test bed: {why}")
    testbed.reap_stale()
    d = Path(tempfile.mkdtemp(prefix="vrdma-hosts-"))
    d.chmod(0o755)  # a client of another uid reaches the sockets too
    with testbed.Testbed(rails=1) as bed:
        h = Hosts(bed, d)
        try:
            for side in "ab":
                h.start_router(side)
            yield h
        finally:
            h.stop()
    subprocess.run(["rm", "-rf", str(d)])


@contextlib.contextmanager
def server(h, port):
    proc = subprocess.Popen(h.argv("a", [rdmabench_path(), "--server", "--once", "-q", "--addr",
                                         f"{h.bed.addr(1, 'a')}:{port}"]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def client(h, port, args, out=None):
    argv = [rdmabench_path(), "--addr", f"{h.bed.addr(1, 'a')}:{port}", "-t", "vrdma", "--timeout", "5", *args]
    if out:
        argv += ["--json", str(out)]
    return run(h.argv("b", argv), timeout=CMD_TIMEOUT)


RUNS = {
    "write-bw": ["--op", "write", "--mode", "bw", "--size", "64,64K,1M"],
    "read-bw": ["--op", "read", "--mode", "bw", "--size", "64,64K"],
    # 64 B rides in the op; 64 KiB is pulled by the target's router with READs.
    "send-bw": ["--op", "send", "--mode", "bw", "--size", "64,64K"],
    "send-lat": ["--op", "send", "--mode", "lat", "--size", "64"],
    "write-imm-lat": ["--op", "write-imm", "--mode", "lat", "--size", "64,64K"],
    "imm-bw": ["--op", "write-imm,send-imm", "--mode", "bw", "--size", "64"],
    "atomics": ["--op", "fadd,cswap", "--mode", "bw"],
    "atomics-lat": ["--op", "fadd", "--mode", "lat"],
    "threads": ["--op", "write,read", "--mode", "bw", "--size", "4K", "--threads", "2", "--qps", "2"],
    "bidir": ["--op", "write", "--mode", "bw", "--size", "4K", "--bidir"],
    "event": ["--op", "send", "--mode", "lat", "--size", "64", "--event"],
}


@pytest.mark.parametrize("name", list(RUNS))
def test_validated_run_across_hosts(hosts, free_port, tmp_path, name):
    out = tmp_path / "r.jsonl"
    before = hosts.bed.traffic(1, "b")
    with server(hosts, free_port) as srv:
        r = client(hosts, free_port, [*RUNS[name], "--iters", str(ITERS), "--validate"], out)
        assert r.returncode == 0, r.stderr
        assert srv.wait(timeout=10) == 0, srv.stderr.read()
    recs = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    assert recs and all(rec["transport"] == "vrdma" and rec["params"]["validate"] for rec in recs)
    for rec in recs:
        assert rec["results"]["iterations"] >= ITERS
    payload = sum(rec["results"]["bytes"] for rec in recs if rec["mode"] == "bw")
    assert hosts.bed.traffic(1, "b") - before >= payload  # the bytes crossed the veth


def stats(h, side):
    r = run(h.bed.exec_argv(side, [CTL, "--socket", str(h.dir / f"{side}.sock"), "stats"]), timeout=10)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_routers_link_learned_each_other(hosts):
    """No peer list was given: each router learned the other from the QP addresses, and says so."""
    for side, other in (("a", "b"), ("b", "a")):
        assert f"at router {hosts.bed.addr(1, other)}:{ROUTER_PORT}" in hosts.log(side)
        links = [l for l in stats(hosts, side).splitlines() if l.startswith("link:")]
        assert any(f"router {hosts.bed.addr(1, other)}:{ROUTER_PORT} (learned) heard" in l for l in links), links


def test_a_peer_router_is_linked_at_start(hosts):
    """--peer: the link forms before any QP asks for it; the peer answers the greeting."""
    sock, log = hosts.dir / "p.sock", hosts.dir / "p.log"
    log.write_text("")
    argv = [VRDMAD, "--socket", str(sock), "--listen", f"{hosts.bed.addr(1, 'b')}:{ROUTER_PORT + 1}",
            "--peer", f"{hosts.bed.addr(1, 'a')}:{ROUTER_PORT}", "--config", str(hosts.config())]
    p = subprocess.Popen(hosts.bed.exec_argv("b", argv), stderr=open(log, "a"), stdout=subprocess.DEVNULL)
    try:
        wait_for_text(log, "serving on")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            r = run(hosts.bed.exec_argv("b", [CTL, "--socket", str(sock), "stats"]), timeout=10)
            if f"router {hosts.bed.addr(1, 'a')}:{ROUTER_PORT} (--peer) heard" in r.stdout:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(r.stdout)
        assert f"router {hosts.bed.addr(1, 'b')}:{ROUTER_PORT + 1} (learned) heard" in stats(hosts, "a")
    finally:
        p.kill()
        p.wait(timeout=10)


def test_another_tenant_on_another_host_reaches_nothing(hosts):
    """A client of another tenant (uid nobody) on host b cannot connect to a tenant's QP on host
    a: a's router answers as if no such QP existed; its writes and reads with the stolen key
    fail; the victim's memory is unchanged."""
    info = hosts.dir / "victim.txt"
    victim = subprocess.Popen(hosts.argv("a", [ATTACK, str(hosts.dir / "a.sock"), "victim", str(info)]),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not (info.exists() and info.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.02)
    # Into the namespace as root, then down to nobody (setpriv, util-linux).
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    a = run(hosts.bed.exec_argv("b", [*as_nobody, ATTACK, str(hosts.dir / "b.sock"), "attack", str(info), "1000"]),
            timeout=120)
    assert a.returncode == 0, a.stdout + a.stderr
    lines = a.stdout.splitlines()
    assert "connect errno=2" in lines, a.stdout
    assert "writes ok=0 failed=1000" in lines and "reads ok=0 failed=1000" in lines, a.stdout
    out, _ = victim.communicate(input="", timeout=30)
    sums = [l for l in out.splitlines() if l.startswith("checksum")]
    assert len(sums) == 2 and sums[0] == sums[1], out


def test_a_router_without_listen_refuses_a_remote_peer(hosts, free_port, tmp_path):
    """A client whose router has no --listen cannot reach a QP on another host: the connect fails
    with the reason, and the run ends with an error instead of hanging."""
    sock, log = hosts.dir / "c.sock", hosts.dir / "c.log"
    log.write_text("")
    lone = subprocess.Popen(hosts.bed.exec_argv("b", [VRDMAD, "--socket", str(sock)]), stderr=open(log, "a"),
                            stdout=subprocess.DEVNULL)
    try:
        wait_for_text(log, "serving on")
        with server(hosts, free_port):
            argv = [rdmabench_path(), "--addr", f"{hosts.bed.addr(1, 'a')}:{free_port}", "-t", "vrdma",
                    "--timeout", "5", "--op", "write", "--iters", "100"]
            r = run(hosts.bed.exec_argv("b", ["env", f"VRDMA_SOCKET={sock}", *argv]), timeout=CMD_TIMEOUT)
        assert r.returncode != 0
        assert "no --listen" in r.stderr, r.stderr
    finally:
        lone.kill()
        lone.wait(timeout=10)


def test_a_killed_router_fails_the_peer_host_run(hosts, free_port):
    """kill -9 of the server host's router mid-stream: the client on the other host ends with an
    error in bounded time (its router gives up on the link), never hangs; a restarted router
    serves again."""
    with server(hosts, free_port):
        c = subprocess.Popen(hosts.argv("b", [rdmabench_path(), "--addr", f"{hosts.bed.addr(1, 'a')}:{free_port}",
                                             "-t", "vrdma", "--timeout", "5", "--op", "write", "--mode", "bw",
                                             "--size", "4K", "--duration", "30"]),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(2.0)
            assert c.poll() is None, c.communicate()
            hosts.routers["a"].kill()
            t0 = time.monotonic()
            _, err = c.communicate(timeout=20)
            elapsed = time.monotonic() - t0
        finally:
            if c.poll() is None:
                c.kill()
    assert c.returncode != 0, err
    print(f"client ended {elapsed:.2f} s after the kill: {err.strip().splitlines()[-1]}")
    assert elapsed < 12, elapsed
    hosts.routers["a"].wait(timeout=10)
    (hosts.dir / "a.sock").unlink(missing_ok=True)  # SIGKILL left it behind
    hosts.start_router("a")
    port = free_port + 1
    with server(hosts, port) as srv:
        r = client(hosts, port, ["--op", "write", "--mode", "bw", "--size", "4K", "--iters", "200", "--validate"])
        assert r.returncode == 0, r.stderr
        assert srv.wait(timeout=10) == 0


@pytest.mark.parametrize("op,victim", [("send", "server"), ("read", "client"), ("write", "server")])
def test_a_tenant_killed_mid_stream_leaves_both_routers_serving(hosts, free_port, op, victim):
    """kill -9 of one end while its router has RMAs in flight into or out of the victim's
    regions (1 MiB SENDs pulled by the server's router, READs into the client's buffer, WRITEs
    landing in the server's): the regions go with the process, but the fabric still holds their
    bytes. Both routers must live on and serve a validated run."""
    for round_ in range(3):
        port = free_port + round_
        with server(hosts, port) as srv:
            c = subprocess.Popen(hosts.argv("b", [rdmabench_path(), "--addr", f"{hosts.bed.addr(1, 'a')}:{port}",
                                                 "-t", "vrdma", "--timeout", "5", "--op", op, "--mode", "bw",
                                                 "--size", "1M", "--duration", "30"]),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                time.sleep(1.5)
                (srv if victim == "server" else c).kill()
                time.sleep(0.5)
            finally:
                c.kill()
                c.wait(timeout=10)
        for side, r in hosts.routers.items():
            assert r.poll() is None, f"round {round_}: router {side} died:\n{hosts.log(side)[-3000:]}"
    port = free_port + 3
    with server(hosts, port) as srv:
        r = client(hosts, port, ["--op", op, "--mode", "bw", "--size", "64K", "--iters", "200", "--validate"])
        assert r.returncode == 0, r.stderr
        assert srv.wait(timeout=10) == 0


FLOOD = str(Path(rdmabench_path()).parent / "vrdma_link_flood")


def link_conns(h, side):
    """Connections established to `side`'s router port."""
    r = run(h.bed.exec_argv(side, ["ss", "-Htn", "state", "established", f"( sport = :{ROUTER_PORT} )"]), timeout=10)
    return len([line for line in r.stdout.splitlines() if line.strip()])


# A stranger's copy of the connection request that libfabric's rxm sends to reconnect to a peer
# (ofi_ctrl_hdr v3, then rxm's data naming the port it listens on and a client id of its own).
def rxm_connreq(port):
    return (bytes.fromhex("0300001800000000000000000000000000000000000000000100000000000000")
            + bytes.fromhex("01020403") + port.to_bytes(2, "little")
            + bytes.fromhex("0200004000000010000000000000") + bytes([0x5a, 0xa5]) + bytes(2))


DIVERT = """
import select, socket, sys, time
host, port, secs, blob = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), bytes.fromhex(sys.argv[4])
conns, got, end, due = [], b"", time.time() + secs, 0
while time.time() < end:
    if time.time() >= due:
        try:
            s = socket.create_connection((host, port), timeout=1)
            s.sendall(blob)
            s.setblocking(False)
            conns.append(s)
        except OSError:
            pass
        due = time.time() + 0.3
    for s in select.select(conns, [], [], 0.05)[0]:
        try:
            d = s.recv(65536)
        except OSError:
            d = b""
        if not d:
            conns.remove(s)
            s.close()
        got += d
print(len(got), got.count(b"VRLK"))
"""


def stranger_on_b(h, argv):
    """`argv` run on host b as uid nobody, its output piped."""
    return subprocess.Popen(h.bed.exec_argv("b", ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                                                  "--clear-groups", *argv]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def assert_a_validated_run(h, port, args):
    with server(h, port) as srv:
        r = client(h, port, [*args, "--validate"])
        assert r.returncode == 0, r.stderr
        assert srv.wait(timeout=10) == 0, srv.stderr.read()


OPEN_SILENTLY = """
import socket, sys, time
host, port, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
held, end = [], time.time() + secs
while time.time() < end:
    try:
        held.append(socket.create_connection((host, port), timeout=1))
    except OSError:
        pass
    time.sleep(0.01)
print(len(held))
"""


def test_a_routers_new_connection_outlives_a_strangers_stream_of_silent_ones(hosts, free_port):
    """Past max_link_conns_per_host (32) the link guard shuts a host's unvouched connections, the
    oldest first, and a router vouched for its own only with a conn_proof message up to a second
    or two after making one: a stranger on host b opening a silent connection to a's port every
    10 ms could make router b's new connection one of the oldest unvouched within 0.3 s (a race
    the conn_proof won in 4 runs here). Now a connection whose request proved the key is vouched
    for as it is taken, and the run across the hosts passes."""
    stranger = stranger_on_b(hosts, [sys.executable, "-c", OPEN_SILENTLY, hosts.bed.addr(1, "a"), str(ROUTER_PORT),
                                      "12"])
    try:
        time.sleep(2)
        hosts.routers["b"].kill()
        hosts.routers["b"].wait(timeout=10)
        hosts.start_router("b")
        assert_a_validated_run(hosts, free_port, ["--op", "write", "--mode", "lat", "--size", "64", "--duration", "6"])
        out, err = stranger.communicate(timeout=30)
    finally:
        stranger.kill()
        stranger.wait(timeout=10)
    assert int(out or 0) >= 100, (out, err)
    assert "past max_link_conns_per_host" in hosts.log("a")


def test_a_local_user_of_a_linked_host_cannot_take_its_link(hosts, free_port):
    """Probe 18 finding 1: uid nobody on host b sent router a's --listen port, from b's address,
    the 56-byte connection request rxm sends when it reconnects. rxm knew a peer by its address
    and took it for router b: a sent b's link messages (their inline payloads, fabric keys) down
    the stranger's connection, and cross-host QPs failed. Now the routers make their own
    connections, and a takes one only when its request proves the cluster's key."""
    stranger = stranger_on_b(hosts, [sys.executable, "-c", DIVERT, hosts.bed.addr(1, "a"), str(ROUTER_PORT), "7",
                                      rxm_connreq(ROUTER_PORT).hex()])
    try:
        time.sleep(1)
        assert_a_validated_run(hosts, free_port, ["--op", "send", "--mode", "lat", "--size", "4K", "--duration", "4"])
        out, err = stranger.communicate(timeout=30)
    finally:
        stranger.kill()
        stranger.wait(timeout=10)
    assert stranger.returncode == 0, err
    got, messages = map(int, out.split())
    assert messages == 0, f"the stranger received {messages} of a's link messages ({got} B)"
    assert got < 1024, f"the stranger received {got} B"
    stats = run(hosts.bed.exec_argv("a", [CTL, "--socket", str(hosts.dir / "a.sock"), "stats"]), timeout=10).stdout
    refused = re.search(r"(\d+) link connections refused", stats)
    assert refused and int(refused.group(1)) >= 10, stats


def test_a_strangers_held_connections_neither_push_out_a_router_nor_stay(hosts, free_port):
    """Probe 11: a stranger (uid nobody) on host b spoke once on each of 40 connections to a's
    --listen port (as a replayed connection request does) and held them for ever; past the cap
    of one host's connections (32), a's guard then shut router b's own new connection, and every
    QP across the two hosts failed. Routers then vouched for the connections they made; now a
    connection whose request does not prove the key is refused as it is made."""
    stranger = subprocess.Popen(
        hosts.bed.exec_argv("b", ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", FLOOD,
                                  f"{hosts.bed.addr(1, 'a')}:{ROUTER_PORT}", f"{hosts.bed.addr(1, 'b')}:20000", "40",
                                  "hold:40"]),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)
        hosts.routers["b"].kill()  # its next connection to a is newer than all the stranger's
        hosts.routers["b"].wait(timeout=10)
        hosts.start_router("b")
        with server(hosts, free_port) as srv:
            r = client(hosts, free_port, ["--op", "write", "--mode", "lat", "--size", "64", "--duration", "4",
                                          "--validate"])
            assert r.returncode == 0, r.stderr
            assert srv.wait(timeout=10) == 0, srv.stderr.read()
        assert stranger.poll() is None, stranger.stderr.read()
        held = link_conns(hosts, "a")
        assert held <= 3, f"{held} connections to a's port: the stranger's are held"
        assert "a connection to the link was refused: its MAC does not verify" in hosts.log("a")
    finally:
        stranger.kill()
        stranger.wait(timeout=10)
