"""rdmabench-report on real rdmabench output: its percentiles agree with what rdmabench printed."""
import json
import subprocess
import sys

import pytest

from conftest import run

hist = pytest.importorskip("rdmabench_report.hist")
load = pytest.importorskip("rdmabench_report.load")


def test_recomputed_percentiles_match_printed(rdmabench, tmp_path):
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", "ofi:shm", "--op", "write,send", "--mode", "bw,lat", "--size", "64,64K", "--iters", "2000",
             "--json", str(out)])
    assert r.returncode == 0, r.stderr
    raw = [json.loads(l) for l in out.read_text().splitlines() if l.strip()]
    loaded = load.load_file(str(out))
    assert len(raw) == len(loaded) == 8
    for rec, obj in zip(raw, loaded):
        again = hist.recompute_lat_us(obj)
        for key in ("p50", "p99", "p999", "p9999"):
            assert again[key] == pytest.approx(rec["results"]["lat_us"][key], rel=1e-9), (rec["label"], key)


def test_plot_and_compare_on_real_output(rdmabench, tmp_path):
    a, b = tmp_path / "shm.jsonl", tmp_path / "tcp.jsonl"
    for t, f in (("ofi:shm", a), ("tcp", b)):
        r = run([rdmabench, "-t", t, "--op", "send", "--mode", "lat", "--size", "64,4K", "--iters", "1000", "--json", str(f)])
        assert r.returncode == 0, r.stderr
    p = subprocess.run([sys.executable, "-m", "rdmabench_report", "plot", str(a), str(b), "-o", str(tmp_path / "plots")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "plots" / "latency_percentiles.png").stat().st_size > 10000
    c = subprocess.run([sys.executable, "-m", "rdmabench_report", "compare", str(a), str(b), "--metric", "p50"],
                       capture_output=True, text=True, timeout=60)
    assert c.returncode == 0, c.stderr
    assert "4K" in c.stdout or "4096" in c.stdout


def documented_bin(v):
    """docs/output-format.md's layout: one bin per ns below 128 ns, then 128 bins per power of two."""
    if v < 128:
        return v, v + 1
    width = 1 << (v.bit_length() - 8)
    low = v // width * width
    return low, low + width


def test_real_bins_follow_the_documented_layout(rdmabench, tmp_path):
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", "tcp", "--op", "send", "--mode", "lat", "--size", "64", "--iters", "2000",
             "--json", str(out)])
    assert r.returncode == 0, r.stderr
    rec = json.loads(out.read_text().splitlines()[0])
    bins = rec["histogram"]["bins"]
    assert len(bins) > 3
    for low, high, count in bins:
        assert (low, high) == documented_bin(low), (low, high)
        assert count > 0
