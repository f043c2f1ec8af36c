"""Writes REPORT_DIR/README.md for `make report`: the job's figures, the repeat summary and a
side-by-side comparison, all made by rdmabench-report from REPORT_DIR/results.jsonl.

usage: report_readme.py REPORT_DIR JOB_FILE PNG...   (the PNGs `rdmabench-report plot` printed)

The comparison puts transports side by side (ofi:shm against ofi:tcp in the default job):
rdmabench-report compare takes one file per column, so the results are split by transport into
REPORT_DIR/by-transport/, with the op and mode left out of the labels there (they are columns of
the table already) so that each transport's runs share a column. A job with one transport gets
the comparison of its runs by label instead.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

TOOL = Path(sys.executable).with_name("rdmabench-report")


def report_tool(*args: str, cwd: Path) -> str:
    done = subprocess.run([str(TOOL), *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"report_readme.py: rdmabench-report {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


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


def main() -> None:
    report_dir, job, pngs = Path(sys.argv[1]), sys.argv[2], [Path(p) for p in sys.argv[3:]]
    results = report_dir / "results.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    if not records:
        sys.exit(f"report_readme.py: {results} holds no results")
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
        table = report_tool("compare", *files, "--metric", metric, "--format", "markdown", cwd=where)
        out += [f"### {title}", "", table, ""]
    if cdfs:
        out += ["## Latency CDFs", ""]
        out += [f"![{p.stem}]({p.name})" for p in cdfs] + [""]
    out += ["## Summary", "", "Mean and sample stdev over repeats, per run and size "
            "(`rdmabench-report summary`).", "",
            report_tool("summary", "results.jsonl", "--format", "markdown", cwd=report_dir), ""]

    (report_dir / "README.md").write_text("\n".join(out))
    print(report_dir / "README.md")


if __name__ == "__main__":
    main()
