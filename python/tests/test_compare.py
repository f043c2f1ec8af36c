"""Compare: values per (op, mode, size), ratios to the first file, reference columns."""

import pytest

from rdmabench_report.cli import main
from rdmabench_report.compare import compare_table, file_columns, reference_columns
from rdmabench_report.reference import load_reference, read_table_rows

from synthetic import make_record, write_jsonl


def two_files(tmp_path):
    host = [make_record(label="host verbs", size=s, gbps=g, repeat=r, repeats=2)
            for s, gs in ((4096, (20.0, 22.0)), (65536, (90.0, 94.0)))
            for r, g in enumerate(gs)]
    virt = [make_record(label="vrdma", size=4096, gbps=7.0),
            make_record(label="vrdma", size=65536, gbps=46.0),
            make_record(label="vrdma", size=1 << 20, gbps=80.0)]
    return (write_jsonl(tmp_path / "host.jsonl", host),
            write_jsonl(tmp_path / "vrdma.jsonl", virt))


def test_ratios_to_first_file(tmp_path):
    host, virt = two_files(tmp_path)
    columns = file_columns([host, virt], "gbps")
    assert columns[0].values[("write", "bw", 4096)] == pytest.approx(21.0)  # mean of repeats
    header, rows = compare_table(columns)
    assert header == ["op", "mode", "size", host, virt, "ratio"]
    by_size = {row[2]: row for row in rows}
    assert by_size["4K"][3:] == ["21.00", "7.000", f"{7 / 21:.2f}x"]
    assert by_size["64K"][3:] == ["92.00", "46.00", "0.50x"]
    assert by_size["1M"][3:] == ["-", "80.00", "-"]  # no baseline, no ratio


def test_one_file_with_two_labels_becomes_two_columns(tmp_path):
    path = write_jsonl(tmp_path / "sweep.jsonl", [make_record(label="t1", gbps=10.0),
                                                  make_record(label="t4", gbps=30.0)])
    header, rows = compare_table(file_columns([path], "gbps"))
    assert header[3:] == [f"{path}: t1", f"{path}: t4", "ratio"]
    assert rows[0][3:] == ["10.00", "30.00", "3.00x"]


def test_reference_column_converts_bytes_per_us_to_gbps(tmp_path):
    host, _ = two_files(tmp_path)
    csv_rows = {int(r["size_bytes"]): float(r["bytes_per_us"])
                for r in read_table_rows("rdma-write-vs-size")}
    column = reference_columns(load_reference("rdma_write_vs_size"), "gbps")[0]
    assert column.values[("write", "bw", 4096)] == pytest.approx(csv_rows[4096] * 8 / 1000)
    header, rows = compare_table(file_columns([host], "gbps") + [column])
    row = [r for r in rows if r[2] == "4K"][0]
    expected = csv_rows[4096] * 8 / 1000
    assert row[5] == f"{expected / 21.0:.2f}x"


def test_compare_cli_markdown_with_latency_metric_and_milestones(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", [make_record([2000] * 10, mode="lat", size=64)])
    b = write_jsonl(tmp_path / "b.jsonl", [make_record([3000] * 10, mode="lat", size=64)])
    assert main(["compare", a, b, "--metric", "p50", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "| write | lat | 64 | 2.000 | 3.000 | 1.50x |" in out
    assert main(["compare", a, "--reference", "throughput-milestones"]) == 0
    out = capsys.readouterr().out
    assert "Reference figures without a message size (other hardware)" in out
    assert "ib_write_bw same hardware" in out


def test_reference_values_at_unmeasured_sizes_are_left_out_with_a_note(tmp_path):
    from rdmabench_report.compare import render_compare
    path = write_jsonl(tmp_path / "lat.jsonl", [make_record([1500] * 5, mode="lat", size=64)])
    text, notes = render_compare([path], "p99", "text", load_reference("virtual-rdma-latency"))
    assert "ref:" not in text  # freeflow figures are at 2 bytes only
    assert any("host-verbs" in note and "write lat 2" in note for note in notes)
    text, notes = render_compare([path], "gbps", "text", load_reference("virtual-rdma-latency"))
    assert notes == ["reference virtual-rdma-latency has no gbps figures; it adds nothing here"]
