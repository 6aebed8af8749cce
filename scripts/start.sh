#!/usr/bin/env bash
# Builds and starts our name server (mqnamesrv) and broker(s) (mqbroker) with a working default
# config, on 127.0.0.1.
#   scripts/start.sh                  a name server (9876) and a broker (10911)
#   scripts/start.sh --enable-proxy   the same, the broker also serving RocketMQ 5's gRPC clients on
#                                     127.0.0.1:8081 (Java's local proxy mode; GRPC_PORT), and the
#                                     proxy's remoting port 8080 (PROXY_REMOTING_PORT)
#   scripts/start.sh --proxy          the same gRPC port served by mqproxy, a separate process in
#                                     front of the name server's brokers (Java's cluster proxy mode)
#   scripts/start.sh --master-slave   a name server, a SYNC_MASTER (10911, HA port 10912) and its
#                                     slave (10921, brokerId 1) in one broker group
#   scripts/start.sh --dledger-brokers  a name server and three brokers in DLedger mode, one broker
#                                     group (RaftNode00) replicated by DLedger: 10911, 10921, 10931,
#                                     DLedger ports 40911-40913; the leader is the master (brokerId 0)
#   scripts/start.sh --dledger-group  a 3-member DLedger 0.3.1.2 group of our `dledger server`
#                                     (group dledger, n0-n2 on 40911-40913), without a broker;
#                                     try: target/release/dledger append -g dledger -p "$DLEDGER_PEERS"
#   scripts/stop.sh                   stop what was started
# State lives in $RMQ_RUN_DIR (default ./run): configs, stores, logs, pids.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
run="${RMQ_RUN_DIR:-$root/run}"
ns_port="${NAMESRV_PORT:-9876}"
broker_port="${BROKER_PORT:-10911}"
slave_port="${SLAVE_PORT:-10921}"
mode=single
case "${1:-}" in
  "") ;;
  --enable-proxy) mode=single-proxy ;;
  --proxy) mode=cluster-proxy ;;
  --master-slave) mode=master-slave ;;
  --dledger-group) mode=dledger-group ;;
  --dledger-brokers) mode=dledger-brokers ;;
  -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
  *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
esac
mkdir -p "$run/logs"

if [ "$mode" = dledger-group ]; then
  cargo build --release --manifest-path "$root/Cargo.toml" --bin dledger
  peers="n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"
  for i in 0 1 2; do
    nohup "$root/target/release/dledger" server -g dledger -i "n$i" -p "$peers" -s "$run/dledger" > "$run/logs/dl$i.log" 2>&1 &
    echo $! > "$run/dl$i.pid"
  done
  for i in 0 1 2; do
    port=$((40911 + i))
    for _ in $(seq 1 600); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
    echo "dledger member n$i listening on 127.0.0.1:$port (log: $run/logs/dl$i.log)"
  done
  echo "peers: $peers"
  echo "stop with: scripts/stop.sh"
  exit 0
fi

bins=(--bin mqnamesrv --bin mqbroker)
[ "$mode" = cluster-proxy ] && bins+=(--bin mqproxy)
cargo build --release --manifest-path "$root/Cargo.toml" "${bins[@]}"

cat > "$run/namesrv.conf" <<CONF
listenPort=$ns_port
bindAddress=127.0.0.1
kvConfigPath=$run/namesrv/kvConfig.json
CONF

# broker_conf NAME PORT ID ROLE STORE [GROUP]: a broker of group broker-a (or GROUP).
broker_conf() {
  cat > "$run/$1.conf" <<CONF
brokerClusterName=DefaultCluster
brokerName=${6:-broker-a}
brokerId=$3
brokerRole=$4
brokerIP1=127.0.0.1
brokerIP2=127.0.0.1
listenPort=$2
bindAddress=127.0.0.1
namesrvAddr=127.0.0.1:$ns_port
storePathRootDir=$5
autoCreateTopicEnable=true
CONF
}

wait_for_port() {
  for _ in $(seq 1 600); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on port $1; see $run/logs" >&2
  return 1
}

# launch NAME BINARY CONF PORT [ARGS...]
launch() {
  local name="$1" binary="$2" conf="$3" port="$4"
  shift 4
  HOME="$run" nohup "$root/target/release/$binary" -c "$conf" "$@" > "$run/logs/$name.log" 2>&1 &
  echo $! > "$run/$name.pid"
  wait_for_port "$port"
  echo "$name listening on 127.0.0.1:$port (log: $run/logs/$name.log)"
}

launch namesrv mqnamesrv "$run/namesrv.conf" "$ns_port"
if [ "$mode" = single ]; then
  broker_conf broker "$broker_port" 0 ASYNC_MASTER "$run/store"
  launch broker mqbroker "$run/broker.conf" "$broker_port"
elif [ "$mode" = single-proxy ]; then
  grpc_port="${GRPC_PORT:-8081}"
  proxy_remoting_port="${PROXY_REMOTING_PORT:-8080}"
  broker_conf broker "$broker_port" 0 ASYNC_MASTER "$run/store"
  printf '{"grpcServerPort": %s, "remotingListenPort": %s}\n' "$grpc_port" "$proxy_remoting_port" > "$run/rmq-proxy.json"
  launch broker mqbroker "$run/broker.conf" "$broker_port" --enable-proxy -pc "$run/rmq-proxy.json"
  wait_for_port "$grpc_port"
  echo "gRPC (MessagingService) on 127.0.0.1:$grpc_port; the proxy's remoting port (remoting and gRPC) on 127.0.0.1:$proxy_remoting_port"
elif [ "$mode" = cluster-proxy ]; then
  grpc_port="${GRPC_PORT:-8081}"
  broker_conf broker "$broker_port" 0 ASYNC_MASTER "$run/store"
  launch broker mqbroker "$run/broker.conf" "$broker_port"
  printf '{"rocketMQClusterName": "DefaultCluster", "grpcServerPort": %s}\n' "$grpc_port" > "$run/rmq-proxy.json"
  HOME="$run" nohup "$root/target/release/mqproxy" -pc "$run/rmq-proxy.json" -n "127.0.0.1:$ns_port" > "$run/logs/proxy.log" 2>&1 &
  echo $! > "$run/proxy.pid"
  wait_for_port "$grpc_port"
  echo "mqproxy: gRPC (MessagingService) on port $grpc_port (log: $run/logs/proxy.log)"
elif [ "$mode" = dledger-brokers ]; then
  peers="n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"
  for i in 0 1 2; do
    broker_conf "raft$i" $((broker_port + 10 * i)) 0 ASYNC_MASTER "$run/store-raft$i" RaftNode00
    printf 'enableDLegerCommitLog=true\ndLegerGroup=RaftNode00\ndLegerPeers=%s\ndLegerSelfId=n%s\n' "$peers" "$i" >> "$run/raft$i.conf"
  done
  for i in 0 1 2; do
    HOME="$run" nohup "$root/target/release/mqbroker" -c "$run/raft$i.conf" > "$run/logs/raft$i.log" 2>&1 &
    echo $! > "$run/raft$i.pid"
  done
  for i in 0 1 2; do
    wait_for_port $((broker_port + 10 * i))
    echo "raft$i listening on 127.0.0.1:$((broker_port + 10 * i)), DLedger n$i on 127.0.0.1:$((40911 + i)) (log: $run/logs/raft$i.log)"
  done
else
  broker_conf master "$broker_port" 0 SYNC_MASTER "$run/store-master"
  broker_conf slave "$slave_port" 1 SLAVE "$run/store-slave"
  launch master mqbroker "$run/master.conf" "$broker_port"
  launch slave mqbroker "$run/slave.conf" "$slave_port"
fi
echo "stop with: scripts/stop.sh"
