"""vrdma's data path between real processes: tenants cannot reach each other's memory, and a peer
or router killed mid-stream ends the run with an error in bounded time, never a hang."""
import os
import signal
import subprocess
import time

import pytest

from conftest import run, wait_for_text
from test_vrdma_router import BUILD, NOBODY, Router, as_root, router, world  # noqa: F401 (fixtures)

ATTACK = str(BUILD / "vrdma_attack")


@as_root
def test_another_tenant_reaches_nothing_of_a_tenants_memory(router, world):
    r = router(f'[[tenant]]\nname = "alpha"\nuids = [0]\n\n[[tenant]]\nname = "beta"\nuids = [{NOBODY}]\n')
    info = world / "victim.txt"
    victim = subprocess.Popen([ATTACK, r.sock, "victim", str(info)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    deadline = time.time() + 10
    while not (info.exists() and info.read_text().endswith("\n")) and time.time() < deadline:
        time.sleep(0.02)
    a = run([ATTACK, r.sock, "attack", str(info), "10000"], timeout=120, user=NOBODY)
    assert a.returncode == 0, a.stdout + a.stderr
    lines = a.stdout.splitlines()
    assert "connect errno=2" in lines, a.stdout  # another tenant's QP does not exist for beta
    assert "writes ok=0 failed=10000" in lines, a.stdout
    assert "reads ok=0 failed=10000" in lines, a.stdout
    out, _ = victim.communicate(input="", timeout=30)
    sums = [l for l in out.splitlines() if l.startswith("checksum")]
    assert len(sums) == 2 and sums[0] == sums[1], out


def stream(rdmabench, sock, port, **kw):
    server = subprocess.Popen([rdmabench, "--server", "--once", "--addr", f"127.0.0.1:{port}", "-q"],
                              env={**os.environ, "VRDMA_SOCKET": sock}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    client = subprocess.Popen([rdmabench, "--addr", f"127.0.0.1:{port}", "-t", "vrdma", "-o", f"socket={sock}",
                               "--op", "write", "--size", "4K", "--duration", "30", "--timeout", "5"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    return server, client


def running(client, seconds=1.0):
    time.sleep(seconds)
    assert client.poll() is None, client.communicate()


def test_a_killed_peer_ends_the_run_with_an_error(rdmabench, router, free_port):
    r = router()
    server, client = stream(rdmabench, r.sock, free_port)
    try:
        running(client)
        server.send_signal(signal.SIGKILL)
        t0 = time.time()
        _, err = client.communicate(timeout=20)
        assert client.returncode != 0
        assert time.time() - t0 < 8
        assert err.strip(), "the client says why"
    finally:
        for p in (server, client):
            if p.poll() is None:
                p.kill()
    deadline = time.time() + 5
    while r.stats().get(f"uid-{os.geteuid()}", {}).get("qps", 0) and time.time() < deadline:
        time.sleep(0.05)
    assert r.stats()[f"uid-{os.geteuid()}"]["qps"] == 0  # both sides' QPs released


def test_a_killed_router_fails_its_clients_within_a_second_and_a_new_one_serves(rdmabench, router, free_port):
    r = router()
    server, client = stream(rdmabench, r.sock, free_port)
    try:
        running(client)
        r.proc.send_signal(signal.SIGKILL)
        t0 = time.time()
        _, err = client.communicate(timeout=20)
        elapsed = time.time() - t0
        assert client.returncode != 0, err
        assert "router is gone" in err or "peer" in err, err
        assert elapsed < 2.0, elapsed
    finally:
        for p in (server, client):
            if p.poll() is None:
                p.kill()
    r2 = router()
    again = run([rdmabench, "-t", "vrdma", "-o", f"socket={r2.sock}", "--op", "write,send", "--size", "64",
                 "--iters", "2000", "--validate"], timeout=60)
    assert again.returncode == 0, again.stderr
