#!/usr/bin/env bash
# CTest's fixture for tests that need a vrdma router: `start DIR VRDMAD` runs vrdmad on DIR/vrdma.sock
# (detached, its output in DIR/vrdmad.log) and waits for the socket; `stop DIR` ends it.
set -euo pipefail
case "$1" in
  start)
    mkdir -p "$2"
    if [ -f "$2/vrdmad.pid" ]; then kill "$(cat "$2/vrdmad.pid")" 2>/dev/null || true; fi
    rm -f "$2/vrdma.sock"
    setsid "$3" --socket "$2/vrdma.sock" </dev/null >"$2/vrdmad.log" 2>&1 &
    echo $! >"$2/vrdmad.pid"
    for _ in $(seq 500); do [ -S "$2/vrdma.sock" ] && exit 0; sleep 0.02; done
    echo "vrdmad did not start: $(cat "$2/vrdmad.log")" >&2
    exit 1 ;;
  stop)
    [ -f "$2/vrdmad.pid" ] && kill "$(cat "$2/vrdmad.pid")" 2>/dev/null || true
    rm -f "$2/vrdmad.pid" ;;
  *) echo "usage: router_fixture.sh start DIR VRDMAD | stop DIR" >&2; exit 2 ;;
esac
