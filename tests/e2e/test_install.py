"""What an installed vrdma gives a C programmer: `cmake --install` into a fresh prefix, then a
program built against libvrdma.so.1 with `pkg-config --cflags --libs vrdma`, and another with
CMake's find_package(vrdma), each run against a router (src/vrdma/lib/CMakeLists.txt)."""
import json
import os
import shutil
import subprocess
import time

from pathlib import Path

import pytest

from conftest import run
from test_vrdma_router import BUILD, router, world  # noqa: F401 (fixtures)

PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include <vrdma/vrdma.h>

int main(int argc, char **argv) {
  if (strcmp(vrdma_version(), VRDMA_VERSION_STRING) != 0) return 3;  /* the library is the header's */
  struct vrdma_context *ctx = vrdma_open(argc > 1 ? argv[1] : NULL);
  if (!ctx) { printf("open: %s\n", vrdma_last_error()); return 1; }
  struct vrdma_pd *pd = vrdma_alloc_pd(ctx);
  struct vrdma_mr *mr = pd ? vrdma_alloc_mr(pd, 4096, VRDMA_ACCESS_LOCAL_WRITE) : NULL;
  if (!mr) { printf("mr: %s\n", vrdma_last_error()); return 1; }
  printf("libvrdma %s: tenant %s, a region of %zu B\n", vrdma_version(), vrdma_tenant(ctx), mr->length);
  return 0;
}
"""

CONSUMER = """cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(vrdma 1 REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer vrdma::vrdma)
"""


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if not shutil.which("pkg-config") or not shutil.which("cc"):
        pytest.skip("pkg-config and a C compiler are needed")
    p = tmp_path_factory.mktemp("prefix")
    r = run(["cmake", "--install", str(BUILD), "--prefix", str(p)], timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return p


def libdir(prefix):
    return next(d.parent for d in prefix.rglob("libvrdma.so.1"))


def test_the_library_is_versioned_and_shows_its_api_alone(prefix):
    lib = libdir(prefix) / "libvrdma.so.1"
    dynamic = run(["readelf", "-d", "-W", str(lib)]).stdout
    assert "Library soname: [libvrdma.so.1]" in dynamic
    symbols = run(["nm", "-D", "--defined-only", str(lib)]).stdout.split("\n")
    names = {line.split()[-1].split("@")[0] for line in symbols if line.strip() and not line.endswith(" A VRDMA_1")}
    assert names and all(n.startswith("vrdma_") for n in names), sorted(n for n in names if not n.startswith("vrdma_"))
    assert (prefix / "include" / "vrdma" / "vrdma.h").exists()


def test_a_program_built_with_pkg_config_runs_against_the_router(prefix, router, tmp_path):
    r = router()
    env = {**os.environ, "PKG_CONFIG_PATH": str(libdir(prefix) / "pkgconfig")}
    flags = run(["pkg-config", "--cflags", "--libs", "vrdma"], env=env)
    assert flags.returncode == 0 and "-lvrdma" in flags.stdout, flags.stderr
    assert run(["pkg-config", "--modversion", "vrdma"], env=env).stdout.strip() == "1.0.0"
    (tmp_path / "main.c").write_text(PROGRAM)
    cc = run(["cc", "-o", str(tmp_path / "app"), str(tmp_path / "main.c"), *flags.stdout.split()])
    assert cc.returncode == 0, cc.stderr
    out = run([str(tmp_path / "app"), r.sock], env={**os.environ, "LD_LIBRARY_PATH": str(libdir(prefix))})
    assert out.returncode == 0 and out.stdout.startswith("libvrdma 1.0.0: tenant uid-0, a region of 4096 B"), out.stdout


def test_a_cmake_project_finds_vrdma(prefix, router, tmp_path):
    r = router()
    src, build = tmp_path / "src", tmp_path / "build"
    src.mkdir()
    (src / "main.c").write_text(PROGRAM)
    (src / "CMakeLists.txt").write_text(CONSUMER)
    conf = run(["cmake", "-S", str(src), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}"], timeout=120)
    assert conf.returncode == 0, conf.stdout + conf.stderr
    assert run(["cmake", "--build", str(build)], timeout=120).returncode == 0
    out = run([str(build / "consumer"), r.sock], env={**os.environ, "LD_LIBRARY_PATH": str(libdir(prefix))})
    assert out.returncode == 0 and "libvrdma 1.0.0" in out.stdout, out.stdout + out.stderr


@pytest.fixture(scope="module")
def root_tree(tmp_path_factory):
    """`cmake --install` into a fresh root (DESTDIR), as a package build does."""
    d = tmp_path_factory.mktemp("root")
    r = run(["cmake", "--install", str(BUILD)], env={**os.environ, "DESTDIR": str(d)}, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return d


def installed(root, name):
    found = sorted(root.rglob(name))
    assert found, f"{name} was not installed"
    return found[0]


@pytest.mark.parametrize("page,program", [("rdmabench.1.gz", "rdmabench"), ("vrdmad.8.gz", "vrdmad"),
                                          ("vrdmactl.8.gz", "vrdmactl"), ("vrdma-run.1.gz", "vrdma-run")])
def test_man_pages_are_the_programs_own_help(root_tree, page, program):
    """Each program's page is made from its --help at build time: every flag --help lists is on
    the page, so the two cannot drift."""
    if not shutil.which("help2man"):
        pytest.skip("help2man not installed: the programs' pages are left out")
    text = run(["man", "-l", "-P", "cat", str(installed(root_tree, page))], env={**os.environ, "MANWIDTH": "200"}).stdout
    helped = run([str(BUILD / program), "--help"]).stdout
    flags = {w.rstrip(",.;:)") for w in helped.replace("=", " ").split() if w.startswith("--") and len(w) > 3}
    text = text.replace("\u2010", "-").replace("\u2011", "-")
    missing = sorted(f for f in flags if f not in text)
    assert flags and not missing, missing


def test_the_library_has_a_page(root_tree):
    text = run(["man", "-l", "-P", "cat", str(installed(root_tree, "vrdma.3.gz"))]).stdout
    assert "vrdma_open" in text and "pkg-config" in text and "VRDMA_SOCKET" in text


def test_the_unit_verifies_and_ships_a_config_vrdmad_takes(root_tree, tmp_path):
    """systemd-analyze verify passes on the unit as installed (its paths moved into the fresh
    root, its man page found there), and vrdmad starts with the config the package ships."""
    unit = installed(root_tree, "vrdmad.service")
    prefix = next(p for p in installed(root_tree, "vrdmad").parents if (p / "bin").is_dir())
    text = unit.read_text()
    assert "User=vrdma" in text and "CapabilityBoundingSet=\n" in text and "RuntimeDirectory=vrdma" in text
    assert "Nice=-10\n" in text and "LimitNICE=-10\n" in text  # so the router, with no capability, gets -10 back
    here = str(prefix).removeprefix(str(root_tree))
    moved = tmp_path / "vrdmad.service"
    moved.write_text(text.replace(here + "/", str(prefix) + "/"))
    if shutil.which("systemd-analyze"):
        env = {**os.environ, "MANPATH": str(prefix / "share" / "man")}
        v = run(["systemd-analyze", "verify", str(moved)], env=env, timeout=60)
        assert v.returncode == 0, v.stdout + v.stderr
    config = installed(root_tree, "vrdmad.toml")
    sock = tmp_path / "s"
    p = subprocess.Popen([str(installed(root_tree, "vrdmad")), "--socket", str(sock), "--config", str(config)],
                         stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for_socket(sock, p), p.stderr.read() if p.poll() is not None else "no socket"
    finally:
        p.terminate()
        p.wait(timeout=10)


def wait_for_socket(sock, proc, seconds=5):
    deadline = time.time() + seconds
    while not sock.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    return sock.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="changing uid takes root")
def test_the_router_needs_no_privilege(world):
    """What the unit's User=vrdma and empty CapabilityBoundingSet promise: vrdmad as an
    unprivileged uid with no capabilities serves tenants of other uids (root's and a stranger's)."""
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is needed")
    from test_vrdma_router import NOBODY
    run_dir = world / "run"  # as the unit's RuntimeDirectory: the router's own, 0755
    run_dir.mkdir()
    os.chown(run_dir, NOBODY, NOBODY)
    sock = run_dir / "vrdma.sock"
    p = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all",
                          "--bounding-set=-all", "--no-new-privs", str(BUILD / "vrdmad"), "--socket", str(sock)],
                         stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for_socket(sock, p), p.stderr.read() if p.poll() is not None else "no socket"
        status = Path(f"/proc/{p.pid}/status").read_text()
        assert f"Uid:\t{NOBODY}" in status and "CapEff:\t0000000000000000" in status, status
        for user in (None, NOBODY + 1):
            c = run([str(BUILD / "vrdma_client"), str(sock), "pd", "mr:65536", "user:8192", "qp", "zero"], user=user,
                    timeout=30)
            assert c.returncode == 0, c.stdout + c.stderr
    finally:
        p.terminate()
        p.wait(timeout=10)


def complete(script, *words):
    """What bash offers for the last of `words` after `rdmabench`, with the installed script."""
    line = " ".join(words)
    r = run(["bash", "-c", f'source "{script}"; COMP_WORDS=(rdmabench {line}); COMP_CWORD={len(words)}; '
                           '_rdmabench; printf "%s\\n" "${COMPREPLY[@]}"'])
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_bash_completion_offers_what_this_build_accepts(root_tree):
    """The installed completion is made from the flag table and the registry: every flag of
    --help, every transport --list names, and the -o keys."""
    script = next(root_tree.rglob("bash-completion/completions/rdmabench"))
    helped = run([str(BUILD / "rdmabench"), "--help"]).stdout
    # Each option line of --help starts with its names: "  -n,--iters UINT ...".
    firsts = [line.split()[0] for line in helped.splitlines() if line.startswith("  -")]
    flags = {name.split("=")[0] for first in firsts for name in first.split(",") if name.startswith("--")}
    assert flags and flags <= complete(script, "--"), sorted(flags - complete(script, "--"))
    assert {"--threads", "--thread-gap"} == complete(script, "--thr")
    listed = json.loads(run([str(BUILD / "rdmabench"), "--list", "json"]).stdout)
    names = {t["name"] for t in listed["transports"] if not t["test_only"]}
    assert names and names <= complete(script, "-t", "")
    assert "ofi:shm" in complete(script, "-t", "ofi")
    assert "sndbuf=" in complete(script, "-o", "s")
    assert {"write-imm", "write"} == complete(script, "--op", "wri")


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    """`make deb`'s packages (cpack over the install rules), made into a fresh folder."""
    if not shutil.which("cpack") or not shutil.which("dpkg-deb") or not shutil.which("dpkg-shlibdeps"):
        pytest.skip("cpack, dpkg-deb and dpkg-shlibdeps (dpkg-dev) are needed")
    out = tmp_path_factory.mktemp("debs")
    r = run(["cpack", "--config", str(BUILD / "CPackConfig.cmake"), "-G", "DEB", "-B", str(out)], timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return {p.name.split("_")[0]: p for p in out.glob("*.deb")}


def field(deb, name):
    return run(["dpkg-deb", "-f", str(deb), name]).stdout.strip()


def test_the_packages_and_their_metadata(debs):
    assert sorted(debs) == ["rdmabench", "vrdma", "vrdma-dev"]
    assert field(debs["vrdma-dev"], "Depends") == f"vrdma (= {field(debs['vrdma'], 'Version')})"
    for name in ("rdmabench", "vrdma"):  # dpkg-shlibdeps found the Debian libraries they link
        depends = field(debs[name], "Depends")
        assert "libc6" in depends and "libfmt9" in depends and "libfabric1" in depends, depends
    files = {name: run(["dpkg-deb", "-c", str(deb)]).stdout for name, deb in debs.items()}
    for path in ("./usr/bin/vrdmad", "./usr/lib/libvrdma.so.1", "./usr/lib/systemd/system/vrdmad.service",
                 "./usr/bin/vrdma-run", "./usr/lib/libvrdma-verbs.so", "./usr/lib/libvrdma-rdmacm.so",
                 "./etc/vrdma/vrdmad.toml", "./usr/share/man/man8/vrdmad.8.gz", "./usr/share/doc/vrdma/copyright"):
        assert path in files["vrdma"], path
    for path in ("./usr/include/vrdma/vrdma.h", "./usr/lib/pkgconfig/vrdma.pc", "./usr/share/man/man3/vrdma.3.gz"):
        assert path in files["vrdma-dev"], path
    assert "./usr/share/bash-completion/completions/rdmabench" in files["rdmabench"]
    control = run(["dpkg-deb", "-I", str(debs["vrdma"])]).stdout
    assert all(f in control for f in ("conffiles", "postinst", "triggers", "shlibs")), control


def test_the_packages_installed_in_a_fresh_root_run(debs, world):
    """The three packages unpacked into a fresh root: its rdmabench runs, its vrdmad serves with
    the shipped config, a program builds against its header and library, and its unit verifies."""
    root = world / "root"
    for deb in debs.values():
        assert run(["dpkg-deb", "-x", str(deb), str(root)]).returncode == 0
    usr = root / "usr"
    assert run([str(usr / "bin" / "rdmabench"), "--version"]).stdout.startswith("rdmabench ")
    unit = (usr / "lib" / "systemd" / "system" / "vrdmad.service").read_text()
    assert "ExecStart=/usr/bin/vrdmad --socket /run/vrdma/vrdma.sock --config /etc/vrdma/vrdmad.toml" in unit
    sock = world / "pkg.sock"
    p = subprocess.Popen([str(usr / "bin" / "vrdmad"), "--socket", str(sock), "--config",
                          str(root / "etc" / "vrdma" / "vrdmad.toml")], stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for_socket(sock, p), p.stderr.read() if p.poll() is not None else "no socket"
        env = {**os.environ, "PKG_CONFIG_PATH": str(usr / "lib" / "pkgconfig")}
        flags = run(["pkg-config", "--cflags", "--libs", "vrdma"], env=env).stdout.split()
        (world / "main.c").write_text(PROGRAM)
        cc = run(["cc", "-o", str(world / "app"), str(world / "main.c"), *flags])
        assert cc.returncode == 0, cc.stderr
        out = run([str(world / "app"), str(sock)], env={**os.environ, "LD_LIBRARY_PATH": str(usr / "lib")})
        assert out.returncode == 0 and out.stdout.startswith("libvrdma 1.0.0"), out.stdout
    finally:
        p.terminate()
        p.wait(timeout=10)
    if shutil.which("systemd-analyze"):
        moved = world / "vrdmad.service"
        moved.write_text(unit.replace("/usr/bin/", f"{usr}/bin/").replace("/etc/vrdma/", f"{root}/etc/vrdma/"))
        v = run(["systemd-analyze", "verify", str(moved)], env={**os.environ, "MANPATH": str(usr / "share" / "man")})
        assert v.returncode == 0, v.stdout + v.stderr


def test_lintian_finds_no_error_but_the_placeholder_maintainer(debs):
    """lintian on the three packages: no error, but for the Maintainer address, which is for the
    one who publishes them to set (make deb DEB_MAINTAINER="Name <address>")."""
    if not shutil.which("lintian"):
        pytest.skip("lintian not installed (apt-get install lintian)")
    r = run(["lintian", "--no-tag-display-limit", *map(str, debs.values())], timeout=300)
    errors = [l for l in r.stdout.splitlines() if l.startswith("E:")]
    assert errors and all("bogus-mail-host" in e and "rdmabench@invalid" in e for e in errors), errors
