import os
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def rdmabench():
    path = os.environ.get("RDMABENCH", str(ROOT / "build" / "rdmabench"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"rdmabench binary not found at {path}; run `make build` or set RDMABENCH")
    return path


@pytest.fixture
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
