#!/usr/bin/env python3
"""Turns bench/gpu_engine.sh output into bench/RESULTS.md's section on dma:cuda -o engine=sm:
Mreq/s per payload for the GPU-thread engine (by warps per queue) beside the copy engines and
DOCA's peaks, by op and thread count, and the crossover: the smallest payload at which the copy
engines are at least as fast as the best sm configuration.

    bench/gpu_engine_table.py DIR [RESULTS.md]
"""
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

from results_md import replace_section

HEADING = "## GPU-thread engine (dma:cuda -o engine=sm) beside the copy engines"
SIZES = [16, 64, 256, 1024, 4096, 16384, 65536]
GOALS = {16: 50.0, 64: 50.0, 256: 20.0}  # issue 34's Mreq/s goals on an H100


def label(n):
    return f"{n // 1024}K" if n >= 1024 else str(n)


def rates(path):
    """{(op, threads): {size: Mreq/s}} from one JSON Lines file."""
    table = defaultdict(dict)
    if Path(path).exists():
        for line in Path(path).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                table[(r["op"], r["params"]["threads"])][r["size"]] = r["results"]["mops"]
    return table


def doca_peaks():
    ref = defaultdict(dict)
    path = Path(__file__).resolve().parents[1] / "python/rdmabench_report/reference/doca_dma_peak.csv"
    for row in csv.DictReader(path.open()):
        ref[row["op"]][int(row["payload_bytes"])] = float(row["peak_mreqs_per_s"])
    return ref


def crossover(copy, sms):
    """The smallest payload where the copy engines match the best sm configuration, or None."""
    for s in SIZES:
        best_sm = max((t.get(s, 0) for t in sms), default=0)
        if copy.get(s, 0) >= best_sm > 0:
            return s
    return None


def section(d):
    d = Path(d)
    gpu = list(csv.DictReader((d / "gpu.csv").read_text().replace(", ", ",").splitlines()))[0]
    copy = rates(d / "copy.jsonl")
    sm = {int(p.stem.split("_w")[1]): rates(p) for p in sorted(d.glob("sm_w*.jsonl"))}
    out = [HEADING, "",
           f"`bench/gpu_engine.sh` on {gpu['name']} (driver {gpu['driver_version']}), PCIe Gen"
           f"{gpu['pcie.link.gen.current']} x{gpu['pcie.link.width.current']}. Both engines passed `--validate` "
           "(every byte checked) first. Mreq/s = million copies per second, all threads together; batch 16, "
           "depth 256, random addressing in 16 MiB per thread, 0.4 s a point. `write` = host -> device, "
           "`read` = device -> host; `sm wN` = the persistent kernel with N warps per queue (thread).", "",
           "| engine | op | threads | " + " | ".join(label(s) for s in SIZES) + " |",
           "|---|---|---|" + "---|" * len(SIZES)]
    for key in sorted(copy):
        rows = [("copy", copy[key])] + [(f"sm w{w}", t[key]) for w, t in sorted(sm.items()) if key in t]
        for name, row in rows:
            out.append(f"| {name} | {key[0]} | {key[1]} | " + " | ".join(f"{row.get(s, 0):.2f}" for s in SIZES) + " |")
    ref = doca_peaks()
    for op in ("read", "write"):
        out.append(f"| DOCA peak (ref) | {op} | | " + " | ".join(f"{ref[op].get(s, 0):.2f}" for s in SIZES) + " |")
    goal_heads = " | ".join(f"best sm at {label(s)} (goal {g:g})" for s, g in GOALS.items())
    out += ["", "Crossover (smallest payload where the copy engines match the best sm configuration) and issue 34's "
            "goals, Mreq/s:", "", f"| op | threads | crossover | {goal_heads} |", "|---|---|---|" + "---|" * len(GOALS)]
    for key in sorted(copy):
        sms = [t[key] for t in sm.values() if key in t]
        c = crossover(copy[key], sms)
        best = {s: max((t.get(s, 0) for t in sms), default=0) for s in GOALS}
        cells = " | ".join(f"{best[s]:.1f} {'met' if best[s] >= g else 'not met'}" for s, g in GOALS.items())
        out.append(f"| {key[0]} | {key[1]} | {label(c) if c else 'none up to 64K'} | {cells} |")
    pause = d / "pause.txt"  # gpu_pause_floor's lines: the GPU's own pauses of a persistent kernel
    if pause.exists():
        out += ["", "The floor under the sm engine's tail, `bench/tools/gpu_pause_floor` (pauses of a persistent "
                "kernel nothing else competes with, by the GPU's own clock):", ""]
        out += [f"- {line.removeprefix('gpu_pause_floor: ')}" for line in pause.read_text().splitlines() if line.strip()]
    notes = d / "notes.md"  # hand-written: how the kernel got here, what the table says
    if notes.exists():
        out += ["", notes.read_text().rstrip()]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: bench/gpu_engine_table.py DIR [RESULTS.md]")
    replace_section(sys.argv[2] if len(sys.argv) > 2 else Path(__file__).parent / "RESULTS.md", HEADING, section(sys.argv[1]))
