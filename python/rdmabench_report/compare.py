"""Side-by-side table of one metric per (op, mode, size): every input beside the first one,
like a paper setting host verbs beside a virtual layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .fmt import human_size, number, ratio, render_table
from .group import mean_metric
from .load import load_file
from .metrics import metric_title, metric_unit
from .reference import ReferenceSeries

RowKey = Tuple[str, str, int]  # (op, mode, size)


@dataclass
class Column:
    title: str
    values: Dict[RowKey, Optional[float]] = field(default_factory=dict)
    source: str = ""  # set for reference columns: the document the figures come from
    origin: str = ""  # set for reference columns: "table: system", for notes


def file_columns(paths: Sequence[str], metric: str) -> List[Column]:
    """A column per file, or per (file, label) when one file holds several labelled runs of the
    same (op, mode, size) (e.g. a thread sweep), so nothing is averaged across different runs."""
    columns: List[Column] = []
    for path in paths:
        by_label: Dict[str, Dict[RowKey, list]] = {}
        for record in load_file(path):
            key = (record.op, record.mode, record.size)
            by_label.setdefault(record.label, {}).setdefault(key, []).append(record)
        for label, groups in by_label.items():
            title = path if len(by_label) == 1 else f"{path}: {label}"
            columns.append(Column(title, {key: mean_metric(recs, metric)
                                          for key, recs in groups.items()}))
    return columns


def reference_columns(references: Sequence[ReferenceSeries], metric: str) -> List[Column]:
    """A column per reference system; its rows are matched by the series' op and mode."""
    columns: Dict[tuple, Column] = {}
    for series in references:
        for size, value in series.by_size.get(metric, {}).items():
            column = columns.setdefault((series.table, series.name, series.source),
                                        Column(series.column_title, source=series.source,
                                               origin=f"{series.table}: {series.name}"))
            column.values[(series.op or "", series.mode or "", size)] = value
    return list(columns.values())


def flat_reference_rows(references: Sequence[ReferenceSeries], metric: str) -> List[List[str]]:
    """Size-less references (throughput milestones) as labelled rows of their own."""
    return [[series.name, series.source, number(series.flat[metric])]
            for series in references if metric in series.flat]


def compare_table(columns: Sequence[Column]) -> Tuple[List[str], List[List[str]]]:
    """Header and rows: op, mode, size, first column, then each other column with its ratio.
    Rows are the (op, mode, size) the runs measured; references only fill in beside them."""
    keys = sorted({key for column in columns if not column.source for key in column.values})
    header = ["op", "mode", "size", columns[0].title]
    for column in columns[1:]:
        header += [column.title, "ratio"]
    rows = []
    for key in keys:
        base = columns[0].values.get(key)
        row = [key[0], key[1], human_size(key[2]), number(base)]
        for column in columns[1:]:
            value = column.values.get(key)
            row += [number(value), ratio(value, base)]
        rows.append(row)
    return header, rows


def render_compare(paths: Sequence[str], metric: str, style: str = "text",
                   references: Sequence[ReferenceSeries] = ()) -> Tuple[str, List[str]]:
    """The report text, and notes about references that add nothing (for stderr)."""
    runs = file_columns(paths, metric)
    run_keys = {key for column in runs for key in column.values}
    matched, notes = [], []
    for column in reference_columns(references, metric):
        if run_keys & set(column.values):
            matched.append(column)
        else:
            where = ", ".join(f"{op} {mode} {human_size(size)}"
                              for op, mode, size in sorted(column.values)[:4])
            more = ", ..." if len(column.values) > 4 else ""
            notes.append(f"reference {column.origin} has {metric} figures only at {where}{more} "
                         "(op mode size), which the runs did not measure; left out")
    notes += [f"reference {table} has no {metric} figures; it adds nothing here"
              for table in tables_without_metric(references, metric)]
    header, rows = compare_table(runs + matched)
    lines = [f"{metric}: {metric_title(metric)} ({metric_unit(metric)}), mean over repeats; "
             f"ratio = column / {runs[0].title}"]
    lines += [f"{column.title}: published figure from {column.source}, other hardware"
              for column in matched]
    parts = ["\n".join(lines), "", render_table(header, rows, style, numeric_from=2)]
    flat = flat_reference_rows(references, metric)
    if flat:
        parts += ["", "Reference figures without a message size (other hardware):", "",
                  render_table(["reference", "source", f"{metric} ({metric_unit(metric)})"],
                               flat, style, numeric_from=2)]
    return "\n".join(parts), notes


def tables_without_metric(references: Sequence[ReferenceSeries], metric: str) -> List[str]:
    """Reference tables that have nothing for this metric, so the CLI can say so."""
    tables = dict.fromkeys(series.table for series in references)
    return [table for table in tables
            if not any(metric in s.by_size or metric in s.flat
                       for s in references if s.table == table)]
