"""Named figures of a record (gbps, mops, p50, ...) with units, and how to read them."""

from __future__ import annotations

from typing import Dict, Optional

from .hist import QUANTILES, percentile_us, record_bins

# Figures under results: name -> (what it is, unit).
RESULT_METRICS: Dict[str, tuple] = {
    "gbps": ("throughput", "Gbit/s"),
    "gbytes_per_s": ("throughput", "GB/s"),
    "mops": ("message rate", "Mops/s"),
}
# Figures under results.lat_us, all in microseconds.
LATENCY_METRICS: Dict[str, str] = {
    "min": "min latency", "p50": "p50 latency", "avg": "mean latency", "p99": "p99 latency",
    "p999": "p99.9 latency", "p9999": "p99.99 latency", "max": "max latency",
    "stdev": "latency stdev",
}
METRIC_NAMES = tuple(RESULT_METRICS) + tuple(LATENCY_METRICS)
# Spellings people type for the same figure.
ALIASES = {"p99.9": "p999", "p99.99": "p9999", "mean": "avg", "median": "p50",
           "throughput": "gbps", "rate": "mops"}


def canonical_metric(name: str) -> Optional[str]:
    """The metric's schema name, or None when it is not one."""
    name = name.strip().lower()
    name = ALIASES.get(name, name)
    return name if name in METRIC_NAMES else None


def metric_unit(metric: str) -> str:
    return RESULT_METRICS[metric][1] if metric in RESULT_METRICS else "us"


def metric_title(metric: str) -> str:
    return RESULT_METRICS[metric][0] if metric in RESULT_METRICS else LATENCY_METRICS[metric]


def _number(value) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def metric_value(record, metric: str) -> Optional[float]:
    """The figure as stored; percentiles missing from lat_us are recomputed from the bins."""
    if metric in RESULT_METRICS:
        return _number(record.results.get(metric))
    value = _number(record.lat_us.get(metric))
    if value is None and metric in QUANTILES and record.histogram_bins:
        lat = record.lat_us
        value = percentile_us(record_bins(record), QUANTILES[metric], lat.get("min"), lat.get("max"))
    return value
