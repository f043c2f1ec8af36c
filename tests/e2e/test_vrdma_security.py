"""vrdmad shared by tenants who do not trust each other: each test runs a hostile or buggy tenant
(tests/vrdma/vrdma_hostile.c, mostly as uid nobody) against a real router, and checks what the
router promises: no tenant reaches another's QPs, no request costs the router more than its own
work, the well-behaved tenant is served meanwhile, nothing is held without limit."""
import contextlib
import fcntl
import inspect
import json
import os
import re
import resource
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import cluster_config, run, wait_for_text
from test_vrdma_router import (BUILD, CTL, NOBODY, VRDMAD, Router, as_root, cpu_seconds,  # noqa: F401
                               linked_routers, router, world)

HOSTILE = str(BUILD / "vrdma_hostile")
DATAGRAM = str(BUILD / "vrdma_datagram")
WC_SUCCESS, WC_WR_FLUSH_ERR, WC_LOC_QP_OP_ERR, WC_RETRY_EXC_ERR = 0, 3, 9, 10

# The control protocol's packet header (src/vrdma/proto/control.hh: kMagic, kVersion).
CONTROL_MAGIC, CONTROL_VERSION = 0x31445256, 8
# A QP's ring entries (src/vrdma/proto/qp_layout.hh): a receive, and a send with 64 B inline.
MAX_SGE = 8
RECV_ENTRY, SEND_ENTRY = 24 + 16 * MAX_SGE, 48 + 16 * MAX_SGE + 64


def hostile(sock, *args, user=None, timeout=120):
    p = run([HOSTILE, sock, *map(str, args)], timeout=timeout, user=user)
    assert p.returncode == 0, p.stdout + p.stderr
    return dict(kv.split("=", 1) for kv in p.stdout.split() if "=" in kv)


def start_ping(sock, seconds):
    """The well-behaved tenant (root): a connection, a PD and a router-path WRITE every millisecond."""
    return subprocess.Popen([HOSTILE, sock, "ping", str(seconds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def start_remote_ping(a, b, seconds):
    """The well-behaved tenant (root) across two linked routers, whose sockets are opened to every
    uid first (the attacker's too): a 64 B WRITE from a's host to b's every millisecond."""
    for r in (a, b):
        os.chmod(r.sock, 0o777)
    return subprocess.Popen([HOSTILE, a.sock, "remote-ping", b.sock, str(seconds)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def ping_result(p):
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, out + err
    return dict(kv.split("=", 1) for kv in out.split())


def assert_served(result, stall_ms=100):
    assert int(result["failed"]) == 0 and int(result["rounds"]) > 0, result
    assert float(result["worst_ms"]) < stall_ms, result


@as_root
def test_a_qp_number_is_never_issued_twice(router, world):
    """A destroyed QP's number is never reissued: a peer that still names it reaches nothing, never
    another tenant's new QP. 16,000 QPs drawn from 24 random bits would repeat (birthday bound:
    99.95%); the router's numbers are a keyed permutation of a counter. Two tenants make them at
    once (each is paced at 4,096 at once, then 1,000 a second)."""
    r = router()
    files = [world / "root.txt", world / "nobody.txt"]
    for f in files:
        f.touch()
        f.chmod(0o666)
    procs = [subprocess.Popen([HOSTILE, r.sock, "qp-churn", "8000", str(f)], user=user, stdout=subprocess.PIPE, text=True)
             for f, user in zip(files, (None, NOBODY))]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0 and "issued=8000 distinct=8000" in out, out
    numbers = [line for f in files for line in f.read_text().split()]
    assert len(numbers) == 16000 and len(set(numbers)) == 16000


def datagrams_reach_only_their_tenant(listen_sock, send_sock, qpn_file):
    """A datagram QP listens at `listen_sock`; uid nobody, then root, send to it from `send_sock`
    knowing its number and Q_Key: the listener hears root's 50 with its Q_Key only, and nothing
    of nobody's, whose completions all say success anyway."""
    listener = subprocess.Popen([DATAGRAM, listen_sock, "listen", str(qpn_file), "8"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not (qpn_file.exists() and qpn_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    senders = {}
    for who, user in (("stranger", NOBODY), ("friend", None)):
        p = run([DATAGRAM, send_sock, "send", str(qpn_file), "50"], user=user, timeout=60)
        assert p.returncode == 0 and "sent ok=150 failed=0" in p.stdout, p.stdout + p.stderr
        senders[who] = p.stdout.split()[1]
    out, err = listener.communicate(timeout=30)
    assert listener.returncode == 0, out + err
    assert "received 50\n" in out, out
    assert f"from {senders['friend']}\n" in out and f"from {senders['stranger']}\n" not in out, (out, senders)


@as_root
def test_a_datagram_reaches_only_its_own_tenants_qps(router, world):
    """A datagram (UD) QP takes datagrams from its own tenant's QPs alone: another tenant (uid
    nobody) that knows its number and Q_Key reaches nothing, and learns nothing of the QP. A
    sender of the same tenant reaches it, with its Q_Key only, and is named as the source."""
    r = router()
    datagrams_reach_only_their_tenant(r.sock, r.sock, world / "qpn.txt")


@as_root
def test_a_datagram_from_another_host_reaches_only_its_own_tenants_qps(linked_routers, world):
    """The same across two linked routers: a datagram crosses the link through an address handle
    of the other router, and is delivered there only to the tenant its router names."""
    a, b = linked_routers
    datagrams_reach_only_their_tenant(a.sock, b.sock, world / "qpn.txt")


def datagram_latency(p):
    """vrdma_datagram send's microseconds from post to completion: p50, p99 and worst."""
    assert p.returncode == 0, p.stdout + p.stderr
    return {k: float(v) for k, v in re.findall(r"(p50_us|p99_us|worst_us)=([0-9.]+)", p.stdout)}


@as_root
def test_a_datagram_flood_to_another_host_costs_others_a_short_turn(linked_routers, world):
    """Probe 21: uid nobody's 16 datagram QPs keep 4 KiB datagrams to another host's router in
    flight (to QP numbers nobody has). Each costs the router a MAC and a sendmsg (20-40 us), and a
    turn of the router's loop gave a tenant 128 requests: another tenant's next datagram waited
    behind that many, 2-5 ms each (300 took 1-3.5 s between two hosts). A tenant's turn is now
    held to the router's time too (kTenantTurnNs): the other tenant's datagrams each wait for one
    short turn, and none for long. (The attacker's own datagrams wait too: a router sends at most
    kDatagramsInFlight to another, 256 KiB of 4 KiB ones, ahead of anyone's next message.)"""
    a, b = linked_routers
    for r in (a, b):
        os.chmod(r.sock, 0o777)
    qpn_file = world / "qpn.txt"
    listener = subprocess.Popen([DATAGRAM, b.sock, "listen", str(qpn_file), "40"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not (qpn_file.exists() and qpn_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    alone = datagram_latency(run([DATAGRAM, a.sock, "send", str(qpn_file), "100"], timeout=60))
    flood = subprocess.Popen([HOSTILE, a.sock, "ud-flood", b.sock, "16", "4096", "10"], user=NOBODY,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2)
        beside = datagram_latency(run([DATAGRAM, a.sock, "send", str(qpn_file), "200"], timeout=60))
    finally:
        out, err = flood.communicate(timeout=60)
        listener.kill()
        listener.communicate()
    assert flood.returncode == 0, out + err
    flooded = int(re.search(r"posted=(\d+)", out).group(1))
    assert flooded > 10000, out  # the flood ran
    # Before: p50 0.7-1.6 ms on loopback (one turn of 128 datagrams); after: 0.18-0.31 ms.
    assert beside["p50_us"] < 600 and beside["worst_us"] < 100_000, (alone, beside, out)


def listen_port(r):
    return int(r.proc.args[r.proc.args.index("--listen") + 1].rsplit(":", 1)[1])


def loopback_qp_file(path, port, qpn=1):
    """A QP's address as vrdma_datagram reads it: QPN, port, and ::ffff:127.0.0.1 in hex."""
    path.write_text(f"{qpn} {port} 00000000000000000000ffff7f000001\n")
    return str(path)


@as_root
def test_datagrams_to_a_router_that_is_gone_hold_no_memory(linked_routers, world):
    """Probe 8 D1: datagrams through an address handle naming a router nobody runs (a closed
    port) were queued without bound: the router grew by 650 MB in 20 s and kept it, and other
    tenants stalled. An address handle is now made only for a router that has proven the key, so
    here the router proves it and then stops: a datagram goes only while the link keeps up, else
    it is dropped."""
    a, b = linked_routers
    gone = loopback_qp_file(world / "gone.txt", listen_port(b))
    first = run([DATAGRAM, a.sock, "send", gone, "1"], user=NOBODY, timeout=30)
    assert first.returncode == 0, first.stdout + first.stderr
    b.stop()
    ping = start_ping(a.sock, 6)
    before = rss_kib(a.proc.pid)
    p = run([DATAGRAM, a.sock, "send", gone, "40000", "4096"], user=NOBODY, timeout=120)
    grown = rss_kib(a.proc.pid) - before
    assert p.returncode == 0 and "sent ok=120000 failed=0" in p.stdout, p.stdout + p.stderr
    assert grown < 32 * 1024, f"the router grew by {grown} KiB for 120,000 datagrams to a router that is gone"
    assert_served(ping_result(ping))


class CountingListeners:
    """TCP listeners on loopback that are not routers: they count the connections they are given."""

    def __init__(self, count):
        self.socks = []
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(64)
            s.setblocking(False)
            self.socks.append(s)
        self.ports = [s.getsockname()[1] for s in self.socks]
        self.accepted = [0] * count
        self.held = []

    def take(self):
        for i, s in enumerate(self.socks):
            while True:
                try:
                    conn, _ = s.accept()
                except BlockingIOError:
                    break
                self.accepted[i] += 1
                self.held.append(conn)
        return self.accepted

    def close(self):
        for s in self.socks + self.held:
            s.close()


@as_root
def test_a_tenant_cannot_aim_its_router_at_addresses_that_are_not_routers(linked_routers, world):
    """Probe 9 lead: an address handle (or a QP's peer) may name any address, and the router
    connected there for the tenant: 20 tenants' processes at once made it open connections to
    20 ports of services that are not routers. Now an address gets one greeting until it proves
    the key, a few at a time (4 per tenant), is not greeted again for 10 s, and every such request
    fails alike: 'did not answer within 800 ms'."""
    a, _ = linked_routers
    ears = CountingListeners(20)
    try:
        files = [loopback_qp_file(world / f"p{i}.txt", port) for i, port in enumerate(ears.ports)]
        procs = [subprocess.Popen([DATAGRAM, a.sock, "send", f, "1"], preexec_fn=as_nobody_holding(64),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for f in files]
        outs = [p.communicate(timeout=30) for p in procs]
        time.sleep(0.5)
        greeted = sum(1 for n in ears.take() if n)
        assert 1 <= greeted <= 4, f"the router connected to {greeted} of 20 addresses that are not routers"
        assert all(p.returncode == 1 for p in procs), outs
        assert all("create_ah" in err for _, err in outs), outs
        again = [run([DATAGRAM, a.sock, "send", files[0], "1"], user=NOBODY, timeout=30) for _ in range(5)]
        again.append(run([DATAGRAM, a.sock, "rc-to", files[0], "0"], user=NOBODY, timeout=30))
        time.sleep(0.5)
        assert ears.take()[0] <= 1, f"{ears.accepted[0]} connections to one address that is not a router"
        assert "did not prove the cluster's key" in again[0].stderr, again[0].stderr
        assert "connect errno=" in again[-1].stdout and "connect errno=0" not in again[-1].stdout, again[-1].stdout
    finally:
        ears.close()


def assert_a_keyed_router_links(r, world, port):
    """A router holding the cluster's key, started with --peer at `port` (r's --listen), links."""
    peer = world / "peer"
    peer.mkdir()
    (peer / "c.toml").write_text(cluster_config(world))
    with socket.socket() as s:  # not port + 1: a port the attack's connections left may hold it
        s.bind(("127.0.0.1", 0))
        own = s.getsockname()[1]
    with open(peer / "log", "w") as log:
        p = subprocess.Popen([VRDMAD, "--socket", str(peer / "s.sock"), "--listen", f"127.0.0.1:{own}",
                              "--peer", f"127.0.0.1:{port}", "--config", str(peer / "c.toml")], stderr=log)
    try:
        deadline = time.time() + 10
        while "link:" not in run([CTL, "--socket", r.sock, "stats"], timeout=10).stdout and time.time() < deadline:
            time.sleep(0.2)
        stats = run([CTL, "--socket", r.sock, "stats"], timeout=10).stdout
        assert "link:" in stats, f"{stats}\nrouter:\n{r.log.read_text()[-3000:]}\npeer:\n{(peer / 'log').read_text()[-3000:]}"
    finally:
        p.kill()
        p.wait()


# libfabric 1.17 tcp;ofi_rxm's connection request as a router sent it (recorded): a stranger replayed
# it to complete the fabric's handshake, which asked for no key. Routers now make their own
# connections, and refuse a request that does not prove the key.
RXM_CONNREQ = bytes.fromhex("0300001800000000000000000000000000000000000000000100000000000000"
                            "010204033a1d0200004000000010000000000000c86a0000")


def cpu_of(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def send_a_frame_libfabric_never_takes(port):
    """As uid nobody: the fabric's handshake at `port`, one 16-byte frame whose header size is 0, gone."""
    frame = struct.pack("<BBHBBBBQ", 3, 1, 0, 0, 0, 0, 0, 0) + bytes(32)
    code = (f"import socket, time\ns = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
            f"try:\n  s.sendall(bytes.fromhex('{RXM_CONNREQ.hex()}'))\n  s.recv(100)\n"
            f"  s.sendall(bytes.fromhex('{frame.hex()}'))\n  time.sleep(0.5)\n"
            f"except OSError:\n  pass\ns.close()\n")
    poke = run(["python3", "-c", code], user=NOBODY, timeout=30)
    assert poke.returncode == 0, poke.stderr


@as_root
def test_a_frame_libfabric_never_takes_costs_no_core(router, world, free_port):
    """Probe 9 E5: a stranger completed the fabric's handshake at --listen, sent one 16-byte frame
    whose header size is 0, and left: libfabric never took the frame, fi_trywait failed for ever
    and the router spun at 100% of a core (11 s of CPU in 10 s). The loop then stopped spinning on
    a fabric that says it has work and gives none; now the stranger's handshake is refused before
    it can send a frame. Tenants are served, and a keyed router still links."""
    r = router(cluster_config(world), extra=["--listen", f"127.0.0.1:{free_port}"])
    send_a_frame_libfabric_never_takes(free_port)
    time.sleep(1)
    before = cpu_of(r.proc.pid)
    ping = start_ping(r.sock, 6)
    assert_served(ping_result(ping))
    used = cpu_of(r.proc.pid) - before
    assert used < 2.5, f"the router used {used:.1f} s of CPU in the 6 s after one frame"
    assert "a connection to the link was refused" in r.log.read_text()
    assert_a_keyed_router_links(r, world, free_port)


def wakeups_of(pid):
    status = Path(f"/proc/{pid}/status").read_text()
    return sum(int(line.split()[1]) for line in status.splitlines() if line.startswith("voluntary_ctxt_switches"))


def hold_a_connection_request_header(port, seconds):
    """As uid nobody: the tcp provider's 32-byte connection request header at `port`, promising
    104 bytes of data that never come, held for `seconds`."""
    header = struct.pack("<BBHIQQQ", 3, 0, socket.htons(104), 0, 0, 0, 1)
    code = (f"import socket, time\ns = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
            f"s.sendall(bytes.fromhex('{header.hex()}'))\ntime.sleep({seconds})\n")
    return subprocess.Popen(["python3", "-c", code], preexec_fn=as_nobody_holding(16))


@as_root
def test_a_connection_request_header_without_its_data_stalls_no_one(router, world, free_port):
    """Probe 19: a stranger that sent --listen the tcp provider's connection request header and
    then nothing held the router's one thread inside libfabric (a blocking recv() for the data)
    until the link guard shut the connection 5-6 s later: every local client's call timed out
    meanwhile. The sockets libfabric accepts are now non-blocking, and it reads the data when it
    comes."""
    r = router(cluster_config(world), extra=["--listen", f"127.0.0.1:{free_port}"])
    stranger = hold_a_connection_request_header(free_port, 8)
    try:
        time.sleep(0.5)
        ping = start_ping(r.sock, 3)
        assert_served(ping_result(ping))
        started = time.monotonic()
        stats = run([CTL, "--socket", r.sock, "stats"], timeout=10)
        took = time.monotonic() - started
    finally:
        stranger.kill()
        stranger.wait()
    assert stats.returncode == 0 and took < 0.5, (took, stats.stderr)
    assert_a_keyed_router_links(r, world, free_port)


def router_address(port):
    """127.0.0.1:`port` as a link message names a router (proto::RouterAddress)."""
    return bytes(10) + b"\xff\xff" + bytes([127, 0, 0, 1]) + struct.pack("<HH", port, 0)


def link_connect_request(key_file, from_port, to_port):
    """A link connection's request from the router at `from_port` to the one at `to_port`, as that
    router makes it under the cluster's key (src/vrdma/router/link_handshake.hh), in the tcp
    provider's framing: what a host on the path sees go by."""
    import hmac
    signed = (struct.pack("<II", 0x4C445256, 1) + router_address(from_port) + router_address(to_port) + os.urandom(16)
              + struct.pack("<q", time.time_ns()))
    key = bytes.fromhex(Path(key_file).read_text().split()[0])
    mac = hmac.new(key, b"vrdma link connect request\0" + signed, "sha256").digest()
    return struct.pack("<BBHIQQQ", 3, 0, socket.htons(len(signed) + 32), 0, 0, 0, 1) + signed + mac


@as_root
def test_a_request_held_back_and_replayed_by_a_host_on_the_path_is_sent_nothing(linked_routers, world):
    """Probe 19: a host on the path between routers a and b held b's link connection request
    back and sent it to a itself. The request proves the key, not that its sender is there: a took
    the connection for b's and sent down it what it had for b (hello, conn_proof). Now a router
    sends only down the connection it made itself, whose answer proved the key to it; one it took
    carries what the other side sends."""
    a, b = linked_routers
    port = lambda r: int(r.proc.args[r.proc.args.index("--listen") + 1].rsplit(":", 1)[1])  # noqa: E731
    replay = socket.create_connection(("127.0.0.1", port(a)), timeout=3)
    try:
        replay.sendall(link_connect_request(world / "link.key", port(b), port(a)))
        replay.settimeout(3)
        answer = replay.recv(4096)
        assert len(answer) >= 32 + 56, answer  # taken: the tcp provider's answer and a's
        ping = start_remote_ping(a, b, 2)
        replay.settimeout(0.2)
        got, until = b"", time.time() + 3
        while time.time() < until:
            try:
                chunk = replay.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                break
            got += chunk
        assert got.count(b"VRLK") == 0, f"a sent {got.count(b'VRLK')} link messages down the replayed connection"
        assert_served(ping_result(ping))
    finally:
        replay.close()


@as_root
def test_a_frame_libfabric_never_takes_costs_nothing_once_shut(router, world, free_port):
    """Probe 11 F1: once the guard had shut the stranger's connection, libfabric kept the closed
    socket, readable for ever, and the router polled the fabric every millisecond until it
    restarted (about 930 wake-ups a second for good). Now the fabric is watched edge-triggered
    while it says it has work and gives none (the router wakes for what is new, and every 10 ms),
    and a stranger's handshake is refused before it can send a frame."""
    r = router(cluster_config(world), extra=["--listen", f"127.0.0.1:{free_port}"])
    send_a_frame_libfabric_never_takes(free_port)
    time.sleep(12)  # the guard shuts it (5 s stuck, 10 s unvouched)
    before = wakeups_of(r.proc.pid)
    time.sleep(3)
    rate = (wakeups_of(r.proc.pid) - before) / 3
    assert rate < 300, f"the router woke {rate:.0f} times a second with nothing to do"
    assert_a_keyed_router_links(r, world, free_port)


def connections_to(pid, ports):
    """How many TCP connections process `pid` holds to any of `ports` (their remote port)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.readlines()[1:]:
                fields = row.split()
                if int(fields[2].rsplit(":", 1)[1], 16) in ports and fields[3] != "0A":
                    inodes.add(fields[9])
    held = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            held += os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] in inodes
        except FileNotFoundError:
            pass
    return held


@as_root
def test_greetings_to_silent_listeners_hold_no_descriptors(router, world, free_port):
    """Probe 9 E1: each address a tenant named that accepted and stayed silent kept one of the
    router's connections for as long as the listener liked (150 addresses: 150 descriptors, and a
    router limited to 256 ran out). Now a connection the router made that gets nothing back is shut
    within its deadline (10 s; the fabric gives one up sooner, when no answer proves the key)."""
    r = router(cluster_config(world), extra=["--listen", f"127.0.0.1:{free_port}"])
    ears = CountingListeners(12)
    try:
        most = 0
        for i, port in enumerate(ears.ports):
            f = loopback_qp_file(world / f"s{i}.txt", port)
            run([DATAGRAM, r.sock, "send", f, "1"], user=NOBODY, timeout=30)
            ears.take()
            most = max(most, connections_to(r.proc.pid, set(ears.ports)))
        assert most >= 1, "the router made no connection to 12 listeners: the test saw nothing to shut"
        deadline = time.time() + 16
        while connections_to(r.proc.pid, set(ears.ports)) and time.time() < deadline:
            ears.take()
            time.sleep(0.5)
        left = connections_to(r.proc.pid, set(ears.ports))
        assert left == 0, f"{left} of the router's connections to silent listeners are still held"
    finally:
        ears.close()


@as_root
def test_a_tenant_does_not_learn_what_another_tried(linked_routers, world):
    """Probe 9 E8: an address another tenant had tried in the last 10 s was refused at once
    (EHOSTUNREACH, 0.1 ms) where a fresh one took 800 ms: a tenant learned what another tried. Now
    each tenant's failed tries are its own."""
    a, _ = linked_routers
    ears = CountingListeners(1)
    try:
        f = loopback_qp_file(world / "tried.txt", ears.ports[0])
        first = run([DATAGRAM, a.sock, "send", f, "1"], user=NOBODY, timeout=30)
        assert "did not answer within 800 ms" in first.stderr, first.stderr
        started = time.monotonic()
        other = run([DATAGRAM, a.sock, "send", f, "1"], timeout=30)  # root: a tenant of its own
        took = time.monotonic() - started
        assert "did not answer within 800 ms" in other.stderr and took > 0.7, (took, other.stderr)
        again = run([DATAGRAM, a.sock, "send", f, "1"], user=NOBODY, timeout=30)
        assert "did not prove the cluster's key when last tried" in again.stderr, again.stderr
    finally:
        ears.close()


@as_root
def test_a_router_gone_quiet_proves_itself_again_before_new_requests(linked_routers, world):
    """Probe 9 E6: a router's proof lasted for ever: after it died, whoever took its port got the
    next tenant's address handle at once. Now a router not heard from for 5 s is greeted again
    before a new request goes there, and a process holding the dead router's port cannot answer."""
    a, b = linked_routers
    port = listen_port(b)
    target = loopback_qp_file(world / "b.txt", port)
    first = run([DATAGRAM, a.sock, "send", target, "1"], user=NOBODY, timeout=30)
    assert first.returncode == 0, first.stdout + first.stderr
    b.stop()
    with socket.socket() as impostor:
        impostor.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        impostor.bind(("127.0.0.1", port))
        impostor.listen()
        time.sleep(6)
        later = run([DATAGRAM, a.sock, "send", target, "1"], user=NOBODY, timeout=30)
    assert later.returncode == 1 and "did not answer within 800 ms" in later.stderr, later.stdout + later.stderr


@as_root
def test_link_networks_bound_where_a_tenant_may_send(router, world, free_port):
    """[router] link_networks: a tenant's address handles and QP peers must lie inside them."""
    cfg = cluster_config(world) + 'link_networks = ["10.99.0.0/16", "fd00::/8"]\n'
    r = router(cfg, extra=["--listen", f"127.0.0.1:{free_port}"])
    outside = loopback_qp_file(world / "outside.txt", free_port + 1)
    p = run([DATAGRAM, r.sock, "send", outside, "1"], user=NOBODY, timeout=30)
    assert p.returncode == 1 and "outside the config's [router] link_networks" in p.stderr, p.stderr
    bad = world / "bad.toml"
    bad.write_text(cluster_config(world) + 'link_networks = ["10.99.0.1/16"]\n')
    refused = run([VRDMAD, "--socket", str(world / "never.sock"), "--config", str(bad)], timeout=10)
    assert refused.returncode == 2 and "link_networks" in refused.stderr and "host bits" in refused.stderr, refused.stderr


@pytest.mark.parametrize("where", ["one router", "two routers"])
def test_a_connected_qp_cannot_connect_to_a_datagram_qp(router, linked_routers, world, where):
    """Probe 8 D3: across hosts an RC QP's connect to a UD QP (of its tenant) was accepted, and
    every op then failed with a misleading status; on one router it was refused. Both refuse."""
    a, b = linked_routers
    qpn = world / "qpn.txt"
    listener = subprocess.Popen([DATAGRAM, a.sock, "listen", str(qpn), "3"], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not (qpn.exists() and qpn.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    p = run([DATAGRAM, a.sock if where == "one router" else b.sock, "rc-to", str(qpn), "0"], timeout=30)
    listener.communicate(timeout=30)
    assert p.returncode == 0 and "connect errno=22" in p.stdout, p.stdout + p.stderr


@as_root
def test_an_unknown_opcode_fails_and_is_never_carried_out(router):
    """A request with opcode 99 written straight into the send ring (laid out as a compare-and-swap
    on the tenant's own region) completes with a local QP operation error; the QP then flushes."""
    r = router()
    out = hostile(r.sock, "bad-opcode", user=NOBODY)
    assert int(out["status"]) == WC_LOC_QP_OP_ERR and int(out["next"]) == WC_WR_FLUSH_ERR, out


@as_root
def test_a_ring_that_claims_more_than_it_holds_is_not_spun_on(router):
    """Probe 7 D1: a tenant set its send ring's tail 2^63 past the head and kicked once; the router
    then carried out zero-filled requests that were never posted, at a whole core, for as long as
    the QP lived (121 million in 10 s). A ring whose producer claims more than its capacity holds
    nothing to take: the router moves nothing of it and goes idle."""
    r = router()
    p = subprocess.Popen([HOSTILE, r.sock, "ring-tail", "4"], user=NOBODY, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)  # set up and kicked
    before = cpu_seconds(r.proc.pid)
    time.sleep(2)
    spent = cpu_seconds(r.proc.pid) - before
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, out + err
    assert spent < 0.3, f"the router spent {spent:.2f} s of CPU in 2 s on a ring that claims 2^63 requests"
    stats = run([CTL, "--socket", r.sock, "stats"], timeout=10).stdout
    ops = max(int(line.split()[9]) for line in stats.splitlines()[1:] if line.split() and line.split()[0] != "router:")
    assert ops < 100, stats


@as_root
@pytest.mark.parametrize("opcode", [4, 6], ids=["read", "fetch-add"])
def test_a_read_or_atomic_with_inline_bytes_fails(router, opcode):
    """Probe 7 D3: on the router path a READ or fetch-add written into the ring as inline, with no
    local buffer, completed with success (the READ's bytes went nowhere; the fetch-add changed
    the target with no place for the old value). Inline bytes are for SENDs and WRITEs: the
    request fails, and the target is untouched."""
    r = router()
    out = hostile(r.sock, "inline-op", opcode, user=NOBODY)
    assert int(out["wr_id"]) == 9 and int(out["status"]) == WC_LOC_QP_OP_ERR and int(out["target"]) == 0, out


@as_root
def test_a_message_over_2_gib_is_refused_and_rate_bytes_holds(router):
    """rate_bytes charged a 32-bit copy of a message's length, so 4 GiB + 4 KiB went free under a
    10 MB/s limit. A message is at most 2^31 B, as in verbs."""
    r = router(f'[[tenant]]\nname = "t"\nuids = [{NOBODY}]\nrate_bytes = "10M"\nmax_reg_bytes = "8G"\n')
    out = hostile(r.sock, "huge-write", user=NOBODY)
    assert int(out["status"]) == WC_LOC_QP_OP_ERR, out


def host_memory():
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


@as_root
def test_registration_is_limited_by_default_and_stalls_nobody(router):
    """Without a config a tenant may register a quarter of the host's memory, and the router never
    populates a client's memory on the thread every tenant shares: a 4 GiB registration once held
    it for seconds, and 1 TiB ran the host out of memory."""
    r = router()
    ping = start_ping(r.sock, 3)
    time.sleep(0.5)
    big = min(4 << 30, host_memory() // 8)
    assert hostile(r.sock, "reg", big, user=NOBODY)["errno"] == "0"
    huge = run([HOSTILE, r.sock, "reg", str(1 << 40)], timeout=30, user=NOBODY)
    assert "reg errno=12" in huge.stdout and "max_reg_bytes of" in huge.stdout, huge.stdout
    assert_served(ping_result(ping))


@as_root
def test_a_throttled_tenant_costs_the_router_its_own_work(router):
    """1,000 ops/s, posted as fast as they complete, once cost the router a whole core: a request
    that waits for tokens is looked at again a millisecond later, never spun on."""
    r = router(f'[[tenant]]\nname = "slow"\nuids = [{NOBODY}]\nrate_ops = 1000\n')
    before = cpu_seconds(r.proc.pid)
    out = hostile(r.sock, "flood", 2, user=NOBODY)
    used = cpu_seconds(r.proc.pid) - before
    assert 1500 <= int(out["ops"]) <= 2600, out  # the limit holds: 1,000/s and a 50 ms burst
    assert used < 0.5, f"the router used {used:.2f} s of CPU over 2 s for {out['ops']} throttled ops"


def test_a_send_from_a_qp_the_receiver_is_not_connected_to_leaves_its_receives_alone(router):
    """Probe 18 finding 5: on the direct path a QP Z connected to X one-sidedly while X was free;
    X and Y then connected to each other, and Z sent to X. Z's SEND failed (remote access error),
    but it had taken X's posted receive, which completed with a local protection error, so Y's
    SEND then found none. Now a SEND takes a receive only from a QP connected back to its sender;
    Z's fails at once, as an RC requester's retries run out when the responder drops another QP's
    packets."""
    r = router()
    out = hostile(r.sock, "stray-send")
    assert out["stray"] == str(WC_RETRY_EXC_ERR), out
    assert out["real"] == str(WC_SUCCESS) and out["len"] == "6" and out["text"] == "real!", out


@as_root
def test_receives_a_tenant_claims_to_have_withdrawn_cost_it_its_own_turn(router):
    """A receive ring that claims 2^62 withdrawn receives once made the router pop them one by one,
    for ever, on the thread that serves everyone: one SEND hung the router. Skipping withdrawn
    receives now takes at most a ring's worth a turn."""
    r = router()
    ping = start_ping(r.sock, 3)
    out = hostile(r.sock, "withdrawn", user=NOBODY)
    assert_served(ping_result(ping))
    assert out["status"] != str(WC_SUCCESS), out  # it found no receive: never one made up


@as_root
def test_many_rings_of_withdrawn_receives_stall_no_one(router):
    """Skipping a ring's worth a turn was still a ring's worth: 16 pairs whose 65,536-slot rings
    claim 2^62 withdrawn receives, each with a SEND waiting, held every turn for about 70 ms
    (fourth probe). Withdrawn receives are now skipped in one step, a few steps a turn."""
    r = router()
    attack = subprocess.Popen([HOSTILE, r.sock, "withdrawn-many", "16", "6"], user=NOBODY, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    time.sleep(2)  # its pairs made and their SENDs waiting
    ping = start_ping(r.sock, 3)
    assert_served(ping_result(ping), stall_ms=50)
    out, err = attack.communicate(timeout=60)
    assert attack.returncode == 0 and "sends=" in out, out + err


@as_root
def test_a_tenant_with_many_regions_stalls_no_one(router):
    """The data path found a region by walking all of its owner's regions: 4,096 of them and 32
    pairs keeping WRITEs in flight held every tenant's turn for 250 ms (fourth probe). A region
    is found by its rkey in one lookup."""
    r = router()
    attack = subprocess.Popen([HOSTILE, r.sock, "many-regions", "32", "4096", "7"], user=NOBODY,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)  # its regions made and its WRITEs flowing
    ping = start_ping(r.sock, 3)
    assert_served(ping_result(ping), stall_ms=50)
    out, err = attack.communicate(timeout=60)
    assert attack.returncode == 0 and int(out.split("=")[1]) > 10000, out + err


@as_root
def test_qp_memory_counts_against_max_reg_bytes(router):
    """QP and SRQ memory (the owner's memfds, which the router reads and so pulls in) counted
    against no limit: a tenant held 64 MiB of regions at most but made the router map 1.4 GB of
    rings (fourth probe). It counts against max_reg_bytes, with a message that says so."""
    r = router(f'[[tenant]]\nname = "small"\nuids = [{NOBODY}]\nmax_reg_bytes = "64M"\n')
    p = run([HOSTILE, r.sock, "qp-memory", "20"], timeout=60, user=NOBODY)
    assert p.returncode == 0, p.stdout + p.stderr
    got = dict(kv.split("=", 1) for kv in p.stdout.split())
    assert int(got["made"]) in range(4, 7) and got["errno"] == "12", p.stdout + p.stderr  # ~11 MiB each
    assert "of QP and SRQ memory), over its max_reg_bytes of 67108864 B" in p.stderr, p.stderr


@as_root
def test_a_request_to_a_peer_that_never_connects_is_not_spun_on(router):
    r = router()
    before = cpu_seconds(r.proc.pid)
    assert hostile(r.sock, "stuck", 2, user=NOBODY)["posted"] == "16"
    used = cpu_seconds(r.proc.pid) - before
    assert used < 0.3, f"the router used {used:.2f} s of CPU over 2 s on requests that cannot move"


def limited_router(router, world, nofile=1024, **kw):
    """A router under a descriptor limit every attack can reach (the common 1024)."""
    return router(wrap=["prlimit", f"--nofile={nofile}:{nofile}"], **kw)


@as_root
def test_the_router_takes_every_descriptor_it_is_allowed(router):
    """Under systemd's default (soft 1,024, hard far above) one uid within its default limits took
    every descriptor the router had, and others' opens failed: the router raises its soft limit."""
    r = router(wrap=["prlimit", "--nofile=1024:16384"])
    limits = Path(f"/proc/{r.proc.pid}/limits").read_text()
    line = next(x for x in limits.splitlines() if x.startswith("Max open files"))
    assert line.split()[3:5] == ["16384", "16384"], line


def rss_kib(pid):
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(x for x in status.splitlines() if x.startswith("VmRSS:")).split()[1])


@as_root
def test_rkeys_a_tenant_makes_up_do_not_grow_the_router(linked_routers):
    """A router remembered every rkey its tenant asked another host's router about, refusals
    included, for the QP's life: WRITEs naming a new rkey each grew it by megabytes a second. The
    cache is bounded and a refusal is not kept."""
    a, b = linked_routers
    # The router's heap warms up first (a fixed 12 MB, measured: after 5 s on a quiet machine,
    # 28 s under two busy loops, at 0.4 MB a second). So the run goes on, 12 s at least, until
    # four seconds pass in which it grew by less than 1 MiB, for at most 60 s; with the cache unbounded it grew 3 MB a
    # second on a quiet machine, 0.4 MB a second under the busy loops, and never stopped.
    p = subprocess.Popen([HOSTILE, a.sock, "remote-keys", b.sock, "60"], user=NOBODY, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    samples = [rss_kib(a.proc.pid)]
    while p.poll() is None and not (len(samples) > 12 and samples[-1] - samples[-5] < 1024):
        time.sleep(1)
        samples.append(rss_kib(a.proc.pid))
    p.send_signal(signal.SIGUSR1)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, out + err
    result = dict(kv.split("=", 1) for kv in out.split())
    # Refusals are paced at 100 a second past 64 (the test below): 12 s or more name 1,200 or more.
    assert int(result["ops"]) > 500 and result["refused"] == result["ops"], result
    # The link between the routers lost a wake-up once in about 120,000 round trips: both slept
    # with a key's question unread in a socket until router B's guard shut the link 5 s later.
    assert float(result["worst_gap_ms"]) < 1000, result
    assert samples[-1] - samples[-5] < 1024, f"router A's RSS each second (KiB), made-up rkeys all along: {samples}"
    # A link's handshake fails fi_trywait for a few milliseconds: that is not a frame never taken.
    for r in (a, b):
        assert "gives none" not in r.log.read_text(), r.log.read_text()


@as_root
def test_rkeys_another_router_refuses_are_paced_for_their_tenant(linked_routers):
    """WRITEs naming a new made-up rkey each, on a QP that stays usable after errors, cost both
    routers a round trip apiece and moved nothing: about 11,000 a second kept both waking, and
    another tenant's ib_write_lat across them went from 73 us typical to 1.4 ms (probe 20). Past
    64 refusals a tenant's next question about an unknown rkey waits for a pace of 100 a second;
    the other tenant is served meanwhile."""
    a, b = linked_routers
    cpu_before = cpu_of(a.proc.pid)
    assert_served(ping_result(start_remote_ping(a, b, 4)))
    serving_alone = cpu_of(a.proc.pid) - cpu_before  # what the other tenant's ping costs router a
    ping = start_remote_ping(a, b, 4)
    cpu_before = cpu_of(a.proc.pid)
    p = subprocess.Popen([HOSTILE, a.sock, "remote-keys", b.sock, "4"], user=NOBODY, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=60)
    cpu = cpu_of(a.proc.pid) - cpu_before
    print(f"router a: {serving_alone:.2f} s of CPU for the ping alone, {cpu:.2f} s with the refusals")
    assert p.returncode == 0, out + err
    result = dict(kv.split("=", 1) for kv in out.split())
    assert result["refused"] == result["ops"], result
    assert 64 <= int(result["ops"]) <= 64 + 100 * 5, result  # 4 s at 100 a second, a second's slack
    assert_served(ping_result(ping))
    # Requests that wait for the pace (or a key's answer) are no reason to spin: the asking router
    # spun through all 4 s with them (3.5 s of CPU measured), and uses a fraction of that now. The
    # ping's own cost (naps beside its spinning client) is measured alone first: CI saw 1.5-1.6 s
    # in all against a bound of 1.5 s that left it out.
    assert cpu < serving_alone + 1.0, f"router a used {cpu:.2f} s of CPU in the 4 s, {serving_alone:.2f} s for the ping alone"


@as_root
def test_one_uid_within_its_limits_cannot_take_every_descriptor(router, world):
    """Under a 1,024-descriptor limit one uid registering 4 KiB regions (within max_mrs) took them
    all, and every other tenant's open failed. No tenant holds more than half of the router's
    descriptors (or mappings), and past half each grows only within its share."""
    r = limited_router(router, world)
    holder = subprocess.Popen([HOSTILE, r.sock, "hold", "2000", "6"], user=NOBODY, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    line = holder.stdout.readline()
    held = dict(kv.split("=", 1) for kv in line.split())
    assert held["errno"] == "12" and 300 < int(held["held"]) < 500, line  # ENOMEM at half the router's
    assert hostile(r.sock, "reg", 4096)["errno"] == "0"
    assert_served(ping_result(start_ping(r.sock, 1)))
    holder.communicate(timeout=30)


@as_root
def test_register_churn_does_not_exhaust_the_routers_descriptors(router, world):
    """Each released region kept its memfd for 10 s: 3,000 register/deregister cycles took every
    descriptor under a 1024 limit, and other tenants' registrations failed. A region nothing
    outside the router can still reach goes at once."""
    r = limited_router(router, world)
    out = hostile(r.sock, "mr-churn", 3000, 65536, user=NOBODY)
    assert out["failed"] == "0", out
    assert hostile(r.sock, "reg", 4096)["errno"] == "0"
    assert len(os.listdir(f"/proc/{r.proc.pid}/fd")) < 64


@as_root
def test_regions_held_for_other_hosts_count_against_their_tenant(router, world, free_port):
    """With --listen a released region is held a few seconds (an RMA of another host's router may
    still land): it counts against the tenant that released it, so churn holds no more than its
    max_reg_bytes, and other tenants are not touched."""
    r = router(cluster_config(world, f'[[tenant]]\nname = "churner"\nuids = [{NOBODY}]\nmax_reg_bytes = "1M"\n'
                                     f'[[tenant]]\nname = "root"\nuids = [0]\n'),
               extra=["--listen", f"127.0.0.1:{free_port}"])
    out = hostile(r.sock, "mr-churn", 100, 65536, user=NOBODY)
    assert int(out["failed"]) >= 80 and out["errno"] == "12", out  # 16 fit, then the held ones count
    churner = r.stats()["churner"]
    assert churner["mrs"] == 0 and churner["reg_bytes"] == 0
    assert hostile(r.sock, "reg", 4 << 20)["errno"] == "0"


@as_root
def test_released_regions_are_swept_while_the_router_is_idle(router, world, free_port):
    """A region held for other hosts' routers goes when its grace ends, even if nothing wakes the
    router (it was swept only when some event came). Its pages are let go at once (zero pages
    stand in for them, see blank_for_peers): the router keeps its descriptor and registration."""
    r = router(cluster_config(world), extra=["--listen", f"127.0.0.1:{free_port}"])
    assert hostile(r.sock, "mr-churn", 4, 1 << 20, user=NOBODY)["failed"] == "0"

    def mapped():
        return sum("memfd:vrdma-uid-" in line for line in Path(f"/proc/{r.proc.pid}/maps").read_text().splitlines())

    def held():
        fds = Path(f"/proc/{r.proc.pid}/fd")
        links = []
        for f in os.listdir(fds):
            try:
                links.append(os.readlink(fds / f))
            except FileNotFoundError:  # closed meanwhile
                pass
        return sum(link.startswith("/memfd:vrdma-uid-") for link in links)

    assert held() == 4
    deadline = time.time() + 2  # zero pages go in off the loop, at once
    while mapped() and time.time() < deadline:
        time.sleep(0.05)
    assert mapped() == 0
    deadline = time.time() + 8
    while held() and time.time() < deadline:
        time.sleep(0.2)
    assert held() == 0


@as_root
def test_admins_in_no_tenant_read_every_tenants_statistics_and_nothing_more(router):
    """Under a config of tenants, root and admin_uids in none of them were refused at hello, so
    the operator saw nothing during an attack (fourth probe). They read every tenant's
    statistics, count in no tenant, and may do nothing else."""
    admin = NOBODY + 1
    r = router(f'[router]\nadmin_uids = [{admin}]\n\n[[tenant]]\nname = "t"\nuids = [{NOBODY}]\n')
    assert run([HOSTILE, r.sock, "reg", "4096"], timeout=30, user=NOBODY).returncode == 0
    for user in (None, admin):  # root, and the config's admin
        s = run([CTL, "--socket", r.sock, "stats"], timeout=10, user=user)
        assert s.returncode == 0, s.stderr
        rows = [line.split()[0] for line in s.stdout.splitlines()[1:] if not line.startswith(("router:", "link:"))]
        assert rows == ["t"], s.stdout
    p = run([HOSTILE, r.sock, "reg", "4096"], timeout=30, user=admin)
    assert p.returncode != 0 and "as an admin it may read statistics, nothing more" in p.stdout + p.stderr, p.stdout + p.stderr
    stranger = run([CTL, "--socket", r.sock, "stats"], timeout=10, user=NOBODY + 2)
    assert stranger.returncode != 0 and "in no tenant" in stranger.stderr, stranger.stdout + stranger.stderr


@as_root
def test_a_welcome_tells_nothing_of_other_tenants_connections(router):
    """The welcome carried the router's connection counter, so a tenant sampling it twice learnt
    how many connections every tenant had opened between (probe 6, F2)."""
    r = router()

    def welcome_client_id():
        c = RawClient.__new__(RawClient)
        c.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        c.s.connect(r.sock)
        c.s.settimeout(5)
        c.seq = 0
        _, body, _ = c.ask("hello", struct.pack("<II", os.getpid(), 0))
        c.s.close()
        return struct.unpack_from("<I", body, 76)[0]

    first = welcome_client_id()
    for _ in range(20):  # another tenant's connections meanwhile
        speak(r.sock)[0].close()
    assert welcome_client_id() == first


def test_a_tenant_sees_only_its_own_statistics(router):
    r = router(f'[router]\nadmin_uids = [{NOBODY + 1}]\n')
    assert run([HOSTILE, r.sock, "reg", "4096"], timeout=30).returncode == 0  # root's tenant: uid-0
    mine = run([CTL, "--socket", r.sock, "stats"], timeout=10, user=NOBODY)
    assert mine.returncode == 0, mine.stderr
    rows = [line.split()[0] for line in mine.stdout.splitlines()[1:] if not line.startswith(("router:", "link:"))]
    assert rows == [f"uid-{NOBODY}"], mine.stdout
    everyone = run([CTL, "--socket", r.sock, "stats"], timeout=10)
    assert "uid-0" in everyone.stdout and f"uid-{NOBODY}" in everyone.stdout
    # The same for scripts (vrdmactl stats --json): a tenant's own row, and nothing of the router's.
    mine = json.loads(run([CTL, "--socket", r.sock, "stats", "--json"], timeout=10, user=NOBODY).stdout)
    assert [t["tenant"] for t in mine["tenants"]] == [f"uid-{NOBODY}"] and "links" not in mine and "router" not in mine
    admin = json.loads(run([CTL, "--socket", r.sock, "stats", "--json"], timeout=10, user=NOBODY + 1).stdout)
    assert {t["tenant"] for t in admin["tenants"]} >= {"uid-0", f"uid-{NOBODY}"} and "router" in admin, admin


def speak(sock_path):
    """A client that speaks the control protocol itself (src/vrdma/proto/control.hh): hello, then a PD."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(sock_path)
    s.settimeout(5)
    seq = iter(range(1, 1000))

    def ask(mtype, body=b"", fds=()):
        packet = struct.pack("<IHHII", CONTROL_MAGIC, CONTROL_VERSION, mtype, next(seq), len(body)) + body
        socket.send_fds(s, [packet], list(fds))
        reply = s.recv(4096)
        return struct.unpack_from("<H", reply, 6)[0], reply[16:]

    t, _ = ask(1, struct.pack("<II", os.getpid(), 0))
    assert t == 2  # welcome
    t, body = ask(4)
    assert t == 9  # handle
    return s, ask, struct.unpack_from("<I", body)[0]


@pytest.mark.parametrize("what", ["pipe", "socket", "unsealed memfd"])
def test_reg_mr_with_memory_that_is_not_a_sealed_memfd_is_einval(router, what):
    r = router()
    s, ask, pd = speak(r.sock)
    if what == "pipe":
        fd, other = os.pipe()
    elif what == "socket":
        a, b = socket.socketpair()
        fd, other = a.fileno(), b.fileno()
    else:
        fd = os.memfd_create("plain")
        os.ftruncate(fd, 4096)
        other = None
    t, body = ask(6, struct.pack("<IIQQQ", pd, 1, 4096, 0x7f0000000000, 0), fds=[fd])
    assert t == 3, t  # error
    err, message = struct.unpack_from("<i200s", body)
    assert err == 22, (err, message)  # EINVAL: the descriptor is wrong, not the memory short
    s.close()


def test_a_region_whose_addresses_wrap_past_2_64_is_einval(router):
    """Probe 7 D2: a region at va 2^64 - 4096 of 8192 B (its last address wraps past 2^64) was
    granted; verbs refuses it."""
    r = router()
    s, ask, pd = speak(r.sock)
    fd = os.memfd_create("wraps", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 1 << 16)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    t, body = ask(6, struct.pack("<IIQQQ", pd, 1, 8192, (1 << 64) - 4096, 0), fds=[fd])
    assert t == 3, t  # error
    err, message = struct.unpack_from("<i200s", body)
    assert err == 22 and b"wrap" in message, (err, message)
    t, body = ask(6, struct.pack("<IIQQQ", pd, 1, 4096, (1 << 64) - 4096, 0), fds=[fd])
    assert t != 3, body  # its last page up to the very end is a region like any other
    s.close()


def as_nobody_holding(count):
    """A preexec_fn: uid nobody, allowed `count` descriptors and a few more."""
    def drop_privileges():
        resource.setrlimit(resource.RLIMIT_NOFILE, (count + 64, count + 64))
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    return drop_privileges


def hold_idle_connections(sock, count, seconds):
    """uid nobody opens `count` connections that never say hello, and holds them."""
    code = (f"import socket, time\nheld = []\nfor _ in range({count}):\n"
            f"    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
            f"    try:\n        s.connect({sock!r}); held.append(s)\n    except OSError:\n        pass\n"
            f"print(len(held), flush=True)\ntime.sleep({seconds})\n")
    return subprocess.Popen(["python3", "-c", code], preexec_fn=as_nobody_holding(count), stdout=subprocess.PIPE,
                            text=True)


@as_root
def test_idle_connections_of_one_uid_cost_others_nothing(router, world):
    """1,100 connections from one uid that never say hello, against a router limited to 1,024
    descriptors: it once spun at 100% and wrote millions of log lines while the well-behaved tenant
    waited. Now one uid holds at most max_clients_per_uid connections, one that says nothing is
    dropped after 2 s, and repeated log lines are limited."""
    r = limited_router(router, world)
    attack = hold_idle_connections(r.sock, 1100, 3)
    time.sleep(1)
    ping = start_ping(r.sock, 2)
    assert_served(ping_result(ping))
    out, _ = attack.communicate(timeout=30)
    assert attack.returncode == 0
    lines = [line for line in r.log.read_text().splitlines() if f"uid {NOBODY}" in line or "descriptors" in line]
    assert len(lines) < 50, f"{len(lines)} log lines about the attack"
    assert any("max_clients_per_uid" in line for line in lines)


def hold_welcomed_connections_of_many_uids(sock, uids, each, seconds):
    """One root process that becomes each of `uids` in turn (its effective uid, which the kernel
    reports for the socket) and opens `each` connections that say hello, then holds them: a
    user with a range of subordinate uids can do as much."""
    hello = struct.pack("<IHHII", CONTROL_MAGIC, CONTROL_VERSION, 1, 1, 8) + struct.pack("<II", 1, 0)
    code = (f"import os, resource, socket, time\n"
            f"hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
            f"resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\nheld = []\n"
            f"for uid in {list(uids)!r}:\n    os.seteuid(uid)\n    for _ in range({each}):\n"
            f"        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
            f"        try:\n            s.connect({sock!r}); s.send({hello!r}); held.append(s)\n"
            f"        except OSError:\n            pass\n    os.seteuid(0)\n"
            f"print(len(held), flush=True)\ntime.sleep({seconds})\n")
    return subprocess.Popen(["python3", "-c", code], stdout=subprocess.PIPE, text=True)


@as_root
def test_a_users_many_uids_cannot_take_the_routers_descriptors(router, world):
    """40 uids, each within max_clients_per_uid (64 connections, all welcomed), once took every
    descriptor of a router limited to 1,024, and another tenant's open waited until they let go;
    a user with subordinate uids (rootless containers) has 65,536. Now a user's subordinate uids
    are that user's tenant, and a connection is a descriptor in the router's host share: the 40
    take no more than half, and the other tenant is served."""
    subuid = world / "subuid"
    subuid.write_text("# a user and the uids of its containers\n4243:50000:40\n")
    r = limited_router(router, world, extra=["--subuid", str(subuid)])
    attack = hold_welcomed_connections_of_many_uids(r.sock, range(50000, 50040), 64, 20)
    held = int(attack.stdout.readline())
    time.sleep(0.5)
    fds = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
    ping = subprocess.Popen([HOSTILE, r.sock, "ping", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            user=4444)
    result = ping_result(ping)
    attack.kill()
    attack.wait()
    assert fds < 1024 - 64, f"{held} connections of 40 uids hold {fds} of the router's 1,024 descriptors"
    assert_served(result)
    assert fds < 1024 // 2 + 64, fds
    log = r.log.read_text()
    assert "descriptors are shared out" in log and "is tenant uid-4243" in log, log[-2000:]


def test_a_connection_over_the_uids_cap_is_refused_with_the_reason(router, world):
    r = router('[router]\nmax_clients_per_uid = 1\n')
    ready = world / "ready"
    held = subprocess.Popen([str(BUILD / "vrdma_client"), r.sock, "pd", f"wait:{ready}"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 10
    while not ready.exists() and time.time() < deadline:
        time.sleep(0.02)
    second = run([str(BUILD / "vrdma_client"), r.sock, "pd"], timeout=10)
    held.communicate(input="", timeout=10)
    assert second.returncode == 1
    assert "refused the connection: uid" in second.stdout and "max_clients_per_uid" in second.stdout, second.stdout
    assert run([str(BUILD / "vrdma_client"), r.sock, "pd"], timeout=10).returncode == 0  # its slot came free


def unused_ports(n):
    """n consecutive loopback ports nobody listens on (checked by binding each)."""
    for base in range(47000, 60000, 97):
        try:
            socks = []
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free loopback ports")


@as_root
def test_a_router_that_does_not_answer_stalls_no_one(router, world, free_port):
    """A QP connected to a router nobody runs (or one whose host died): the link's posts once
    waited inside the event loop, 2 s each, while every tenant stood still. They wait in a queue
    now, and the connect fails within its bound."""
    r = router(cluster_config(world), extra=["--listen", f"127.0.0.1:{free_port}"])
    ping = start_ping(r.sock, 4)
    time.sleep(0.5)
    out = hostile(r.sock, "connect-nowhere", unused_ports(4), 4, user=NOBODY)
    assert out["failed"] == "4" and out["errno"] in ("110", "113"), out  # ETIMEDOUT, EHOSTUNREACH
    assert float(out["worst_ms"]) < 1500, out
    assert_served(ping_result(ping))


@as_root
def test_a_stranger_cannot_link_to_a_router(router, world, free_port):
    """With --listen a router takes link connections and messages only from routers that prove the
    cluster's key: one with another key, or none, is refused as it connects (logged at most a few
    times a second), and never becomes a peer."""
    r = router(cluster_config(world), extra=["--listen", f"127.0.0.1:{free_port}"])
    other = world / "other"
    other.mkdir()
    for how in (["--config", None], ["--insecure-link"]):
        if how[0] == "--config":
            cfg = other / "c.toml"
            cfg.write_text(cluster_config(other))  # a key of its own, not the cluster's
            how = ["--config", str(cfg)]
        log = other / "stranger.log"
        p = subprocess.Popen([VRDMAD, "--socket", str(other / "s.sock"), "--listen", f"127.0.0.1:{free_port + 1}",
                              "--peer", f"127.0.0.1:{free_port}", *how], stderr=open(log, "w"))
        try:
            wait_for_text(log, "serving on")
            wait_for_text(r.log, "a connection to the link was refused", timeout=10)
        finally:
            p.kill()
            p.wait()
    links = run([CTL, "--socket", r.sock, "stats"], timeout=10).stdout
    assert "link:" not in links, links
    assert "its MAC does not verify" in r.log.read_text()


@as_root
def test_a_strangers_flood_of_link_messages_costs_no_memory_and_stalls_no_one(router, world, free_port):
    """A host without the key, flooding --listen with messages over the link's own fabric, grew the
    router by 3 GB in 6 s (each message waited in rxm's buffers for a receive) and stalled its
    tenants for 83 ms. The router then kept receives posted and reaped them in bulk; now the
    stranger's connection is refused as it is made, and its flood never reaches the router."""
    r = router(cluster_config(world), extra=["--listen", f"127.0.0.1:{free_port}"])
    before = rss_kib(r.proc.pid)
    flood = subprocess.Popen([str(BUILD / "vrdma_link_flood"), str(free_port), str(unused_ports(1)), "6", "badmac"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    ping = start_ping(r.sock, 4)
    assert_served(ping_result(ping))
    out, err = flood.communicate(timeout=60)
    assert flood.returncode == 0, out + err
    grown = rss_kib(r.proc.pid) - before
    assert "a connection to the link was refused" in r.log.read_text()
    assert grown < 256 * 1024, f"the router grew by {grown // 1024} MiB under {out.strip()} messages"
    assert r.proc.poll() is None


def test_listen_needs_a_key_or_says_it_has_none(world, free_port):
    no_key = run([VRDMAD, "--socket", str(world / "s"), "--listen", f"127.0.0.1:{free_port}"], timeout=10)
    assert no_key.returncode == 2 and no_key.stderr.count("\n") == 1, no_key.stderr
    assert "--listen needs the cluster's link key" in no_key.stderr and "--insecure-link" in no_key.stderr
    key = world / "k"
    key.write_text("00" * 32 + "\n")
    key.chmod(0o644)
    cfg = world / "c.toml"
    cfg.write_text(f'[router]\nlink_key = "{key}"\n')
    loose = run([VRDMAD, "--socket", str(world / "s"), "--listen", f"127.0.0.1:{free_port}", "--config", str(cfg)],
                timeout=10)
    assert loose.returncode == 2 and "chmod 600" in loose.stderr, loose.stderr
    log = world / "insecure.log"
    p = subprocess.Popen([VRDMAD, "--socket", str(world / "s"), "--listen", f"127.0.0.1:{free_port}", "--insecure-link"],
                         stderr=open(log, "w"))
    try:
        wait_for_text(log, "link messages are NOT authenticated (--insecure-link)")
    finally:
        p.kill()
        p.wait()


def close_wait_sockets(pid):
    """The process's TCP sockets in CLOSE-WAIT (state 08 in /proc/net/tcp), by inode."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            count += fields[3] == "08" and fields[9] in inodes
    return count


def fuzz_link_port(port, seconds, seed):
    """Raw TCP at a --listen port, as a stranger would: connections closed at once, garbage,
    partial headers, half-closed and slow ones, each ending with an orderly close (the kind that
    once stuck in libfabric)."""
    import random
    import threading
    rng = random.Random(seed)
    until = time.time() + seconds
    sent = [0]

    def one():
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        kind = rng.randrange(5)
        try:
            if kind == 1:
                s.sendall(os.urandom(rng.randrange(1, 200)))
            elif kind == 2:  # a header's worth, cut short
                s.sendall(bytes([rng.randrange(256) for _ in range(rng.randrange(1, 32))]))
            elif kind == 3:
                s.shutdown(socket.SHUT_WR)
                time.sleep(0.05)
            elif kind == 4:  # slow
                for b in os.urandom(rng.randrange(1, 8)):
                    s.send(bytes([b]))
                    time.sleep(0.01)
        finally:
            s.close()
        sent[0] += 1

    def worker():
        while time.time() < until and sent[0] < 1500:
            try:
                one()
            except OSError:
                time.sleep(0.01)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sent[0]


@as_root
def test_fuzzing_the_link_port_leaves_nothing_behind(router, world, free_port):
    """Raw TCP at --listen once left the router holding hundreds of sockets in CLOSE-WAIT and
    spinning a core: libfabric 1.17's tcp provider read a stale errno (the router's own EAGAIN)
    after a recv() of 0 and kept the dead connection. The router clears errno before each call
    into the provider; the well-behaved tenant is served throughout."""
    r = router(cluster_config(world), extra=["--listen", f"127.0.0.1:{free_port}"])
    assert hostile(r.sock, "reg", 4096)["errno"] == "0"  # a served client leaves EAGAIN in errno
    ping = start_ping(r.sock, 6)
    sent = fuzz_link_port(free_port, 5, seed=28)
    assert sent > 100, sent
    assert_served(ping_result(ping), stall_ms=200)
    time.sleep(1)
    before = cpu_seconds(r.proc.pid)
    time.sleep(2)
    used = cpu_seconds(r.proc.pid) - before
    stuck = close_wait_sockets(r.proc.pid)
    assert used < 0.2 and stuck < 5, f"after {sent} connections: {used:.2f} s of CPU in 2 s idle, {stuck} in CLOSE-WAIT"
    assert run([CTL, "--socket", r.sock, "stats"], timeout=10).returncode == 0


def connections_held_at(pid, port):
    """How many TCP connections to local `port` process `pid` holds a descriptor for. Counting these,
    not all descriptors, keeps the test blind to a served session whose descriptors the router is
    still closing (CI once saw 36 = 32 connections + 4 of the ping's)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.readlines()[1:]:
                fields = row.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    held = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        held += target.startswith("socket:[") and target[8:-1] in inodes
    return held


def hold_silent_link_connections(port, count, seconds):
    """uid nobody opens `count` TCP connections to a --listen port that never send a byte."""
    code = (f"import socket, time\nheld = [socket.create_connection(('127.0.0.1', {port})) for _ in range({count})]\n"
            f"print(len(held), flush=True)\ntime.sleep({seconds})\n")
    return subprocess.Popen(["python3", "-c", code], preexec_fn=as_nobody_holding(count), stdout=subprocess.PIPE,
                            text=True)


@as_root
def test_silent_connections_to_the_link_port_are_bounded_and_shut(router, world, free_port):
    """libfabric accepts the --listen port's connections and keeps each until it speaks: a stranger's
    300 silent connections held 300 of the router's descriptors for as long as the stranger liked.
    Now one host (one uid, on this host) holds at most max_link_conns_per_host (32) at once, a
    connection that sends nothing is shut after 10 s, the tenants are served meanwhile, and a router
    with the key still links."""
    r = router(cluster_config(world), extra=["--listen", f"127.0.0.1:{free_port}"])
    listener = connections_held_at(r.proc.pid, free_port)
    attack = hold_silent_link_connections(free_port, 300, 30)
    assert attack.stdout.readline().strip() == "300"
    ping = start_ping(r.sock, 3)
    assert_served(ping_result(ping))
    held = connections_held_at(r.proc.pid, free_port) - listener
    assert held <= 32, f"uid {NOBODY}'s 300 silent connections hold {held} of the router's descriptors"
    deadline = time.time() + 15
    while connections_held_at(r.proc.pid, free_port) > listener and time.time() < deadline:
        time.sleep(0.5)
    still = connections_held_at(r.proc.pid, free_port) - listener
    assert still == 0, f"{still} connections still held after 10 s of silence"
    attack.kill()
    attack.wait()
    log = r.log.read_text()
    assert "past max_link_conns_per_host (32)" in log and "sent nothing for 10 s" in log, log
    assert_a_keyed_router_links(r, world, free_port)


class RawClient:
    """A client that speaks the control protocol itself and lays out its QP memory by hand
    (src/vrdma/proto/control.hh, qp_layout.hh, src/core/spsc_ring.hh), as a hostile one would."""
    TYPES = dict(hello=1, welcome=2, error=3, alloc_pd=4, handle=9, done=10, create_qp=13, qp_created=14,
                 connect_qp=15, qp_connected=16, destroy_qp=19, send_doorbell=20, create_ah=23, destroy_ah=24)

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.connect(path)
        self.s.settimeout(5)
        self.seq = 0
        _, body, _ = self.ask("hello", struct.pack("<II", os.getpid(), 0))
        self.welcome = body
        self.router_id = struct.unpack_from("<Q", body, 80)[0]
        self.pd = struct.unpack_from("<I", self.ask("alloc_pd")[1])[0]

    def ask(self, name, body=b"", fds=()):
        self.seq += 1
        packet = struct.pack("<IHHII", CONTROL_MAGIC, CONTROL_VERSION, self.TYPES[name], self.seq, len(body)) + body
        socket.send_fds(self.s, [packet], list(fds))
        data, got, _, _ = socket.recv_fds(self.s, 4096, 2)
        return struct.unpack_from("<H", data, 6)[0], data[16:], got

    def qp_memory(self, slots=16, flags=0):
        """A memfd laid out as a QP with `slots` in every ring, sealed against shrinking."""
        def ring_bytes(slot):
            return (192 + slots * slot + 63) // 64 * 64
        offs, at = [], 128
        for slot in (RECV_ENTRY, 24, SEND_ENTRY, 16):  # receive, arrival, send, CQE rings
            offs.append(at)
            at += ring_bytes(slot)
        total = (at + 4095) // 4096 * 4096
        fd = os.memfd_create("hand-made-qp", os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, total)
        import fcntl
        fcntl.fcntl(fd, 1033, 2)  # F_ADD_SEALS, F_SEAL_SHRINK
        mem = bytearray(total)
        struct.pack_into("<IIQQQ", mem, 0, 0x50515256, slots, offs[0], offs[1], at)
        struct.pack_into("<I", mem, 36, flags)
        struct.pack_into("<I", mem, 60, slots)
        struct.pack_into("<QQ", mem, 64, offs[2], offs[3])
        for off, slot in zip(offs, (RECV_ENTRY, 24, SEND_ENTRY, 16)):
            struct.pack_into("<IIIIQ", mem, off, 0x52535052, 1, slot, 8, slots)
        os.pwrite(fd, bytes(mem), 0)
        return fd, total

    def create_qp(self, flags=0, doorbell=None):
        fd, total = self.qp_memory(flags=flags)
        t, body, _ = self.ask("create_qp", struct.pack("<IIQ", self.pd, 0, total), [fd] + ([doorbell] if doorbell else []))
        return struct.unpack_from("<I", body)[0] if t == self.TYPES["qp_created"] else -struct.unpack_from("<i", body)[0]

    def connect(self, qp, peer):
        t, body, fds = self.ask("connect_qp", struct.pack("<IIQ16sHHI", qp, peer, self.router_id, bytes(16), 0, 0, 0))
        return t, fds


ROUTER_PATH = 2  # proto::QpFlags::router_path


@as_root
def test_hugetlb_memory_is_refused(router):
    """A hugetlbfs memfd passes the seal and size checks, but its pages can be taken from under a
    mapping (a punched hole frees the reservation): the router then died of SIGBUS storing into a
    QP's header. Only ordinary shared memory (tmpfs) is taken, for QPs as for regions."""
    r = router()
    c = RawClient(r.sock)
    pool = Path("/proc/sys/vm/nr_hugepages")
    before = pool.read_text()
    try:  # a pool of two pages, so that the mapping itself could succeed (as on hosts that have one)
        pool.write_text("2\n")
    except OSError as e:
        pytest.skip(f"no huge pages to be had here: {e}")
    fd = os.memfd_create("huge-qp", os.MFD_ALLOW_SEALING | os.MFD_HUGETLB)
    try:
        os.ftruncate(fd, 2 << 20)
        fcntl.fcntl(fd, 1033, 2)  # F_ADD_SEALS, F_SEAL_SHRINK
        t, body, _ = c.ask("create_qp", struct.pack("<IIQ", c.pd, 0, 2 << 20), [fd])
    finally:
        os.close(fd)
        pool.write_text(before)
    assert t == RawClient.TYPES["error"] and struct.unpack_from("<i", body)[0] == 22, (t, body)  # EINVAL
    assert b"hugetlb" in body, body
    assert r.proc.poll() is None
    assert_served(ping_result(start_ping(r.sock, 0.5)))


@as_root
def test_a_client_cannot_make_the_routers_descriptors_block(router):
    """A router-path QP's kick fd is shared with its owner, who can clear O_NONBLOCK on it and
    overflow it: the router once read it and hung for good. It is edge-triggered now, never read."""
    import fcntl
    r = router()
    c = RawClient(r.sock)
    a, b = c.create_qp(ROUTER_PATH), c.create_qp(ROUTER_PATH)
    t, fds = c.connect(a, b)
    assert t == RawClient.TYPES["qp_connected"] and fds, t
    c.connect(b, a)
    kick = fds[0]
    fcntl.fcntl(kick, fcntl.F_SETFL, 0)  # blocking, for everyone who shares it
    os.write(kick, struct.pack("<Q", 1))
    os.write(kick, struct.pack("<Q", 0xfffffffffffffffd))  # full: the next write of 1 would block
    assert_served(ping_result(start_ping(r.sock, 2)))


@as_root
@pytest.mark.parametrize("kind", ["pipe", "full blocking eventfd"])
def test_a_doorbell_cannot_block_or_kill_the_router(router, kind):
    """A doorbell is the owner's eventfd, which the router writes when the peer goes: a pipe
    (full, or with its reader gone: SIGPIPE) once hung or killed it. Only an eventfd is taken, and
    the router's write of it never blocks."""
    r = router()
    c = RawClient(r.sock)
    if kind == "pipe":
        rd, wr = os.pipe()
        os.close(rd)
        qp = c.create_qp(doorbell=wr)
        assert qp == -22, qp  # EINVAL: a doorbell must be an eventfd
        return
    bell = os.eventfd(0)  # blocking
    os.write(bell, struct.pack("<Q", 0xfffffffffffffffe))  # full
    a, b = c.create_qp(doorbell=bell), c.create_qp()
    assert a > 0 and b > 0
    c.connect(a, b)
    c.connect(b, a)
    ping = start_ping(r.sock, 2)
    c.ask("destroy_qp", struct.pack("<I", b))  # the router rings a's doorbell: it breaks
    assert_served(ping_result(ping))
    assert r.proc.poll() is None


def lingering_tcp_socket(seconds):
    """A connected TCP socket with a full send queue and SO_LINGER of `seconds`: its last close
    waits that long. Returns it, its peer and the listener (kept open by the caller)."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    s.connect(listener.getsockname())
    peer, _ = listener.accept()
    s.setblocking(False)
    try:
        while True:
            s.send(b"x" * 65536)
    except BlockingIOError:
        pass
    s.setblocking(True)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, seconds))
    return s, peer, listener


@as_root
def test_a_lingering_socket_passed_with_a_request_costs_nothing(router):
    """Any descriptor can ride on any message; closing a TCP socket with SO_LINGER and unsent
    data once held the router for as long as the attacker chose. What a client passes that its
    message does not take is refused and closed off the router's loop."""
    r = router()
    s, peer, listener = lingering_tcp_socket(10)
    c = RawClient(r.sock)
    ping = start_ping(r.sock, 2)
    c.seq += 1
    socket.send_fds(c.s, [struct.pack("<IHHII", CONTROL_MAGIC, CONTROL_VERSION, 4, c.seq, 0)], [s.fileno()])  # alloc_pd
    s.close()  # the router holds the last reference now
    t0 = time.time()
    reply = c.s.recv(4096)
    assert time.time() - t0 < 0.5
    assert struct.unpack_from("<H", reply, 6)[0] == RawClient.TYPES["error"]
    assert b"alloc_pd came with a descriptor of another kind" in reply
    assert_served(ping_result(ping))
    peer.close()
    listener.close()


@as_root
def test_connecting_again_adds_nothing(router):
    """A router-path QP connected again to the same peer was routed again each time: 20,000
    repeats made 20,001 router-path QPs of 2, and every turn of the loop longer."""
    r = router()
    c = RawClient(r.sock)
    a, b = c.create_qp(ROUTER_PATH), c.create_qp(ROUTER_PATH)
    for _ in range(2000):
        t, fds = c.connect(a, b)
        assert t == RawClient.TYPES["qp_connected"]
        for fd in fds:
            os.close(fd)
    line = next(l for l in run([CTL, "--socket", r.sock, "stats"], timeout=10).stdout.splitlines() if l.startswith("router:"))
    assert " 1 router-path QPs" in line, line


@as_root
def test_large_copies_are_shared_out_in_turns(router):
    """A tenant's 256 MiB router-path WRITEs, 16 at once, held the loop for the whole batch (a
    second): a QP moves at most 1 MiB a turn, so another tenant waits one such copy at most."""
    r = router()
    ping = start_ping(r.sock, 4)
    time.sleep(0.5)
    out = hostile(r.sock, "big-writes", 16, 256 << 20, user=NOBODY)
    assert out["ok"] == "16", out
    assert_served(ping_result(ping))


@as_root
@pytest.mark.parametrize("threads", [1, 2])
def test_a_tenants_many_qps_share_one_turn(router, threads):
    """512 router-path QP pairs of one tenant, each with a 1 MiB WRITE in flight: every QP moved
    its 1 MiB each turn, so a turn copied 512 MiB and another tenant's WRITE waited 133 ms at
    p50; with --threads 2 the control thread also lost its lock to the data thread turn after
    turn, and other tenants' vrdma_open timed out. A tenant now moves at most 1 MiB (128
    requests) a turn over all its QPs, and a data thread lets the control thread in."""
    r = router(extra=["--threads", str(threads)])
    attacker = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", HOSTILE, r.sock,
                                 "wide", "512", str(1 << 20), "8"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert attacker.stdout.readline().startswith("pairs=512"), attacker.stderr.read()
        assert_served(ping_result(start_ping(r.sock, 3)))
    finally:
        out, err = attacker.communicate(timeout=60)
    assert attacker.returncode == 0 and int(out.split("ops=")[1]) > 0, out + err


@as_root
@pytest.mark.parametrize("load", [("16", str(1 << 20), "16"), ("256", "8", "64", "fadd"), ("1", str(1 << 30), "1")],
                         ids=["writes", "fetch_adds", "one_gib_writes"])
def test_a_tenants_bulk_ops_across_hosts_leave_room_for_another(linked_routers, load):
    """16 QPs of one tenant each keeping 16 1 MiB WRITEs in flight to another host's router: the
    fabric's queue to that router is one for all, first come first served, so another tenant's
    64 B WRITE waited behind 256 MiB (with more, it waited past the 3 s bound and its QP broke).
    256 QPs with 64 fetch-adds each did the same with 8 B a request. A tenant's requests in
    flight on the links are held to 8 MiB and 256 requests, and a WRITE or READ over 1 MiB goes
    in 1 MiB pieces within that (a 1 GiB WRITE went whole: another tenant waited 0.2-0.3 s)."""
    a, b = linked_routers
    for r in (a, b):
        os.chmod(r.sock, 0o777)
    attacker = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", HOSTILE, a.sock,
                                 "wide-remote", b.sock, load[0], load[1], load[2], "10", *load[3:]],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert attacker.stdout.readline().startswith(f"pairs={load[0]}"), attacker.stderr.read()
        time.sleep(1)
        assert_served(hostile(a.sock, "remote-ping", b.sock, 4), stall_ms=100)
    finally:
        out, err = attacker.communicate(timeout=60)
    assert attacker.returncode == 0 and int(out.split("ops=")[1]) > 0, out + err


@as_root
def test_many_tenants_bulk_writes_across_hosts_leave_room_for_another(linked_routers):
    """24 tenants (one process making each one's connections under its own uid, as a user with
    subordinate uids can) each keeping a 16 MiB WRITE in flight to another host's router: each
    stayed within its own 8 MiB share of the links, but together they put 192 MiB in the
    fabric's one first-come-first-served queue, and another tenant's 64 B WRITE waited behind it
    (40 tenants: 109-145 ms, probe 17). The router now holds everyone's bytes on the links to
    16 MiB, past which a tenant with something there waits while its part is over an even
    share; one with nothing there may always send one piece (1 MiB)."""
    a, b = linked_routers
    for r in (a, b):
        os.chmod(r.sock, 0o777)
    tenants = 24
    attack = subprocess.Popen([HOSTILE, a.sock, "tenants-remote", b.sock, "50200", str(tenants), str(16 << 20), "7"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert attack.stdout.readline().startswith(f"tenants={tenants}"), attack.stderr.read()
        time.sleep(1)
        result = hostile(a.sock, "remote-ping", b.sock, 4)
        router = json.loads(run([CTL, "--socket", a.sock, "stats", "--json"], timeout=10).stdout)["router"]
    finally:
        out, err = attack.communicate(timeout=60)
    assert attack.returncode == 0 and "failed=0" in out and int(out.split("ops=")[1].split()[0]) > 0, out + err
    peak = router["link_bytes_peak"]
    assert peak <= (16 + tenants + 1) << 20, f"{peak >> 20} MiB on the links at once"
    assert_served(result, stall_ms=100)


@as_root
def test_sends_abandoned_by_their_qps_leave_room_for_another(linked_routers):
    """A tenant's 256 MiB SENDs to another host, each QP destroyed 30 ms after posting: a SEND's
    payload is pulled by the target's router, the destroyed QP gave its tenant's link share back
    while the pulls went on, and the next SEND started at once beside them; another tenant's 64 B
    WRITE waited 0.4-1.3 s (probe 15). The target now stops pulling for a QP whose peer has gone,
    and what may still be pulled stays on the tenant's share while its registration is kept."""
    a, b = linked_routers
    ping = start_remote_ping(a, b, 6)
    try:
        time.sleep(0.5)
        p = run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", HOSTILE, a.sock,
                 "abandon-sends", b.sock, "24", str(256 << 20)], timeout=120)
        assert p.returncode == 0 and "sent=24" in p.stdout, p.stdout + p.stderr
    finally:
        result = ping_result(ping)
    assert_served(result, stall_ms=150)


def test_sends_past_a_receive_not_posted_fail_with_it_not_one_rnr_wait_after_another(linked_routers):
    """8 QPs to another host, one receive posted at each peer, 8 pulled 1 MiB SENDs posted on each:
    the target's router served each QP's SENDs one RNR wait (1 s) after another, delivering none
    but answering each RNR, and with 16 QPs the later ones waited past the initiator's 3 s bound,
    so live QPs were reported "peer gone" (REM_OP_ERR) and their messages lost (probe 16). As on
    RC, the first SEND past the receives fails with RNR, and those its sender sent behind it are
    flushed at the target, never delivered: each QP costs its tenant's link share one RNR wait.
    Recovered, a QP is served again."""
    a, b = linked_routers
    r = hostile(a.sock, "rnr-sends", b.sock, 8, 8, 1 << 20, timeout=60)
    assert (r["success"], r["rnr"], r["flushed"], r["other"], r["received"]) == ("8", "8", "48", "0", "8"), str(r)
    assert float(r["ms"]) < 8 * 1000 + 2000 and r["recovered"] == "0", r


@pytest.mark.parametrize("kind,fails_with", [("badlkey", 2), ("oob", 4), ("atomic", 4)])
def test_requests_behind_a_failed_one_flush_across_hosts(linked_routers, kind, fails_with):
    """A 1 MiB WRITE in flight, then a request that fails, then 3 SENDs, on a QP to another host:
    the SENDs were carried to the peer and answered success after the failure when the request
    failed at the initiator's router (a bad local key, a WRITE past the target region), while
    its answer waited behind the WRITE's (probe 17). As on RC they flush (status 3) and none
    arrives; a request that fails at the target (a misaligned atomic) flushes those sent behind
    it there."""
    a, b = linked_routers
    r = hostile(a.sock, "fail-then-sends", b.sock, kind, timeout=60)
    assert r["statuses"] == f"0,{fails_with},3,3,3" and r["received"] == "0", r


def test_failures_that_never_leave_the_router_do_not_bring_the_error_epoch_round(linked_routers):
    """A QP's error epoch is 16 bits, and the target holds a failed one until an op of another
    arrives. An op failed at the target, then 65,534 requests failed at the initiator's router,
    each followed by a recovery: every failure moved the epoch on, it came round to the failed
    one, and the next SEND was flushed at the target, never delivered (probe 17). The epoch now
    moves on only after an op went out in it."""
    a, b = linked_routers
    r = hostile(a.sock, "epoch-wrap", b.sock, 65534, timeout=120)
    assert r == {"send": "0", "received": "1"}, r


@pytest.mark.parametrize("where", ["across_hosts", "router_path"])
def test_a_withdrawn_receive_is_either_filled_and_announced_or_never_written(linked_routers, where):
    """64 SENDs of 12,000 B into 64 receives withdrawn 200 us later (fresh ones posted after), 20
    times: the router had taken a receive before the withdrawal, which flushed it, and went on
    filling it, so a buffer the owner had back got the bytes and the sender was told success for
    a message the receiver never saw (3-18 such receives across hosts, 1-3 on the router path;
    probe 17). The router marks a receive before it looks at the withdrawal again, and
    withdraw_recvs leaves a marked one to its arrival."""
    a, b = linked_routers
    target, flags = (b.sock, 0) if where == "across_hosts" else (a.sock, 2)
    r = hostile(a.sock, "withdraw-race", target, flags, 200, timeout=120)
    assert r["written"] == "0" and r["recv_ok"] == r["send_ok"] == "1280", r


@as_root
def test_a_region_pinned_for_a_peers_pulls_counts_against_its_tenant_until_let_go(world):
    """A 32 MiB region deregistered while a SEND from it is in flight to a router that never
    answers (stopped): the SEND fails at the 3 s op bound, and its pieces stay pinned 5 s more for
    that router's pulls. The region was counted against its tenant for its 5 s grace only, so a
    new 32 MiB region fitted under max_reg_bytes 5 s after the deregistration while the old pages
    were still held (probe 15). It now counts until nothing pins it: about 8 s."""
    config = cluster_config(world, '[[tenant]]\nname = "t"\nuids = [0]\nmax_reg_bytes = "48M"\n')
    routers = []
    try:
        for name in ("a", "b"):
            d = world / name
            d.mkdir()
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            routers.append(Router(d, config, ["--listen", f"127.0.0.1:{port}"]))
        a, b = routers
        p = subprocess.Popen([HOSTILE, a.sock, "pinned-dereg", b.sock, str(32 << 20)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert p.stdout.readline().startswith("ready"), p.stderr.read()
        b.proc.send_signal(signal.SIGSTOP)
        try:
            p.stdin.write("go\n")
            p.stdin.flush()
            line = p.stdout.readline()
        finally:
            b.proc.send_signal(signal.SIGCONT)
        out, err = p.communicate("done\n", timeout=30)
        assert p.returncode == 0, line + out + err
        r = dict(kv.split("=", 1) for kv in line.split())
        assert r["errno"] == "12" and 7500 < float(r["again_ms"]) < 11000, line
    finally:
        for r in routers:
            r.stop()


@as_root
def test_a_tenant_that_exits_mid_stream_cuts_no_one_off(linked_routers):
    """A tenant whose WRITEs to another host are in flight when it exits: its regions there were
    closed at once, its WRITEs still on the way failed the fabric's key check, and libfabric's tcp
    then dropped the whole connection between the routers, cancelling every other tenant's RMAs
    on it (REM_ACCESS_ERR, "Operation canceled"). A released region's registration now stays a
    while over zero pages, and its router fails the ops that reach it after the revocation."""
    a, b = linked_routers
    ping = start_remote_ping(a, b, 5)
    try:
        until = time.monotonic() + 4.5
        runs = 0
        while time.monotonic() < until:  # each run exits with 64 MiB of WRITEs in flight
            p = run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", HOSTILE, a.sock,
                     "wide-remote", b.sock, "8", str(1 << 20), "8", "0.3"], timeout=60)
            assert p.returncode == 0 and int(p.stdout.split("ops=")[1]) > 0, p.stdout + p.stderr
            runs += 1
    finally:
        result = ping_result(ping)
    assert runs >= 3, runs
    assert_served(result, stall_ms=100)


def test_pds_are_limited_and_one_in_use_is_busy(router):
    r = router('[[tenant]]\nname = "t"\nuids = [0, 65534]\nmax_pds = 2\n')
    out = run([str(BUILD / "vrdma_client"), r.sock, "pd", "qp", "!dealloc", "pd", "!pd"], timeout=30)
    assert out.returncode == 0, out.stdout
    assert "errno=16: PD" in out.stdout and "still has QP" in out.stdout, out.stdout
    assert "its max_pds" in out.stdout, out.stdout


@as_root
def test_a_doorbell_made_blocking_again_and_again_stalls_no_one(router):
    """Both CQ eventfds full, made blocking as fast as a thread can while the QPs stay armed and
    write-imms arrive 32 at a time: each ring waited out a 20 ms timer, 800 ms a turn. A doorbell
    found blocking is dropped for good, and a QP is rung once a turn."""
    r = router()
    ping = start_ping(r.sock, 5)
    time.sleep(0.5)
    out = hostile(r.sock, "bell", 4, user=NOBODY)
    assert int(out["posted"]) > 0, out
    assert_served(ping_result(ping))


@as_root
def test_freeing_a_tenants_memory_stalls_no_one(router):
    """A region its owner touched and then unmapped: the router's mapping is the last, and freeing
    2 GiB of pages took the kernel 0.1-0.2 s on the control thread. It is let go of off the loop."""
    r = router()
    ping = start_ping(r.sock, 8)
    time.sleep(0.5)
    assert hostile(r.sock, "touch-and-free", min(2 << 30, host_memory() // 8), user=NOBODY)["errno"] == "0"
    assert_served(ping_result(ping))


def test_large_sends_into_one_srq_are_never_mixed(router):
    """Two 4 MiB SENDs at once into two QPs of one SRQ, each moved over several turns: each took
    the SRQ's next receive only at its last byte, so both wrote into the same one in turns."""
    r = router()
    for _ in range(3):
        assert hostile(r.sock, "srq-mix")["mixed"] == "0"


@as_root
def test_a_lingering_socket_inside_a_unix_socket_is_closed_at_once(router):
    """A TCP socket with unsent data and an hour of SO_LINGER, queued inside a Unix socket that
    rides on alloc_pd: closing the Unix socket closed the TCP one inside the closer thread, which
    then waited the hour while descriptors piled up. The closer empties a Unix socket first and
    closes what it held abortively."""
    r = router()
    assert run([str(BUILD / "vrdma_client"), r.sock, "pd"], timeout=10).returncode == 0
    baseline = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
    s, peer, listener = lingering_tcp_socket(3600)
    u1, u2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    socket.send_fds(u1, [b"x"], [s.fileno()])
    s.close()
    c = RawClient(r.sock)
    c.seq += 1
    socket.send_fds(c.s, [struct.pack("<IHHII", CONTROL_MAGIC, CONTROL_VERSION, 4, c.seq, 0)], [u2.fileno()])
    u2.close()
    c.s.recv(4096)
    c.s.close()
    for _ in range(50):  # each goes, and its socket is closed by the closer: if it is stuck, they pile up
        assert run([str(BUILD / "vrdma_client"), r.sock, "pd"], timeout=10).returncode == 0
    deadline = time.time() + 3
    while len(os.listdir(f"/proc/{r.proc.pid}/fd")) > baseline + 3 and time.time() < deadline:
        time.sleep(0.1)
    assert len(os.listdir(f"/proc/{r.proc.pid}/fd")) <= baseline + 3
    assert_served(ping_result(start_ping(r.sock, 1)))
    u1.close()
    peer.close()
    listener.close()


@as_root
def test_a_users_many_uids_are_one_owner_of_closes_that_never_return(router, world):
    """The closes that do not return are counted against the tenant, not the uid: a user's
    subordinate uids (its rootless containers, which can mount FUSE in a user namespace) are one
    tenant, and 65,536 of them, 7 stuck closes each, were never stalled."""
    subuid = world / "subuid"
    subuid.write_text("4243:50000:40\n")
    r = router(extra=["--subuid", str(subuid)])
    with stalled_filesystem(world) as file:
        attacks = [subprocess.Popen(["/usr/bin/python3", "-c", STUCK_CLOSES, r.sock, str(file), "5", "0"], user=uid,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for uid in (50000, 50001)]
        for a in attacks:
            assert a.stdout.readline().strip() == "sent", a.stderr.read()
        time.sleep(0.3)
        third = run(["/usr/bin/python3", "-c", STUCK_CLOSES, r.sock, "/dev/null", "0", "1"], timeout=30, user=50002)
        assert "its tenant passed wait in closes that have not returned" in third.stdout, third.stdout + third.stderr
        assert_served(ping_result(start_ping(r.sock, 1)))
    for a in attacks:
        a.communicate(timeout=30)


# For the scripts below: sends descriptors on a new connection to the router once the router
# serves it. Till then a kernel with SO_PASSRIGHTS (Linux 6.16) refuses them (EPERM), and for
# good on a connection the router refuses.
SEND_ONCE_SERVED = """
def send_once_served(c, data, fds, within=5):
    import socket, time
    end = time.time() + within
    while True:
        try:
            return socket.send_fds(c, data, fds)
        except PermissionError:
            if time.time() > end:
                raise
            time.sleep(0.005)
"""


def descriptors_gated(r):
    """Whether this router's kernel refuses descriptors on connections it does not serve."""
    return "cannot refuse descriptors" not in r.log.read_text()


# Hands the router a Unix socket that holds a TCP socket lingering `linger` s with unsent data,
# hidden behind a zero-length packet ("empty") or in a listening socket's unaccepted connection
# ("listen"), keeping no copy of either; then waits `hold` s.
HIDDEN_LINGERING_SOCKET = SEND_ONCE_SERVED + """
import os, socket, struct, sys, time
path, mode, linger, hold = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
s, peer, listener = lingering_tcp_socket(linger)
if mode == "empty":
    u1, give = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    u1.send(b"")
    socket.send_fds(u1, [b"L"], [s.fileno()])
    u1.close()
else:
    give = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    give.bind(b"\\0hidden-lingering-" + str(os.getpid()).encode())
    give.listen(4)
    cl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cl.connect(give.getsockname())
    socket.send_fds(cl, [b"L"], [s.fileno()])
    cl.close()
s.close()
c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
c.connect(path)
send_once_served(c, [b"x"], [give.fileno()])
give.close()
print("sent", flush=True)
time.sleep(hold)
"""


@as_root
@pytest.mark.parametrize("mode", ["empty", "listen"], ids=["behind-a-zero-length-packet", "in-an-unaccepted-connection"])
def test_a_lingering_socket_hidden_in_a_unix_socket_holds_up_no_close(router, mode):
    """The closer empties a Unix socket before closing it, so that the kernel drops nothing in it
    there (a TCP socket with unsent data and SO_LINGER would wait out its linger on the closer).
    A zero-length packet ended the emptying early, and a listening socket's unaccepted connection
    was never emptied: in both, the closer waited 30 s and every other close waited behind it
    (uid nobody, no tenant needed). Now a socket not surely emptied closes on a thread of its
    owner's."""
    r = router()
    baseline = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
    script = inspect.getsource(lingering_tcp_socket) + HIDDEN_LINGERING_SOCKET
    attack = subprocess.Popen(["/usr/bin/python3", "-c", script, r.sock, mode, "30", "8"], user=NOBODY,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert attack.stdout.readline().strip() == "sent", attack.stderr.read()
        for _ in range(200):  # other clients come and go: each socket is closed by the closer
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as c:
                c.connect(r.sock)
            time.sleep(0.002)
        deadline = time.time() + 3
        while len(os.listdir(f"/proc/{r.proc.pid}/fd")) > baseline + 3 and time.time() < deadline:
            time.sleep(0.05)
        held = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
        assert held <= baseline + 3, f"the router holds {held} descriptors (from {baseline})"
        assert_served(ping_result(start_ping(r.sock, 1)))
    finally:
        attack.kill()
        attack.communicate(timeout=30)


# Queues 9 packets of 253 copies of a stalled file in a Unix socket and hands the socket over.
SOCKET_FULL_OF_STUCK_FILES = SEND_ONCE_SERVED + """
import os, resource, socket, sys
path, file = sys.argv[1], sys.argv[2]
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
fds = [os.open(file, os.O_RDONLY) for _ in range(253)]
u1, give = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
for _ in range(9):
    socket.send_fds(u1, [b"f"], fds)
c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
c.connect(path)
send_once_served(c, [b"x"], [give.fileno()])
print("sent", flush=True)
"""


@as_root
def test_stuck_files_inside_a_unix_socket_count_as_they_are_taken_out(router, world):
    """A Unix socket passed to the router holding 9 packets of 253 files whose closes never
    return: they counted toward stalling their owner only when the closer came to each, after the
    whole socket was emptied, so all 2,277 came in (32 on threads, 2,245 parked in the router's
    table; 10 uids filled it). Now each counts as it is taken out, and the emptying stops at the
    packet that stalls its owner; the rest the kernel drops untaken."""
    r = router()
    baseline = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
    with stalled_filesystem(world) as file:
        attack = subprocess.Popen(["/usr/bin/python3", "-c", SOCKET_FULL_OF_STUCK_FILES, r.sock, str(file)],
                                  user=NOBODY, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert attack.stdout.readline().strip() == "sent", attack.stderr.read()
        time.sleep(1)
        held = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
        assert held <= baseline + 253, f"the router holds {held} descriptors (from {baseline})"
        assert_served(ping_result(start_ping(r.sock, 1)))
    attack.communicate(timeout=30)


# Holds 4 connections (its uid's max_clients_per_uid), then, `tries` times, connects once more
# and sends a TCP socket lingering `linger` s with unsent data in its first packet, keeping no copy.
LINGER_PAST_THE_CAP = """
import socket, struct, sys, time
path, tries, linger = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
keep, sent = [], 0
for _ in range(4):
    keep.append(socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET))
    keep[-1].connect(path)
for _ in range(tries):
    s, peer, listener = lingering_tcp_socket(linger)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect(path)
    try:
        socket.send_fds(c, [b"x" * 24], [s.fileno()])
        sent += 1
    except OSError:  # refused before it was sent: this close is the last, so not a lingering one
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()  # the copy in flight is the last
    keep += [listener, peer, c]
    time.sleep(0.2)
print("sent", sent)
"""


@as_root
def test_a_lingering_socket_sent_past_the_connection_cap_costs_nothing(router):
    """A connection over its uid's max_clients_per_uid is told why and closed; what it had sent is
    read first (else the client sees a reset, not the reason). That read took no descriptors: the
    kernel dropped them, in the router's loop, where a TCP socket with unsent data and SO_LINGER,
    whose last reference it was, closed and waited out its linger. Now they go to the closer."""
    r = router('[router]\nmax_clients_per_uid = 4\n')
    ping = start_ping(r.sock, 3)
    script = inspect.getsource(lingering_tcp_socket) + LINGER_PAST_THE_CAP
    attack = run(["/usr/bin/python3", "-c", script, r.sock, "10", "20"], timeout=60, user=NOBODY)
    # Where the kernel refuses descriptors on a connection the router does not serve, none is sent.
    sent = r"sent 0$" if descriptors_gated(r) else r"sent [1-9]"
    assert attack.returncode == 0 and re.search(sent, attack.stdout.strip()), attack.stdout + attack.stderr
    assert_served(ping_result(ping))
    assert "max_clients_per_uid" in r.log.read_text()


# A Unix socket that keeps refilling itself with copies of itself, handed to the router as a stray
# descriptor, fed for `seconds` (run as another uid).
SELF_FEEDING_SOCKET = SEND_ONCE_SERVED + """
import resource, socket, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # its descriptors in flight count against it
q0, q1 = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
def feed():
    try:
        socket.send_fds(q0, [b"x"], [q1.fileno()] * 253, socket.MSG_DONTWAIT)
        return True
    except OSError:
        return False
for _ in range(60):
    if not feed():
        break
def hand_over():
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect(path)
    try:
        send_once_served(c, [b"x"], [q1.fileno()])  # garbage: the router drops c, and q1 goes to its closer
    except OSError:
        pass  # too many of its own in flight: the next try
    return c
c, end, again = hand_over(), time.time() + seconds, time.time() + 0.5
while time.time() < end:
    if not feed():
        time.sleep(0.0001)
    if time.time() > again:
        c.close()
        c, again = hand_over(), time.time() + 0.5
print("fed")
"""


@as_root
def test_a_unix_socket_full_of_itself_cannot_fill_the_routers_descriptors(router):
    """A stray Unix socket is emptied of the descriptors queued in it before it is closed. One that
    its sender keeps filling with copies of itself (253 a packet) took the router from 30 to 20,000
    descriptors, its limit: other tenants' connections waited 600 ms and their sessions were dropped.
    Any uid can pass one, tenant or not."""
    r = router()
    baseline = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
    attack = subprocess.Popen(["/usr/bin/python3", "-c", SELF_FEEDING_SOCKET, r.sock, "6"], user=NOBODY,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    most = baseline
    try:
        time.sleep(1)
        ping = start_ping(r.sock, 3)
        while attack.poll() is None:
            with contextlib.suppress(FileNotFoundError):
                most = max(most, len(os.listdir(f"/proc/{r.proc.pid}/fd")))
            time.sleep(0.05)
    finally:
        out, err = attack.communicate(timeout=30)
    assert attack.returncode == 0 and "fed" in out, out + err
    assert_served(ping_result(ping))
    assert most < baseline + 4096, f"the router held {most} descriptors (from {baseline})"
    assert r.proc.poll() is None


# Opens the stalled filesystem's file n times and hands the descriptors to the router with a
# garbage packet (the router drops the connection and closes them; with n 0, no such connection);
# then, `again` times, connects and prints what the router answers. Its own closes would wait too: it ends only once the
# filesystem does.
STUCK_CLOSES = SEND_ONCE_SERVED + """
import os, socket, sys, time
path, file, n, again = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
fds = [os.open(file, os.O_RDONLY) for _ in range(n)]
if n:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect(path)
    send_once_served(c, [b"x"], fds)
print("sent", flush=True)
if n:
    c.settimeout(5)
    c.recv(4096)  # the router drops it: b"" once it has read the packet
    time.sleep(0.5)
for _ in range(again):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.settimeout(5)
    c.connect(path)
    try:
        c.send(b"hello?")
    except OSError:
        pass  # refused, and closed, before it was sent: the reason waits all the same
    try:
        print("answer", c.recv(4096)[24:].split(b"\\0")[0].decode(errors="replace"), flush=True)
    except OSError as e:
        print("answer", e, flush=True)
    c.close()
"""


@contextlib.contextmanager
def stalled_filesystem(world, owner=None):
    """A FUSE mount whose server never answers FLUSH: every close of its file "f" waits until the
    server ends (on leaving), which lets them all return. With `owner`, the mount is that uid's
    alone, as fusermount leaves a user's: even root may not stat its file."""
    mnt = world / "stalled"
    mnt.mkdir()
    mnt.chmod(0o755)
    fs = subprocess.Popen([str(BUILD / "stalled_fuse"), str(mnt), *([str(owner)] if owner is not None else [])],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = fs.stdout.readline()
        if "ready" not in line:
            pytest.skip(f"no FUSE mount here: {fs.stderr.read().strip()}")
        yield mnt / "f"
    finally:
        fs.terminate()
        fs.wait(timeout=10)
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def router_threads(r):
    return len(os.listdir(f"/proc/{r.proc.pid}/task"))


@as_root
def test_a_close_that_never_returns_holds_up_no_other_close(router, world):
    """A file on a FUSE mount whose server never answers FLUSH, handed to the router as a stray
    descriptor by another uid: its close() waits for ever, and every close and unmapping queued
    behind it on the router's closer waited too (24 descriptors became 3,880 in 5 s under churn).
    Now such a close runs on a thread of its own; the uid that passed it, once 8 of its closes do
    not return, is not served (its connections refused, unread) until they do."""
    r = router()
    baseline_fds, baseline_threads = len(os.listdir(f"/proc/{r.proc.pid}/fd")), router_threads(r)
    with stalled_filesystem(world) as file:
        attack = subprocess.Popen(["/usr/bin/python3", "-c", STUCK_CLOSES, r.sock, str(file), "40", "2"],
                                  user=NOBODY, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert attack.stdout.readline().strip() == "sent", attack.stderr.read()
        ping = start_ping(r.sock, 2)
        most = 0
        for _ in range(200):  # other clients come and go: each socket is closed by the closer
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as c:
                c.connect(r.sock)
            most = max(most, len(os.listdir(f"/proc/{r.proc.pid}/fd")))
            time.sleep(0.005)
        assert_served(ping_result(ping))
        # A stuck close frees its descriptor before it waits; 32 threads a uid, its other 8 wait for one.
        held = baseline_fds + 3 + 8
        deadline = time.time() + 3
        while len(os.listdir(f"/proc/{r.proc.pid}/fd")) > held and time.time() < deadline:
            time.sleep(0.05)
        assert len(os.listdir(f"/proc/{r.proc.pid}/fd")) <= held, f"most {most}, from {baseline_fds}"
        assert router_threads(r) > baseline_threads  # the stuck closes, each on its own thread
        answers = [attack.stdout.readline() for _ in range(2)]
        assert all("its tenant passed wait in closes that have not returned" in a for a in answers), answers
        assert "refused: uid" in r.log.read_text() and "closes that have not returned" in r.log.read_text()
        assert run([str(BUILD / "vrdma_client"), r.sock, "pd"], timeout=10).returncode == 0
    attack.communicate(timeout=30)  # its own closes returned with the filesystem
    deadline = time.time() + 5
    while router_threads(r) > baseline_threads and time.time() < deadline:
        time.sleep(0.05)
    assert router_threads(r) == baseline_threads  # every close returned, and its thread ended
    again = run(["/usr/bin/python3", "-c", STUCK_CLOSES, r.sock, "/dev/null", "1", "1"], timeout=30, user=NOBODY)
    assert "closes that have not returned" not in again.stdout, again.stdout  # served again (and refused as no tenant)
    assert r.proc.poll() is None


def assert_other_clients_closed_and_served(r, baseline):
    """While an attack holds what it holds: 200 clients come and go (each socket is closed off the
    loop), a ping is served throughout, and the router's descriptors come back to `baseline`."""
    ping = start_ping(r.sock, 2)
    for _ in range(200):
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as c:
            c.connect(r.sock)
        time.sleep(0.005)
    assert_served(ping_result(ping))
    deadline = time.time() + 3
    while len(os.listdir(f"/proc/{r.proc.pid}/fd")) > baseline + 3 and time.time() < deadline:
        time.sleep(0.05)
    held = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
    assert held <= baseline + 3, f"the router holds {held} descriptors (from {baseline})"
    assert run([str(BUILD / "vrdma_client"), r.sock, "pd"], timeout=10).returncode == 0


@as_root
def test_a_file_root_may_not_even_stat_closes_on_a_thread_of_its_own(router, world):
    """Probe 24: a FUSE mount of one user's alone (no allow_other, as fusermount leaves it) refuses
    even root's fstat. The closer took that refusal for 'not open: nothing to wait for' and closed
    the file itself; its FLUSH was never answered, every close behind it waited, and one uid's
    20,000 sessions filled the router's table. A descriptor is now told apart without a call into
    its filesystem (its /proc/self/fd link, F_GET_SEALS), and such a file closes on a thread."""
    r = router()
    baseline = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
    with stalled_filesystem(world, owner=NOBODY) as file:
        assert subprocess.run(["stat", str(file)], capture_output=True).returncode != 0  # root may not
        attack = subprocess.Popen(["/usr/bin/python3", "-c", STUCK_CLOSES, r.sock, str(file), "1", "0"],
                                  user=NOBODY, group=NOBODY, extra_groups=[], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        assert attack.stdout.readline().strip() == "sent", attack.stderr.read()
        assert_other_clients_closed_and_served(r, baseline)
    attack.communicate(timeout=30)  # its own close of the file returned with the filesystem
    assert r.proc.poll() is None


# Opens the stalled filesystem's file once, connects `nconn` sessions, and sends on each one
# packet carrying 253 copies of that descriptor (each copy's close waits on its own FLUSH).
BURST_OF_STUCK_FILES = SEND_ONCE_SERVED + """
import os, socket, sys
path, file, nconn = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(file, os.O_RDONLY)
conns = []
for _ in range(nconn):
    conns.append(socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET))
    conns[-1].connect(path)
sent = 0
for c in conns:
    try:
        send_once_served(c, [b"x"], [fd] * 253, within=2)
        sent += 1
    except OSError:
        pass
print("sent", sent, flush=True)
sys.stdin.read()
os._exit(0)
"""


@as_root
def test_one_uids_burst_of_stuck_files_parks_a_bounded_number(router, world):
    """Probe 24: one uid's 64 connections each sent a packet of 253 copies of a file whose close
    never returns, all within 1.3 ms: before 100 ms had passed and its owner was stalled, 16,000
    were parked in the router's table (two uids filled it, and root was refused). Now an owner
    with 1,024 descriptors not closed is stalled at once, and what its other connections queued
    goes with them, unread."""
    r = router()
    baseline = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
    attack = None
    try:
        with stalled_filesystem(world) as file:
            attack = subprocess.Popen(["/usr/bin/python3", "-c", BURST_OF_STUCK_FILES, r.sock, str(file), "64"],
                                      user=NOBODY, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
            assert attack.stdout.readline().startswith("sent"), attack.stderr.read()
            time.sleep(1)
            held = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
            assert held <= baseline + 1024 + 2 * 253 + 64, f"the router holds {held} descriptors (from {baseline})"
            assert_served(ping_result(start_ping(r.sock, 1)))
            assert run([str(BUILD / "vrdma_client"), r.sock, "pd"], timeout=10).returncode == 0
            assert "closes that have not returned" in r.log.read_text()
    finally:  # its own close of the file returns with the filesystem
        if attack:
            attack.kill()
            attack.communicate(timeout=30)
    assert r.proc.poll() is None


@as_root
def test_a_tenant_whose_close_waits_for_a_thread_others_hold_is_not_stalled(router, world):
    """Probe 24: 32 uids, each with 32 closes that never return, held all 1,024 of the router's
    threads for closes; another uid's ordinary close then waited for a thread, parked, and after
    100 ms counted as stuck: that uid was refused as stalled. Only a close begun on a thread and
    not returned counts now."""
    r = router()
    attackers = []
    try:
        with stalled_filesystem(world) as file:
            for uid in range(60000, 60032):
                attackers.append(subprocess.Popen(["/usr/bin/python3", "-c", STUCK_CLOSES, r.sock, str(file), "40", "0"],
                                                  user=uid, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            for a in attackers:
                assert a.stdout.readline().strip() == "sent", a.stderr.read()
            deadline = time.time() + 10
            while router_threads(r) < 1024 and time.time() < deadline:
                time.sleep(0.05)
            assert router_threads(r) >= 1024, router_threads(r)
            innocent = run(["/usr/bin/python3", "-c", STUCK_CLOSES, r.sock, "/dev/null", "1", "1"], timeout=30,
                           user=60100)
            assert innocent.returncode == 0, innocent.stderr
            assert "closes that have not returned" not in innocent.stdout, innocent.stdout
            assert_served(ping_result(start_ping(r.sock, 1)))
    finally:  # their own closes return with the filesystem
        for a in attackers:
            a.kill()
            a.communicate(timeout=30)
    assert r.proc.poll() is None


def holds_nothing_up_while_it_waits(router, world, script, *args):
    """Runs an attack script as nobody against a new router, with the stalled file as its second
    argument; once it says "sent", other clients' descriptors still close and they are served.
    Its thread's fault ends with the filesystem, and only then can it be killed."""
    r = router()
    baseline = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
    attack = None
    try:
        with stalled_filesystem(world) as file:
            attack = subprocess.Popen(["/usr/bin/python3", "-c", script, r.sock, str(file), *args], user=NOBODY,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert attack.stdout.readline().strip() == "sent", attack.stderr.read()
            time.sleep(0.3)
            assert_other_clients_closed_and_served(r, baseline)
    finally:
        if attack:
            attack.kill()
            attack.communicate(timeout=30)
    assert r.proc.poll() is None


# Holds a Unix stream socket's receive lock: a thread of its own reads the socket into a page of
# the stalled file, mapped, whose fault waits on a READ never answered; then hands that socket to
# the router as a stray descriptor and keeps its copy.
HELD_RECEIVE_LOCK = SEND_ONCE_SERVED + """
import mmap, os, socket, sys, threading, time
path, file = sys.argv[1], sys.argv[2]
f = os.open(file, os.O_RDONLY)
page = mmap.mmap(f, 4096, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
a.send(b"y" * 100)
threading.Thread(target=lambda: b.recv_into(memoryview(page)), daemon=True).start()
time.sleep(0.5)
c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
c.connect(path)
send_once_served(c, [b"x"], [b.fileno()])
print("sent", flush=True)
sys.stdin.read()
os._exit(0)
"""


@as_root
def test_a_socket_whose_receive_lock_a_client_holds_holds_up_no_close(router, world):
    """Probe 23: a client held a passed Unix socket's receive lock from a thread stuck in a page
    fault on a FUSE mount it serves, then passed the socket to the router. The closer's
    non-blocking read of it, to empty it, waited for the lock: every close behind it waited too
    (1,451 descriptors held after 300 clients came and went). Now a Unix socket is never read nor
    closed on the closer, only on a thread of its owner's."""
    holds_nothing_up_while_it_waits(router, world, HELD_RECEIVE_LOCK)


# Holds an epoll set's lock: a thread of its own waits in epoll_wait with its event buffer in a
# page of the stalled file, mapped, so copying the ready event out faults on a READ never
# answered. The set watches a `kind` of file (pipe, eventfd, tcp) that it hands the router as a
# stray descriptor, keeping no copy: the router's close of it is the last.
HELD_EPOLL = SEND_ONCE_SERVED + """
import ctypes, mmap, os, select, socket, sys, threading, time
path, file, kind = sys.argv[1], sys.argv[2], sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)
keep = []
if kind == "pipe":
    victim, w = os.pipe()
    os.write(w, b"x")
    keep.append(w)
elif kind == "eventfd":
    victim = os.eventfd(1)
else:
    listener = socket.create_server(("127.0.0.1", 0))
    s = socket.create_connection(listener.getsockname())
    peer, _ = listener.accept()
    peer.send(b"x")
    victim = s.detach()
    keep += [listener, peer]
watching = select.epoll()
watching.register(victim, select.EPOLLIN)  # ready at once
f = os.open(file, os.O_RDONLY)
page = mmap.mmap(f, 4096, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
events = ctypes.addressof(ctypes.c_char.from_buffer(page))
threading.Thread(target=lambda: libc.epoll_wait(watching.fileno(), ctypes.c_void_p(events), 1, -1), daemon=True).start()
time.sleep(0.5)
c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
c.connect(path)
send_once_served(c, [b"x"], [victim])
os.close(victim)
print("sent", flush=True)
sys.stdin.read()
os._exit(0)
"""


@as_root
@pytest.mark.parametrize("kind", ["pipe", "eventfd", "tcp"])
def test_a_file_a_clients_epoll_watches_holds_up_no_close(router, world, kind):
    """Probe 25: the last close of a file an epoll set watches takes the set's lock, and a client
    held its set's lock from a thread stuck copying an event into a page of a FUSE file it serves.
    It passed the router a pipe (an eventfd, a TCP socket) that set watched, and kept no copy: the
    closer closed pipes and eventfds itself, 'at once', and waited for good; every close behind it
    waited too, and the router's table filled. Only memfds, which no epoll set can watch, close on
    the closer now; the rest close on threads of their owner's."""
    holds_nothing_up_while_it_waits(router, world, HELD_EPOLL, kind)


@as_root
def test_a_kick_a_clients_epoll_watches_holds_up_no_loop(router, world):
    """Probe 25, the same lock on the router's own descriptor: a router-path QP's kick is an
    eventfd the router makes and passes to its owner. The owner put its copy in an epoll set whose
    lock a thread holds, closed the copy and destroyed the QP: the router closed its kick, the last
    copy, on its loop. The kick now closes on a thread of its owner's, as a passed file does."""
    r = router()
    os.chmod(r.sock, 0o777)
    attack = None
    try:
        with stalled_filesystem(world) as file:
            attack = subprocess.Popen([HOSTILE, r.sock, "held-kick", str(file), "30"], user=NOBODY,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = attack.stdout.readline()
            assert line.startswith("armed") and int(line.split("=")[1]) >= 2, line + attack.stderr.read()
            time.sleep(0.5)
            assert_served(ping_result(start_ping(r.sock, 1)))
            assert run([str(BUILD / "vrdma_client"), r.sock, "pd"], timeout=10).returncode == 0
    finally:  # its thread's fault ends with the filesystem, and only then can it be killed
        if attack:
            attack.kill()
            attack.communicate(timeout=30)
    assert r.proc.poll() is None


# Stalls its tenant with closes of sockets, and no filesystem: hands the router `n` Unix sockets,
# each holding the last reference to a TCP socket lingering 60 s with unsent data (the kernel
# drops it, and waits out its linger, where the Unix socket is closed); then opens and closes
# `churn` connections, each offering a descriptor, and prints how many the kernel let it offer.
CHURN_WHEN_STALLED = SEND_ONCE_SERVED + """
import socket, struct, sys, time
path, n, churn = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
gives, keep = [], []
for _ in range(n):
    s, peer, listener = lingering_tcp_socket(60)
    u1, give = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    socket.send_fds(u1, [b"L"], [s.fileno()])
    s.close()
    gives.append(give)
    keep += [peer, listener, u1]
c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
c.connect(path)
send_once_served(c, [b"x"], [g.fileno() for g in gives])
for g in gives:
    g.close()
print("sent", flush=True)
sys.stdin.readline()
offered = 0
for _ in range(churn):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect(path)
    try:
        socket.send_fds(c, [b"y"], [0])
        offered += 1
    except OSError:
        pass
    c.close()
print("offered", offered, flush=True)
sys.stdin.read()
"""


@as_root
def test_a_stalled_tenants_connections_hold_none_of_the_routers_descriptors(router):
    """A tenant whose 32 threads for closing sockets were all stuck (each socket held the last
    reference to a TCP socket lingering with unsent data) had each connection it opened after
    refused, and the refused socket's close parked behind those threads, in the router's table:
    2,000 connections held 2,000 more descriptors; one uid, no filesystem needed, could fill the
    table for every tenant. Where the kernel can, a
    connection now takes no descriptor until the router serves it, so a refused one is closed at
    once."""
    r = router()
    if not descriptors_gated(r):
        pytest.skip("this kernel cannot refuse descriptors on a connection (SO_PASSRIGHTS, Linux 6.16)")
    script = inspect.getsource(lingering_tcp_socket) + CHURN_WHEN_STALLED
    attack = subprocess.Popen(["/usr/bin/python3", "-c", script, r.sock, "40", "2000"], user=NOBODY,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert attack.stdout.readline().strip() == "sent", attack.stderr.read()
        time.sleep(0.5)  # its 32 threads stuck, the other sockets it passed parked behind them: stalled
        before = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
        attack.stdin.write("churn\n")
        attack.stdin.flush()
        offered = attack.stdout.readline().strip()
        held = len(os.listdir(f"/proc/{r.proc.pid}/fd"))
        assert held <= before + 4, f"the router holds {held} descriptors (from {before}); {offered}"
        assert offered == "offered 0", offered + attack.stderr.read()
        assert "closes that have not returned" in r.log.read_text()
        assert_served(ping_result(start_ping(r.sock, 1)))
    finally:
        attack.kill()
        attack.communicate(timeout=30)
    assert r.proc.poll() is None


def test_address_handles_are_bounded_per_tenant_as_well_as_per_client(linked_routers):
    """Each connection may hold 4,096 address handles; a tenant held as many as its connections
    allowed (a user's 65,536 container uids, 64 connections each). Now a tenant holds 65,536 at
    most: the 17th connection's first is refused, and one given back makes room."""
    a, _ = linked_routers
    clients = []
    try:
        for k in range(17):
            c = RawClient(a.sock)
            here = c.welcome[96:116]  # the router's own --listen address: no link to make
            made, refused = [], None
            for _ in range(4096 if k < 16 else 1):
                t, body, _ = c.ask("create_ah", here + struct.pack("<I", 0))
                if t != RawClient.TYPES["handle"]:
                    refused = body
                    break
                made.append(struct.unpack_from("<I", body)[0])
            clients.append((c, made))
            if k < 16:
                assert refused is None and len(made) == 4096, (k, len(made), refused)
        assert refused and b"address handles, the most a tenant may" in refused, refused
        first, made = clients[0]
        t, _, _ = first.ask("destroy_ah", struct.pack("<I", made[0]))
        assert t == RawClient.TYPES["done"]
        last, _ = clients[-1]
        t, body, _ = last.ask("create_ah", last.welcome[96:116] + struct.pack("<I", 0))
        assert t == RawClient.TYPES["handle"], body
    finally:
        for c, _ in clients:
            c.s.close()
    time.sleep(0.3)  # their handles go with their connections: a new one may make them again
    c = RawClient(a.sock)
    t, body, _ = c.ask("create_ah", c.welcome[96:116] + struct.pack("<I", 0))
    assert t == RawClient.TYPES["handle"], body


# --- vrdmad --metrics ---------------------------------------------------------------------------

SCRAPE = ("import sys, urllib.request\n"
          "print(urllib.request.urlopen(f'http://127.0.0.1:{sys.argv[1]}/metrics', timeout=5).read().decode())")


def metrics_router(router, config=None):
    r = router(config, extra=["--metrics", "127.0.0.1:0"])
    wait_for_text(r.log, "metrics at http://127.0.0.1:")
    port = int(re.search(r"metrics at http://127\.0\.0\.1:(\d+)/metrics", r.log.read_text()).group(1))
    return r, port


def scrape(port, user=None):
    p = run(["/usr/bin/python3", "-c", SCRAPE, str(port)], timeout=30, user=user)  # the venv is root's
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


@as_root
def test_metrics_are_prometheus_text_and_each_uid_sees_what_it_may(router, world):
    """vrdmad --metrics: Prometheus' text format over HTTP. A scraper of this host is known by the
    uid /proc/net/tcp gives its socket: a tenant sees its own series, an admin every tenant's with
    the links' and the router's, a uid in no tenant nothing."""
    admin, stranger = NOBODY + 1, NOBODY + 2
    r, port = metrics_router(router, f'[router]\nadmin_uids = [{admin}]\n\n[[tenant]]\nname = "t0"\nuids = [0]\n\n'
                                     f'[[tenant]]\nname = "tn"\nuids = [{NOBODY}, {admin}]\n')
    ready = world / "ready"
    holder = subprocess.Popen([str(BUILD / "vrdma_client"), r.sock, "pd", "mr:65536", f"wait:{ready}"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while not ready.exists() and time.time() < deadline:
            time.sleep(0.02)
        everything = scrape(port)  # root
        assert "# TYPE vrdma_tenant_registered_bytes gauge" in everything
        assert 'vrdma_tenant_registered_bytes{tenant="t0"} 65536' in everything, everything
        assert "vrdma_router_cpu_seconds_total " in everything and "# TYPE vrdma_tenant_requests_total counter" in everything
        assert "vrdma_router_link_bytes 0" in everything and "vrdma_router_link_bytes_peak 0" in everything, everything
        mine = scrape(port, user=NOBODY)
        assert 'tenant="tn"' in mine and 'tenant="t0"' not in mine and "vrdma_router_" not in mine, mine
        assert 'tenant="t0"' in scrape(port, user=admin)
        nothing = scrape(port, user=stranger)
        assert "is in no tenant" in nothing and "vrdma_tenant_" not in nothing, nothing
    finally:
        holder.communicate(input=b"", timeout=30)


SCRAPE_V6 = ("import socket, sys\n"
             "s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)\n"
             "s.settimeout(5)\n"
             "s.connect((sys.argv[1], int(sys.argv[2])))\n"
             "s.sendall(b'GET /metrics HTTP/1.0\\r\\n\\r\\n')\n"
             "out = b''\n"
             "while chunk := s.recv(65536):\n"
             "    out += chunk\n"
             "print(out.decode())")


@as_root
def test_a_scraper_on_an_ipv6_socket_sees_only_its_own_tenant(router):
    """A scraper of this host is told apart by its socket's owner in /proc/net/tcp. One that
    connected from an IPv6 socket to the v4-mapped ::ffff:127.0.0.1 is listed in tcp6 instead, was
    not found, and was served every tenant's series as if it were another host. It must see its
    own tenant only, and a scraper of this host that cannot be told apart sees no tenant at all."""
    r, port = metrics_router(router, f'[[tenant]]\nname = "t0"\nuids = [0]\n\n[[tenant]]\nname = "tn"\nuids = [{NOBODY}]\n')
    holder = subprocess.Popen([str(BUILD / "vrdma_client"), r.sock, "pd", "mr:65536", f"wait:{r.sock}.ready"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while not Path(f"{r.sock}.ready").exists() and time.time() < deadline:
            time.sleep(0.02)
        p = run(["/usr/bin/python3", "-c", SCRAPE_V6, "::ffff:127.0.0.1", str(port)], timeout=30, user=NOBODY)
        assert p.returncode == 0, p.stdout + p.stderr
        assert 'tenant="t0"' not in p.stdout and "vrdma_router_" not in p.stdout, p.stdout
        assert 'tenant="tn"' in p.stdout, p.stdout
    finally:
        holder.communicate(input=b"", timeout=30)


@as_root
def test_silent_scrapers_stall_no_one_and_the_endpoint_recovers(router):
    """Scrapers that connect and say nothing hold only the metrics thread, one at a time for at
    most a second each; tenants are served meanwhile, and a real scrape is answered after."""
    r, port = metrics_router(router)
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
    try:
        assert_served(ping_result(start_ping(r.sock, 2)))
    finally:
        for s in silent:
            s.close()
    assert "vrdma_tenant_clients" in scrape(port)


HOLD_SCRAPES = ("import select, socket, sys, time\n"
                "port, n, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])\n"
                "held, end = [], time.time() + seconds\n"
                "print('holding', flush=True)\n"
                "while time.time() < end:\n"
                "    while len(held) < n:\n"
                "        try:\n"
                "            held.append(socket.create_connection(('127.0.0.1', port), timeout=0.2))\n"
                "        except OSError:\n"
                "            break\n"
                "    for s in select.select(held, [], [], 0.02)[0]:\n"
                "        held.remove(s)\n"
                "        s.close()\n")


@as_root
def test_one_uid_holding_connections_does_not_keep_others_from_scraping(router):
    """The metrics thread served one connection at a time, each for up to 1 s: one uid keeping 32
    silent connections open (opening another as each was shut) filled the listen queue, and root's
    scrape waited past its 5 s timeout (probe 17). Now every connection is served as far as it can
    go, one uid has at most 4 open, and the endpoint 64 in all."""
    r, port = metrics_router(router)
    hold = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "/usr/bin/python3",
                             "-c", HOLD_SCRAPES, str(port), "32", "8"], stdout=subprocess.PIPE, text=True)
    try:
        assert hold.stdout.readline().strip() == "holding"
        time.sleep(1)
        worst = 0.0
        for _ in range(4):
            t0 = time.monotonic()
            assert "vrdma_tenant_clients" in scrape(port)
            worst = max(worst, time.monotonic() - t0)
    finally:
        hold.kill()
        hold.wait()
    assert worst < 1.5, f"a scrape took {worst:.1f} s"


HOLD_LOOPBACK = ("import resource, socket, sys, time\n"
                 "per, ports = int(sys.argv[1]), 3\n"
                 "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
                 "resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\n"
                 "held = []\n"
                 "for _ in range(ports):\n"
                 "    l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(4096); held.append(l)\n"
                 "    for _ in range(per):\n"
                 "        held.append(socket.create_connection(l.getsockname())); held.append(l.accept()[0])\n"
                 "print(len(held), flush=True)\n"
                 "time.sleep(60)\n")


def timed_scrape(port):
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    assert b"vrdma_tenant_clients" in out, out[:300]
    return time.monotonic() - t0


@as_root
def test_a_uid_holding_many_tcp_connections_does_not_slow_others_scrapes(router):
    """A scrape is told apart by its socket's owner, which the router found by reading the whole of
    /proc/net/tcp: uid nobody holding 60,000 loopback sockets (within its descriptor limits) made
    root's scrape take 297 ms against 34 (probe 18), and about 350,000 would pass the endpoint's
    1 s deadline. The owner of that one socket is now asked of the kernel (sock_diag)."""
    r, port = metrics_router(router)
    quiet = min(timed_scrape(port) for _ in range(3))
    holders = [subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                                 "/usr/bin/python3", "-c", HOLD_LOOPBACK, "3000"], stdout=subprocess.PIPE, text=True)
               for _ in range(4)]  # 18,003 descriptors each, under nobody's 20,000
    try:
        held = sum(int(h.stdout.readline() or 0) for h in holders)
        worst = max(timed_scrape(port) for _ in range(5))
    finally:
        for h in holders:
            h.kill()
            h.wait()
    assert held >= 60000, held
    assert worst < quiet + 0.1, f"a scrape took {worst * 1000:.0f} ms beside {held} sockets, {quiet * 1000:.0f} ms alone"


@as_root
def test_a_uid_holding_many_tcp_connections_does_not_cost_the_link_guard_a_core(router, world, free_port):
    """Probe 18: the link guard, grouping unvouched connections to --listen by their owner's uid,
    read the whole of /proc/net/tcp at each look (once a second) while any were held: uid nobody
    holding 60,000 loopback sockets and a few silent connections to the port cost the router a
    third of a core. The guard now groups only when a cap could be passed, and asks the kernel
    for each connection's owner alone (sock_diag)."""
    r = router(cluster_config(world), extra=["--listen", f"127.0.0.1:{free_port}"])
    holders = [subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                                 "/usr/bin/python3", "-c", HOLD_LOOPBACK, "3000"], stdout=subprocess.PIPE, text=True)
               for _ in range(4)]
    attack = None
    try:
        held = sum(int(h.stdout.readline() or 0) for h in holders)
        attack = hold_silent_link_connections(free_port, 64, 30)
        assert attack.stdout.readline().strip() == "64"
        time.sleep(1.5)
        before = cpu_of(r.proc.pid)
        time.sleep(6)
        used = cpu_of(r.proc.pid) - before
    finally:
        for p in holders + ([attack] if attack else []):
            p.kill()
            p.wait()
    assert held >= 60000, held
    assert used < 0.6, f"the router used {used:.2f} s of CPU in 6 s beside {held} sockets of another uid"


def test_metrics_flag_mistakes_are_one_line(world):
    for value, needle in (("abc", "--metrics abc: give [HOST:]PORT"), ("1.2.3:99999", "--metrics 1.2.3:99999"),
                          ("nohost:9478", "--metrics nohost: give a numeric address")):
        p = run([VRDMAD, "--socket", str(world / "s"), "--metrics", value], timeout=10)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and needle in p.stderr, p.stderr
