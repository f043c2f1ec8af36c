"""rdmabench --job: a TOML matrix run on loopback over shm into one JSON Lines file, and job files
with mistakes rejected, with one FILE:LINE line, before any run starts."""
import os
import json
import re
from pathlib import Path

import pytest

from conftest import ROOT, run

TINY = """
[defaults]
transport = "ofi:shm"
size = "64"
iters = 200
warmup = "20"
json = "{json}"

[matrix]
op = ["write", "read", "send"]
mode = ["bw", "lat"]

[[run]]           # an extra run: a bw stream at another depth
op = "write"
depth = 8
"""


def load(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def write_job(tmp_path, text, name="job.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_tiny_job_over_shm(rdmabench, tmp_path):
    out = tmp_path / "r.jsonl"
    job = write_job(tmp_path, TINY.format(json=out))
    r = run([rdmabench, "--job", str(job)], timeout=120)
    assert r.returncode == 0, r.stderr
    runs = 3 * 2 + 1  # the matrix, then the [[run]]; one size, one repeat: one line each
    recs = load(out)
    assert len(recs) == runs
    progress = [l for l in r.stderr.splitlines() if re.match(r"\[\d+/\d+\] ", l)]
    assert [l.split()[0] for l in progress] == [f"[{i}/{runs}]" for i in range(1, runs + 1)]
    assert "--op write --mode bw --transport ofi:shm --size 64" in progress[0]
    assert [(x["op"], x["mode"]) for x in recs[:6]] == [(o, m) for o in ("write", "read", "send") for m in ("bw", "lat")]
    assert [x["job"]["run"] for x in recs] == list(range(1, runs + 1))
    assert all(x["job"]["runs"] == runs and x["provider"] == "shm" for x in recs)
    # Only the [[run]] sets depth, so its label says so and keeps it apart from the matrix's write bw.
    assert recs[0]["label"] == "ofi:shm write bw t1"
    assert recs[-1]["label"].endswith("depth=8") and recs[-1]["params"]["depth"] == 8
    assert not (tmp_path / "r.jsonl.partial").exists()


def test_command_line_flags_replace_defaults(rdmabench, tmp_path):
    out = tmp_path / "other.jsonl"
    job = write_job(tmp_path, TINY.format(json=tmp_path / "unused.jsonl"))
    r = run([rdmabench, "--job", str(job), "--json", str(out), "--iters", "100", "--size", "128"], timeout=120)
    assert r.returncode == 0, r.stderr
    recs = load(out)
    assert len(recs) == 7 and not (tmp_path / "unused.jsonl").exists()
    assert all(x["size"] == 128 and x["results"]["iterations"] == 100 for x in recs)


def test_a_failed_run_does_not_stop_the_job(rdmabench, tmp_path):
    # The second run's data goes wrong (a fault in its sends), which only the run itself can find.
    out = tmp_path / "r.jsonl"
    job = write_job(tmp_path, f"""
[defaults]
transport = "ofi:shm"
iters = 100
validate = true
json = "{out}"
[matrix]
op = ["write", "send", "read"]
""")
    r = run([rdmabench, "--job", str(job)], timeout=60, env=dict(os.environ, RDMABENCH_FAULT="corrupt:send:5"))
    assert r.returncode == 1, r.stderr
    assert re.search(r"\[2/3\] failed: server: server thread 0: send #4 of 65536 B: byte 0 is", r.stderr), r.stderr
    assert "1 of 3 runs failed (run 2)" in r.stderr.splitlines()[-1]
    assert [x["job"]["run"] for x in load(out)] == [1, 3]


def test_a_run_this_machine_cannot_do_is_refused_before_the_first_starts(rdmabench, tmp_path):
    out = tmp_path / "r.jsonl"
    job = write_job(tmp_path, f"""
[defaults]
size = "64"
iters = 100
json = "{out}"
[[run]]
transport = "tcp"
[[run]]
transport = "dma:cpu"
op = "send"
""")
    r = run([rdmabench, "--job", str(job)], timeout=30)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1, r.stderr
    assert "run 2 of 2" in r.stderr and "-t dma:cpu: --op send" in r.stderr
    assert not out.exists()  # not even the first run started
    # A queue deeper than the provider's is known from its probe, before anything starts too.
    job = write_job(tmp_path, f"[defaults]\ntransport = \"ofi:shm\"\njson = \"{out}\"\n[matrix]\ndepth = [8, 100000]\n")
    r = run([rdmabench, "--job", str(job)], timeout=30)
    assert r.returncode == 2 and "run 2 of 2" in r.stderr and "--depth 100000" in r.stderr, r.stderr


@pytest.mark.parametrize("body,line,key", [
    ("[defaults]\njson = \"r.jsonl\"\niters = 100\nitres = 100\n", 4, "itres"),           # unknown key
    ("[defaults]\njson = \"r.jsonl\"\n[matrix]\nop = [\"write\", \"jump\"]\n", 4, "op"),   # bad value, 2nd run
    ("[defaults]\njson = \"r.jsonl\"\n[matrix]\nsize = [64, 4096]\ndepth = [1]\nbatch = [2]\n", 5, "depth"),
    ("[defaults]\nsize = \"64\"\n", 1, "json"),                                           # no results file
    ("[defaults]\njson = \"r.jsonl\"\nvalidate = \"yes\"\n", 3, "validate"),
    ("[defaults]\njson = \"r.jsonl\"\nthreads = \"many\"\n", 3, "threads"),               # does not convert
    ("[defaults]\njson = \"r.jsonl\"\ndepth = \"-5\"\n", 3, "depth"),                     # a value, not a flag
    ("[defaults]\njson = \"r.jsonl\"\nmode = \"lat\"\n[matrix]\nbatch-size = [1, 4]\n", 5, "batch-size"),  # alias
])
def test_bad_job_is_rejected_before_any_run(rdmabench, tmp_path, body, line, key):
    job = write_job(tmp_path, body)
    r = run([rdmabench, "--job", str(job)], timeout=20, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"{job}:{line}: key '{key}': "), lines[0]
    assert r.stdout == ""
    assert not (tmp_path / "r.jsonl").exists()


def test_bad_flag_beside_the_job_is_named_on_the_command_line(rdmabench, tmp_path):
    job = write_job(tmp_path, "[defaults]\njson = \"r.jsonl\"\nmode = \"lat\"\n")
    r = run([rdmabench, "--job", str(job), "--depth", "8"], timeout=20, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith(f"{job}: --depth on the command line: --depth 8 with --mode lat: "), r.stderr
    assert not (tmp_path / "r.jsonl").exists()


def test_toml_syntax_error_names_the_line(rdmabench, tmp_path):
    job = write_job(tmp_path, "[defaults]\njson = \"r.jsonl\"\nsize = [64,\n")
    r = run([rdmabench, "--job", str(job)], timeout=20)
    assert r.returncode == 2
    assert re.fullmatch(re.escape(str(job)) + r":\d+: .+\n", r.stderr), r.stderr


SHIPPED = sorted((ROOT / "jobs").glob("*.toml"))


@pytest.mark.parametrize("job", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_jobs_run(rdmabench, tmp_path, job):
    # Each runs as shipped (well under a minute here); results go to tmp_path.
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "--job", str(job), "--json", str(out)], timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    recs = load(out)
    total = int(re.search(r"\[1/(\d+)\]", r.stderr).group(1))
    assert len({x["job"]["run"] for x in recs}) == total
