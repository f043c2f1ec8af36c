"""The dma transport between real processes: dma:cpu everywhere, dma:cuda where a GPU is."""
import json
import subprocess

import pytest

from conftest import run


def records(path):
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


@pytest.mark.parametrize("mode", ["bw", "lat"])
def test_dma_cpu_validated(rdmabench, tmp_path, mode):
    out = tmp_path / "r.jsonl"
    extra = ["--batch", "16", "--random-space", "1M", "--thread-gap", "512K"] if mode == "bw" else []
    r = run([rdmabench, "-t", "dma:cpu", "--op", "write,read", "--mode", mode, "--size", "16,4K,64K", "--iters", "500",
             "--threads", "2", "--validate", "--json", str(out)] + extra)
    assert r.returncode == 0, r.stderr
    recs = records(out)
    assert len(recs) == 6
    for rec in recs:
        assert rec["transport"] == "dma" and rec["provider"] == "cpu"
        assert rec["results"]["iterations"] == 1000
        assert rec["results"]["mops"] > 0


def test_dma_rejects_send(rdmabench):
    r = run([rdmabench, "-t", "dma:cpu", "--op", "send"], timeout=20)
    assert r.returncode == 2  # an input error, found before anything starts
    assert "--op send" in r.stderr and "dma" in r.stderr


def test_dma_unknown_engine(rdmabench):
    r = run([rdmabench, "-t", "dma:abacus"], timeout=20)
    assert r.returncode == 2
    assert "dma:cpu or dma:cuda" in r.stderr


def test_dma_cuda_runs_or_says_why_not(rdmabench, tmp_path):
    listing = run([rdmabench, "--list"]).stdout
    line = [l for l in listing.splitlines() if l.split()[:1] == ["dma:cuda"]][0]
    r = run([rdmabench, "-t", "dma:cuda", "--op", "write,read", "--size", "4K", "--iters", "200", "--batch", "16",
             "--json", str(tmp_path / "c.jsonl")], timeout=60)
    if "unusable" in line:
        assert r.returncode != 0
        assert "dma:cuda" in r.stderr
        pytest.skip("no usable GPU here: " + line.strip())
    assert r.returncode == 0, r.stderr
    assert len(records(tmp_path / "c.jsonl")) == 2


def test_dma_cpu_refuses_engine_sm(rdmabench):
    r = run([rdmabench, "-t", "dma:cpu", "-o", "engine=sm", "--op", "write", "--size", "64", "--iters", "10"], timeout=20)
    assert r.returncode == 2
    assert "-o engine=sm" in r.stderr and "dma:cuda" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_dma_sm_warps_out_of_range(rdmabench):
    r = run([rdmabench, "-t", "dma:cuda", "-o", "engine=sm", "-o", "sm_warps=0", "--op", "write", "--iters", "10"],
            timeout=20)
    assert r.returncode == 2
    assert "sm_warps=0" in r.stderr and "1 to 256" in r.stderr


def test_dma_list_says_why_engine_sm_is_absent(rdmabench):
    lines = [l for l in run([rdmabench, "--list"]).stdout.splitlines() if l.split()[:2] == ["dma:cuda", "engine=sm"]]
    assert len(lines) == 1
    assert " usable " in lines[0] or len(lines[0].split("unusable", 1)[1].strip()) > 10  # a reason, not just the verdict


@pytest.mark.parametrize("engine", ["copy", "sm"])
def test_dma_cuda_engine_validated(rdmabench, tmp_path, engine):
    """Every byte each cuda engine moved, checked (--validate): writes land in the device buffer and are
    copied back to the server's region for its check; reads bring the server's pattern back."""
    name = "dma:cuda" if engine == "copy" else "dma:cuda engine=sm"
    line = [l for l in run([rdmabench, "--list"]).stdout.splitlines()
            if l.startswith("  " + name + " ") or l.split()[:len(name.split())] == name.split()][0]
    if "unusable" in line:
        pytest.skip("no usable GPU engine here: " + line.strip())
    out = tmp_path / "v.jsonl"
    r = run([rdmabench, "-t", "dma:cuda", "-o", f"engine={engine}", "--op", "write,read", "--size", "16,256,4K,64K",
             "--iters", "300", "--threads", "2", "--batch", "16", "--random-space", "1M", "--thread-gap", "512K",
             "--validate", "--json", str(out)], timeout=120)
    assert r.returncode == 0, r.stderr
    recs = records(out)
    assert len(recs) == 8
    for rec in recs:
        assert rec["provider"] == ("cuda" if engine == "copy" else "cuda-sm")
        assert rec["results"]["iterations"] == 600
