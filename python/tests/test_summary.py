"""Summary: mean and sample stdev over repeats."""

import statistics

import pytest

from rdmabench_report.cli import main
from rdmabench_report.load import load_file
from rdmabench_report.summary import summarize

from synthetic import make_record, write_jsonl


def test_mean_and_sample_stdev_over_five_repeats(tmp_path):
    gbps = [10.0, 11.0, 12.0, 13.0, 14.0]
    records = [make_record(gbps=g, mops=g / 10, repeat=i, repeats=5, samples_ns=[1000 * (i + 1)])
               for i, g in enumerate(gbps)]
    records.append(make_record(size=64, gbps=3.0))  # a single-repeat row
    rows = summarize(load_file(write_jsonl(tmp_path / "r.jsonl", records)))
    assert [(r.size, r.n) for r in rows] == [(64, 1), (4096, 5)]
    mean, sd = rows[1].stats["gbps"]
    assert mean == pytest.approx(12.0)
    assert sd == pytest.approx(statistics.stdev(gbps))  # sqrt(2.5), the n-1 form
    assert sd == pytest.approx(1.5811388, rel=1e-6)
    assert rows[1].stats["mops"][0] == pytest.approx(1.2)
    # One sample per repeat, so each repeat's p50 is that sample's bin middle (clamped to it).
    assert rows[1].stats["p50"][0] == pytest.approx(3.0)
    assert rows[0].stats["gbps"] == (3.0, None)


def test_summary_cli_markdown(tmp_path, capsys):
    records = [make_record(gbps=g, repeat=i, repeats=2) for i, g in enumerate([4.0, 6.0])]
    path = write_jsonl(tmp_path / "r.jsonl", records)
    assert main(["summary", path, "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if line.startswith("| synthetic run")][0]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:5] == ["synthetic run", "write", "bw", "4K", "2"]
    assert cells[5:7] == ["5.000", "1.414"]
