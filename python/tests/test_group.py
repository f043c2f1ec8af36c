"""Run grouping and the labels readers see."""

from rdmabench_report.group import group_by_run, run_label
from rdmabench_report.load import Record

from synthetic import make_record


def test_run_label_adds_only_what_the_label_lacks():
    assert run_label("ofi:shm write bw t1", "write", "bw") == "ofi:shm write bw t1"
    assert run_label("ofi:verbs write", "write", "lat") == "ofi:verbs write lat"
    assert run_label("host", "read", "bw") == "host read bw"


def test_group_by_run_keeps_first_appearance_order_and_sorts_sizes():
    records = [Record("f", i, make_record(label=label, mode=mode, size=size))
               for i, (label, mode, size) in enumerate(
                   [("b", "bw", 4096), ("a", "bw", 64), ("b", "bw", 64), ("b", "lat", 64),
                    ("b", "bw", 64)], start=1)]
    runs = group_by_run(records)
    assert list(runs) == [("b", "write", "bw"), ("a", "write", "bw"), ("b", "write", "lat")]
    assert list(runs[("b", "write", "bw")]) == [64, 4096]
    assert [r.line for r in runs[("b", "write", "bw")][64]] == [3, 5]
