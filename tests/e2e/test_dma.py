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
