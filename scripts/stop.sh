#!/usr/bin/env bash
# Stops what scripts/start.sh started.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
run="${RMQ_RUN_DIR:-$root/run}"
for name in proxy dl0 dl1 dl2 raft0 raft1 raft2 slave master broker namesrv; do
  pidfile="$run/$name.pid"
  [ -f "$pidfile" ] || continue
  pid="$(cat "$pidfile")"
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    echo "stopped $name ($pid)"
  fi
  rm -f "$pidfile"
done
