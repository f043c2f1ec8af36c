"""Grouping records into runs (label, op, mode) and averaging repeats."""

from __future__ import annotations

from statistics import mean
from typing import Dict, List, Optional, Sequence, Tuple

from .metrics import metric_value

RunKey = Tuple[str, str, str]  # (label, op, mode)


def run_label(label: str, op: str, mode: str) -> str:
    """The label readers see: the record's label plus whichever of op and mode it does not
    already say (rdmabench's default labels, like "ofi:shm write bw t1", say both)."""
    words = label.split()
    missing = [part for part in (op, mode) if part not in words]
    return " ".join([label] + missing)


def group_by_run(records) -> Dict[RunKey, Dict[int, List]]:
    """run -> size -> its records (the repeats); runs in order of first appearance, sizes sorted."""
    runs: Dict[RunKey, Dict[int, List]] = {}
    for record in records:
        key = (record.label, record.op, record.mode)
        runs.setdefault(key, {}).setdefault(record.size, []).append(record)
    return {key: dict(sorted(by_size.items())) for key, by_size in runs.items()}


def mean_metric(records: Sequence, metric: str) -> Optional[float]:
    """Mean over the records that have the figure; None if none has it."""
    values = [v for v in (metric_value(r, metric) for r in records) if v is not None]
    return mean(values) if values else None
