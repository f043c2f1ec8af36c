"""Heat-maps of a cluster run (rdmabench --cluster --json): one PNG per (op, mode, size), hosts by
hosts, source on the rows and destination on the columns; bw cells in Gb/s, lat cells in p50 us,
each the mean over the pair's repeats. Outliers (as rdmabench marks them) are in red, and so are
the hosts rdmabench named slow (its per-host verdict lines), on the axes and in the legend."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .errors import ReportError
from .fmt import size_with_unit
from .plot import output_directory

Key = Tuple[str, str, int]


def _cluster_groups(records) -> Tuple[Dict[Key, Dict[Tuple[int, int], List[float]]], Dict[int, str]]:
    groups: Dict[Key, Dict[Tuple[int, int], List[float]]] = {}
    names: Dict[int, str] = {}
    for rec in records:
        cluster = rec.data.get("cluster")
        if not isinstance(cluster, dict):
            continue
        try:
            src, dst = int(cluster["src_rank"]), int(cluster["dst_rank"])
            names[src], names[dst] = str(cluster["src_host"]), str(cluster["dst_host"])
        except (KeyError, TypeError, ValueError):
            raise ReportError(f"{rec.where}: its cluster member lacks src_rank, dst_rank, src_host or "
                              "dst_host; is this rdmabench --cluster output?") from None
        value = rec.results.get("gbps") if rec.mode == "bw" else rec.lat_us.get("p50")
        if not isinstance(value, (int, float)):
            raise ReportError(f"{rec.where}: no {'gbps' if rec.mode == 'bw' else 'lat_us.p50'} figure")
        groups.setdefault((rec.op, rec.mode, rec.size), {}).setdefault((src, dst), []).append(float(value))
    return groups, names


def _verdict_text(verdict: dict) -> str:
    """' SLOW: sends 0.01x, receives 0.01x' for a host named slow, else ''."""
    if not verdict.get("slow"):
        return ""
    sides = [f"{side} {verdict[side]['ratio']:.2g}x" for side in ("sends", "receives")
             if isinstance(verdict.get(side), dict) and verdict[side].get("slow")]
    return "  SLOW: " + ", ".join(sides) + " the pairs without it"


def heatmap_figure(key: Key, cells: Dict[Tuple[int, int], List[float]], names: Dict[int, str],
                   outlier_bw: float = 0.8, outlier_lat: float = 2.0,
                   verdicts: Optional[Dict[int, dict]] = None) -> Figure:
    op, mode, size = key
    hosts = max(max(pair) for pair in cells) + 1
    means = {pair: statistics.fmean(values) for pair, values in cells.items()}
    median = statistics.median(means.values())
    grid = [[float("nan")] * hosts for _ in range(hosts)]
    for (src, dst), value in means.items():
        grid[src][dst] = value
    figure = Figure(figsize=(2.2 + 0.9 * hosts, 1.6 + 0.8 * hosts))
    FigureCanvasAgg(figure)
    ax = figure.add_subplot(1, 1, 1)
    # Bandwidth: more is better (bright); latency: less is better, so its scale is reversed.
    image = ax.imshow(grid, cmap="viridis" if mode == "bw" else "viridis_r")
    unit = "Gb/s" if mode == "bw" else "p50 us"
    figure.colorbar(image, ax=ax, label=unit)
    for (src, dst), value in means.items():
        outlier = value < outlier_bw * median if mode == "bw" else value > outlier_lat * median
        ax.text(dst, src, f"{value:.3g}", ha="center", va="center", fontsize=8,
                color="red" if outlier else "white", fontweight="bold" if outlier else "normal")
    verdicts = verdicts or {}
    labels = [str(i) for i in range(hosts)]
    ax.set_xticks(range(hosts), labels)
    ax.set_yticks(range(hosts), labels)
    for ticks in (ax.get_xticklabels(), ax.get_yticklabels()):
        for i, tick in enumerate(ticks):
            if verdicts.get(i, {}).get("slow"):
                tick.set_color("red")
                tick.set_fontweight("bold")
    ax.set_xlabel("destination host")
    ax.set_ylabel("source host")
    ax.set_title(f"{op} {mode} {size_with_unit(size)}: {unit} per pair (median {median:.3g})", fontsize=10)
    legend = "\n".join(f"{i}: {names.get(i, '?')}{_verdict_text(verdicts.get(i, {}))}" for i in range(hosts))
    figure.text(0.01, -0.02, legend, fontsize=7, va="top", family="monospace")
    return figure


def heatmaps(records, out_dir: str, host_verdicts: Optional[List[dict]] = None) -> List[Path]:
    groups, names = _cluster_groups(records)
    if not groups:
        raise ReportError("no cluster records (lines with a \"cluster\" member) in these files; "
                          "write them with rdmabench --cluster --json FILE")
    directory = output_directory(out_dir)
    written = []
    for key, cells in groups.items():
        op, mode, size = key
        path = directory / re.sub(r"[^A-Za-z0-9._-]+", "_", f"heatmap_{op}_{mode}_{size}.png")
        verdicts = {int(v["host"]): v for v in host_verdicts or []
                    if (v.get("op"), v.get("mode"), v.get("size")) == key and "host" in v}
        heatmap_figure(key, cells, names, verdicts=verdicts).savefig(path, bbox_inches="tight")
        written.append(path)
    return written
