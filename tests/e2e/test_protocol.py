"""The control protocol against peers that misbehave: another version, malformed or oversized
messages, idle, stopped or silent peers, and many clients at once. Each test plays the hostile side
with a raw socket (or a stopped process) beside the real binary."""
import json
import os
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import children_of, remove_dead_shm_names, run, wait_for_text

MAX_MESSAGE = 1024 * 1024


def send_frame(sock, payload, kind=b"J"):
    sock.sendall(kind + struct.pack("<I", len(payload)) + payload)


def recv_frame(sock, timeout=10.0):
    """One frame as (kind, payload), or None when the peer closed first."""
    sock.settimeout(timeout)
    buf = b""
    while len(buf) < 5:
        chunk = sock.recv(5 - len(buf))
        if not chunk:
            return None
        buf += chunk
    kind, n = buf[:1], struct.unpack("<I", buf[1:])[0]
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return kind, data


def recv_message(sock, timeout=10.0):
    frame = recv_frame(sock, timeout)
    assert frame is not None, "the peer closed without a message"
    assert frame[0] == b"J"
    return json.loads(frame[1])


@pytest.fixture
def server(rdmabench, free_port, tmp_path):
    """A server on 127.0.0.1 with --timeout 2 (the wait for a hello); yields (port, log path, process)."""
    log = tmp_path / "server.err"
    with open(log, "w") as err:
        proc = subprocess.Popen([rdmabench, "--server", "--addr", f"127.0.0.1:{free_port}", "--timeout", "2"],
                                stderr=err, start_new_session=True)
    try:
        wait_for_text(log, "listening")
        yield free_port, log, proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
            proc.wait(timeout=40)
        remove_dead_shm_names()


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def client_run(rdmabench, port, *extra, timeout=60):
    return run([rdmabench, "--addr", f"127.0.0.1:{port}", "-t", "tcp", "--op", "write", "-n", "200",
                "--size", "64", *extra], timeout=timeout)


def test_hello_of_another_version_is_refused_with_both_versions_named(server):
    port, log, _ = server
    with connect(port) as s:
        send_frame(s, json.dumps({"type": "hello", "version": 1, "software": "0.0.1"}).encode())
        msg = recv_message(s)
    assert msg["type"] == "error"
    assert "protocol 1 (rdmabench 0.0.1)" in msg["message"]
    assert "same rdmabench version" in msg["message"]
    wait_for_text(log, "protocol 1")


def test_client_refuses_a_server_of_another_version(rdmabench, free_port):
    with socket.create_server(("127.0.0.1", free_port)) as listener:
        client = subprocess.Popen([rdmabench, "--addr", f"127.0.0.1:{free_port}", "-t", "tcp", "--timeout", "5"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        conn, _ = listener.accept()
        with conn:
            hello = recv_message(conn)
            assert hello["type"] == "hello" and isinstance(hello["version"], int)
            send_frame(conn, json.dumps({"type": "ready", "version": hello["version"] + 1, "software": "9.9.9"}).encode())
            _, err = client.communicate(timeout=15)
    assert client.returncode == 1
    assert f"speaks control protocol {hello['version'] + 1} (rdmabench 9.9.9)" in err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("payload, field", [
    (b'{"type": "hello", "version": 4}', "software"),
    (b'[1, 2, 3]', None),
    (b'{"type": "hello", "version": 4, "software": "x", "rail_ips": [], "spec": {"threads": "many"}}', "spec"),
    (b'{"type": "bye"}', None),
    (b'not json at all', None),
])
def test_malformed_hello_gets_an_error_and_the_server_goes_on(rdmabench, server, payload, field):
    port, log, proc = server
    with connect(port) as s:
        send_frame(s, payload)
        msg = recv_message(s)
    assert msg["type"] == "error"
    assert "protocol error" in msg["message"] or "expected" in msg["message"], msg
    if field:
        assert f"'{field}'" in msg["message"]
    assert client_run(rdmabench, port).returncode == 0
    assert proc.poll() is None


def test_oversized_frame_is_refused_from_its_header(server):
    port, log, _ = server
    with connect(port) as s:
        t0 = time.time()
        s.sendall(b"J" + struct.pack("<I", 1 << 30))  # claims 1 GiB, sends nothing more
        msg = recv_message(s)
        assert time.time() - t0 < 1.5  # refused at once, not after waiting for the payload
    assert msg["type"] == "error"
    assert f"over the {MAX_MESSAGE} B" in msg["message"]


def test_idle_connections_do_not_hold_up_a_real_client(rdmabench, server):
    port, log, _ = server
    idle = [connect(port) for _ in range(3)]
    try:
        t0 = time.time()
        r = client_run(rdmabench, port)
        took = time.time() - t0
        assert r.returncode == 0, r.stderr
        assert took < 2.0, f"a real client took {took:.1f} s beside 3 idle connections"
        # and the idle ones are dropped after the server's --timeout (2 s), with a reason
        for s in idle:
            msg = recv_message(s, timeout=10)
            assert msg["type"] == "error" and "sent nothing for 2 s" in msg["message"]
    finally:
        for s in idle:
            s.close()


def test_fifty_simultaneous_connects_are_all_served(server):
    port, log, _ = server
    socks = [connect(port) for _ in range(50)]
    try:
        for s in socks:
            send_frame(s, json.dumps({"type": "hello", "version": 1, "software": "old"}).encode())
        answered = sum(1 for s in socks if recv_message(s, timeout=30)["type"] == "error")
    finally:
        for s in socks:
            s.close()
    assert answered == 50


def test_many_real_clients_at_once(rdmabench, server):
    port, log, _ = server
    clients = [subprocess.Popen([rdmabench, "--addr", f"127.0.0.1:{port}", "-t", "tcp", "--op", "write", "-n", "300",
                                 "--size", "64", "--validate"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    results = [c.communicate(timeout=120) for c in clients]
    for c, (out, err) in zip(clients, results):
        assert c.returncode == 0, err
        assert "write bw" in out


def measuring_shm_client(rdmabench, port, log):
    """A 30 s ofi:shm write stream with --timeout 2, returned once the server serves it and it is
    past its start."""
    client = subprocess.Popen([rdmabench, "--addr", f"127.0.0.1:{port}", "-t", "ofi:shm", "--op", "write",
                               "--duration", "30", "--timeout", "2"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_text(log, "run from")
    time.sleep(0.5)  # into the stream: nothing announces it, and a little more of it changes nothing
    return client


def test_a_stopped_client_is_dropped_within_its_timeout(rdmabench, server):
    port, log, _ = server
    client = measuring_shm_client(rdmabench, port, log)
    try:
        client.send_signal(signal.SIGSTOP)
        t0 = time.time()
        # the run's control messages or its setup's exchange notice it, whichever it was in
        wait_for_text(log, "at 127.0.0.1 sent nothing for 2 s", timeout=15)
        # its 2 s --timeout, then the bounded join of workers that may be stuck on the stopped peer
        assert time.time() - t0 < 10
        # meanwhile, and after, other clients are served
        assert client_run(rdmabench, port).returncode == 0
    finally:
        client.kill()
        client.wait()


def test_client_facing_a_frozen_server_gives_up_within_its_timeout(rdmabench, server):
    port, log, proc = server
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        t0 = time.time()
        r = client_run(rdmabench, port, "--timeout", "2", timeout=30)
        took = time.time() - t0
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    assert r.returncode == 1
    assert "server at 127.0.0.1 sent nothing for 2 s" in r.stderr
    assert took < 6


def test_client_facing_a_silent_listener_gives_up_within_its_timeout(rdmabench, free_port):
    with socket.create_server(("127.0.0.1", free_port)) as listener:  # never accepts, never answers
        t0 = time.time()
        r = run([rdmabench, "--addr", f"127.0.0.1:{free_port}", "-t", "tcp", "--timeout", "2"], timeout=30)
        took = time.time() - t0
    assert r.returncode == 1
    assert "sent nothing for 2 s" in r.stderr
    assert took < 6


def test_a_killed_run_process_leaves_no_shared_memory_behind(rdmabench, server):
    port, log, proc = server
    client = measuring_shm_client(rdmabench, port, log)
    try:
        kids = children_of(proc.pid)
        assert len(kids) == 1
        run_pid = kids[0]
        assert list(Path("/dev/shm").glob(f"{run_pid}:*")), "the run's shm regions should exist while it runs"
        os.kill(run_pid, signal.SIGKILL)
        wait_for_text(log, f"process {run_pid} died of signal 9")
        time.sleep(0.2)
        assert not list(Path("/dev/shm").glob(f"{run_pid}:*"))
    finally:
        client.kill()
        client.wait()
