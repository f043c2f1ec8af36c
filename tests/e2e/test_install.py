"""What an installed vrdma gives a C programmer: `cmake --install` into a fresh prefix, then a
program built against libvrdma.so.1 with `pkg-config --cflags --libs vrdma`, and another with
CMake's find_package(vrdma), each run against a router (src/vrdma/lib/CMakeLists.txt)."""
import os
import shutil
import subprocess
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
