#!/usr/bin/env python3
"""N hosts in N network namespaces, every two joined by a veth pair of their own: a full mesh, so
each link can be slowed (tc tbf) or cut on its own and a test knows exactly which pairs cross it.

    host i: namespace rbns-<pid>-<seq>-h<i>, address 10.78.0.<i+1>/32 on lo
    link i-j: veth rbm<i><j>x<sfx> (in host i) <-> rbm<j><i>x<sfx> (in host j), routing only
              10.78.0.<j+1> from i (and back), with the host address as the source

Only private addresses, only inside the namespaces. Needs root and iproute2; reuses testbed.py's
helpers (bounded `ip` commands, killing what runs inside at teardown, reaping stale beds).
"""
import itertools
import os
import subprocess
import time

import testbed
from testbed import CMD_TIMEOUT, NS_PREFIX, _ip

_seq = itertools.count(1)


class Mesh:
    __test__ = False

    def __init__(self, hosts=3):
        if not 2 <= hosts <= 9:
            raise ValueError("hosts must be 2..9")
        self.hosts = hosts
        seq = next(_seq)
        self.ns = [f"{NS_PREFIX}{os.getpid()}-{seq}-h{i}" for i in range(hosts)]
        self.suffix = f"{os.getpid() % 0xfffff:x}{seq:x}"
        self.created = []

    def addr(self, i):
        return f"10.78.0.{i + 1}"

    def iface(self, i, j):
        """Host i's end of the link to host j."""
        return f"rbm{i}{j}x{self.suffix}"

    def exec_argv(self, i, argv):
        return ["ip", "netns", "exec", self.ns[i], *argv]

    def up(self):
        try:
            for i, ns in enumerate(self.ns):
                _ip("netns", "add", ns)
                self.created.append(ns)
                subprocess.run(self.exec_argv(i, ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                                                  "net.ipv6.conf.default.disable_ipv6=1"]),
                               capture_output=True, timeout=CMD_TIMEOUT)
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "addr", "add", f"{self.addr(i)}/32", "dev", "lo")
            for i, j in itertools.combinations(range(self.hosts), 2):
                a, b = self.iface(i, j), self.iface(j, i)
                _ip("link", "add", a, "netns", self.ns[i], "type", "veth", "peer", "name", b, "netns", self.ns[j])
                for h, dev, other in ((i, a, j), (j, b, i)):
                    _ip("-n", self.ns[h], "link", "set", dev, "up")
                    _ip("-n", self.ns[h], "route", "add", f"{self.addr(other)}/32", "dev", dev, "src", self.addr(h))
            self.wait_ready()
        except BaseException:
            self.down()
            raise
        return self

    def wait_ready(self, timeout=5.0):
        deadline = time.monotonic() + timeout
        for i, j in itertools.permutations(range(self.hosts), 2):
            while True:
                r = _ip("-n", self.ns[i], "link", "show", "dev", self.iface(i, j), check=False)
                if "state UP" in r.stdout or "LOWER_UP" in r.stdout:
                    break
                if time.monotonic() > deadline:
                    raise testbed.TestbedError(f"{self.iface(i, j)} not up after {timeout}s")
                time.sleep(0.02)

    def slow(self, i, j, rate="50mbit"):
        """Token-bucket both directions of link i-j (netem is not in every kernel; tbf is)."""
        for h, dev in ((i, self.iface(i, j)), (j, self.iface(j, i))):
            _ip_tc(self.ns[h], ["qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", "32kbit",
                                "latency", "400ms"])

    def slow_host(self, h, rate="50mbit", egress_only=False):
        """Token-bucket every link of host h: the data it sends, and (unless egress_only) all it
        receives. Egress only, the pure acks host h sends pass the bucket: a host slow to send
        still acks at once, and a 50 Mbit/s bucket on its acks held what it received at 0.77 to
        0.88 x the others (its ack clock, not its receiving, was slowed)."""
        for j in range(self.hosts):
            if j == h:
                continue
            if egress_only:
                self._shape_data_only(self.ns[h], self.iface(h, j), rate)
                continue
            for i, dev in [(h, self.iface(h, j)), (j, self.iface(j, h))]:
                _ip_tc(self.ns[i], ["qdisc", "add", "dev", dev, "root", *_tbf(rate)])

    @staticmethod
    def _shape_data_only(ns, dev, rate):
        # Two classes of an htb that never shapes (the kernel here has no prio qdisc): class 1:2, the
        # default, holds the bucket; a TCP segment under 128 bytes, a pure ack (40 to 80 bytes of
        # headers, no payload), goes to class 1:1, unshaped. The burst is explicit: at 100gbit tc
        # computes a burst of 0 bytes, and every ack then waited for htb's timer (all of them
        # counted as overlimits), which a busy machine fires late.
        _ip_tc(ns, ["qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "2"])
        for cls in ("1:1", "1:2"):
            _ip_tc(ns, ["class", "add", "dev", dev, "parent", "1:", "classid", cls, "htb", "rate", "10gbit",
                        "burst", "4mb", "cburst", "4mb"])
        _ip_tc(ns, ["qdisc", "add", "dev", dev, "parent", "1:2", *_tbf(rate)])
        _ip_tc(ns, ["filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                    "match", "ip", "protocol", "6", "0xff", "match", "u16", "0x0000", "0xff80", "at", "2",
                    "flowid", "1:1"])

    def pids(self, i):
        r = _ip("netns", "pids", self.ns[i], check=False)
        return [int(t) for t in r.stdout.split()]

    def down(self):
        errors = []
        for ns in reversed(self.created):
            try:
                testbed.delete_namespace(ns)
            except (testbed.TestbedError, OSError, subprocess.TimeoutExpired) as e:
                errors.append(str(e))
        self.created = []
        if errors:
            raise testbed.TestbedError("; ".join(errors))

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()
        return False


def _tbf(rate):
    return ["tbf", "rate", rate, "burst", "32kbit", "latency", "400ms"]


def _ip_tc(ns, args):
    r = subprocess.run(["ip", "netns", "exec", ns, "tc", *args], capture_output=True, text=True, timeout=CMD_TIMEOUT)
    if r.returncode != 0:
        raise testbed.TestbedError(f"tc {' '.join(args)} in {ns}: {r.stderr.strip() or r.returncode}")
