#!/usr/bin/env python3
"""Replaces one "## " section of bench/RESULTS.md, keeping the others, so each script that
measures something owns its section.

    python3 bench/results_md.py "## Heading" [RESULTS.md] < section.md
"""
import sys
from pathlib import Path

TITLE = """# rdmabench beside its peer tools

Each section is written by the script it names: `make compare` runs the loopback ones, and
`bench/dma_gpu.sh` with `bench/dma_table.py` the GPU one. Numbers move from run to run on this
shared 2-core machine; the ratios, measured side by side in one run, are what to read.
"""


def replace_section(results, heading, text):
    """The section keeps its place in the file; a new one goes at the end."""
    path = Path(results)
    lines = path.read_text().splitlines(keepends=True) if path.exists() else TITLE.splitlines(keepends=True)
    if not text.startswith(heading):
        text = heading.strip() + "\n\n" + text
    section = text.rstrip("\n") + "\n\n"
    out, skip, placed = [], False, False
    for line in lines:
        if line.startswith("## "):
            skip = line.strip() == heading.strip()
            if skip and not placed:
                out.append(section)
                placed = True
        if not skip:
            out.append(line)
    body = "".join(out).rstrip("\n") + "\n"
    if not placed:
        body += "\n" + section.rstrip("\n") + "\n"
    path.write_text(body)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: results_md.py HEADING [RESULTS.md] < section")
    target = sys.argv[2] if len(sys.argv) > 2 else Path(__file__).parent / "RESULTS.md"
    replace_section(target, sys.argv[1], sys.stdin.read())
