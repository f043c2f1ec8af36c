"""vrdma in containers, FreeFlow's setting: each end runs in a container of its own (its own user,
network and mount namespaces, made with unshare inside one of tests/netns's network namespaces),
as root inside and an unprivileged uid outside, with the host's router socket bound into its
mount namespace. The router, in the host's namespaces, knows each container by its uid on the
host: containers of one uid are one tenant and connect; a container of another uid cannot reach
them."""
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT, rdmabench_path, run, wait_for_text

sys.path.insert(0, str(ROOT / "tests" / "netns"))
import testbed  # noqa: E402

BUILD = Path(rdmabench_path()).parent
VRDMAD, VRDMA_RUN, CTL = str(BUILD / "vrdmad"), str(BUILD / "vrdma-run"), str(BUILD / "vrdmactl")
TENANT, STRANGER = 4242, 4343
# Inside: a private tmpfs at /mnt, the host's socket bound onto /mnt/vrdma.sock, then the program.
INSIDE = ('mount -t tmpfs none /mnt && touch /mnt/vrdma.sock && mount --bind "$0" /mnt/vrdma.sock && '
          'exec env VRDMA_SOCKET=/mnt/vrdma.sock "$@"')


@pytest.fixture(scope="module")
def host():
    if os.geteuid() != 0:
        pytest.skip("containers need root to make their namespaces")
    for tool in ("unshare", "setpriv", "rping", "ibv_rc_pingpong"):
        if not shutil.which(tool):
            pytest.skip(f"not installed: {tool}")
    ok, why = testbed.available()
    if not ok:
        pytest.skip(f"netns test bed: {why}")
    probe = run(["setpriv", f"--reuid={TENANT}", f"--regid={TENANT}", "--clear-groups", "--", "unshare", "--user",
                 "--map-root-user", "--mount", "true"], timeout=10)
    if probe.returncode != 0:
        pytest.skip(f"this kernel does not let an unprivileged uid make a user namespace: {probe.stderr.strip()}")
    testbed.reap_stale()
    d = Path(tempfile.mkdtemp(prefix="vrdma-containers-"))
    d.chmod(0o755)  # the containers' uids reach the socket through it
    log = d / "router.log"
    router = subprocess.Popen([VRDMAD, "--socket", str(d / "vrdma.sock")], stderr=open(log, "w"))
    try:
        wait_for_text(log, "serving on")
        with testbed.Testbed(rails=1) as bed:
            yield {"bed": bed, "sock": str(d / "vrdma.sock")}
    finally:
        router.kill()
        router.wait()
        shutil.rmtree(d, ignore_errors=True)


def container(h, side, uid, argv):
    """argv in a container in namespace `side`, as root inside and `uid` on the host."""
    return h["bed"].exec_argv(side, ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
                                     "unshare", "--user", "--map-root-user", "--mount", "--",
                                     "sh", "-c", INSIDE, h["sock"], VRDMA_RUN, *argv])


def pair(h, server_argv, client_argv, client_uid=TENANT):
    srv = subprocess.Popen(container(h, "a", TENANT, server_argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    try:
        time.sleep(0.5)
        cli = run(container(h, "b", client_uid, client_argv), timeout=60)
        if cli.returncode != 0 and srv.poll() is None:
            srv.kill()
        out, _ = srv.communicate(timeout=60)
    finally:
        if srv.poll() is None:
            srv.kill()
    return srv.returncode, out, cli


def test_a_container_sees_vrdma0_as_its_uids_tenant(host):
    r = run(container(host, "a", TENANT, ["sh", "-c", "id -u; ibv_devices"]), timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0] == "0" and "vrdma0" in r.stdout  # root inside


def test_rping_between_two_containers_of_one_tenant(host, free_port):
    argv = ["rping", "-p", str(free_port), "-C", "20", "-S", "4000", "-V"]
    src, sout, cli = pair(host, [*argv, "-s", "-a", host["bed"].addr(1, "a")], [*argv, "-c", "-a", host["bed"].addr(1, "a")])
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert src == 0, sout
    stats = run([CTL, "--socket", host["sock"], "stats"], timeout=10).stdout
    assert f"uid-{TENANT}" in stats, stats  # the router knew both ends by their uid on the host


def test_rc_pingpong_between_two_containers_of_one_tenant(host, free_port):
    argv = ["ibv_rc_pingpong", "-p", str(free_port), "-c", "-g", "0", "-n", "200"]
    src, sout, cli = pair(host, argv, [*argv, host["bed"].addr(1, "a")])
    assert cli.returncode == 0 and "iters in" in cli.stdout, cli.stdout + cli.stderr
    assert src == 0, sout


def test_a_container_of_another_uid_cannot_reach_them(host, free_port):
    """Another uid is another tenant: its QP cannot connect to the first container's."""
    argv = ["ibv_rc_pingpong", "-p", str(free_port), "-c", "-g", "0", "-n", "10"]
    src, sout, cli = pair(host, argv, [*argv, host["bed"].addr(1, "a")], client_uid=STRANGER)
    assert cli.returncode != 0 or src != 0
    said = cli.stdout + cli.stderr + sout
    assert "vrdma-verbs: modify_qp to RTR" in said and "iters in" not in cli.stdout, said
