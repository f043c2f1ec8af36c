"""Latency histogram bins: percentiles by the documented rule, merging, CDF points.

Rule (docs/output-format.md): rank = max(1, ceil(q * total)); the first bin whose cumulative
count reaches rank gives (low + high) / 2, clamped to the observed [min, max]; reported in us.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from .errors import ReportError

Bin = Tuple[float, float, int]  # (low_ns, high_ns, count), holding low <= v < high

# The percentile fields of lat_us and their quantiles.
QUANTILES: Dict[str, float] = {"p50": 0.5, "p99": 0.99, "p999": 0.999, "p9999": 0.9999}


def parse_bins(raw: Sequence, where: str = "histogram") -> List[Bin]:
    """Validate [low, high, count] triples; sorted by low because the rule walks values upward."""
    bins: List[Bin] = []
    for index, item in enumerate(raw):
        ok = (isinstance(item, (list, tuple)) and len(item) == 3
              and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in item)
              and item[0] < item[1] and item[2] >= 0 and float(item[2]).is_integer())
        if not ok:
            raise ReportError(f"{where}: histogram bin #{index} {item!r} is not "
                              "[low_ns, high_ns, count]; fix or delete that line")
        bins.append((item[0], item[1], int(item[2])))
    bins.sort()
    return bins


def percentile_us(bins: Sequence[Bin], q: float,
                  min_us: Optional[float] = None, max_us: Optional[float] = None) -> Optional[float]:
    """The q-quantile in us by the documented rule; None for an empty histogram."""
    total = sum(count for _, _, count in bins)
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    cumulative = 0
    for low, high, count in bins:
        cumulative += count
        if cumulative >= rank:
            value = (low + high) / 2 / 1000
            # Clamping in us returns exactly the stored min/max when it applies.
            if min_us is not None and value < min_us:
                value = min_us
            if max_us is not None and value > max_us:
                value = max_us
            return value
    return None  # unreachable: cumulative ends at total >= rank


def record_bins(record) -> List[Bin]:
    return parse_bins(record.histogram_bins, record.where)


def recompute_lat_us(record) -> Dict[str, Optional[float]]:
    """p50..p9999 of one record from its bins, clamped to its stored min/max (a cross-check)."""
    bins = record_bins(record)
    lat = record.lat_us
    return {name: percentile_us(bins, q, lat.get("min"), lat.get("max"))
            for name, q in QUANTILES.items()}


def merge_bins(bin_lists: Iterable[Sequence[Bin]]) -> List[Bin]:
    """Sum counts of identical bins, e.g. to pool the repeats of one run."""
    counts: Dict[Tuple[float, float], int] = defaultdict(int)
    for bins in bin_lists:
        for low, high, count in bins:
            counts[(low, high)] += count
    return sorted((low, high, count) for (low, high), count in counts.items())


def cdf_points_us(bins: Sequence[Bin]) -> Tuple[List[float], List[float]]:
    """(x_us, fraction <= x) at each bin's upper edge, starting from 0 at the first lower edge."""
    total = sum(count for _, _, count in bins)
    if total == 0:
        return [], []
    xs = [bins[0][0] / 1000]
    ys = [0.0]
    cumulative = 0
    for low, high, count in bins:
        cumulative += count
        xs.append(high / 1000)
        ys.append(cumulative / total)
    return xs, ys
