#!/usr/bin/env python3
"""Seeds for `make fuzz`: well-formed control packets, router-to-router link messages and a
well-formed QP memory (two receives and one arrival queued), so the fuzzer starts from inputs that
get past every check and mutates them from there. Layouts as in
src/vrdma/proto/{control,link,qp_layout}.hh and src/core/spsc_ring.hh.

    tests/fuzz/make_seeds.py DIR
"""
import struct
import time
import sys
from pathlib import Path

MAGIC, VERSION = 0x31445256, 8
MAX_SGE = 8
LINK_MAGIC, LINK_VERSION = 0x4B4C5256, 5
ROUTER_AT = bytes(10) + b"\xff\xff" + bytes([10, 77, 1, 1]) + struct.pack("<HH", 7480, 0)


def packet(mtype, seq, body=b""):
    return struct.pack("<IHHII", MAGIC, VERSION, mtype, seq, len(body)) + body


def link(mtype, req, body=b"", tail=b""):
    """A link message and its trailer (src/vrdma/router/link_auth.hh): number, send time, MAC (none)."""
    head = struct.pack("<IHHQ", LINK_MAGIC, LINK_VERSION, mtype, 0x1122334455667788) + ROUTER_AT + bytes(4)
    trailer = struct.pack("<Qq", 1, 1_800_000_000 * 10**9) + bytes(32)
    return head + struct.pack("<QII", req, len(body) + len(tail), 0) + body + tail + trailer


def link_op(opcode, payload):
    pieces = bytes(24 * MAX_SGE)
    body = struct.pack("<IIBBHIQIIQQ", 1, 2, opcode, 0, 0, 9, 0x7f0000001000, 0x55, len(payload), 0, 0) + pieces
    return link(5, 0x100000001, body, payload)


def ring(capacity, slot_size, slots):
    head = struct.pack("<IIIIQ", 0x52535052, 1, slot_size, 8, capacity).ljust(64, b"\0")
    head += struct.pack("<Q", 0).ljust(64, b"\0")            # head: nothing popped
    head += struct.pack("<Q", len(slots)).ljust(64, b"\0")   # tail: this many pushed
    body = b"".join(s.ljust(slot_size, b"\0") for s in slots).ljust(capacity * slot_size, b"\0")
    return head + body


def pad64(b):
    return b.ljust((len(b) + 63) // 64 * 64, b"\0")


def qp_memory():
    recv = struct.pack("<QQII", 7, 0, 1, 0) + struct.pack("<QII", 0x7f0000001000, 4096, 0x1234)
    recvs = pad64(ring(2, 24 + 16 * MAX_SGE, [recv, recv]))
    arrival = struct.pack("<QIIBBB5x", 0, 64, 9, 1, 0, 0)
    arrivals = pad64(ring(2, 24, [arrival]))
    r_off = 64
    a_off = r_off + len(recvs)
    total = a_off + len(arrivals)
    header = struct.pack("<IIQQQIIQQI", 0x50515256, 2, r_off, a_off, total, 0, 1, 0, 0, 0).ljust(64, b"\0")
    return header + recvs + arrivals


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    seeds = {
        "alloc_pd": packet(4, 1),
        "reg_mr": packet(6, 2, struct.pack("<IIQQQ", 0xabc, 7, 4096, 0x7f0000000000, 0)),
        "stats_text": packet(12, 3, struct.pack("<I", 5) + b"hello"),
        "connect_qp": packet(15, 4, struct.pack("<IIQ", 1, 2, 3) + ROUTER_AT + bytes(4)),
        "create_srq": packet(21, 5, struct.pack("<IIQ", 1, 0, 4096)),
        "link_connect": link(1, 7, struct.pack("<II", 1, 2) + b"tenant".ljust(64, b"\0")),
        "link_key": link(4, 8, struct.pack("<iIQQQQ", 0, 6, 0x7f0000001000, 4096, 0x55, 0)),
        "link_op_send": link_op(0, b"x" * 64),
        "link_datagram": link(11, 0, struct.pack("<IIIIB3xI", 1, 2, 0x1234, 0, 2, 16) + b"tenant".ljust(64, b"\0"),
                              b"d" * 16),
        "create_ah": packet(23, 6, ROUTER_AT + bytes(4)),
        # A link connection's request (src/vrdma/router/link_handshake.hh): magic, version, from,
        # to (the fuzzer's router is at the zero address), nonce, send time, MAC.
        "link_connect_request": struct.pack("<II", 0x4C445256, 1) + ROUTER_AT + bytes(20) + b"n" * 16
                                + struct.pack("<q", time.time_ns()) + bytes(32),
        "qp_memory": qp_memory(),
    }
    for name, data in seeds.items():
        (out / f"seed-{name}").write_bytes(data)


if __name__ == "__main__":
    main()
