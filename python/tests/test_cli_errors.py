"""Bad input: one clear stderr line naming the file (and line), exit code 2."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rdmabench_report.cli import main

from synthetic import make_record, write_jsonl

PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args):
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT))
    return subprocess.run([sys.executable, "-m", "rdmabench_report", *args],
                          capture_output=True, text=True, env=env)


def test_missing_file_exits_2_naming_it(tmp_path):
    missing = str(tmp_path / "missing.jsonl")
    result = run_cli("summary", missing)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("rdmabench-report: error: ") and missing in lines[0]
    assert "--json" in lines[0]  # says how to produce the file


def test_bad_json_line_exits_2_naming_file_and_line(tmp_path, capsys):
    path = tmp_path / "broken.jsonl"
    write_jsonl(path, [make_record()])
    path.write_text(path.read_text() + "\nnot json\n")
    for command in (["summary", str(path)], ["compare", str(path)],
                    ["plot", str(path), "-o", str(tmp_path / "out")]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert f"{path}:3: not valid JSON" in err


def test_unknown_reference_exits_2_listing_names(tmp_path):
    path = write_jsonl(tmp_path / "ok.jsonl", [make_record()])
    result = run_cli("compare", path, "--reference", "nonsense")
    assert result.returncode == 2
    assert "unknown reference 'nonsense'" in result.stderr
    assert "rdma-write-vs-size" in result.stderr


def test_unknown_metric_is_a_usage_error(tmp_path, capsys):
    path = write_jsonl(tmp_path / "ok.jsonl", [make_record()])
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", path, "--metric", "speed"])
    assert exit_info.value.code == 2
    assert "unknown metric 'speed'" in capsys.readouterr().err


def test_good_input_exits_0(tmp_path):
    path = write_jsonl(tmp_path / "ok.jsonl", [make_record()])
    result = run_cli("compare", path, "--metric", "p99.9")
    assert result.returncode == 0, result.stderr
