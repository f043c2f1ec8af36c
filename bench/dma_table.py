#!/usr/bin/env python3
"""Turns bench/dma_gpu.sh output into the "DMA payload table" section of bench/RESULTS.md:
Mreq/s per payload for each (op, threads, batch), beside the DOCA DMA reference peaks, and the
large-copy GB/s as a share of the GPU's PCIe link.

    bench/dma_table.py DIR [RESULTS.md]
"""
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

from results_md import replace_section

HEADING = "## DMA payload table (copy engines)"
SIZES = [16, 64, 256, 1024, 4096, 16384, 65536]
GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}  # GB/s per lane, per direction


def load(path):
    return [json.loads(l) for l in Path(path).read_text().splitlines() if l.strip()] if Path(path).exists() else []


def label(n):
    return f"{n // 1024}K" if n >= 1024 else str(n)


def reference():
    ref = defaultdict(dict)
    path = Path(__file__).resolve().parents[1] / "python/rdmabench_report/reference/doca_dma_peak.csv"
    for row in csv.DictReader(path.open()):
        ref[row["op"]][int(row["payload_bytes"])] = float(row["peak_mreqs_per_s"])
    return ref


def section(d):
    d = Path(d)
    gpu = list(csv.DictReader((d / "gpu.csv").read_text().replace(", ", ",").splitlines()))[0]
    gen, width = int(gpu["pcie.link.gen.current"]), int(gpu["pcie.link.width.current"])
    link = GBPS_PER_LANE[gen] * width
    out = [HEADING, "",
           f"`bench/dma_gpu.sh` on {gpu['name']} (driver {gpu['driver_version']}), PCIe Gen{gen} x{width}: "
           f"{link:.1f} GB/s per direction. Mreq/s = million copies per second, all threads together; "
           "addressing random in a 64 MiB region (16 MiB per thread), depth 256, 0.4 s per point. "
           "`write` = host -> device, `read` = device -> host. The DOCA columns are the source document's "
           "peaks on a BlueField (other hardware: context, not a target).", ""]
    table = defaultdict(dict)
    for r in load(d / "dma_cuda.jsonl"):
        p = r["params"]
        table[(r["op"], p["threads"], p["batch"])][r["size"]] = r["results"]["mops"]
    ref = reference()
    out.append("| engine | op | threads | batch | " + " | ".join(label(s) for s in SIZES) + " |")
    out.append("|---|---|---|---|" + "---|" * len(SIZES))
    for (op, t, b) in sorted(table):
        out.append(f"| dma:cuda | {op} | {t} | {b} | " + " | ".join(f"{table[(op, t, b)].get(s, 0):.2f}" for s in SIZES) + " |")
    for r_op in ("read", "write"):
        out.append(f"| DOCA peak (ref) | {r_op} | | | " + " | ".join(f"{ref[r_op].get(s, 0):.2f}" for s in SIZES) + " |")
    cpu = defaultdict(dict)
    for r in load(d / "dma_cpu.jsonl"):
        cpu[r["op"]][r["size"]] = r["results"]["mops"]
    for op in sorted(cpu):
        out.append(f"| dma:cpu | {op} | 1 | 16 | " + " | ".join(f"{cpu[op].get(s, 0):.2f}" for s in SIZES) + " |")
    out += ["", "Large copies (1 thread, batch 16, depth 64):", "",
            "| op | bytes | GB/s | share of PCIe link |", "|---|---|---|---|"]
    for r in load(d / "dma_cuda_gbs.jsonl"):
        g = r["results"]["gbytes_per_s"]
        out.append(f"| {r['op']} | {label(r['size']) if r['size'] < 1 << 20 else str(r['size'] >> 20) + 'M'} | {g:.1f} | {g / link:.0%} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: bench/dma_table.py DIR [RESULTS.md]")
    replace_section(sys.argv[2] if len(sys.argv) > 2 else Path(__file__).parent / "RESULTS.md", HEADING, section(sys.argv[1]))
