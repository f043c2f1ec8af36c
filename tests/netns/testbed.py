#!/usr/bin/env python3
"""Two network namespaces joined by one or more veth pairs: a two-host test bed on one machine.

    A (server side)                      B (client side)
    rbv1a<sfx> 10.77.1.1/24  <-- veth -->  rbv1b<sfx> 10.77.1.2/24     rail 1
    rbv2a<sfx> 10.77.2.1/24  <-- veth -->  rbv2b<sfx> 10.77.2.2/24     rail 2 (rails=2)

Only private addresses, only inside the namespaces, no routes out, no link to the host's own
namespace; `lo` is up in both. IPv6 is off inside the namespaces by default, so each veth carries
exactly one address (and libfabric's tcp provider lists exactly one fabric per interface).
Names carry the pid and a sequence number, so parallel or leftover runs never collide.

Needs root and iproute2 (`ip netns`). Every command is bounded by a timeout.

Python:
    from testbed import Testbed
    with Testbed(rails=2) as bed:
        bed.exec_argv("a", ["rdmabench", "--server", "--addr", f"{bed.addr(1, 'a')}:7471"])
        bed.iface(1, "b")        # the client's rail-1 interface (= its libfabric tcp domain)

Command line (for poking at it by hand):
    testbed.py up [--rails 2] [--tag NAME]   create, print names as JSON
    testbed.py down --tag NAME [--rails 2]   delete (also kills what still runs inside)
    testbed.py reap                          delete beds whose creating process is gone
    testbed.py check                         exit 0 when a bed can be built here, else print why
"""
import argparse
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

CMD_TIMEOUT = 10      # seconds for any one `ip` command
IFNAMSIZ = 15         # longest interface name Linux accepts
NS_PREFIX = "rbns-"
AUTO_NS = re.compile(r"^rbns-(\d+)-(\d+)-([ab]|h\d+)$")   # names made by Testbed() or Mesh() with no tag
_seq = itertools.count(1)


class TestbedError(RuntimeError):
    __test__ = False  # not a pytest test class


def _ip(*args, check=True, timeout=CMD_TIMEOUT):
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise TestbedError(f"ip {' '.join(args)}: {r.stderr.strip() or f'exit {r.returncode}'}")
    return r


def available():
    """(True, "") when a bed can be built here, else (False, reason)."""
    if os.geteuid() != 0:
        return False, "network namespaces need root (euid is %d)" % os.geteuid()
    if not shutil.which("ip"):
        return False, "iproute2 `ip` not found"
    try:
        r = _ip("netns", "list", check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"`ip netns list` failed: {e}"
    if r.returncode != 0:
        return False, f"`ip netns` unavailable: {r.stderr.strip()}"
    return True, ""


def list_namespaces():
    r = _ip("netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_inside(ns):
    """SIGKILL whatever still runs inside namespace ns (only processes of this bed)."""
    r = _ip("netns", "pids", ns, check=False)
    for tok in r.stdout.split():
        try:
            os.kill(int(tok), signal.SIGKILL)
        except (ValueError, ProcessLookupError):
            pass


def delete_namespace(ns):
    _kill_inside(ns)
    r = _ip("netns", "del", ns, check=False)
    if r.returncode != 0 and ns in list_namespaces():
        raise TestbedError(f"ip netns del {ns}: {r.stderr.strip()}")


def reap_stale():
    """Delete namespaces left by earlier automatic beds whose creating process has died."""
    gone = []
    for ns in list_namespaces():
        m = AUTO_NS.match(ns)
        if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
            delete_namespace(ns)
            gone.append(ns)
    return gone


class Testbed:
    """Namespaces "a" (server) and "b" (client) joined by `rails` veth pairs."""

    __test__ = False  # not a pytest test class

    def __init__(self, rails=1, tag=None, ipv6=False):
        if not 1 <= rails <= 9:
            raise ValueError("rails must be 1..9")
        self.rails = rails
        self.ipv6 = ipv6
        if tag is None:
            seq = next(_seq)
            self.ns = {s: f"{NS_PREFIX}{os.getpid()}-{seq}-{s}" for s in "ab"}
            self.suffix = f"{os.getpid():x}x{seq:x}"
        else:
            if not re.fullmatch(r"[A-Za-z0-9]+", tag):
                raise ValueError("tag: letters and digits only")
            self.ns = {s: f"{NS_PREFIX}{tag}-{s}" for s in "ab"}
            self.suffix = tag
        for rail in range(1, rails + 1):
            for s in "ab":
                if len(self.iface(rail, s)) > IFNAMSIZ:
                    raise ValueError(f"interface name {self.iface(rail, s)} longer than {IFNAMSIZ}")
        self.created = []

    # --- names -------------------------------------------------------------------------------
    def iface(self, rail, side):
        """Interface of `side` ("a" or "b") on `rail` (1-based); libfabric tcp's domain name."""
        return f"rbv{rail}{side}{self.suffix}"

    def addr(self, rail, side):
        return f"10.77.{rail}.{1 if side == 'a' else 2}"

    def exec_argv(self, side, argv):
        """argv run inside namespace `side`. `ip netns exec` execs it, so a Popen's pid is argv's."""
        return ["ip", "netns", "exec", self.ns[side], *argv]

    def describe(self):
        return {"namespaces": self.ns, "rails": [
            {s: {"iface": self.iface(r, s), "addr": self.addr(r, s) + "/24"} for s in "ab"}
            for r in range(1, self.rails + 1)]}

    # --- life cycle --------------------------------------------------------------------------
    def up(self, ready_timeout=5.0):
        try:
            for s in "ab":
                _ip("netns", "add", self.ns[s])
                self.created.append(self.ns[s])
                if not self.ipv6:
                    # Before any veth exists, so none gets a link-local address. Absent with ipv6.disable=1.
                    subprocess.run(self.exec_argv(s, ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                                                      "net.ipv6.conf.default.disable_ipv6=1"]),
                                   capture_output=True, timeout=CMD_TIMEOUT)
                _ip("-n", self.ns[s], "link", "set", "lo", "up")
            for r in range(1, self.rails + 1):
                a, b = self.iface(r, "a"), self.iface(r, "b")
                # Created straight inside the namespaces: nothing ever appears in the host's namespace.
                _ip("link", "add", a, "netns", self.ns["a"], "type", "veth", "peer", "name", b, "netns", self.ns["b"])
                for s, dev in (("a", a), ("b", b)):
                    _ip("-n", self.ns[s], "addr", "add", f"{self.addr(r, s)}/24", "dev", dev)
                    _ip("-n", self.ns[s], "link", "set", dev, "up")
            self.wait_ready(ready_timeout)
        except BaseException:
            self.down()
            raise
        return self

    def wait_ready(self, timeout=5.0):
        """Wait until every veth end is operationally UP (IFF_RUNNING).

        Right after `link set up` a veth is UP but not yet RUNNING for a moment, and libfabric's tcp
        provider skips interfaces that are not running: it would list only `lo`.
        """
        deadline = time.monotonic() + timeout
        pending = [(s, self.iface(r, s)) for r in range(1, self.rails + 1) for s in "ab"]
        while pending:
            s, dev = pending[0]
            r = _ip("-j", "-n", self.ns[s], "link", "show", "dev", dev, check=False)
            state = json.loads(r.stdout)[0].get("operstate") if r.returncode == 0 and r.stdout.strip() else None
            if state == "UP":
                pending.pop(0)
                continue
            if time.monotonic() > deadline:
                raise TestbedError(f"{dev} in {self.ns[s]} not operationally UP after {timeout}s (state {state})")
            time.sleep(0.02)

    def traffic(self, rail, side):
        """Bytes received plus sent so far on side's rail interface (kernel counters)."""
        r = _ip("-j", "-s", "-n", self.ns[side], "link", "show", "dev", self.iface(rail, side))
        st = json.loads(r.stdout)[0]["stats64"]
        return st["rx"]["bytes"] + st["tx"]["bytes"]

    def cut(self, rail=1):
        """Delete rail's veth pair (both ends go): the peer vanishes without a FIN or RST."""
        _ip("-n", self.ns["a"], "link", "del", self.iface(rail, "a"))

    def down(self):
        errors = []
        for ns in reversed(self.created or list(self.ns.values())):
            try:
                delete_namespace(ns)
            except (TestbedError, OSError, subprocess.TimeoutExpired) as e:
                errors.append(str(e))
        self.created = []
        if errors:
            raise TestbedError("; ".join(errors))

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()
        return False


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up")
    up.add_argument("--rails", type=int, default=1)
    up.add_argument("--tag", default=f"m{os.getpid():x}")
    up.add_argument("--ipv6", action="store_true", help="keep IPv6 (link-local addresses) in the namespaces")
    down = sub.add_parser("down")
    down.add_argument("--tag", required=True)
    down.add_argument("--rails", type=int, default=1)
    sub.add_parser("reap")
    sub.add_parser("check")
    a = p.parse_args(argv)
    ok, why = available()
    if a.cmd == "check":
        print("ok" if ok else why)
        return 0 if ok else 1
    if not ok:
        print(f"testbed: {why}", file=sys.stderr)
        return 1
    if a.cmd == "up":
        bed = Testbed(a.rails, tag=a.tag, ipv6=a.ipv6).up()
        print(json.dumps(bed.describe(), indent=2))
    elif a.cmd == "down":
        Testbed(a.rails, tag=a.tag).down()
    elif a.cmd == "reap":
        for ns in reap_stale():
            print(f"deleted {ns}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
