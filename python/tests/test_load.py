"""Reading JSON Lines: blank lines skipped, bad lines reported as file:line."""

import pytest

from rdmabench_report.errors import ReportError
from rdmabench_report.load import load_file, load_files

from synthetic import make_record, write_jsonl


def test_blank_lines_are_skipped_and_lines_remembered(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", [make_record(size=64), make_record(size=128)],
                       blank_lines=True)
    records = load_file(path)
    assert [r.size for r in records] == [64, 128]
    assert [r.line for r in records] == [1, 3]
    assert records[0].where == f"{path}:1"


def test_bad_json_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    write_jsonl(path, [make_record(), make_record()])
    path.write_text(path.read_text() + '{"op": "write", \n')
    with pytest.raises(ReportError, match=r"bad\.jsonl:3: not valid JSON"):
        load_file(str(path))


def test_missing_fields_and_wrong_schema(tmp_path):
    path = tmp_path / "odd.jsonl"
    path.write_text('{"schema": 1, "op": "write"}\n')
    with pytest.raises(ReportError, match=r"odd\.jsonl:1: record lacks mode, size, results"):
        load_file(str(path))
    record = make_record()
    record["schema"] = 2
    write_jsonl(path, [record])
    with pytest.raises(ReportError, match=r"odd\.jsonl:1: schema 2 is not supported"):
        load_file(str(path))


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(ReportError, match=r"nope\.jsonl: no such file"):
        load_files([str(tmp_path / "nope.jsonl")])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(ReportError, match=r"empty\.jsonl: holds no records"):
        load_file(str(empty))
