"""`rdmabench-report readme`: REPORT_DIR/README.md for `make report`: the job's figures, the
repeat summary and a side-by-side comparison, from REPORT_DIR/results.jsonl.

The comparison puts transports side by side (ofi:shm against ofi:tcp in the default job): compare
takes one file per column, so the results are split by transport into REPORT_DIR/by-transport/,
with the op and mode left out of the labels there (they are columns of the table already) so that
each transport's runs share a column. A job with one transport gets the comparison of its runs by
label instead.
"""

from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

from .compare import render_compare
from .errors import ReportError
from .load import load_files
from .summary import render_summary, summarize


@contextmanager
def _in(directory: Path):
    """compare names its columns after the files as given: run it beside them."""
    before = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


def transport_of(record: dict) -> str:
    t, p = record.get("transport", "?"), record.get("provider", "")
    return f"{t}:{p}" if p and p != t else t


def libraries(records: list) -> str:
    """The libraries the runs were made on, each once ("libfabric 1.17, UCX 1.13.1")."""
    names = sorted({r.get("library_version") or f"libfabric {r['libfabric_version']}" for r in records
                    if r.get("library_version") or r.get("libfabric_version")})
    return ", ".join(names) if names else "kernel TCP only"


def split_by_transport(records: list, out_dir: Path) -> list:
    """One file per transport, labels without op and mode; returns the file names."""
    groups: dict = {}
    for record in records:
        record = dict(record)
        words = [w for w in record.get("label", "").split() if w not in (record.get("op"), record.get("mode"))]
        record["label"] = " ".join(words)
        groups.setdefault(transport_of(record), []).append(record)
    out_dir.mkdir(exist_ok=True)
    names = []
    for transport, recs in groups.items():
        name = re.sub(r"[^A-Za-z0-9_.]+", "-", transport) + ".jsonl"  # ofi:tcp;ofi_rxm -> ofi-tcp-ofi_rxm
        (out_dir / name).write_text("".join(json.dumps(r) + "\n" for r in recs))
        names.append(name)
    return names


def write_readme(report_dir: Path, job: str, pngs: Sequence[Path]) -> Path:
    """Writes report_dir/README.md; returns its path."""
    pngs = [Path(p) for p in pngs]
    results = report_dir / "results.jsonl"
    if not results.is_file():
        raise ReportError(f"{results}: no such file; run the job with --json {results} first")
    records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    if not records:
        raise ReportError(f"{results} holds no results; run the job with --json {results} first")
    first = records[0]
    transports = sorted({transport_of(r) for r in records})

    out = [f"# rdmabench report: `{job}`", ""]
    out += [f"{len(records)} measurements from `rdmabench --job {job}` on {first.get('host', '?')}, "
            f"{first.get('timestamp', '?')}, rdmabench {first.get('version', '?')} on "
            f"{libraries(records)}; transports: {', '.join(transports)}. "
            "Raw results: [results.jsonl](results.jsonl) (JSON Lines, see docs/output-format.md); "
            "the tables rdmabench printed: [tables.txt](tables.txt).", ""]
    out += ["These are figures of this machine: compare them with runs made the same way "
            "(same transport, sizes, and validation setting), not with other hardware.", ""]

    titles = {"throughput_gbps.png": "Throughput", "message_rate_mops.png": "Message rate",
              "latency_percentiles.png": "Latency percentiles (lat mode)"}
    cdfs = [p for p in pngs if p.name.startswith("latency_cdf_")]
    names = {p.name for p in pngs}
    for name, title in titles.items():
        if name in names:
            out += [f"## {title}", "", f"![{title}]({name})", ""]

    if len(transports) > 1:
        names = split_by_transport(records, report_dir / "by-transport")
        where, files = report_dir / "by-transport", names
        intro = (f"`rdmabench-report compare` of the transports, the first ({names[0][:-6]}) as the base "
                 "of the ratios; the per-transport files are in by-transport/.")
    else:
        where, files = report_dir, ["results.jsonl"]
        intro = "`rdmabench-report compare` of the runs, by label."
    out += ["## Comparison", "", intro, ""]
    for metric, title in (("gbps", "Throughput (Gbit/s)"),
                          ("p50", "Median latency (us; in bw rows, post to completion under load)")):
        with _in(where):
            table, _ = render_compare(files, metric, "markdown")
        out += [f"### {title}", "", table, ""]
    if cdfs:
        out += ["## Latency CDFs", ""]
        out += [f"![{p.stem}]({p.name})" for p in cdfs] + [""]
    out += ["## Summary", "", "Mean and sample stdev over repeats, per run and size "
            "(`rdmabench-report summary`).", "",
            render_summary(summarize(load_files([str(results)])), "markdown"), ""]

    readme = report_dir / "README.md"
    readme.write_text("\n".join(out))
    return readme
