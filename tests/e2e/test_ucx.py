"""The ucx transport's own surface: UCX_TLS-style lists beyond those --list names, judged by the
pre-run check before anything starts, and the library named in the output."""
import json

from conftest import run


def test_a_list_list_does_not_name_runs_validated(rdmabench, tmp_path):
    out = tmp_path / "r.jsonl"
    r = run([rdmabench, "-t", "ucx:posix,cma", "--op", "write,read", "--size", "4K", "--iters", "300", "--validate",
             "--json", str(out)])
    assert r.returncode == 0, r.stderr
    recs = [json.loads(l) for l in out.read_text().splitlines() if l.strip()]
    assert [rec["provider"] for rec in recs] == ["posix,cma", "posix,cma"]
    assert recs[0]["library_version"].startswith("UCX ")
    assert recs[0]["libfabric_version"] == ""


def test_a_list_ucx_cannot_use_is_refused_up_front_with_its_reason(rdmabench):
    r = run([rdmabench, "-t", "ucx:nosuchtl", "--size", "4K", "--iters", "10"], timeout=30)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1, r.stderr
    assert "-t ucx:nosuchtl: not usable here" in r.stderr and "nosuchtl" in r.stderr
    assert "server" not in r.stdout  # refused before a server child was started
