"""vrdmad, the vrdma router, as a real daemon with real clients (tests/vrdma/vrdma_client.c on
libvrdma's C header): tenants from SO_PEERCRED and --config, limits, cleanup of a dead client,
a dead or stopped router making calls fail within a second, hostile packets, bad input."""
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import cluster_config, rdmabench_path, run, wait_for_text

BUILD = Path(rdmabench_path()).parent
VRDMAD = str(BUILD / "vrdmad")
CLIENT = str(BUILD / "vrdma_client")
CTL = str(BUILD / "vrdmactl")
NOBODY = 65534
# Tests that run a client as another uid (nobody) switch to it, which takes root (CI runs as root).
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="running a client as uid nobody needs root")


@pytest.fixture
def world():
    """A directory every uid can reach (the socket lives there); removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix="vrdma-"))
    d.chmod(0o755)
    yield d
    subprocess.run(["rm", "-rf", str(d)])


class Router:
    def __init__(self, d, config=None, extra=(), wrap=()):
        self.sock = str(d / "vrdma.sock")
        self.log = d / "vrdmad.log"
        cmd = [*wrap, VRDMAD, "--socket", self.sock]  # wrap: a command that execs it (prlimit)
        if config:
            cfg = d / "tenants.toml"
            cfg.write_text(config)
            cmd += ["--config", str(cfg)]
        cmd += list(extra)
        self.proc = subprocess.Popen(cmd, stderr=open(self.log, "w"), stdout=subprocess.DEVNULL)
        wait_for_text(self.log, "serving on")

    def stats(self):
        r = run([CTL, "--socket", self.sock, "stats"], timeout=10)
        assert r.returncode == 0, r.stderr
        rows = [line.split() for line in r.stdout.splitlines()[1:] if not line.startswith(("router:", "link:"))]
        return {row[0]: dict(zip(["clients", "pds", "mrs", "qps", "reg_bytes", "requests", "errors", "refused",
                                  "routed_ops", "routed_bytes", "throttled_ms", "queued"],
                                 map(int, row[1:]))) for row in rows}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)


@pytest.fixture
def router(world):
    started = []

    def start(config=None, extra=(), wrap=()):
        r = Router(world, config, extra, wrap)
        started.append(r)
        return r

    yield start
    for r in started:
        if r.proc.poll() is None:
            r.proc.kill()
            r.proc.wait()


@pytest.fixture
def linked_routers(world):
    """Two routers on this host, each listening on a loopback port under the cluster's key: QPs
    across them take the remote path, as between hosts. Stopped afterwards."""
    routers = []
    try:
        for name in ("a", "b"):
            d = world / name
            d.mkdir()
            d.chmod(0o755)
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            routers.append(Router(d, cluster_config(world), ["--listen", f"127.0.0.1:{port}"]))
        yield routers
    finally:
        for r in routers:
            r.stop()


def client(sock, *steps, user=None, **kw):
    return run([CLIENT, sock, *steps], timeout=30, user=user, **kw)


ME = f"uid-{os.geteuid()}"
TENANTS = f"""
[[tenant]]
name = "alpha"
uids = [0]
max_reg_bytes = "1M"

[[tenant]]
name = "beta"
uids = [{NOBODY}]
"""


@as_root
def test_clients_are_tenants_by_uid_and_limits_hold(router):
    r = router(TENANTS)
    a = client(r.sock, "pd", "mr:524288", "mr:524288", "!mr:4096", "dereg", "mr:4096")
    assert a.returncode == 0, a.stdout
    assert "ok open tenant=alpha" in a.stdout
    refused = [line for line in a.stdout.splitlines() if line.startswith("fail mr:4096")]
    assert refused and "errno=12" in refused[0] and "max_reg_bytes of 1048576 B" in refused[0], a.stdout
    b = client(r.sock, "pd", "mr:2097152", user=NOBODY)  # beta is not limited
    assert b.returncode == 0, b.stdout + b.stderr
    assert "ok open tenant=beta" in b.stdout


@as_root
def test_a_uid_in_no_tenant_is_refused(router):
    r = router(f'[[tenant]]\nname = "only"\nuids = [{NOBODY}]\n')
    stranger = NOBODY + 1
    out = client(r.sock, "pd", user=stranger)
    assert out.returncode == 1
    assert f"fail open errno=1: uid {stranger} is in no tenant of --config" in out.stdout
    assert f"refused: uid {stranger} is in no tenant" in r.log.read_text()
    # root in no tenant is let in for statistics alone
    out = client(r.sock, "pd")
    assert out.returncode == 1 and "fail pd errno=1: uid 0 is in no tenant of the config: as an admin it may read statistics" in out.stdout, out.stdout


@as_root
def test_without_a_config_every_uid_is_its_own_tenant(router):
    r = router()
    assert f"tenant=uid-{os.geteuid()}" in client(r.sock).stdout
    assert f"tenant=uid-{NOBODY}" in client(r.sock, user=NOBODY).stdout


def test_objects_are_checked_and_released(router):
    r = router()
    out = client(r.sock, "pd", "mr:65536", "!dealloc", "dereg", "!dereg", "dealloc", "!dealloc")
    assert out.returncode == 0, out.stdout
    assert "errno=16: PD" in out.stdout and "still has memory regions" in out.stdout


def test_a_peer_timeout_is_at_most_three_seconds(router):
    r = router()
    out = client(r.sock, "pd", "qp", "timeout:0", "timeout:537000000", "timeout:3000000000", "!timeout:3000000001")
    assert out.returncode == 0, out.stdout
    assert "fail timeout:3000000001 errno=22: peer timeout of 3000000001 ns: give at most 3000000000 ns" in out.stdout


def test_a_buffer_of_the_callers_keeps_its_contents_through_registration(router):
    r = router()
    out = client(r.sock, "pd", "user:4096", "user:1000000", "stats")
    assert out.returncode == 0, out.stdout
    assert "ok user:1000000" in out.stdout
    assert r.stats()[ME]["mrs"] == 0  # both deregistered


def test_a_killed_client_has_everything_released(router, world):
    r = router()
    ready = world / "ready"
    c = subprocess.Popen([CLIENT, r.sock, "pd", "mr:1048576", "mr:65536", f"wait:{ready}"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 10
    while not ready.exists() and time.time() < deadline:
        time.sleep(0.02)
    s = r.stats()[ME]
    assert (s["mrs"], s["reg_bytes"]) == (2, 1048576 + 65536)
    c.kill()
    c.wait()
    deadline = time.time() + 5
    while r.stats()[ME]["reg_bytes"] and time.time() < deadline:
        time.sleep(0.02)
    s = r.stats()[ME]
    assert (s["pds"], s["mrs"], s["reg_bytes"]) == (0, 0, 0)
    assert "released 1 PDs, 2 MRs" in r.log.read_text()


@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_a_dead_or_stuck_router_fails_calls_within_a_second(router, world, how):
    r = router()
    ready = world / "ready"
    c = subprocess.Popen([CLIENT, r.sock, "pd", f"wait:{ready}", "pd"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    deadline = time.time() + 10
    while not ready.exists() and time.time() < deadline:
        time.sleep(0.02)
    r.proc.send_signal(signal.SIGKILL if how == "killed" else signal.SIGSTOP)
    try:
        t0 = time.time()
        out, _ = c.communicate(input="", timeout=10)  # closing stdin ends the wait step
        elapsed = time.time() - t0
    finally:
        if how == "stopped":
            r.proc.send_signal(signal.SIGCONT)
    assert c.returncode == 1, out
    last = out.splitlines()[-1]
    assert last.startswith("fail pd errno="), out
    assert ("errno=110" in last) if how == "stopped" else ("errno=104" in last), last
    assert elapsed < 1.5, elapsed


def test_a_restarted_router_serves_again_on_the_same_socket(router):
    r = router()
    r.proc.kill()
    r.proc.wait()
    assert os.path.exists(r.sock)  # a killed router leaves its socket file
    r2 = router()
    assert client(r2.sock, "pd", "mr:4096").returncode == 0


def test_a_hostile_client_is_cut_off_and_others_are_served(router):
    r = router()
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.connect(r.sock)
        s.send(os.urandom(40))
        s.settimeout(5)
        assert s.recv(100) == b""  # disconnected
    assert client(r.sock, "pd", "mr:4096").returncode == 0
    assert "disconnected" in r.log.read_text()


def test_bad_input_is_one_line_and_exit_2(world):
    bad = world / "bad.toml"
    bad.write_text('[[tenant]]\nname = "a"\nuids = [1]\nmax_qps = -1\n')
    r = run([VRDMAD, "--socket", str(world / "s"), "--config", str(bad)], timeout=10)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "tenant[0].max_qps" in r.stderr, r.stderr
    r = run([VRDMAD, "--turbo"], timeout=10)
    assert r.returncode == 2 and "--turbo" in r.stderr
    for argv, named in ((["--listen", "localhost:7480"], "--listen localhost:7480"),
                        (["--listen", "127.0.0.1:0"], "--listen 127.0.0.1:0"),
                        (["--listen", "127.0.0.1:7480", "--fabric", "tcp"], "--fabric tcp"),
                        (["--fabric", "ofi:tcp"], "--fabric needs --listen"),
                        (["--peer", "127.0.0.1:7481"], "--peer needs --listen"),
                        (["--listen", "127.0.0.1:7480", "--peer", "somewhere"], "--peer somewhere"),
                        (["--threads", "0"], "--threads 0"), (["--threads", "two"], "--threads two")):
        r = run([VRDMAD, "--socket", str(world / "s"), *argv], timeout=10)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and named in r.stderr, (argv, r.stderr)
    assert not (world / "s").exists()


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_an_idle_router_sleeps(router):
    """Parked, it wakes for nothing: a second of idleness costs it (almost) no CPU."""
    r = router()
    assert client(r.sock, "pd", "mr:4096").returncode == 0
    before = cpu_seconds(r.proc.pid)
    time.sleep(1.0)
    assert cpu_seconds(r.proc.pid) - before <= 0.02


def test_data_threads_share_the_router_path(router, rdmabench):
    """--threads 2: two threads of their own move the same-host router-path QPs, each its share;
    a validated run of every op with two connections comes out right, and the stats say so."""
    r = router(extra=["--threads", "2"])
    p = run([rdmabench, "-t", "vrdma:router", "-o", f"socket={r.sock}", "--op", "write,read,send,fadd,write-imm",
             "--size", "64,64K", "--iters", "2000", "--threads", "2", "--validate"], timeout=120)
    assert p.returncode == 0, p.stderr
    line = next(l for l in run([CTL, "--socket", r.sock, "stats"], timeout=10).stdout.splitlines()
                if l.startswith("router:"))
    turns = [int(x) for x in line.split("busy turns ")[1].rstrip(")").split(",")]
    assert len(turns) == 2 and all(t > 0 for t in turns), line
    assert r.stats()[f"uid-{os.geteuid()}"]["routed_ops"] > 0


def test_rdmabench_finds_the_router_that_o_socket_names(router, world):
    """-o socket=PATH is where the pre-run check looks too, not only where the run connects."""
    r = router()
    env = {k: v for k, v in os.environ.items() if k != "VRDMA_SOCKET"}
    ok = run([rdmabench_path(), "-t", "vrdma", "-o", f"socket={r.sock}", "-s", "4K", "-n", "100", "--repeat", "1"],
             timeout=60, env=env)
    assert ok.returncode == 0, ok.stderr
    assert any(t["requests"] > 0 for t in r.stats().values())  # the run was this router's
    missing = run([rdmabench_path(), "-t", "vrdma", "-o", f"socket={world}/none.sock", "-s", "4K", "-n", "100"],
                  timeout=60, env=env)
    assert missing.returncode == 2
    assert f"no vrdma router at {world}/none.sock" in missing.stderr


def test_stats_json_holds_the_tables_figures(router, world):
    """vrdmactl stats --json: the table's figures as one object, for scripts. A client holding a
    64 KiB region and a QP shows in its tenant's row; root sees the router's own figures."""
    import json
    r = router()
    ready = world / "ready"
    holder = subprocess.Popen([CLIENT, r.sock, "pd", "mr:65536", "qp", f"wait:{ready}"], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while not ready.exists() and time.time() < deadline:
            time.sleep(0.02)
        out = run([CTL, "--socket", r.sock, "stats", "--json"], timeout=10)
        assert out.returncode == 0, out.stderr
        s = json.loads(out.stdout)
        me = next(t for t in s["tenants"] if t["tenant"] == ME)
        assert me["clients"] >= 2 and me["mrs"] == 1 and me["qps"] == 1 and me["reg_bytes"] == 65536, me
        assert me["ring_bytes"] > 0 and s["more_tenants"] == 0 and s["router"]["up_s"] > 0, s
        assert isinstance(s["links"], list)
    finally:
        holder.communicate(input=b"", timeout=30)
