#!/usr/bin/env python3
"""Counts the moments when every copy in flight waited a millisecond or more, per queue, from
rdmabench JSON Lines (bench/gpu_engine.sh's DIR or any --json file): an op that took >= 1 ms in a
run whose typical op takes tens of microseconds was caught in such a moment, and each one catches
the whole window, so ops >= 1 ms / (threads * depth) is how many there were.

    bench/gpu_stalls.py FILE.jsonl [FILE.jsonl...]
"""
import json
import sys


def stalls(r):
    bins = r["histogram"]["bins"]
    slow = sum(n for lo, _hi, n in bins if lo >= 1_000_000)
    slowest = max((lo for lo, _hi, n in bins if n), default=0)
    p = r["params"]
    return slow, slow / (p["threads"] * p["depth"]), slowest / 1000


def main(paths):
    print("file | engine | op | threads | depth | size | s | Mreq/s | p50 us | ops >= 1 ms | moments per queue | slowest us")
    for path in paths:
        for line in open(path):
            if not line.strip():
                continue
            r = json.loads(line)
            p, res = r["params"], r["results"]
            slow, moments, slowest = stalls(r)
            print(f"{path.split('/')[-1]} | {r['provider']} | {r['op']} | {p['threads']} | {p['depth']} | {r['size']} | "
                  f"{p['duration_s']} | {res['mops']:.2f} | {res['lat_us']['p50']:.1f} | {slow} | {moments:.1f} | {slowest:.0f}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: bench/gpu_stalls.py FILE.jsonl [FILE.jsonl...]")
    main(sys.argv[1:])
