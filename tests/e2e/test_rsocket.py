"""Unmodified sockets programs over rsockets on vrdma: `vrdma-run --rsocket` preloads librdmacm's
librspreload after libvrdma-rdmacm.so, so a program's TCP sockets become rsockets whose bytes vrdma0
carries (RDMA WRITE WITH IMMEDIATE into the peer's ring). On one host and across two routers in two
network namespaces: iperf3 and sockperf, a stream checked byte for byte, proof that the program's
kernel TCP connections carried no data (only the connection manager's handshake), and no quiet fall
back to the kernel's TCP when an rsocket cannot connect."""
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time

import pytest

from conftest import run
from test_verbs_interop import BUILD, CMD_TIMEOUT, hosts, one_host, two_hosts  # noqa: F401

STREAM_CHECK = str(BUILD / "stream_check")


@pytest.fixture(autouse=True)
def need_rspreload():
    if not glob.glob("/usr/lib/*/rsocket/librspreload.so"):
        pytest.skip("librspreload is not installed (apt-get install librdmacm1)")


def need(program):
    if not shutil.which(program):
        pytest.skip(f"{program} is not installed (apt-get install {program})")


def rsocket_argv(host, argv):
    return host.argv(["--rsocket", *argv])


def start(host, argv):
    return subprocess.Popen(rsocket_argv(host, argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc):
    try:
        out, _ = proc.communicate(timeout=CMD_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    return out


def kernel_tcp_bytes(host, port):
    """Bytes the kernel's TCP connections on `port` have carried (sent and acked, and received), in
    `host`'s namespace, by ss: the program's connections there are only the connection manager's."""
    r = run(host.wrap(["ss", "-Htin", "state", "established", f"( sport = :{port} or dport = :{port} )"]), timeout=10)
    return sum(int(n) for n in re.findall(r"bytes_(?:acked|received):(\d+)", r.stdout))


def wait_listening(proc, text="", seconds=1.0):
    time.sleep(seconds)  # the programs' own listen: their clients retry nothing
    assert proc.poll() is None, finish(proc)


def test_iperf3_over_rsocket_carries_no_byte_on_kernel_tcp(hosts, free_port):
    """iperf3 -c / -s, unmodified: the transfer goes over vrdma0; sampled mid-run, the kernel's TCP
    connections on iperf3's port have carried no more than the connection manager's handshakes."""
    need("iperf3")
    srv = start(hosts["server"], ["iperf3", "-s", "-1", "-p", str(free_port)])
    wait_listening(srv)
    cli = start(hosts["client"], ["iperf3", "-c", hosts["addr"], "-p", str(free_port), "-t", "3", "-J"])
    time.sleep(2)
    carried = kernel_tcp_bytes(hosts["client"], free_port)
    out = finish(cli)
    finish(srv)
    assert cli.returncode == 0, out
    moved = json.loads(out[out.index("{"):])["end"]["sum_received"]["bytes"]
    assert moved > 50_000_000, f"iperf3 moved {moved} B"
    assert carried < 64 * 1024, f"the kernel's TCP on port {free_port} carried {carried} B while iperf3 moved {moved} B"


@pytest.mark.parametrize("size", [3_000_000, 100_000_000])
def test_a_stream_over_rsocket_arrives_whole(hosts, free_port, size):
    """stream_check: pieces of random sizes, every byte a function of its position, checked at the
    receiver, whose answer comes back after the sender's shutdown; 10 rounds of the smaller size, as
    a disconnect racing the answer once lost it (the receives it had filled were flushed)."""
    for attempt in range(10 if size < 10_000_000 else 1):
        port = free_port + attempt
        srv = start(hosts["server"], [STREAM_CHECK, "serve", str(port)])
        wait_listening(srv, seconds=0.7)
        cli = run(rsocket_argv(hosts["client"], [STREAM_CHECK, "send", hosts["addr"], str(port), str(size)]),
                  timeout=CMD_TIMEOUT)
        sout = finish(srv)
        assert cli.returncode == 0 and f"ok {size}" in cli.stdout, f"round {attempt}: {cli.stdout}{cli.stderr}\n{sout}"
        assert srv.returncode == 0 and f"ok {size}" in sout, sout


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_reader_waiting_in_poll_hears_that_its_peer_died(one_host, free_port):
    """Probe 14: a reader waiting in poll() (rpoll) for a peer killed mid-stream, which sends no end
    of stream, waited for ever: the peer's DISCONNECTED came on the socket's channel and rpoll woke
    for it but never read it (a blocking recv() did). Now poll() reports it and recv() ends."""
    reader = start(one_host["server"], [STREAM_CHECK, "pollwait", str(free_port)])
    wait_listening(reader, seconds=0.7)
    sender = subprocess.Popen(rsocket_argv(one_host["client"], [STREAM_CHECK, "send", "127.0.0.1", str(free_port),
                                                                 "100000000000"]),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(1.5)
        sender.kill()  # SIGKILL: no end of stream, no close
        sender.wait(timeout=10)
        out, _ = reader.communicate(timeout=15)
    finally:
        for p in (sender, reader):
            if p.poll() is None:
                p.kill()
    assert "ended" in out, out


def test_a_sender_whose_peer_half_closed_sleeps_and_then_fails(one_host, free_port):
    """Probe 10 F2: a peer that ended its side of the stream (legal TCP) and read nothing more left
    the sender, blocked on a full ring, spinning at a full core for as long as it waited, and past
    the peer's exit. Now it sleeps, and fails once the peer goes."""
    sink = start(one_host["server"], [STREAM_CHECK, "halfclose", str(free_port), "6"])
    wait_listening(sink, seconds=0.7)
    sender = subprocess.Popen(rsocket_argv(one_host["client"], [STREAM_CHECK, "send", "127.0.0.1", str(free_port),
                                                                 "50000000"]),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(1.5)  # the ring (1 MiB) is full by now
        before = cpu_seconds(sender.pid)  # env and vrdma-run exec the program: one process
        time.sleep(3)
        used = cpu_seconds(sender.pid) - before
        out, _ = sender.communicate(timeout=20)
    finally:
        if sender.poll() is None:
            sender.kill()
        finish(sink)
    assert used < 1.0, f"the blocked sender used {used:.2f} s of CPU in 3 s"
    assert sender.returncode != 0 and "ok 50000000" not in out, out


def test_sockperf_ping_pong_over_rsocket(hosts, free_port, tmp_path):
    """sockperf's TCP ping-pong (poll, as librspreload does not carry epoll) over rsockets."""
    need("sockperf")
    feed = tmp_path / "feed.txt"
    feed.write_text(f"T:{hosts['addr']}:{free_port}\n")
    tmp_path.chmod(0o755)
    srv = start(hosts["server"], ["sockperf", "server", "-f", str(feed), "-F", "p"])
    wait_listening(srv)
    cli = run(rsocket_argv(hosts["client"], ["sockperf", "ping-pong", "-f", str(feed), "-F", "p", "-t", "2", "-m", "14"]),
              timeout=CMD_TIMEOUT)
    srv.kill()
    finish(srv)
    out = cli.stdout + cli.stderr
    assert cli.returncode == 0 and "Summary: Latency is" in out, out
    assert int(re.search(r"Total (\d+) observations", out).group(1)) > 1000, out


def test_a_failed_rconnect_stays_failed_rather_than_fall_back_to_kernel_tcp(one_host, free_port):
    """librspreload answers a failed rconnect by moving the socket to the kernel's TCP and connecting
    again there. Here a kernel listener (not an rsocket) holds the port: iperf3 fails, saying why,
    and the listener is sent the connection manager's request at most, never iperf3's bytes."""
    need("iperf3")
    got = []

    def listen(sock):
        sock.settimeout(15)
        try:
            while True:
                c, _ = sock.accept()
                c.settimeout(2)
                try:
                    got.append(c.recv(4096))
                except OSError:
                    got.append(b"")
                c.close()
        except OSError:
            pass

    with socket.socket() as ear:
        ear.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ear.bind(("127.0.0.1", free_port))
        ear.listen()
        t = threading.Thread(target=listen, args=(ear,))
        t.start()
        cli = run(rsocket_argv(one_host["client"], ["iperf3", "-c", "127.0.0.1", "-p", str(free_port), "-t", "1"]),
                  timeout=CMD_TIMEOUT)
        ear.close()
        t.join(timeout=20)
    assert cli.returncode != 0, cli.stdout + cli.stderr
    assert "no fall back to the kernel's TCP" in cli.stderr, cli.stderr
    assert all(not data or data.startswith(b"VRCM") for data in got), got


def test_udp_sockets_are_left_to_the_kernel_with_a_line(one_host):
    """rsockets carry streams; librspreload gives a UDP socket the kernel's, and the program is told."""
    code = "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print('udp', s.fileno() >= 0)"
    r = run(rsocket_argv(one_host["client"], ["python3", "-c", code]), timeout=30)
    assert r.returncode == 0 and "udp True" in r.stdout, r.stdout + r.stderr
    assert "IP sockets of type 2 are not carried by vrdma" in r.stderr, r.stderr
