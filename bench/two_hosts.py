"""Two hosts on this machine for the comparison scripts: two network namespaces joined by a veth
(tests/netns/testbed.py), a vrdmad in each, listening on its veth address and linked over
libfabric's tcp provider under one cluster key, as a deployment's routers are. Needs root.

    with two_hosts.Hosts(build) as (a, b):
        subprocess.run(b.argv(["rdmabench", ...]))   # run in b's namespace, VRDMA_SOCKET set
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "netns"))
import testbed  # noqa: E402

ROUTER_PORT = 7600


class Host:
    """One side of the bed: its namespace, address and vrdmad."""

    def __init__(self, bed, side, d, build, nice=0):
        self.bed, self.side, self.sock = bed, side, str(d / f"{side}.sock")
        self.addr = bed.addr(1, side)
        key, config = d / "link.key", d / "cluster.toml"
        if not key.exists():
            key.write_text(os.urandom(32).hex() + "\n")
            key.chmod(0o600)
            config.write_text(f'[router]\nlink_key = "{key}"\n')
        pre = ["nice", "-n", str(nice)] if nice else []  # the systemd unit's Nice=, for instance
        self.router = subprocess.Popen(bed.exec_argv(side, [*pre, str(build / "vrdmad"), "--socket", self.sock, "--listen",
                                                            f"{self.addr}:{ROUTER_PORT}", "--fabric", "ofi:tcp",
                                                            "--config", str(config), "-q"]))
        for _ in range(100):
            if Path(self.sock).exists():
                return
            time.sleep(0.05)
        raise SystemExit(f"vrdmad on host {side} did not start")

    def argv(self, argv, nice=0):
        pre = ["nice", "-n", str(nice)] if nice else []
        return self.bed.exec_argv(self.side, [*pre, "env", f"VRDMA_SOCKET={self.sock}", *argv])

    def stop(self):
        self.router.kill()
        self.router.wait()


class Hosts:
    """Context manager: the bed up and both routers started; all gone afterwards."""

    def __init__(self, build, router_nice=0):
        self.build, self.nice = Path(build), router_nice

    def __enter__(self):
        ok, why = testbed.available()
        if not ok:
            raise SystemExit(f"no network namespace test bed here: {why}")
        testbed.reap_stale()
        self.dir = Path(tempfile.mkdtemp(prefix="two-hosts-"))
        self.bed = testbed.Testbed(rails=1).up()
        try:
            self.hosts = [Host(self.bed, "a", self.dir, self.build, self.nice)]
            self.hosts.append(Host(self.bed, "b", self.dir, self.build, self.nice))
        except BaseException:
            self.__exit__()
            raise
        return self.hosts

    def __exit__(self, *exc):
        for h in getattr(self, "hosts", []):
            h.stop()
        self.bed.down()
        shutil.rmtree(self.dir, ignore_errors=True)
        return False
