"""PNG figures: throughput and message rate vs size, latency percentiles vs size, latency CDFs.

Figures are drawn on matplotlib's Agg canvas directly (no pyplot), so importing this module does
not change the backend or global state of a caller's session.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from .errors import ReportError
from .fmt import human_size, size_with_unit
from .group import RunKey, group_by_run, mean_metric, run_label
from .hist import cdf_points_us, merge_bins, record_bins
from .metrics import metric_title, metric_unit
from .reference import ReferenceSeries

RUN_COLORS = colormaps["tab10"]
REFERENCE_COLORS = colormaps["Dark2"]
LOG_SPAN = 50        # a value axis spanning more than this factor goes logarithmic
MAX_SIZE_TICKS = 12  # beyond this, label every other power of two so labels stay readable
PANEL_SIZE_TICKS = 7  # the narrower latency panels hold fewer labels
PERCENTILE_PANELS = (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"))


def _new_figure(width: float = 9.5, height: float = 5.5) -> Figure:
    figure = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(figure)
    return figure


def _size_axis(ax, sizes: Sequence[int], max_ticks: int = MAX_SIZE_TICKS) -> None:
    """Log2 x axis with ticks at powers of two labelled 64, 4K, 1M."""
    ax.set_xscale("log", base=2)
    low = math.floor(math.log2(min(sizes)))
    high = math.ceil(math.log2(max(sizes)))
    if low == high:
        low, high = low - 1, high + 1
    exponents = list(range(low, high + 1))
    step = math.ceil(len(exponents) / max_ticks)
    ticks = [2 ** e for e in exponents[::step]]
    ax.set_xticks(ticks)
    ax.set_xticklabels([human_size(t) for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(2 ** low / 1.25, 2 ** high * 1.25)
    ax.set_xlabel("message size (bytes)")


def _value_axis(ax, values: Sequence[float], label: str) -> None:
    """Log scale when values span a wide range (small sizes would hug zero otherwise)."""
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > LOG_SPAN:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0, top=max(positive or [1]) * 1.1)
    ax.set_ylabel(label)
    ax.grid(True, which="major", alpha=0.3)


def _legend_outside(ax) -> None:
    # Outside the axes on the right, so the legend never hides a line.
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                  fontsize="small", ncol=2 if len(handles) > 16 else 1)


def _run_points(by_size: Dict[int, list], metric: str) -> List[Tuple[int, float]]:
    points = [(size, mean_metric(records, metric)) for size, records in by_size.items() if size > 0]
    return [(size, value) for size, value in points if value is not None and value > 0]


def _lat_kind(by_size: Dict[int, list]) -> str:
    kinds = {r.results.get("lat_kind") for records in by_size.values() for r in records}
    kinds.discard(None)
    return "/".join(sorted(kinds))


def rate_figure(runs: Dict[RunKey, Dict[int, list]], references: Sequence[ReferenceSeries],
                metric: str) -> Optional[Figure]:
    """Throughput (gbps) or message rate (mops) vs size: a line per stream (bw) run, dashed
    references. Ping-pong (lat) runs move one op at a time, so their rate is latency in another
    unit: they belong to the percentile and CDF figures, not beside the streams."""
    bw_runs = {key: by_size for key, by_size in runs.items() if key[2] == "bw"}
    figure = _new_figure()
    ax = figure.add_subplot()
    sizes: List[int] = []
    values: List[float] = []
    for index, ((label, op, mode), by_size) in enumerate(bw_runs.items()):
        points = _run_points(by_size, metric)
        if not points:
            continue
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", markersize=4, color=RUN_COLORS(index % 10),
                label=run_label(label, op, mode))
        sizes += xs
        values += ys
    if not values:
        return None
    _draw_references(ax, references, metric, sizes, values)
    _size_axis(ax, sizes)
    _value_axis(ax, values, f"{metric_title(metric)} ({metric_unit(metric)})")
    ax.set_title(f"{metric_title(metric).capitalize()} vs message size (mean over repeats)")
    _legend_outside(ax)
    return figure


def _draw_references(ax, references, metric, sizes: List[int], values: List[float]) -> None:
    """Dashed reference lines; size-less milestones as horizontal lines, best step per setup."""
    best_per_group: Dict[str, ReferenceSeries] = {}
    color_index = 0
    for series in references:
        points = sorted((s, v) for s, v in series.by_size.get(metric, {}).items() if s > 0 and v > 0)
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, linestyle="--", marker="x", markersize=5,
                    color=REFERENCE_COLORS(color_index % 8), label=series.legend)
            color_index += 1
            sizes += xs
            values += ys
        elif metric in series.flat:
            best = best_per_group.get(series.group)
            if best is None or series.flat[metric] > best.flat[metric]:
                best_per_group[series.group] = series
    for series in best_per_group.values():
        ax.axhline(series.flat[metric], linestyle="--", linewidth=1.2,
                   color=REFERENCE_COLORS(color_index % 8), label=series.legend)
        color_index += 1
        values.append(series.flat[metric])


def latency_percentiles_figure(runs: Dict[RunKey, Dict[int, list]],
                               references: Sequence[ReferenceSeries]) -> Optional[Figure]:
    """p50, p99, p99.9 vs size for lat-mode runs, one panel each so references can stay dashed."""
    lat_runs = {key: by_size for key, by_size in runs.items() if key[2] == "lat"}
    if not lat_runs:
        return None
    figure = _new_figure(width=16, height=5.2)
    axes = figure.subplots(1, len(PERCENTILE_PANELS), sharey=True)
    sizes: List[int] = []
    values: List[float] = []
    run_lines = 0
    for ax, (metric, title) in zip(axes, PERCENTILE_PANELS):
        for index, ((label, op, mode), by_size) in enumerate(lat_runs.items()):
            points = _run_points(by_size, metric)
            if points:
                xs, ys = zip(*points)
                kind = _lat_kind(by_size)
                ax.plot(xs, ys, marker="o", markersize=4, color=RUN_COLORS(index % 10),
                        label=run_label(label, op, mode) + (f" [{kind}]" if kind else ""))
                sizes += xs
                values += ys
                run_lines += 1
        _draw_references(ax, references, metric, sizes, values)
        ax.set_title(f"{title} latency")
    if not run_lines:
        return None
    for ax in axes:
        _size_axis(ax, sizes, PANEL_SIZE_TICKS)
    _value_axis(axes[0], values, "latency (us)")
    for ax in axes[1:]:
        ax.grid(True, which="major", alpha=0.3)
    figure.suptitle("Latency percentiles vs message size (lat mode, mean over repeats)")
    _legend_outside(axes[-1])
    return figure


def latency_cdf_figure(key: RunKey, by_size: Dict[int, list]) -> Optional[Figure]:
    """CDF of one run's latency, a curve per size, repeats pooled by summing their bins."""
    curves = []
    for size, records in by_size.items():
        bins = merge_bins(record_bins(r) for r in records)
        xs, ys = cdf_points_us(bins)
        if xs:
            curves.append((size, xs, ys, len(records)))
    if not curves:
        return None
    figure = _new_figure()
    ax = figure.add_subplot()
    colors = colormaps["viridis"]
    for index, (size, xs, ys, _) in enumerate(curves):
        shade = index / max(1, len(curves) - 1) * 0.9  # stop before viridis' pale yellow end
        ax.step(xs, ys, where="post", color=colors(shade), label=size_with_unit(size))
    all_x = [x for _, xs, _, _ in curves for x in xs if x > 0]
    if all_x and max(all_x) / min(all_x) > LOG_SPAN / 2:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("latency (us)")
    ax.set_ylabel("fraction of operations <= latency")
    ax.grid(True, which="major", alpha=0.3)
    kind = _lat_kind(by_size)
    pooled = max(n for *_, n in curves)
    ax.set_title(f"Latency CDF: {run_label(*key)}" + (f" [{kind}]" if kind else "")
                 + (f", {pooled} repeats pooled" if pooled > 1 else ""))
    _legend_outside(ax)
    return figure


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


def _save(figure: Figure, path: Path, written: List[Path]) -> None:
    figure.savefig(path, bbox_inches="tight")
    written.append(path)


def output_directory(out_dir: str) -> Path:
    """-o DIR, created if missing; a clear error when it cannot be."""
    directory = Path(out_dir)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ReportError(f"{out_dir}: cannot create the output directory ({err.strerror}); "
                          "pass another -o DIR") from None
    return directory


def plot_all(records, out_dir: str, references: Sequence[ReferenceSeries] = ()) -> Tuple[List[Path], List[str]]:
    """Write every figure that the records support; returns (paths written, notes for the user)."""
    directory = output_directory(out_dir)
    runs = group_by_run(records)
    written: List[Path] = []
    for metric, filename in (("gbps", "throughput_gbps.png"), ("mops", "message_rate_mops.png")):
        figure = rate_figure(runs, references, metric)
        if figure is not None:
            _save(figure, directory / filename, written)
    figure = latency_percentiles_figure(runs, references)
    if figure is not None:
        _save(figure, directory / "latency_percentiles.png", written)
    used_slugs: Dict[str, int] = {}
    for key, by_size in runs.items():
        figure = latency_cdf_figure(key, by_size)
        if figure is None:
            continue
        slug = _slug(run_label(*key))
        used_slugs[slug] = used_slugs.get(slug, 0) + 1
        suffix = "" if used_slugs[slug] == 1 else f"_{used_slugs[slug]}"
        _save(figure, directory / f"latency_cdf_{slug}{suffix}.png", written)
    return written, _unused_reference_notes(runs, references)


def _unused_reference_notes(runs, references) -> List[str]:
    """Latency references only show on the lat-mode figure; say so rather than drop them quietly."""
    has_lat = any(key[2] == "lat" for key in runs)
    notes = []
    for table in dict.fromkeys(s.table for s in references):
        latency_only = all(s.mode == "lat" for s in references if s.table == table)
        if latency_only and not has_lat:
            notes.append(f"reference {table} has latency figures only and there are no "
                         "lat-mode runs to set it beside; it was not drawn")
    return notes
