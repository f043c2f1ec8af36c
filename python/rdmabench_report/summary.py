"""Per (label, op, mode, size): repeats, and mean and sample stdev of the headline figures,
like a five-run table."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import mean, stdev
from typing import Dict, List, Optional, Sequence, Tuple

from .fmt import human_size, number, render_table
from .metrics import metric_unit, metric_value

SUMMARY_METRICS = ("gbps", "mops", "p50", "p99")


@dataclass
class SummaryRow:
    label: str
    op: str
    mode: str
    size: int
    n: int
    stats: Dict[str, Tuple[Optional[float], Optional[float]]]  # metric -> (mean, sample stdev)


def _mean_stdev(values: List[float]) -> Tuple[Optional[float], Optional[float]]:
    if not values:
        return None, None
    # Sample stdev (n - 1): the repeats are a sample of what the setup does; undefined for one.
    return mean(values), (stdev(values) if len(values) > 1 else None)


def summarize(records) -> List[SummaryRow]:
    groups: Dict[tuple, list] = {}
    for record in records:
        groups.setdefault((record.label, record.op, record.mode, record.size), []).append(record)
    order = {label: i for i, label in enumerate(dict.fromkeys(r.label for r in records))}
    rows = []
    for (label, op, mode, size), group in sorted(
            groups.items(), key=lambda item: (order[item[0][0]],) + item[0][1:]):
        stats = {}
        for metric in SUMMARY_METRICS:
            values = [v for v in (metric_value(r, metric) for r in group) if v is not None]
            stats[metric] = _mean_stdev(values)
        rows.append(SummaryRow(label, op, mode, size, len(group), stats))
    return rows


def render_summary(rows: Sequence[SummaryRow], style: str = "text") -> str:
    header = ["label", "op", "mode", "size", "n"]
    for metric in SUMMARY_METRICS:
        header += [f"{metric} ({metric_unit(metric)})", "stdev"]
    lines = []
    for row in rows:
        cells = [row.label, row.op, row.mode, human_size(row.size), str(row.n)]
        for metric in SUMMARY_METRICS:
            average, spread = row.stats[metric]
            cells += [number(average), number(spread)]
        lines.append(cells)
    note = "mean and sample stdev (n-1) over repeats; stdev '-' with a single repeat"
    return note + "\n\n" + render_table(header, lines, style, numeric_from=3)
