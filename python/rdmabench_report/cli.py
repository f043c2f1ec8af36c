"""Command line: rdmabench-report plot | compare | summary | heatmap | readme."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from . import __version__
from .compare import render_compare
from .errors import ReportError
from .fmt import TABLE_FORMATS
from .heatmap import heatmaps
from .load import load_files, load_host_verdicts
from .metrics import METRIC_NAMES, canonical_metric
from .plot import plot_all
from .readme import write_readme
from .reference import TABLES, load_references
from .summary import render_summary, summarize

PROG = "rdmabench-report"


def _metric(text: str) -> str:
    metric = canonical_metric(text)
    if metric is None:
        raise argparse.ArgumentTypeError(
            f"unknown metric {text!r}; use one of: {', '.join(METRIC_NAMES)}")
    return metric


def _add_reference_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reference", metavar="NAME", action="append", default=[],
                        help="overlay a published table (other hardware); repeatable; one of: "
                             + ", ".join(TABLES) + " (or the CSV file stem)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Plots, comparisons and summaries of rdmabench --json results.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    plot = commands.add_parser("plot", help="write PNG figures",
                               description="Throughput and message rate vs size, latency "
                                           "percentiles vs size (lat mode), latency CDF per run.")
    plot.add_argument("files", nargs="+", metavar="RESULTS.jsonl")
    plot.add_argument("-o", "--out-dir", required=True, metavar="DIR",
                      help="directory for the PNG files (created if missing)")
    _add_reference_option(plot)

    compare = commands.add_parser("compare", help="side-by-side table, ratios to the first file",
                                  description="One metric per (op, mode, size) for each file, "
                                              "with each file's ratio to the first.")
    compare.add_argument("files", nargs="+", metavar="RESULTS.jsonl")
    compare.add_argument("--metric", type=_metric, default="gbps",
                         help="gbps, mops, gbytes_per_s, p50, p99, p999 (p99.9), p9999, avg, min, "
                              "max, stdev (default gbps)")
    compare.add_argument("--format", choices=TABLE_FORMATS, default="text")
    _add_reference_option(compare)

    summary = commands.add_parser("summary", help="mean and stdev over repeats",
                                  description="Per (label, op, mode, size): repeats, mean and "
                                              "sample stdev of gbps, mops, p50, p99.")
    summary.add_argument("files", nargs="+", metavar="RESULTS.jsonl")
    summary.add_argument("--format", choices=TABLE_FORMATS, default="text")

    heatmap = commands.add_parser("heatmap", help="write a PNG heat-map per (op, mode, size) of a cluster run",
                                  description="Hosts by hosts (row: source, column: destination): bw in "
                                              "Gb/s, lat in p50 us, outliers in red; from rdmabench "
                                              "--cluster --json records.")
    heatmap.add_argument("files", nargs="+", metavar="RESULTS.jsonl")
    heatmap.add_argument("-o", "--out-dir", required=True, metavar="DIR",
                         help="directory for the PNG files (created if missing)")

    readme = commands.add_parser("readme", help="write REPORT_DIR/README.md of a job's results (make report)",
                                 description="The job's figures, a side-by-side comparison of its "
                                             "transports and the repeat summary, from "
                                             "REPORT_DIR/results.jsonl.")
    readme.add_argument("report_dir", metavar="REPORT_DIR", type=Path)
    readme.add_argument("job", metavar="JOB_FILE", help="the job file the results came from")
    readme.add_argument("pngs", nargs="*", metavar="PNG", type=Path, help="the figures `plot` wrote there")
    return parser


def _note(text: str) -> None:
    print(f"{PROG}: note: {text}", file=sys.stderr)


def run(args: argparse.Namespace) -> None:
    if args.command == "plot":
        references = load_references(args.reference)  # unknown names fail before any work
        written, notes = plot_all(load_files(args.files), args.out_dir, references)
        for path in written:
            print(path)
        for note in notes:
            _note(note)
    elif args.command == "compare":
        references = load_references(args.reference)
        text, notes = render_compare(args.files, args.metric, args.format, references)
        print(text)
        for note in notes:
            _note(note)
    elif args.command == "heatmap":
        for path in heatmaps(load_files(args.files), args.out_dir, load_host_verdicts(args.files)):
            print(path)
    elif args.command == "summary":
        print(render_summary(summarize(load_files(args.files)), args.format))
    elif args.command == "readme":
        print(write_readme(args.report_dir, args.job, args.pngs))


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)  # argparse itself exits 2 on bad usage
    try:
        run(args)
    except ReportError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    return 0
