import functools
import json
import contextlib
import ctypes
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def rdmabench_path():
    return os.environ.get("RDMABENCH", str(ROOT / "build" / "rdmabench"))


@functools.lru_cache(maxsize=1)
def listing():
    """The registry as the binary has it (`rdmabench --list json`); empty when there is no binary,
    which the rdmabench fixture then reports."""
    path = rdmabench_path()
    if not os.access(path, os.X_OK):
        return {"transports": []}
    out = subprocess.run([path, "--list", "json"], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def listed_transports(*needs):
    """The -t values the e2e tests run between two processes, taken from the binary rather than
    written here: each user-facing entry's test variants that --list reports usable on this
    machine, with every capability in `needs` (e.g. "send", "peer_memory_readable")."""
    out = []
    for t in listing()["transports"]:
        if t["test_only"]:
            continue
        for variant in t["test_variants"]:
            label = f"{t['name']}:{variant}" if variant else t["name"]
            # An instance is listed under the name -t takes, or a provider layered on it ("tcp;ofi_rxm").
            found = [i for i in t["instances"] if i["name"] == label or i["name"].startswith(label + ";")]
            usable = [i for i in found if i["usable"] and all(i.get("caps", {}).get(n) for n in needs)]
            if usable:
                out.append(label)
    return out


_ROUTER = {}


def start_session_router():
    """vrdmad for the whole session, so -t vrdma is usable (and listed) like any other transport;
    every process the tests start finds it through VRDMA_SOCKET. A router that fails to start is
    an error here, not a transport quietly left out."""
    vrdmad = Path(rdmabench_path()).parent / "vrdmad"
    if not os.access(vrdmad, os.X_OK):
        return
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="rdmabench-e2e-vrdma-"))
    d.chmod(0o755)
    sock = d / "vrdma.sock"
    log = open(d / "vrdmad.log", "w")
    proc = subprocess.Popen([str(vrdmad), "--socket", str(sock)], stdout=log, stderr=log, start_new_session=True)
    deadline = time.time() + 10
    while not sock.exists():
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"vrdmad did not start: {(d / 'vrdmad.log').read_text()}")
        time.sleep(0.02)
    os.environ["VRDMA_SOCKET"] = str(sock)
    _ROUTER.update(proc=proc, dir=d)


def pytest_configure(config):
    config.addinivalue_line("markers", "transports(*caps): parametrize `transport` over listed_transports(*caps)")
    start_session_router()


def pytest_unconfigure(config):
    proc = _ROUTER.get("proc")
    if proc and proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=10)
    if _ROUTER.get("dir"):
        subprocess.run(["rm", "-rf", str(_ROUTER["dir"])])


def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker("transports")
    if marker is not None:
        metafunc.parametrize("transport", listed_transports(*marker.args))


@pytest.fixture(scope="session")
def rdmabench():
    path = rdmabench_path()
    if not os.access(path, os.X_OK):
        pytest.fail(f"rdmabench binary not found at {path}; run `make build` or set RDMABENCH")
    return path


@pytest.fixture
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_config(d, config=""):
    """`config` with a [router] table naming the cluster's link key, a file in `d` made once (mode
    0600, as vrdmad requires) and shared by every router started with it."""
    key = Path(d) / "link.key"
    if not key.exists():
        key.write_text(os.urandom(32).hex() + "\n")
        key.chmod(0o600)
    return f'{config}\n[router]\nlink_key = "{key}"\n'


def run(cmd, timeout=120, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def wait_for_text(path, text, timeout=20.0):
    """Waits until the file at `path` (a process's redirected output) contains `text`."""
    import time
    end = time.time() + timeout
    while time.time() < end:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} did not appear in {path} within {timeout} s: {path.read_text(errors='replace')!r}")


def remove_dead_shm_names():
    """Processes a test SIGKILLs cannot close their libfabric shm regions (/dev/shm/<pid>:...):
    remove those of dead pids so the suite leaves no 16 MiB leftovers behind."""
    shm = Path("/dev/shm")
    for p in shm.glob("*:*:*"):
        pid = p.name.split(":", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            p.unlink(missing_ok=True)
        except PermissionError:
            pass


@contextlib.contextmanager
def orphans_adopted():
    """Makes this process the subreaper of what it starts: a process rdmabench leaves behind,
    alive or not reaped, becomes a child of ours, where the test can see it, instead of vanishing
    into init."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def children_of(pid):
    return [int(p) for p in run(["pgrep", "-P", str(pid)]).stdout.split()]


def only_child_of(proc, timeout=20.0):
    """The pid of the one child process `proc` starts (rdmabench's --loopback server)."""
    end = time.time() + timeout
    while time.time() < end:
        kids = children_of(proc.pid)
        if kids:
            assert len(kids) == 1, kids
            return kids[0]
        time.sleep(0.02)
    raise AssertionError(f"process {proc.pid} started no child within {timeout} s")


def process_state(pid):
    """The state letter of `pid` (R, S, Z, ...), or None when no such process exists."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]
