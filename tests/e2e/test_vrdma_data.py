"""vrdma's data path between real processes: tenants cannot reach each other's memory, and a peer
or router killed mid-stream ends the run with an error in bounded time, never a hang."""
import os
import signal
import subprocess
import time

import pytest

from conftest import run, wait_for_text
from test_vrdma_router import BUILD, NOBODY, Router, as_root, linked_routers, router, world  # noqa: F401 (fixtures)

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


@as_root
def test_a_rate_limited_tenant_gets_its_rate_while_another_runs_unthrottled(rdmabench, router, world):
    """Two tenants stream 64 B WRITEs at once; the limited one (router path, token buckets) must
    land within 10% of its 20,000 ops/s, the other far above it."""
    limit = 20000
    r = router(f'[[tenant]]\nname = "limited"\nuids = [0]\nrate_ops = {limit}\n\n'
               f'[[tenant]]\nname = "free"\nuids = [{NOBODY}]\n')
    env = {**os.environ, "VRDMA_SOCKET": r.sock}
    outs = {name: world / f"{name}.jsonl" for name in ("limited", "free")}
    for f in outs.values():
        f.touch()
        f.chmod(0o666)
    args = ["-t", "vrdma", "--op", "write", "--size", "64", "--duration", "3", "--depth", "64"]
    procs = {
        "limited": subprocess.Popen([rdmabench, *args, "--json", str(outs["limited"])], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True),
        "free": subprocess.Popen([rdmabench, *args, "--json", str(outs["free"])], env=env, user=NOBODY,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True),
    }
    for name, p in procs.items():
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, f"{name}: {err}"
    import json
    rate = {name: json.loads(f.read_text().splitlines()[0])["results"]["mops"] * 1e6 for name, f in outs.items()}
    assert abs(rate["limited"] - limit) <= 0.1 * limit, rate
    assert rate["free"] > 3 * limit, rate
    stats = r.stats()
    assert stats["limited"]["errors"] == 0 and stats["free"]["errors"] == 0
    assert stats["limited"]["routed_ops"] > 0 and stats["limited"]["throttled_ms"] > 1000  # its requests waited
    assert stats["free"]["routed_ops"] == 0  # the direct path: the router moved none of its bytes


def test_each_qp_gets_its_own_rate(rdmabench, router, world):
    """qp_rate_ops limits every QP of the tenant by itself: two threads (a QP each) both land
    within 10% of the per-QP rate, so the tenant gets twice it."""
    limit = 10000
    r = router(f'[[tenant]]\nname = "perqp"\nuids = [{os.geteuid()}]\nqp_rate_ops = {limit}\n')
    out = world / "r.jsonl"
    p = run([rdmabench, "-t", "vrdma", "-o", f"socket={r.sock}", "--op", "write", "--size", "64", "--duration", "2",
             "--depth", "64", "--threads", "2", "--json", str(out)], timeout=60)
    assert p.returncode == 0, p.stderr
    import json
    rec = json.loads(out.read_text().splitlines()[0])
    rates = [t["mops"] * 1e6 for t in rec["results"]["per_thread"]]
    assert len(rates) == 2 and all(abs(x - limit) <= 0.1 * limit for x in rates), rates
    assert r.stats()["perqp"]["throttled_ms"] > 500


@as_root
def test_zero_length_rdma_ops_check_no_key_as_on_infiniband(linked_routers):
    """UCX flushes a QP with a zero-length RDMA WRITE under rkey 0, which vrdma refused: an op
    that moves nothing is not checked against a key on InfiniBand. WRITE, READ and WRITE with
    immediate of zero bytes succeed on the direct path, the router path and to another host's
    router (the immediate arriving)."""
    a, b = linked_routers
    out = run([str(BUILD / "vrdma_client"), a.sock, "zero", "zero-router", f"zero-remote:{b.sock}"], timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


@as_root
def test_a_qp_says_whether_the_router_moves_its_bytes(linked_routers):
    """rdmabench's target spun on the last byte of a WRITE when its QP's peer was on another host,
    as on the direct path, and the routers that move those bytes waited for its time slice: 56 us
    one way at p50, 2 ms at p99, across two namespace hosts. vrdma_qp_router_path tells a program
    which path its QP took (0 direct, 1 router path or another host), and -t vrdma polls then."""
    a, b = linked_routers
    out = run([str(BUILD / "vrdma_client"), a.sock, "path", "path-router", f"path-remote:{b.sock}"], timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


@as_root
def test_eight_sges_gather_and_scatter_on_every_path(linked_routers):
    """Programs ask a verbs device for more SGEs than 4 (UCX: 5 on RC, 6 on UD). A WRITE gathered
    from 8 SGEs, a READ scattered into 8 and a SEND of 8 into a receive of 8 land byte for byte on
    the direct path, the router path and to another host's router, whose fabric takes only 4
    pieces a post (the op is split and completes once)."""
    a, b = linked_routers
    out = run([str(BUILD / "vrdma_client"), a.sock, "sges", "sges-router", f"sges-remote:{b.sock}"], timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_deregistered_key_fails_though_the_library_kept_what_it_checked(router):
    """The direct path keeps a copy of the last local region and the last peer key a QP checked,
    so that a 64 B WRITE does not take the context's lock (a third of its cost). A request naming
    either after its deregistration must still fail: LOC_PROT_ERR for the local region (its memory
    is unmapped by then: a stale copy would copy from it), REM_ACCESS_ERR for the peer's."""
    r = router()
    out = run([str(BUILD / "vrdma_client"), r.sock, "stale-keys"], timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_forked_child_writes_its_own_copy_of_registered_memory(router):
    """vrdma puts shared memory under a registered buffer (and vrdma_alloc_mr's regions are shared
    memory): a forked child's writes to its copy reached the parent. The child gets private
    copies, holding what the parent had, as Linux gives children of RDMA programs since 5.13."""
    r = router()
    out = run([str(BUILD / "vrdma_client"), r.sock, "fork-copies"], timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_buffer_of_more_than_2_gib_registers_with_its_contents(router):
    """Probe 14: vrdma_reg_mr of a caller's buffer of 2 GiB or more failed with EFAULT: its bytes
    are copied into the shared memory with pwrite, which Linux cuts at 0x7ffff000 B a call."""
    r = router()
    out = run([str(BUILD / "vrdma_client"), r.sock, "pd", f"user:{(2 << 30) + 4096}"], timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_forked_childs_calls_on_what_it_inherited_fail_and_leave_the_parent_be(router):
    """Probe 14: a forked child shares its parent's connection to the router and its rings, so
    its vrdma_dereg_mr of an inherited region deregistered the parent's, and a poll of an
    inherited CQ would take the parent's completions; mapping the memfd under a registered buffer
    it inherited, it wrote the parent's bytes. In the child those calls now fail (ECONNRESET, as
    on a router gone) and those memfds are empty; the parent goes on with its region, PD and CQ,
    its buffer as it was."""
    r = router()
    out = run([str(BUILD / "vrdma_client"), r.sock, "fork-orphan"], timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_forked_child_that_cannot_have_its_copy_cannot_touch_the_memory(router):
    """Where the child's copy cannot be made (its address space capped below it; in probe 13, a
    parent that had used up its mappings), the child got zeros in place of its parent's bytes,
    or kept sharing them; and once the pages were taken away instead, its first touch waited
    for ever in the write fence's handler (the buffer had been fenced at its registration). The
    child now dies of SIGSEGV at its first touch, and the parent's bytes stay as they were."""
    r = router()
    out = run([str(BUILD / "vrdma_client"), r.sock, "fork-starved"], timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
