"""Synthetic rdmabench records built from known samples, independent of the package's code.

Binning follows docs/output-format.md: exact bins of width 1 below 128 ns; for v >= 128 with
msb position m (2^m <= v < 2^(m+1)), 128 sub-bins of width 2^(m-7).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter

QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999, "p9999": 0.9999}


def bin_of(value_ns: float):
    """(low, high) of the bin holding value_ns."""
    if value_ns < 128:
        low = math.floor(value_ns)
        return low, low + 1
    msb = math.floor(math.log2(value_ns))
    width = 2 ** (msb - 7)
    low = math.floor(value_ns / width) * width
    return low, low + width


def histogram_bins(samples_ns):
    counts = Counter(bin_of(v) for v in samples_ns)
    return [[low, high, count] for (low, high), count in sorted(counts.items())]


def rule_percentile_us(bins, q, min_ns, max_ns):
    """The documented rule, written out separately from the package's version."""
    total = sum(b[2] for b in bins)
    rank = max(1, math.ceil(q * total))
    seen = 0
    for low, high, count in bins:
        seen += count
        if seen >= rank:
            return min(max((low + high) / 2, min_ns), max_ns) / 1000
    raise AssertionError("rank beyond total")


def exact_percentile_us(samples_ns, q):
    """Nearest-rank percentile of the raw samples, same rank rule."""
    ordered = sorted(samples_ns)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1] / 1000


def make_record(samples_ns=None, *, label="synthetic run", op="write", mode="bw", size=4096,
                repeat=0, repeats=1, gbps=10.0, mops=None, lat_kind=None):
    """One schema-1 record; lat_us and bins come from samples_ns when given."""
    mops = gbps * 1000 / (size * 8) if mops is None else mops
    if lat_kind is None:
        lat_kind = "completion" if mode == "bw" else ("round_trip" if op == "read" else "half_round_trip")
    record = {
        "schema": 1, "tool": "rdmabench", "version": "0.1.0",
        "timestamp": "2026-11-22T17:40:00Z", "host": "testhost", "label": label,
        "transport": "loopback", "provider": "", "fabric": "", "domain": "",
        "op": op, "mode": mode, "size": size, "repeat": repeat, "repeats": repeats,
        "params": {"op": op, "mode": mode, "size": size, "threads": 1, "depth": 64},
        "results": {"iterations": 1000, "bytes": 1000 * size, "duration_s": 0.1,
                    "gbps": gbps, "gbytes_per_s": gbps / 8, "mops": mops, "lat_kind": lat_kind},
    }
    if samples_ns is not None:
        bins = histogram_bins(samples_ns)
        low, high = min(samples_ns), max(samples_ns)
        lat = {"min": low / 1000, "avg": statistics.fmean(samples_ns) / 1000,
               "max": high / 1000, "stdev": statistics.pstdev(samples_ns) / 1000}
        lat.update({name: rule_percentile_us(bins, q, low, high) for name, q in QUANTILES.items()})
        record["results"]["lat_us"] = lat
        record["histogram"] = {"unit": "ns", "bins": bins}
    return record


def write_jsonl(path, records, blank_lines=False):
    lines = []
    for record in records:
        lines.append(json.dumps(record))
        if blank_lines:
            lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return str(path)
