"""perftest parity between real processes: atomics (fadd, cswap), writes and sends with immediate
data, and --event (threads sleep on the completion queue's wait object), over every transport
that --list says has them; and the up-front refusals where a transport or a flag says no."""
import json

import pytest

from conftest import children_of, listed_transports, run

SHORT = ["--iters", "300", "--warmup", "30", "--timeout", "10"]


def records(path):
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


@pytest.mark.transports("atomics", "peer_memory_readable")
@pytest.mark.parametrize("mode", ["bw", "lat"])
def test_atomics_validated(rdmabench, tmp_path, transport, mode):
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", transport, "--op", "fadd,cswap", "--mode", mode, "--threads", "2", "--qps", "2",
             "--validate", "--json", str(out)] + SHORT)
    assert r.returncode == 0, r.stderr
    recs = records(out)
    assert [(x["op"], x["size"]) for x in recs] == [("fadd", 8), ("cswap", 8)]
    for x in recs:
        assert x["mode"] == mode and x["results"]["iterations"] == 600
        if mode == "lat":
            assert x["results"]["lat_kind"] == "round_trip"


@pytest.mark.transports("atomics")
def test_atomics_beside_other_ops_run_at_8_bytes(rdmabench, tmp_path, transport):
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", transport, "--op", "write,fadd", "--size", "64,4K", "--json", str(out)] + SHORT)
    assert r.returncode == 0, r.stderr
    assert [(x["op"], x["size"]) for x in records(out)] == [("write", 64), ("write", 4096), ("fadd", 8)]


@pytest.mark.transports("imm_data", "peer_memory_readable")
@pytest.mark.parametrize("mode", ["bw", "lat"])
def test_immediate_data_validated(rdmabench, tmp_path, transport, mode):
    out = tmp_path / "r.jsonl"
    ops = "write-imm,send-imm" if transport in listed_transports("send") else "write-imm"
    r = run([rdmabench, "-t", transport, "--op", ops, "--mode", mode, "--size", "64,64K", "--validate",
             "--json", str(out)] + SHORT)
    assert r.returncode == 0, r.stderr
    recs = records(out)
    assert {x["op"] for x in recs} == set(ops.split(","))
    assert all(x["results"]["iterations"] == 300 for x in recs)


@pytest.mark.transports("can_wait", "peer_memory_readable")
@pytest.mark.parametrize("mode", ["bw", "lat"])
def test_event_runs_validated(rdmabench, tmp_path, transport, mode):
    caps = set()
    for need in ("send", "imm_data"):
        if transport in listed_transports(need):
            caps.add(need)
    ops = ["read"] + (["send"] if "send" in caps else []) + (["write-imm"] if "imm_data" in caps else [])
    if mode == "bw":
        ops.append("write")
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", transport, "--event", "--op", ",".join(ops), "--mode", mode, "--size", "64,16K",
             "--validate", "--cpu-util", "--json", str(out)] + SHORT)
    assert r.returncode == 0, r.stderr
    recs = records(out)
    assert len(recs) == 2 * len(ops)
    for x in recs:
        assert x["results"]["iterations"] == 300
        assert x["params"]["event"] is True
        assert x["results"]["cpu"]["server"]["util"] >= 0


def test_event_write_latency_is_refused_toward_write_imm(rdmabench):
    r = run([rdmabench, "--event", "--op", "write", "--mode", "lat"], timeout=20)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1
    assert "--event" in r.stderr and "--op write-imm" in r.stderr


@pytest.mark.parametrize("args, words", [
    (["--op", "fadd", "--size", "64"], ["--size 64 B", "atomics move 8 bytes"]),
    (["--op", "cswap", "--random-space", "1M"], ["--random-space", "cswap"]),
    (["--op", "fadd", "--rails", "3", "--qps", "3"], ["--rails 3 x --qps 3", "at most 8"]),
    (["--op", "send-imm", "--bidir"], ["--bidir", "send-imm"]),
    (["--op", "fetch-add"], ["--op 'fetch-add'", "fadd"]),
])
def test_bad_parity_flags_get_one_line(rdmabench, args, words):
    r = run([rdmabench] + args, timeout=20)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


@pytest.mark.parametrize("op, cap, word", [("fadd", "atomics", "has no atomics"),
                                           ("write-imm", "imm_data", "carries no immediate data"),
                                           ("send", "can_wait", "cannot wake a thread")])
def test_a_transport_without_the_feature_says_so_before_anything_starts(rdmabench, op, cap, word):
    lacking = [t for t in listed_transports() if t not in listed_transports(cap)]
    if not lacking:
        pytest.skip(f"every transport here has {cap}")
    args = ["--op", op] + (["--event"] if cap == "can_wait" else [])
    if cap == "can_wait" and lacking[0] not in listed_transports("send"):
        args = ["--op", "read", "--event"]
    r = run([rdmabench, "-t", lacking[0]] + args, timeout=20)
    assert r.returncode == 2, r.stderr
    assert word in r.stderr and lacking[0] in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
