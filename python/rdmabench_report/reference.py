"""Published reference tables (other people's hardware) as series to overlay on runs.

They are context, never expected values: plots draw them dashed and say "other hardware".
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from importlib import resources
from typing import Callable, Dict, List, Optional

from .errors import ReportError


@dataclass
class ReferenceSeries:
    table: str                  # canonical table name, e.g. "rdma-write-vs-size"
    name: str                   # what was measured, e.g. "host-verbs", "rdma-write"
    source: str                 # the document the figures come from (the CSV's source column)
    op: Optional[str] = None    # op the figures describe, for matching compare rows
    mode: Optional[str] = None  # "bw" for throughput tables, "lat" for latency tables
    by_size: Dict[str, Dict[int, float]] = field(default_factory=dict)  # metric -> size -> value
    flat: Dict[str, float] = field(default_factory=dict)  # metric -> value, for size-less figures
    group: str = ""             # milestones: the setup the step belongs to

    @property
    def legend(self) -> str:
        what = self.name if not self.op or self.op in self.name else f"{self.name} {self.op}"
        return f"reference: {self.source} {what} (other hardware)"

    @property
    def column_title(self) -> str:
        return f"ref: {self.name} (other hw)"


def _put(series: ReferenceSeries, metric: str, size: int, value: float) -> None:
    series.by_size.setdefault(metric, {})[size] = value


def _rdma_write_vs_size(rows) -> List[ReferenceSeries]:
    by_name: Dict[tuple, ReferenceSeries] = {}
    for row in rows:
        key = (row["transport"], row["source"])
        series = by_name.setdefault(key, ReferenceSeries(
            "rdma-write-vs-size", row["transport"], row["source"], op="write", mode="bw"))
        size, bytes_per_us = int(row["size_bytes"]), float(row["bytes_per_us"])
        # bytes/us is MB/s: x8 bits, /1000 for Gbit/s; divided by the size it is messages/us = Mops.
        _put(series, "gbps", size, bytes_per_us * 8 / 1000)
        _put(series, "mops", size, bytes_per_us / size)
    return list(by_name.values())


def _doca_dma_peak(rows) -> List[ReferenceSeries]:
    by_op: Dict[tuple, ReferenceSeries] = {}
    for row in rows:
        key = (row["op"], row["source"])
        series = by_op.setdefault(key, ReferenceSeries(
            "doca-dma-peak", "doca-dma peak", row["source"], op=row["op"], mode="bw"))
        size, mreqs = int(row["payload_bytes"]), float(row["peak_mreqs_per_s"])
        _put(series, "mops", size, mreqs)
        _put(series, "gbps", size, mreqs * size * 8 / 1000)  # Mreq/s x bytes = MB/s
    return list(by_op.values())


def _virtual_rdma_latency(rows) -> List[ReferenceSeries]:
    # perftest's "typical" is its median, so it stands for p50.
    columns = {"avg": "avg_us", "p50": "typical_us", "p99": "p99_us", "p999": "p999_us"}
    by_system: Dict[tuple, ReferenceSeries] = {}
    for row in rows:
        key = (row["system"], row["op"], row["source"])
        series = by_system.setdefault(key, ReferenceSeries(
            "virtual-rdma-latency", row["system"], row["source"], op=row["op"], mode="lat"))
        for metric, column in columns.items():
            if row[column].strip():
                _put(series, metric, int(row["bytes"]), float(row[column]))
    return list(by_system.values())


def _throughput_milestones(rows) -> List[ReferenceSeries]:
    return [ReferenceSeries("throughput-milestones", f"{row['setup']} {row['step']}", row["source"],
                            flat={"gbps": float(row["gbps"])}, group=row["setup"])
            for row in rows]


# canonical name -> (CSV file in the package, reader)
TABLES: Dict[str, tuple] = {
    "doca-dma-peak": ("doca_dma_peak.csv", _doca_dma_peak),
    "rdma-write-vs-size": ("rdma_write_vs_size.csv", _rdma_write_vs_size),
    "virtual-rdma-latency": ("virtual_rdma_latency.csv", _virtual_rdma_latency),
    "throughput-milestones": ("throughput_milestones.csv", _throughput_milestones),
}


def resolve_name(name: str) -> str:
    """Canonical table name from 'rdma-write-vs-size', 'rdma_write_vs_size' or '...csv'."""
    key = name.strip().lower()
    if key.endswith(".csv"):
        key = key[:-4]
    key = key.replace("_", "-")
    if key not in TABLES:
        raise ReportError(f"unknown reference {name!r}; use one of: {', '.join(TABLES)}")
    return key


def read_table_rows(name: str) -> List[dict]:
    filename, _ = TABLES[resolve_name(name)]
    text = resources.files(__package__).joinpath("reference", filename).read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def load_reference(name: str) -> List[ReferenceSeries]:
    canonical = resolve_name(name)
    reader: Callable = TABLES[canonical][1]
    return reader(read_table_rows(canonical))


def load_references(names) -> List[ReferenceSeries]:
    series: List[ReferenceSeries] = []
    for name in names or []:
        series.extend(load_reference(name))
    return series
