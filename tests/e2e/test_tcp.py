"""The kernel TCP transport between real processes, with validation, and its options."""
import json

import pytest

from conftest import run


@pytest.mark.parametrize("mode", ["bw", "lat"])
def test_tcp_transport_validated(rdmabench, tmp_path, mode):
    out = tmp_path / "r.jsonl"
    extra = ["--threads", "2", "--random-space", "1M", "--batch", "8"] if mode == "bw" else []
    r = run([rdmabench, "-t", "tcp", "--op", "write,read,send", "--mode", mode, "--size", "64,64K", "--iters", "300",
             "--validate", "--json", str(out)] + extra)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(l) for l in out.read_text().splitlines() if l.strip()]
    assert len(recs) == 6
    for rec in recs:
        assert rec["transport"] == "tcp"
        assert rec["domain"] == "lo"
        assert rec["results"]["mops"] > 0


def test_tcp_options(rdmabench, tmp_path):
    r = run([rdmabench, "-t", "tcp", "-o", "nodelay=0", "-o", "sndbuf=1M", "--size", "4K", "--iters", "200"])
    assert r.returncode == 0, r.stderr
    bad = run([rdmabench, "-t", "tcp", "-o", "turbo=1"], timeout=20)
    assert bad.returncode == 2
    assert "turbo" in bad.stderr and "nodelay" in bad.stderr
