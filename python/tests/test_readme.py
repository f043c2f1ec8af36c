"""readme: REPORT_DIR/README.md of a job's results, as `make report` writes it."""

from rdmabench_report.cli import main

from synthetic import make_record, write_jsonl


def test_two_transports_are_compared_side_by_side_and_summarized(tmp_path, capsys):
    records = []
    for transport, gbps in (("ofi", 20.0), ("tcp", 10.0)):
        for size in (64, 4096):
            r = make_record(label=f"{transport} write bw t1", size=size, gbps=gbps)
            r["transport"] = transport
            records.append(r)
    write_jsonl(tmp_path / "results.jsonl", records)
    png = tmp_path / "throughput_gbps.png"  # as `plot` names it, listed after the job as make report does
    png.write_bytes(b"")
    assert main(["readme", str(tmp_path), "jobs/x.toml", str(png)]) == 0
    text = (tmp_path / "README.md").read_text()
    assert capsys.readouterr().out.strip() == str(tmp_path / "README.md")
    assert text.startswith("# rdmabench report: `jobs/x.toml`")
    assert "transports: ofi, tcp" in text
    assert "the first (ofi) as the base" in text and (tmp_path / "by-transport" / "tcp.jsonl").is_file()
    assert "| write | bw | 4K | 20.00 | 10.00 | 0.50x |" in text  # tcp's ratio to ofi
    assert "## Summary" in text
    assert "![Throughput](throughput_gbps.png)" in text


def test_no_results_is_an_error_naming_the_file(tmp_path, capsys):
    assert main(["readme", str(tmp_path), "j.toml"]) == 2
    assert "results.jsonl: no such file" in capsys.readouterr().err
