"""Real client and server processes over libfabric shm and tcp: every op x mode with --validate."""
import json
import math
import subprocess
import time

import pytest

from conftest import only_child_of, orphans_adopted, process_state, wait_for_text, listing, run

REQUIRED = ["schema", "tool", "version", "timestamp", "host", "label", "transport", "provider", "fabric",
            "domain", "library_version", "libfabric_version", "op", "mode", "size", "repeat", "repeats", "params", "results",
            "histogram"]
RESULT_FIELDS = ["iterations", "bytes", "duration_s", "gbps", "gbytes_per_s", "mops", "lat_kind", "lat_us"]
LAT_FIELDS = ["min", "p50", "avg", "p99", "p999", "p9999", "max", "stdev"]


def percentile_from_bins(bins, q, lo, hi):
    """The documented rule (docs/output-format.md), in ns."""
    total = sum(c for _, _, c in bins)
    rank = max(1, math.ceil(q * total))
    cum = 0
    for low, high, count in bins:
        cum += count
        if cum >= rank:
            return min(max((low + high) / 2, lo), hi)
    return hi


def load(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_record(rec, op, mode, provider):
    for f in REQUIRED:
        assert f in rec, f
    assert rec["op"] == op and rec["mode"] == mode
    assert provider in rec["provider"]
    res = rec["results"]
    for f in RESULT_FIELDS:
        assert f in res, f
    lat = res["lat_us"]
    for f in LAT_FIELDS:
        assert f in lat
    assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["p9999"] <= lat["max"]
    assert res["iterations"] == rec["params"]["iters"]
    assert res["bytes"] == res["iterations"] * rec["size"]
    assert res["gbps"] > 0 and res["mops"] > 0
    expected_kind = "completion" if mode == "bw" else ("round_trip" if op == "read" else "half_round_trip")
    assert res["lat_kind"] == expected_kind
    bins = rec["histogram"]["bins"]
    # Every measured op has exactly one sample (signal 1); warm-up is not in the histogram.
    assert sum(c for _, _, c in bins) == res["iterations"]
    lo, hi = lat["min"] * 1000, lat["max"] * 1000
    for key, q in [("p50", 0.5), ("p99", 0.99), ("p999", 0.999)]:
        assert percentile_from_bins(bins, q, lo, hi) / 1000 == pytest.approx(lat[key], rel=1e-9)


@pytest.mark.parametrize("provider", ["shm", "tcp"])
@pytest.mark.parametrize("mode", ["bw", "lat"])
@pytest.mark.parametrize("op", ["write", "read", "send"])
def test_validated_run_over_libfabric(rdmabench, tmp_path, free_port, provider, op, mode):
    out = tmp_path / "r.jsonl"
    log = tmp_path / "server.err"
    with open(log, "w") as err:
        server = subprocess.Popen([rdmabench, "--server", "--once", "--addr", f"127.0.0.1:{free_port}"], stderr=err)
    try:
        wait_for_text(log, "listening")
        r = run([rdmabench, "--addr", f"127.0.0.1:{free_port}", "-t", f"ofi:{provider}", "--op", op, "--mode", mode,
                 "--size", "64,4K", "--iters", "300", "--warmup", "50", "--validate", "--json", str(out)])
        assert r.returncode == 0, r.stderr
        assert server.wait(timeout=10) == 0
    finally:
        server.kill()
    recs = load(out)
    assert [x["size"] for x in recs] == [64, 4096]
    for rec in recs:
        check_record(rec, op, mode, provider)
        assert rec["params"]["validate"] is True
        assert rec["params"]["warmup_iters"] == 50
    if provider == "tcp":
        assert recs[0]["domain"] == "lo"  # a loopback run stays on lo


def test_loopback_is_the_default_and_leaves_no_child(rdmabench, tmp_path):
    out = tmp_path / "r.csv"
    with orphans_adopted():
        client = subprocess.Popen([rdmabench, "-t", "ofi:shm", "--size", "1K", "--duration", "1", "--csv", str(out)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        child = only_child_of(client)
        stdout, stderr = client.communicate(timeout=60)
        assert client.returncode == 0, stderr
        # gone, and reaped by rdmabench: a zombie or a survivor would now be a child of ours
        assert process_state(child) is None, f"the --loopback server {child} is left in state {process_state(child)}"
    assert "write bw" in stdout and "Gbps" in stdout
    lines = out.read_text().splitlines()
    assert lines[0].startswith("timestamp,label,transport")
    assert len(lines) == 2


def test_repeat_writes_one_line_per_repeat_and_table_shows_stdev(rdmabench, tmp_path):
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", "ofi:shm", "--size", "64", "--iters", "500", "--repeat", "3", "--json", str(out)])
    assert r.returncode == 0, r.stderr
    recs = load(out)
    assert [x["repeat"] for x in recs] == [0, 1, 2]
    assert all(x["repeats"] == 3 for x in recs)
    assert "±" in r.stdout


def test_repeat_table_max_is_the_largest_of_all_repeats(rdmabench, tmp_path):
    """The max (and latency min) columns are extremes over every repeat, not a mean of them."""
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", "ofi:shm", "--size", "64", "--iters", "300", "--repeat", "4", "--mode", "bw,lat",
             "--json", str(out)])
    assert r.returncode == 0, r.stderr
    assert "min and max over all repeats" in r.stdout
    recs = load(out)
    rows = [l.split() for l in r.stdout.splitlines() if l.split()[:1] == ["64"]]
    bw_row, lat_row = rows
    bw = [x["results"]["lat_us"] for x in recs if x["mode"] == "bw"]
    lat = [x["results"]["lat_us"] for x in recs if x["mode"] == "lat"]
    assert float(bw_row[-1]) == pytest.approx(max(x["max"] for x in bw), abs=0.01)
    assert float(lat_row[-2]) == pytest.approx(max(x["max"] for x in lat), abs=0.01)
    assert float(lat_row[2]) == pytest.approx(min(x["min"] for x in lat), abs=0.01)


def test_duration_mode_and_live_lines(rdmabench, tmp_path):
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", "ofi:shm", "--size", "4K", "--duration", "1.2", "--warmup", "0.2s",
             "--report-interval", "0.5", "--threads", "2", "--cpu-util", "--json", str(out)])
    assert r.returncode == 0, r.stderr
    live = [l for l in r.stdout.splitlines() if l.startswith("@")]
    assert any(" t0 " in l for l in live) and any(" t1 " in l for l in live) and any("total" in l for l in live)
    rec = load(out)[0]
    res = rec["results"]
    # What -D promises: every thread measures for at least the duration, then drains what is in
    # flight (bounded by --timeout, 10 s). How much longer a busy 2-core machine takes is not a promise.
    assert len(res["per_thread"]) == 2
    for t in res["per_thread"]:
        assert 1.2 <= t["seconds"] < 1.2 + 10, t
    assert 1.2 <= res["duration_s"] < 1.2 + 10
    assert sum(t["iterations"] for t in res["per_thread"]) == res["iterations"]
    assert sum(c for _, _, c in rec["histogram"]["bins"]) == res["iterations"]
    assert res["cpu"]["client"]["util"] > 0 and res["cpu"]["server"]["util"] > 0


def test_random_space_thread_gap_batch_signal(rdmabench, tmp_path):
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", "ofi:shm", "--op", "write,read", "--size", "256", "--iters", "2000", "--threads", "2",
             "--random-space", "1M", "--thread-gap", "512K", "--batch", "8", "--depth", "32", "--signal", "4",
             "--validate", "--json", str(out)])
    assert r.returncode == 0, r.stderr
    for rec in load(out):
        assert rec["params"]["addressing"] == "thread-gap"
        assert rec["results"]["iterations"] == 4000
        # One completion (and one latency sample) per 4 ops.
        assert sum(c for _, _, c in rec["histogram"]["bins"]) == 1000


def test_list_shows_usable_providers(rdmabench):
    r = run([rdmabench, "--list"])
    assert r.returncode == 0
    assert "ofi:shm" in r.stdout and "usable" in r.stdout
    assert "-o nodelay=0|1" in r.stdout  # each transport's options, with their types
    assert "inproc" not in r.stdout and "skeleton" not in r.stdout  # test-only


def test_list_json_is_the_registry(rdmabench):
    r = run([rdmabench, "--list", "json"])
    assert r.returncode == 0, r.stderr
    entries = {t["name"]: t for t in json.loads(r.stdout)["transports"]}
    assert entries["inproc"]["test_only"] and entries["skeleton"]["test_only"]
    assert [t["name"] for t in entries.values() if t["default"]] == ["ofi"]
    assert entries == {t["name"]: t for t in listing()["transports"]}


@pytest.mark.transports("send", "peer_memory_readable")
def test_rails_qps_lazy_report_per_rail(rdmabench, tmp_path, transport):
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", transport, "--op", "write,send", "--size", "256", "--iters", "4000", "--rails", "2",
             "--qps", "2", "--batch", "4", "--depth", "16", "--signal", "2", "--lazy", "--validate", "--json", str(out)])
    assert r.returncode == 0, r.stderr
    assert "rail 1:" in r.stdout
    for rec in load(out):
        assert rec["params"]["rails"] == 2 and rec["params"]["qps"] == 2 and rec["params"]["lazy"] is True
        rails = rec["results"]["per_rail"]
        assert [x["rail"] for x in rails] == [0, 1]
        # Ops are spread evenly over 2 rails x 2 qps and every one is accounted for.
        assert [x["iterations"] for x in rails] == [2000, 2000]
        assert sum(x["iterations"] for x in rails) == rec["results"]["iterations"] == 4000


def test_latency_over_several_endpoints(rdmabench, tmp_path):
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", "ofi:shm", "--op", "write,read,send", "--mode", "lat", "--size", "64", "--iters", "501",
             "--rails", "3", "--validate", "--json", str(out)])
    assert r.returncode == 0, r.stderr
    for rec in load(out):
        assert sorted(x["iterations"] for x in rec["results"]["per_rail"]) == [167, 167, 167]


@pytest.mark.transports("write", "read")
def test_bidir_reports_each_direction_and_the_sum(rdmabench, tmp_path, transport):
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", transport, "--op", "write,read", "--size", "4K", "--iters", "3000", "--threads", "2",
             "--bidir", "--json", str(out)])
    assert r.returncode == 0, r.stderr
    assert "reverse (server to client)" in r.stdout
    for rec in load(out):
        res = rec["results"]
        assert res["reverse"]["iterations"] == 6000  # the server runs the same budget back
        # both directions moved data, at the same time: each took time and had a rate of its own
        assert res["iterations"] == 6000 and res["gbps"] > 0
        assert res["reverse"]["duration_s"] > 0 and res["reverse"]["gbps"] > 0
        assert res["sum"]["gbps"] > max(res["gbps"], res["reverse"]["gbps"])


@pytest.mark.parametrize("flags", [
    ["--depth", "3", "--batch", "2", "--signal", "3"],     # a batch would straddle the signaled op
    ["--depth", "64", "--batch", "16", "--signal", "60"],
    ["--lazy", "--signal", "4"],                           # lazy with nothing signaled in flight
    ["--lazy", "--batch", "8", "--signal", "5", "--rails", "2"],
])
def test_signal_batch_depth_combinations_complete(rdmabench, tmp_path, flags):
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", "ofi:shm", "--size", "64", "--iters", "3001", "--timeout", "5", "--json", str(out)] + flags,
            timeout=60)
    assert r.returncode == 0, r.stderr
    rec = load(out)[0]
    assert rec["results"]["iterations"] == 3001
