#!/usr/bin/env bash
# Builds and starts our name server (mqnamesrv) and broker (mqbroker) with a working default
# config, on 127.0.0.1.
#   scripts/start.sh            start (name server on 9876, broker on 10911)
#   scripts/stop.sh             stop them
# State lives in $RMQ_RUN_DIR (default ./run): configs, store, logs, pids.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
run="${RMQ_RUN_DIR:-$root/run}"
ns_port="${NAMESRV_PORT:-9876}"
broker_port="${BROKER_PORT:-10911}"
mkdir -p "$run/logs" "$run/store"

cargo build --release --manifest-path "$root/Cargo.toml" --bin mqnamesrv --bin mqbroker

cat > "$run/namesrv.conf" <<CONF
listenPort=$ns_port
bindAddress=127.0.0.1
kvConfigPath=$run/namesrv/kvConfig.json
CONF

cat > "$run/broker.conf" <<CONF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
brokerIP1=127.0.0.1
brokerIP2=127.0.0.1
listenPort=$broker_port
bindAddress=127.0.0.1
namesrvAddr=127.0.0.1:$ns_port
storePathRootDir=$run/store
autoCreateTopicEnable=true
CONF

wait_for_port() {
  for _ in $(seq 1 600); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on port $1; see $run/logs" >&2
  return 1
}

HOME="$run" nohup "$root/target/release/mqnamesrv" -c "$run/namesrv.conf" > "$run/logs/namesrv.log" 2>&1 &
echo $! > "$run/namesrv.pid"
wait_for_port "$ns_port"
echo "name server listening on 127.0.0.1:$ns_port (log: $run/logs/namesrv.log)"

HOME="$run" nohup "$root/target/release/mqbroker" -c "$run/broker.conf" > "$run/logs/broker.log" 2>&1 &
echo $! > "$run/broker.pid"
wait_for_port "$broker_port"
echo "broker listening on 127.0.0.1:$broker_port (log: $run/logs/broker.log)"
echo "stop both with: scripts/stop.sh"
