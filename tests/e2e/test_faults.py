"""--validate shown to fail. RDMABENCH_FAULT (docs/transports.md) damages one chosen op in one
process, the client's or the server's, and the run must end with exit 1 and an error line that
names the op and where it went wrong: a remote offset, or the message's sequence number."""
import os
import re
import subprocess

import pytest

from conftest import listed_transports, run, wait_for_text

WARMUP, ITERS = 8, 40
NTH = 20                 # a measured op: the 12th after the warm-up
LAST = WARMUP + ITERS    # the last op of the phase: nothing after it can hide or reveal it
COMMON = ["--size", "64", "--warmup", str(WARMUP), "--iters", str(ITERS), "--validate", "--timeout", "2"]
# Write and read targets drawn at random in 1 MiB: the faulted op's place is its own (a later op to
# the same bytes would repair a dropped or truncated write), and a misplaced op has room to move.
SPREAD = ["--random-space", "1M"]

OFFSET = r"byte at remote offset 0x[0-9a-f]+ is 0x[0-9a-f]{2}, expected 0x[0-9a-f]{2}"
LOST_OR_CORRUPTED = r"\(a write to this granule was lost or corrupted\)"
OUT_OF_PLACE = r"\(no write targeted it: a write landed out of place\)"


def case(name, fault, side, op, mode, expect):
    return pytest.param(fault, side, op, mode, expect, id=name)


# fault, the process that has it, the run, and the error line the client must print.
CAUGHT = [
    # Writes: the server checks every byte of its region against the client's coverage map.
    case("write-corrupt", f"corrupt:write:{NTH}", "client", "write", "bw", rf"write of 64 B: {OFFSET} {LOST_OR_CORRUPTED}"),
    case("write-misplace", f"misplace:write:{NTH}", "client", "write", "bw",
         rf"write of 64 B: {OFFSET} ({LOST_OR_CORRUPTED}|{OUT_OF_PLACE})"),
    case("write-drop", f"drop:write:{NTH}", "client", "write", "bw", rf"write of 64 B: {OFFSET} {LOST_OR_CORRUPTED}"),
    case("write-truncate", f"truncate:write:{NTH}", "client", "write", "bw",
         rf"write of 64 B: byte at remote offset 0x[0-9a-f]*(3f|7f|bf|ff) is 0x00, expected 0x[0-9a-f]{{2}} {LOST_OR_CORRUPTED}"),
    # Reads: the client checks what came back against the pattern the server filled in.
    case("read-corrupt", f"corrupt:read:{NTH}", "client", "read", "bw",
         rf"thread 0: read #{NTH - WARMUP - 1} of 64 B at remote offset 0x[0-9a-f]+: byte 0 is"),
    case("read-misplace", f"misplace:read:{NTH}", "client", "read", "bw",
         rf"thread 0: read #{NTH - WARMUP - 1} of 64 B at remote offset 0x[0-9a-f]+: byte 0 is"),
    # Messages: the server checks each message's length and its pattern, seeded by its sequence
    # number, and at the end that every message the client counted arrived.
    case("send-corrupt", f"corrupt:send:{NTH}", "client", "send", "bw",
         rf"server thread 0: send #{NTH - 1} of 64 B: byte 0 is"),
    case("send-duplicate", f"duplicate:send:{NTH}", "client", "send", "bw",
         rf"server thread 0: send #{NTH} of 64 B: byte 0 is"),  # the copy took #{NTH-1}: the original is stale
    case("send-truncate", f"truncate:send:{NTH}", "client", "send", "bw",
         rf"server thread 0: message #{NTH - 1} has 63 B, expected 64"),
    case("send-drop", f"drop:send:{NTH}", "client", "send", "bw",
         rf"server thread 0: send #{NTH - 1} of 64 B: byte 0 is"),  # the next message stands in its place
    case("send-drop-last", f"drop:send:{LAST}", "client", "send", "bw",
         rf"thread 0: {LAST} messages sent, {LAST - 1} received within 2 s"),
    # Ping-pong: the server checks the client's ping, the client checks the server's echo.
    case("lat-write-corrupt", f"corrupt:write:{NTH}", "client", "write", "lat",
         rf"server thread 0: write #{NTH - 1} of 64 B: byte 0 is"),
    case("lat-read-corrupt", f"corrupt:read:{NTH}", "client", "read", "lat",  # ping-pongs count on across the warm-up
         rf"thread 0: read #{NTH - 1} of 64 B at remote offset 0x[0-9a-f]+: byte 0 is"),
    case("lat-write-echo-corrupt", f"corrupt:write:{NTH}", "server", "write", "lat",
         rf"thread 0: write #{NTH - 1} of 64 B came back wrong: byte 0 is"),
    case("lat-send-echo-corrupt", f"corrupt:send:{NTH}", "server", "send", "lat",
         rf"thread 0: send #{NTH - 1} of 64 B came back wrong: byte 0 is"),
    # Atomics: the server checks each endpoint's counter against the ops the client counted, and
    # the client checks that each cswap found what the one before it left.
    case("fadd-drop", f"drop:fadd:{NTH}", "client", "fadd", "bw",
         rf"endpoint 0: the counter holds {LAST - 1} after {LAST} fadd ops"),
    case("fadd-duplicate", f"duplicate:fadd:{NTH}", "client", "fadd", "bw",
         rf"endpoint 0: the counter holds {LAST + 1} after {LAST} fadd ops"),
    case("cswap-duplicate", f"duplicate:cswap:{NTH}", "client", "cswap", "bw",
         rf"thread 0: cswap #{NTH - 1} on endpoint 0 found {NTH} in the counter, expected {NTH - 1}"),
    case("lat-fadd-drop", f"drop:fadd:{NTH}", "client", "fadd", "lat",
         rf"thread 0: fadd #{NTH - 1} on endpoint 0 found {NTH - 2} in the counter, expected {NTH - 1}"),
    # Immediate data: the target checks every immediate arrives, once, in order, and the payload.
    case("write-imm-drop", f"drop:write-imm:{NTH}", "client", "write-imm", "bw",
         rf"server thread 0: write-imm #{NTH - 1} on endpoint 0 carried immediate {NTH}, expected {NTH - 1}"),
    case("write-imm-corrupt", f"corrupt:write-imm:{NTH}", "client", "write-imm", "bw",
         rf"write of 64 B: {OFFSET} {LOST_OR_CORRUPTED}"),
    case("send-imm-drop", f"drop:send-imm:{NTH}", "client", "send-imm", "bw",
         rf"server thread 0: send-imm #{NTH - 1} carried immediate {NTH}, expected {NTH - 1}"),
    case("lat-write-imm-echo-corrupt", f"corrupt:write-imm:{NTH}", "server", "write-imm", "lat",
         rf"thread 0: write-imm #{NTH - 1} of 64 B came back wrong: byte 0 is"),
]


def transports_for(op):
    needs = ["peer_memory_readable"] + (["send"] if op.startswith("send") else []) + \
        (["atomics"] if op in ("fadd", "cswap") else []) + (["imm_data"] if op.endswith("-imm") else [])
    # ofi:tcp is left out to keep the file short: its data path is ofi's, as ofi:shm's is.
    return [t for t in listed_transports(*needs) if t in ("ofi:shm", "tcp", "dma:cpu")]


def with_transports(cases):
    return [pytest.param(*c.values, t, id=f"{c.id}-{t}") for c in cases for t in transports_for(c.values[2])]


def pair(rdmabench, tmp_path, port, transport, fault, side, op, mode, extra=()):
    """A server and a validating client, the fault in `side`'s environment only. Returns the
    client's result and the server's exit code (None if it did not exit) and stderr."""
    clean = {k: v for k, v in os.environ.items() if k != "RDMABENCH_FAULT"}
    faulty = dict(clean, RDMABENCH_FAULT=fault)
    log = tmp_path / "server.err"
    with open(log, "w") as err:
        server = subprocess.Popen([rdmabench, "--server", "--once", "--addr", f"127.0.0.1:{port}"], stderr=err,
                                  env=faulty if side == "server" else clean)
    try:
        wait_for_text(log, "listening")
        common = COMMON if op not in ("fadd", "cswap") else [a if a != "64" else "8" for a in COMMON]  # atomics are 8 B
        r = run([rdmabench, "--addr", f"127.0.0.1:{port}", "-t", transport, "--op", op, "--mode", mode] + common +
                (SPREAD if op in ("write", "read", "write-imm") and mode == "bw" else []) + list(extra), timeout=60, env=faulty if side == "client" else clean)
        try:
            code = server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            code = None
    finally:
        server.kill()
    return r, code, log.read_text(errors="replace")


@pytest.mark.parametrize("fault,side,op,mode,expect,transport", with_transports(CAUGHT))
def test_fault_is_caught(rdmabench, tmp_path, free_port, fault, side, op, mode, expect, transport):
    r, server_code, server_err = pair(rdmabench, tmp_path, free_port, transport, fault, side, op, mode)
    assert r.returncode == 1, (r.stdout, r.stderr)
    errors = [l for l in r.stderr.splitlines() if l.startswith("rdmabench: error:")]
    assert len(errors) == 1, r.stderr
    assert re.search(expect, errors[0]), errors[0]
    assert server_code == 1, server_err  # --once: the server exits with its run, which failed
    found_by_server = errors[0].removeprefix("rdmabench: error: server: ")
    if found_by_server != errors[0]:  # the server logs what it told the client, word for word
        assert f"run ended with an error: {found_by_server}" in server_err, server_err


@pytest.mark.parametrize("transport", transports_for("write"))
def test_a_duplicated_write_is_not_an_error(rdmabench, tmp_path, free_port, transport):
    """By design: a write repeated lands the same bytes at the same place, so the region the
    server checks is exactly what one write leaves. No validator can tell, and none should fail."""
    r, server_code, server_err = pair(rdmabench, tmp_path, free_port, transport, f"duplicate:write:{NTH}", "client",
                                      "write", "bw")
    assert r.returncode == 0, r.stderr
    assert server_code == 0, server_err


@pytest.mark.parametrize("side", ["client", "server"])
def test_a_malformed_fault_is_refused_before_anything_starts(rdmabench, free_port, side):
    args = ["--server", "--addr", f"127.0.0.1:{free_port}"] if side == "server" else ["--addr", f"127.0.0.1:{free_port}"]
    r = run([rdmabench] + args, timeout=10, env=dict(os.environ, RDMABENCH_FAULT="corrupt:wrte:5"))
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    assert "RDMABENCH_FAULT='corrupt:wrte:5': 'wrte' is not an op" in lines[0]
    assert "give KIND:OP:NTH" in lines[0]


# --bidir --validate: each direction is checked on its own region. The server's own stream, faulted
# in the server, is caught by the client (writes landing in its buffers) or by the server (reads).
@pytest.mark.parametrize("op, expect", [
    ("write", r"the server's reverse write of 64 B into thread 0's buffer: byte 0 is"),
    ("read", rf"server: thread 0: read #\d+ of 64 B at remote offset 0x[0-9a-f]+: byte 0 is"),
])
@pytest.mark.parametrize("transport", [t for t in listed_transports("peer_memory_readable") if t in ("ofi:shm", "tcp")])
def test_bidir_reverse_stream_fault_is_caught(rdmabench, tmp_path, free_port, transport, op, expect):
    r, server_code, server_err = pair(rdmabench, tmp_path, free_port, transport, f"corrupt:{op}:{NTH}", "server", op, "bw",
                                      extra=["--bidir"])
    assert r.returncode == 1, (r.stdout, r.stderr)
    errors = [l for l in r.stderr.splitlines() if l.startswith("rdmabench: error:")]
    assert len(errors) == 1 and re.search(expect, errors[0]), r.stderr


@pytest.mark.parametrize("transport", [t for t in listed_transports("peer_memory_readable") if t in ("ofi:shm", "tcp")])
def test_bidir_validated_clean_run_passes(rdmabench, tmp_path, free_port, transport):
    r = run([rdmabench, "--loopback", "-t", transport, "--op", "write,read", "--bidir", "--validate", "--threads", "2",
             "--size", "64,64K", "--iters", "200", "--random-space", "1M"], timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("reverse (server to client)") == 4
