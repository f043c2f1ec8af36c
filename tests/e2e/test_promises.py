"""Promises of the README and docs/output-format.md, each checked by what it changes in a real run:
the documented output fields, pinning, --local-mr, --no-inject and --fixed, IPv6 addresses, the
--life and --batch-size aliases, jobs ended by Ctrl-C or a lost server, the tcp transport's -o
options, and SIGTERM to a server mid-run. (--seed's targets are not observable in a run's output;
tests/unit/addressing_test.cc follows the seed from the command line to the address stream.)"""
import csv
import json
import math
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, children_of, remove_dead_shm_names, run, wait_for_text

DOC = ROOT / "docs" / "output-format.md"


def load(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def start_server(rdmabench, addr, log, *extra):
    """A server on `addr`, awaited by its own 'listening' line; its own session, so killpg ends it
    with the run processes it forks."""
    with open(log, "w") as err:
        proc = subprocess.Popen([rdmabench, "--server", "--addr", addr, *extra], stderr=err, start_new_session=True)
    wait_for_text(log, "listening")
    return proc


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    remove_dead_shm_names()


# ---- docs/output-format.md: every documented field, with its type and unit; nothing undocumented

def documented_fields():
    """{path: (type, unit, presence)} from the doc's field table."""
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]+) \| ([^|]*) \| ([^|]+) \|$", DOC.read_text(), re.M)
    assert len(rows) > 50, "docs/output-format.md has no field table"
    return {f: (ty.strip(), unit.strip(), when.strip()) for f, ty, unit, when in rows}


def documented_csv_columns():
    text = DOC.read_text().split("## CSV", 1)[1]
    return re.search(r"^`(timestamp,[^`]+)`$", text, re.M).group(1).split(",")


def flatten(value, path=""):
    """Every (path, value) of a JSON line, arrays of objects as `a[].b`; histogram bins are one leaf."""
    out = {}
    if path:
        out[path] = value
    if isinstance(value, dict):
        for k, v in value.items():
            out.update(flatten(v, f"{path}.{k}" if path else k))
    elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        for item in value:
            for p, v in flatten(item, path + "[]").items():
                if p != path + "[]":
                    out.setdefault(p, v)
    return out


def has_type(value, ty):
    integer = lambda v: isinstance(v, int) and not isinstance(v, bool)
    return {
        "integer": integer,
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "object": lambda v: isinstance(v, dict),
        "array of strings": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "array of integers": lambda v: isinstance(v, list) and all(integer(x) for x in v),
        "array of objects": lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
        "array of [integer, integer, integer]":
            lambda v: isinstance(v, list) and all(isinstance(b, list) and len(b) == 3 and all(map(integer, b)) for b in v),
    }[ty](value)


def test_doc_example_uses_only_documented_fields():
    example = json.loads(re.search(r"```json\n(.*?)\n```", DOC.read_text(), re.S).group(1))
    fields = documented_fields()
    for path, value in flatten(example).items():
        assert path in fields, f"the example shows {path}, which the field table lacks"
        assert has_type(value, fields[path][0]), (path, value)


def test_every_documented_field_is_in_real_output_with_its_type_and_unit(rdmabench, tmp_path):
    # One job of two runs: a write stream with --bidir and --cpu-util (the conditional fields) and a
    # send ping-pong; --job adds the `job` object; --csv writes one row per JSON line beside it.
    out, table = tmp_path / "r.jsonl", tmp_path / "r.csv"
    job = tmp_path / "job.toml"
    job.write_text(f"""
[defaults]
transport = "ofi:shm"
size = "4K"
iters = 2000
json = "{out}"
csv = "{table}"
[[run]]
op = "write"
bidir = true
cpu-util = true
[[run]]
op = "send"
mode = "lat"
""")
    t0 = time.time()
    r = run([rdmabench, "--job", str(job)], timeout=60)
    wall = time.time() - t0
    assert r.returncode == 0, r.stderr
    recs = load(out)
    assert len(recs) == 2
    fields = documented_fields()
    seen = set()
    for rec in recs:
        flat = flatten(rec)
        undocumented = sorted(set(flat) - set(fields))
        assert not undocumented, f"fields in the output that docs/output-format.md does not list: {undocumented}"
        for path, value in flat.items():
            assert has_type(value, fields[path][0]), f"{path} = {value!r}, documented as {fields[path][0]}"
        always = [f for f, (_, _, when) in fields.items() if when == "always"]
        assert not [f for f in always if f not in flat], "documented as always present but missing"
        seen |= set(flat)
    # The conditional fields this job asks for are there too; only the line rate is not (no
    # provider here reports a link speed). Cluster runs' fields: test_cluster.py checks them.
    unexercised = sorted(f for f in fields if f not in seen and not f.startswith("cluster"))
    assert unexercised == ["results.line_rate_gbps", "results.pct_of_line_rate"], unexercised

    # Units, by how the figures relate: bytes and seconds make the rates, us vs the ns histogram.
    for rec in recs:
        res = rec["results"]
        assert res["bytes"] == res["iterations"] * rec["size"]
        assert 0 < res["duration_s"] < wall  # seconds, not ms: within the job's own wall time
        assert res["gbps"] == pytest.approx(res["bytes"] * 8 / res["duration_s"] / 1e9, rel=1e-6)
        assert res["gbytes_per_s"] == pytest.approx(res["bytes"] / res["duration_s"] / 1e9, rel=1e-6)
        assert res["mops"] == pytest.approx(res["iterations"] / res["duration_s"] / 1e6, rel=1e-6)
        bins = rec["histogram"]["bins"]
        assert rec["histogram"]["unit"] == "ns"
        assert bins[0][0] <= res["lat_us"]["min"] * 1000 < bins[0][1] + 1
        assert bins[-1][0] <= res["lat_us"]["max"] * 1000 <= bins[-1][1]
        for t in res["per_thread"]:
            assert t["seconds"] == pytest.approx(res["duration_s"], rel=0.5)
        assert rec["job"]["runs"] == 2 and rec["job"]["file"] == str(job)
    write = recs[0]["results"]
    assert write["sum"]["gbps"] == pytest.approx(write["gbps"] + write["reverse"]["gbps"])
    cpu = write["cpu"]["client"]
    assert cpu["util"] == pytest.approx(cpu["total_s"] / write["duration_s"], rel=0.25)

    # CSV: the documented header, then one row per JSON line with the same figures.
    rows = list(csv.reader(table.open()))
    assert rows[0] == documented_csv_columns()
    assert len(rows) == 1 + len(recs)
    for row, rec in zip(rows[1:], recs):
        assert len(row) == len(rows[0])
        cell = dict(zip(rows[0], row))
        for col in ("op", "mode", "lat_kind", "transport", "provider", "label", "timestamp"):
            want = rec["results"][col] if col == "lat_kind" else rec[col]
            # the job's label gets its tags after the CSV row is written; both start the same
            assert want.startswith(cell[col]), (col, cell[col], want)
        for col in ("size", "repeat"):
            assert int(cell[col]) == rec[col]
        for col in ("threads", "batch", "depth"):
            assert int(cell[col]) == rec["params"][col]
        assert int(cell["iterations"]) == rec["results"]["iterations"]
        assert cell["partial"] == ("true" if rec["results"]["partial"] else "false")
        for col in ("duration_s", "gbps", "gbytes_per_s", "mops"):
            assert float(cell[col]) == pytest.approx(rec["results"][col], rel=1e-3, abs=1e-6)
        for key in ("min", "p50", "avg", "p99", "p999", "p9999", "max", "stdev"):
            assert float(cell[f"lat_{key}_us"]) == pytest.approx(rec["results"]["lat_us"][key], rel=1e-3, abs=1e-4)


# ---- --cpus / --server-cpus

def allowed_cpus(pid):
    """Cpus_allowed_list of every thread of `pid`."""
    lists = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        lists.append(re.search(r"^Cpus_allowed_list:\s*(\S+)", status, re.M).group(1))
    return lists


@pytest.mark.skipif(os.cpu_count() < 2, reason="pinning to different CPUs needs two")
def test_cpus_and_server_cpus_pin_the_worker_threads(rdmabench, tmp_path):
    # Thread i gets the i-th CPU of --cpus; the --loopback child, and the process it forks for the
    # run, get --server-cpus. Unpinned threads keep the whole machine ("0-1" here).
    client = subprocess.Popen([rdmabench, "--loopback", "-t", "ofi:shm", "--threads", "2", "--cpus", "1,0",
                               "--server-cpus", "1", "--duration", "3", "--warmup", "0.1s"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen_client, seen_server = [], []
    try:
        end = time.time() + 10
        while time.time() < end and client.poll() is None:
            pinned = sorted(c for c in allowed_cpus(client.pid) if "-" not in c and "," not in c)
            if len(pinned) > len(seen_client):
                seen_client = pinned
            for child in children_of(client.pid):
                for runner in children_of(child):  # the server serves each run in a process of its own
                    pinned = sorted(c for c in allowed_cpus(runner) if "-" not in c and "," not in c)
                    if len(pinned) > len(seen_server):
                        seen_server = pinned
            if len(seen_client) >= 2 and len(seen_server) >= 2:
                break
            time.sleep(0.05)
        _, err = client.communicate(timeout=30)
    finally:
        client.kill()
    assert client.returncode == 0, err
    assert seen_client == ["0", "1"], f"client threads pinned: {seen_client}"
    assert seen_server == ["1", "1"], f"server run threads pinned: {seen_server}"


# ---- --local-mr, --fixed, --no-inject

def peak_rss_mib(cmd, timeout=60):
    """Runs `cmd` and returns (exit status, its peak resident memory in MiB), read from VmHWM while
    it runs (the rusage of a child of ours would start from this process's own size)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    end = time.time() + timeout
    while time.time() < end and proc.poll() is None:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
            peak = max(peak, int(re.search(r"^VmHWM:\s*(\d+) kB", status, re.M).group(1)))
        except (FileNotFoundError, ProcessLookupError, AttributeError):
            pass  # exiting: the last figure stands
        time.sleep(0.02)
    if proc.poll() is None:
        proc.kill()
        raise AssertionError(f"{cmd} did not end within {timeout} s")
    return proc.returncode, peak / 1024


def test_local_mr_sizes_each_threads_local_buffer(rdmabench, tmp_path, free_port):
    # --local-mr is each client thread's local buffer: 2 threads x 48 MiB must show in the client's
    # peak memory (an unvalidated write run clears the buffers before it starts, so every page is
    # touched). The server is separate, so the client's figure is its own. A duration run, so the
    # figure is read while the buffers are in use.
    server = start_server(rdmabench, f"127.0.0.1:{free_port}", tmp_path / "server.err")
    try:
        base = [rdmabench, "--addr", f"127.0.0.1:{free_port}", "-t", "tcp", "--size", "4K", "--duration", "0.6",
                "--warmup", "0.1s", "--threads", "2"]
        rc0, default_mib = peak_rss_mib(base)
        rc1, big_mib = peak_rss_mib(base + ["--local-mr", "48M"])
    finally:
        stop(server)
    assert rc0 == 0 and rc1 == 0
    assert big_mib - default_mib >= 2 * 48 * 0.95, f"peak RSS {default_mib:.0f} MiB -> {big_mib:.0f} MiB"


def test_fixed_overrides_random_space_and_validates(rdmabench, tmp_path):
    # Which offsets a run targets is not in its output; the JSON's addressing comes from the same
    # predicate AddressGen uses (spec.random()), and addressing_test checks what fixed draws. Here:
    # --fixed with --random-space is a fixed run whose every byte validates.
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", "ofi:shm", "--op", "write,read", "--size", "256", "--iters", "500", "--threads", "2",
             "--random-space", "1M", "--thread-gap", "4K", "--fixed", "--validate", "--json", str(out)], timeout=60)
    assert r.returncode == 0, r.stderr
    for rec in load(out):
        assert rec["params"]["addressing"] == "fixed" and rec["params"]["fixed"] is True
        assert rec["params"]["random_space"] == 1 << 20 and rec["params"]["thread_gap"] == 4096
    assert "addressing fixed" in r.stdout


@pytest.mark.parametrize("transport", ["ofi:shm", "tcp"])
def test_no_inject_latency_runs_validate(rdmabench, tmp_path, transport):
    # --no-inject makes every latency op a signaled one instead of an inline (FI_INJECT) one. No
    # figure in the output tells the two apart, so this checks what is observable: both sides
    # accept the run, every payload arrives intact, and the line says inject is off.
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", transport, "--op", "write,send", "--mode", "lat", "--size", "16", "--iters", "300",
             "--no-inject", "--validate", "--json", str(out)], timeout=60)
    assert r.returncode == 0, r.stderr
    recs = load(out)
    assert len(recs) == 2
    assert all(rec["params"]["inject"] is False and rec["results"]["iterations"] == 300 for rec in recs)


# ---- IPv6 and the aliases

def test_ipv6_server_and_client_with_the_address_in_brackets(rdmabench, tmp_path, free_port):
    log = tmp_path / "server.err"
    server = start_server(rdmabench, f"[::1]:{free_port}", log, "--once")
    try:
        out = tmp_path / "r.jsonl"
        r = run([rdmabench, "--addr", f"[::1]:{free_port}", "-t", "tcp", "--size", "64", "--iters", "200",
                 "--validate", "--json", str(out)], timeout=60)
        assert r.returncode == 0, r.stderr
        assert server.wait(timeout=10) == 0
    finally:
        stop(server)
    # HOST:PORT with an IPv6 host is written as --addr takes it, so it can be given back
    assert f"listening on [::1]:{free_port}" in log.read_text()
    assert f"server [::1]:{free_port} " in r.stdout
    assert load(out)[0]["server"] == f"[::1]:{free_port}"
    assert "run from ::1 " in log.read_text()


def test_life_and_batch_size_are_duration_and_batch(rdmabench, tmp_path):
    params = []
    for flags in (["--life", "0.4", "--batch-size", "4"], ["--duration", "0.4", "--batch", "4"]):
        out = tmp_path / f"{flags[0][2:]}.jsonl"
        r = run([rdmabench, "-t", "ofi:shm", "--size", "256", "--depth", "16", "--warmup", "0.1s", "--json", str(out)]
                + flags, timeout=60)
        assert r.returncode == 0, r.stderr
        rec = load(out)[0]
        # a duration run: measured for at least 0.4 s (not 0.4 iterations, not the default count)
        assert rec["results"]["duration_s"] >= 0.4
        params.append(rec["params"])
    assert params[0]["duration_s"] == 0.4 and params[0]["batch"] == 4
    assert params[0] == params[1]


# ---- jobs ended by Ctrl-C or by a lost server keep their results

def job_file(tmp_path, out, extra=""):
    path = tmp_path / "job.toml"
    path.write_text(f"""
[defaults]
transport = "tcp"
size = "4K"
duration = 1
warmup = "0.1s"
report-interval = 0.2
timeout = 3
json = "{out}"
{extra}
[matrix]
op = ["write", "read", "send"]
""")
    return path


def live_lines(path):
    return sum(1 for l in path.read_text().splitlines() if l.startswith("@"))


def start_job_and_wait_for_the_second_run(rdmabench, tmp_path, job, out):
    """Starts the job; returns once run 1's line is in the results file and run 2 is measuring
    (it has printed a live line of its own)."""
    stdout, stderr = tmp_path / "job.out", tmp_path / "job.err"
    with open(stdout, "w") as o, open(stderr, "w") as e:
        proc = subprocess.Popen([rdmabench, "--job", str(job)], stdout=o, stderr=e)
    end = time.time() + 20
    while time.time() < end and not (out.exists() and out.read_text().count("\n") >= 1):
        time.sleep(0.02)
    assert out.exists(), stderr.read_text()
    before = live_lines(stdout)
    wait_for_text(stderr, "[2/3]")
    while time.time() < end and live_lines(stdout) <= before:
        time.sleep(0.02)
    assert live_lines(stdout) > before, "run 2 never started measuring"
    return proc, stderr


def test_ctrl_c_ends_a_job_and_keeps_its_results(rdmabench, tmp_path):
    out = tmp_path / "r.jsonl"
    proc, err = start_job_and_wait_for_the_second_run(rdmabench, tmp_path, job_file(tmp_path, out), out)
    try:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 130
    finally:
        proc.kill()
    recs = load(out)
    # run 1 complete, run 2 cut short and marked so, run 3 never started
    assert [(x["job"]["run"], x["results"]["partial"]) for x in recs] == [(1, False), (2, True)]
    assert recs[1]["results"]["iterations"] > 0
    assert "[3/3]" not in err.read_text()
    assert not (tmp_path / "r.jsonl.partial").exists()


def test_lost_server_ends_a_job_with_one_error_and_keeps_its_results(rdmabench, tmp_path, free_port):
    out = tmp_path / "r.jsonl"
    server = start_server(rdmabench, f"127.0.0.1:{free_port}", tmp_path / "server.err")
    job = job_file(tmp_path, out, f'addr = "127.0.0.1:{free_port}"')
    proc, err = start_job_and_wait_for_the_second_run(rdmabench, tmp_path, job, out)
    try:
        stop(server)  # the whole server, at once, as when its host goes down
        t0 = time.time()
        rc = proc.wait(timeout=20)
        took = time.time() - t0
    finally:
        proc.kill()
        stop(server)
    assert rc == 1
    assert took < 3 + 2 + 0.5  # --timeout 3, + 2 s, as for a single run
    assert [x["job"]["run"] for x in load(out)] == [1]
    lines = [l for l in err.read_text().splitlines() if l.strip()]
    errors = [l for l in lines if l.startswith("rdmabench: error: ")]
    assert len(errors) == 1, lines
    others = [l for l in lines if l not in errors and not re.match(r"\[\d/3\] --op ", l)
              and not re.match(r"rdmabench: job .*: 1 result line\(s\) appended to ", l)]
    assert not others, others
    assert "[3/3]" not in err.read_text()


# ---- the tcp transport's -o options

def socket_buffers(pids):
    """(local port, peer port, rb, tb) of every TCP connection the given processes hold."""
    out = run(["ss", "-tnmpH", "state", "established"], timeout=10).stdout
    found = []
    lines = out.splitlines()
    for i, line in enumerate(lines):
        owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if not owners & set(pids) or i + 1 >= len(lines):
            continue
        mem = re.search(r"rb(\d+),t\d+,tb(\d+)", lines[i + 1])
        local, peer = re.findall(r"\S+:(\d+)\s", line)[:2]
        if mem:
            found.append((int(local), int(peer), int(mem.group(1)), int(mem.group(2))))
    return found


def test_tcp_sndbuf_and_rcvbuf_options_size_the_data_connections(rdmabench, tmp_path, free_port):
    # SO_SNDBUF/SO_RCVBUF of every data connection, on both sides (the kernel doubles the value it
    # is given). Sizes no autotuned buffer has, so a default buffer cannot pass for them.
    server = start_server(rdmabench, f"127.0.0.1:{free_port}", tmp_path / "server.err")
    try:
        client = subprocess.Popen([rdmabench, "--addr", f"127.0.0.1:{free_port}", "-t", "tcp", "-o", "sndbuf=1000K",
                                   "-o", "rcvbuf=900K", "--threads", "2", "--size", "4K", "--duration", "3",
                                   "--warmup", "0.1s"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        data = []
        end = time.time() + 10
        while time.time() < end and client.poll() is None:
            pids = [client.pid] + [g for c in children_of(server.pid) for g in [c] + children_of(c)]
            conns = socket_buffers(pids)
            data = [c for c in conns if free_port not in (c[0], c[1])]  # not the control connection
            if len(data) >= 4:  # 2 threads: a connection pair each, both ends on this machine
                break
            time.sleep(0.1)
        _, err = client.communicate(timeout=30)
    finally:
        client.kill()
        stop(server)
    assert client.returncode == 0, err
    assert len(data) == 4, data
    for local, peer, rb, tb in data:
        assert (rb, tb) == (2 * 900 * 1024, 2 * 1000 * 1024), (local, peer, rb, tb)


# ---- SIGTERM to a server mid-run

def test_sigterm_to_a_server_mid_run_ends_the_client_with_one_line(rdmabench, tmp_path, free_port):
    log = tmp_path / "server.err"
    server = start_server(rdmabench, f"127.0.0.1:{free_port}", log)
    try:
        client = subprocess.Popen([rdmabench, "--addr", f"127.0.0.1:{free_port}", "-t", "tcp", "--duration", "30",
                                   "--timeout", "3", "--report-interval", "0.2"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_text(log, "run from")
        end = time.time() + 20
        line = client.stdout.readline()
        while line and not line.startswith("@") and time.time() < end:  # a live line: it is measuring
            line = client.stdout.readline()
        assert line.startswith("@"), f"the run never started measuring: {line!r}"
        server.send_signal(signal.SIGTERM)
        t0 = time.time()
        _, err = client.communicate(timeout=30)
        took = time.time() - t0
        assert server.wait(timeout=10) == 0, log.read_text()
    finally:
        client.kill()
        stop(server)
    assert client.returncode == 1
    assert took < 3, f"the client took {took:.1f} s, more than its --timeout"
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("rdmabench: error: ") and "server stopped" in err, err
