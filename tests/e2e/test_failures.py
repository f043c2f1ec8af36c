"""Bad input, dead peers and interrupts end with a clear error and a non-zero exit, never a hang."""
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import children_of, only_child_of, orphans_adopted, process_state, remove_dead_shm_names, run, wait_for_text


@pytest.mark.parametrize("args,flag", [
    (["--threads", "4", "--thread-gap", "64K", "--random-space", "128K"], "--random-space"),
    (["--size", "8K", "--random-space", "4K"], "--random-space"),
    (["--size", "8K", "--thread-gap", "4K"], "--thread-gap"),
    (["--batch", "4", "--size", "4K", "--local-mr", "8K"], "--local-mr"),
    (["--op", "write", "--recv-mr", "4K"], "--recv-mr"),
    (["--op", "send", "--size", "8K", "--recv-mr", "4K"], "--recv-mr"),
    (["--op", "send", "--size", "64", "--recv-mr", "4K", "--validate"], "--recv-mr"),
    (["--batch", "8", "--depth", "4"], "--depth"),
    (["--size", "12Q"], "--size"),
    (["--op", "teleport"], "--op"),
    (["--mode", "fast"], "--mode"),
    (["--read", "--op", "write"], "--read"),
    (["--iters", "10", "--duration", "1"], "--duration"),
    (["--cpus", "99"], "--cpus"),
    (["-t", "carrier-pigeon"], "-t"),
    (["--warmup", "abc"], "--warmup"),
    (["--mode", "lat", "--depth", "8"], "--depth"),
    (["--thread-gap", "1000"], "--thread-gap"),
    (["--bogus-flag"], "bogus"),
    (["-o", "nodelay=1"], "-o nodelay=1"),                      # ofi has no such option
    (["-t", "tcp", "-o", "nodelay=maybe"], "-o nodelay=maybe"),  # not a boolean
    (["-t", "tcp", "-o", "sndbuf=lots"], "-o sndbuf=lots"),      # not bytes
    (["-t", "tcp", "-o", "sndbuf=1K"], "-o sndbuf=1K"),          # below its range
    (["-t", "tcp:fast"], "-t tcp:fast"),                         # tcp has no variants
    (["-t", "inproc"], "-t inproc"),                             # in-process, for unit tests only
    (["--list", "xml"], "--list"),
    (["--threads", "many"], "--threads 'many': must be a whole number from 1 to 256, e.g. --threads 4"),  # our wording, not CLI11's
    (["--depth=-5"], "--depth '-5': must be a whole number from 1 to 4294967295, e.g. --depth 64"),
    (["--threads", "4294967297"], "--threads '4294967297': must be a whole number from 1 to 256, e.g. --threads 4"),
    (["--duration", "soon"], "--duration 'soon': must be a number of seconds, e.g. --duration 2.5"),
    (["--depth", "4", "--depth", "8"], "--depth given 2 times ('4', '8'): give it once"),
    # numbers a run cannot mean: each used to start a run that never ended or measured nothing
    (["--warmup", "99999999999999999999"], "--warmup '99999999999999999999'"),
    (["-n", "9223372036854775808"], "--iters '9223372036854775808'"),
    (["-D", "1e-9"], "--duration '1e-9'"),
    (["-D", "1e10"], "--duration '1e10'"),
    (["-D", "nan"], "--duration 'nan'"),
    (["--warmup", "1e308s"], "--warmup '1e308s'"),
    (["--timeout", "1e-9"], "--timeout '1e-9'"),
    (["--repeat", "1000000000"], "--repeat '1000000000': must be a whole number from 1 to 1000"),
    (["--size", "3:8"], "--size '3:8'"),
    # empty values, flags the role or mode ignores, and lists naming an item twice
    (["--op", ""], "--op '': an empty value"),
    (["--addr", ""], "--addr '': an empty value"),
    (["--json", ""], "--json '': an empty value"),
    (["--random-space", ""], "--random-space '': an empty value"),
    (["--server", "--iters", "5"], "--iters with --server"),
    (["--server", "-t", "tcp"], "--transport with --server"),
    (["--server", "--size", "4K", "--once"], "--size with --server"),
    (["--once"], "--once applies to --server only"),
    (["--mode", "lat", "--lazy"], "--lazy with --mode lat"),
    (["--op", "write,write"], "--op 'write,write': write is listed twice"),
    (["--mode", "bw,lat,bw"], "--mode 'bw,lat,bw': bw is listed twice"),
    # the tool's own wording, not the argument parser's
    (["--bogus-flag"], "--bogus-flag: not an rdmabench flag; rdmabench --help lists them"),
    (["--threads"], "--threads: no value; give --threads INT"),
    (["--size", "64", "4K"], "'4K': a value with no flag before it"),
    # what this machine must offer and where output goes, checked before anything starts
    (["-t", "ofi:no-such-provider"], "-t ofi:no-such-provider: not usable here"),
    (["-t", "dma", "--op", "send"], "-t dma: --op send"),
    (["--json", "/nonexistent-dir/out.json"], "--json /nonexistent-dir/out.json: cannot open"),
    (["--csv", "/nonexistent-dir/out.csv"], "--csv /nonexistent-dir/out.csv: cannot open"),
    (["--json", "same.out", "--csv", "./same.out"], "--csv ./same.out: the same file as --json same.out"),
])
def test_invalid_arguments_rejected_before_anything_starts(rdmabench, args, flag):
    own_transport = "-t" in args or "--server" in args  # a server takes its transport from the client
    r = run([rdmabench] + args if own_transport else [rdmabench, "-t", "ofi:shm"] + args, timeout=10)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    assert flag in lines[0]
    assert r.stdout == ""


@pytest.mark.parametrize("args", [
    ["-t", "ofi:no-such-provider"],
    ["-t", "dma", "--op", "send"],
    ["--json", "/nonexistent-dir/out.json"],
    ["--iters", "-5"],
])
def test_input_errors_start_no_loopback_child(rdmabench, args, tmp_path):
    """The loopback child is exec'd only after every check passed: an input error execs nothing."""
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    trace = tmp_path / "trace"
    r = run(["strace", "-f", "-e", "trace=execve", "-o", str(trace), rdmabench] + args, timeout=20)
    assert r.returncode == 2, r.stderr
    execs = [l for l in trace.read_text().splitlines() if "execve(" in l]
    assert len(execs) == 1, execs  # rdmabench itself, no child


def test_size_above_the_per_op_limit(rdmabench):
    # rdmabench's own 2 GiB limit, checked before any provider opens (no provider here has a lower
    # one; a provider's max_msg is checked by check_caps, tested in spec_check_test).
    r = run([rdmabench, "-t", "ofi:shm", "--size", "4G"], timeout=20)
    assert r.returncode == 2
    assert r.stderr.strip() == "rdmabench: error: --size 4 GiB: larger than 2 GiB per op; use a smaller size"


def test_no_server(rdmabench, free_port):
    t0 = time.time()
    r = run([rdmabench, "--addr", f"127.0.0.1:{free_port}", "-t", "ofi:shm"], timeout=20)
    assert r.returncode == 1
    assert "cannot connect" in r.stderr
    assert time.time() - t0 < 10


def test_missing_provider(rdmabench):
    r = run([rdmabench, "-t", "ofi:no-such-provider"], timeout=20)
    assert r.returncode == 2
    assert "no-such-provider" in r.stderr and "--list" in r.stderr


def test_address_in_use(rdmabench, free_port, tmp_path):
    log = tmp_path / "first.err"
    with open(log, "w") as err:
        first = subprocess.Popen([rdmabench, "--server", "--addr", f"127.0.0.1:{free_port}"], stderr=err)
    try:
        wait_for_text(log, "listening")
        r = run([rdmabench, "--server", "--addr", f"127.0.0.1:{free_port}"], timeout=10)
        assert r.returncode == 1
        assert "in use" in r.stderr
    finally:
        first.kill()
        first.wait()


@pytest.mark.parametrize("provider,op,mode", [("shm", "write", "bw"), ("tcp", "send", "bw"), ("tcp", "write", "lat")])
def test_killed_server_ends_the_run(rdmabench, free_port, tmp_path, provider, op, mode):
    """The whole server dies at once (its run's child too), as when its host goes down."""
    log = tmp_path / "server.err"
    with open(log, "w") as err_file:
        server = subprocess.Popen([rdmabench, "--server", "--addr", f"127.0.0.1:{free_port}"],
                                  stderr=err_file, start_new_session=True)
    wait_for_text(log, "listening")
    client = subprocess.Popen([rdmabench, "--addr", f"127.0.0.1:{free_port}", "-t", f"ofi:{provider}", "--op", op,
                               "--mode", mode, "--duration", "30", "--timeout", "3"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_text(log, "run from")
    time.sleep(1.0)  # into the measurement
    os.killpg(server.pid, signal.SIGKILL)
    server.wait()
    t0 = time.time()
    out, err = client.communicate(timeout=30)
    took = time.time() - t0
    remove_dead_shm_names()
    assert client.returncode == 1
    # The README's promise: --timeout (3 s) + 2 s, with one endpoint per thread; 0.5 s more for the
    # process to be scheduled and exit on a busy machine.
    assert took < 3 + 2 + 0.5, f"the client took {took:.1f} s to give up on a dead server"
    assert err.startswith("rdmabench: error: ") and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("transport", ["ofi:shm", "ofi:tcp", "tcp"])
def test_server_outlives_a_killed_client(rdmabench, free_port, tmp_path, transport):
    """A client killed mid-run costs the server that run only: each run is served by a child process,
    so even a worker stuck on a lock the dead client held (ofi:shm) ends with that child."""
    log = tmp_path / "server.err"
    with open(log, "w") as err_file:
        server = subprocess.Popen([rdmabench, "--server", "--addr", f"127.0.0.1:{free_port}"], stderr=err_file)
    try:
        wait_for_text(log, "listening")
        client = subprocess.Popen([rdmabench, "--addr", f"127.0.0.1:{free_port}", "-t", transport, "--op", "write",
                                   "--duration", "30", "--timeout", "2"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_text(log, "run from")
        time.sleep(1.0)  # into the measurement
        client.kill()
        client.wait()
        remove_dead_shm_names()
        second = run([rdmabench, "--addr", f"127.0.0.1:{free_port}", "-t", transport, "--op", "write",
                      "--duration", "1", "--warmup", "0.2s", "--timeout", "2", "--validate"], timeout=60)
        assert second.returncode == 0, second.stderr
        assert "write" in second.stdout
        assert server.poll() is None
    finally:
        server.terminate()
        server.wait(timeout=40)
    err = log.read_text()
    assert server.returncode == 0, err
    assert err.count("run from 127.0.0.1") == 2
    # the killed client's run, reported by the server: an error, or the stuck worker that ended its child
    assert "run ended with an error" in err or "still inside the transport" in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_prints_partial_results(rdmabench, tmp_path, sig):
    """SIGTERM (what `timeout` sends) ends a run as Ctrl-C does: partial results, the child reaped."""
    out, table = tmp_path / "r.jsonl", tmp_path / "r.csv"
    with orphans_adopted():
        client = subprocess.Popen([rdmabench, "-t", "ofi:shm", "--duration", "30", "--json", str(out), "--csv", str(table)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        child = only_child_of(client)
        time.sleep(2.0)  # into the measurement
        client.send_signal(sig)
        stdout, stderr = client.communicate(timeout=15)
        # the --loopback server went with the run, and was reaped (or it would now be a child of ours)
        assert process_state(child) is None, f"the --loopback server {child} is left in state {process_state(child)}"
    assert client.returncode == 130
    assert "partial" in stdout
    assert "interrupted" in stderr
    rec = [l for l in out.read_text().splitlines() if l][0]
    assert '"partial":true' in rec
    header, row = table.read_text().splitlines()[:2]
    assert dict(zip(header.split(","), row.split(",")))["partial"] == "true"  # CSV says so too


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_second_interrupt_leaves_no_loopback_child(rdmabench, second):
    """A second Ctrl-C exits at once, past every destructor: the loopback child is still stopped
    and reaped, not left to init (here, with us as subreaper, it would become our child)."""
    with orphans_adopted():
        client = subprocess.Popen([rdmabench, "-t", "ofi:shm", "--duration", "30"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        child = only_child_of(client)
        time.sleep(1.0)
        client.send_signal(signal.SIGINT)
        time.sleep(0.005)  # two pending SIGINTs would merge into one; the run stops within ms
        client.send_signal(second)
        _, stderr = client.communicate(timeout=15)
        time.sleep(0.3)
        assert process_state(child) is None, f"the --loopback server {child} is left in state {process_state(child)}"
        assert child not in children_of(os.getpid())
    assert client.returncode == 130
    assert "second interrupt" in stderr
