#!/usr/bin/env bash
# Regenerates store/tests/golden/timer/ from a live Java 5.3.3 broker (see that folder's README.md): a Java name
# server and broker 5.3.3 on 127.0.0.1 (free ports, a temp folder), the golden timer messages from the 5.3.3 client
# (TimerGolden.java), the broker's answers to GET_TIMER_CHECK_POINT / GET_TIMER_METRICS / GET_BROKER_RUNTIME_INFO and
# mqadmin 5.3.3 brokerStatus, a clean stop (SIGTERM), then extract.py cuts and decodes the timer files.
# Needs java, javac (JDK 17), python3 and compat-tests/resolve-runtime.sh to have run. Nothing is skipped.
# Usage: compat-tests/timer-golden/generate.sh [outDir]     (default: store/tests/golden/timer)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
compat="$(cd "$here/.." && pwd)"
repo="$(cd "$compat/.." && pwd)"
out="${1:-$repo/store/tests/golden/timer}"
die() { echo "generate.sh: $*" >&2; exit 1; }
command -v java >/dev/null || die "java not found"
command -v python3 >/dev/null || die "python3 not found"
. "$compat/versions.env"
v="$RMQ_JAVA_5"
cp_of() {
  local f="$compat/.runtime/cp/$1-$v.cp"
  [ -s "$f" ] || die "$f missing: run compat-tests/resolve-runtime.sh"
  cat "$f"
}
broker_cp="$(cp_of rocketmq-broker)"; namesrv_cp="$(cp_of rocketmq-namesrv)"
client_cp="$(cp_of rocketmq-client)"; tools_cp="$(cp_of rocketmq-tools)"

work="$(mktemp -d "${TMPDIR:-/tmp}/timer-golden.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/home/conf" "$work/home/tmp"
cat > "$work/home/conf/logback.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level [%thread] %logger{24} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="OUT"/></root>
</configuration>
EOF
for name in broker namesrv tools default; do cp "$work/home/conf/logback.xml" "$work/home/conf/logback_$name.xml"; done

# a free port p with p-2..p+1 free too (a broker opens listenPort-2 and listenPort+1)
free_block() {
  python3 - <<'EOF'
import socket
for _ in range(200):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); base = s.getsockname()[1]; s.close()
    socks = []
    try:
        for p in range(base, base + 4):
            t = socket.socket(); t.bind(("127.0.0.1", p)); socks.append(t)
        print(base + 2); break
    except OSError:
        pass
    finally:
        for t in socks: t.close()
EOF
}
wait_port() {
  for _ in $(seq 1 300); do
    if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), 1).close()" 2>/dev/null; then return 0; fi
    kill -0 "$2" 2>/dev/null || die "$3 exited during start-up: $(tail -40 "$4")"
    sleep 0.2
  done
  die "$3 does not listen on $1: $(tail -40 "$4")"
}
# the module flags Java RocketMQ needs on JDK 17; a private home, logs and tmp. Servers are started as
# `java "${jvm[@]}" ... &` (not through a function), so $! is the JVM's own pid, which the stop and the trap signal.
jvm=(-Xms128m -Xmx512m -XX:+UseSerialGC
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED
  --add-opens java.base/java.util=ALL-UNNAMED --add-opens java.base/java.lang=ALL-UNNAMED
  --add-exports java.base/sun.nio.ch=ALL-UNNAMED
  -Duser.home="$work/home" -Drocketmq.home.dir="$work/home" -Djava.io.tmpdir="$work/home/tmp"
  -Dlogback.configurationFile="$work/home/conf/logback.xml" -Drmq.logback.configurationFile="$work/home/conf/logback.xml"
  -Drocketmq.client.logRoot="$work/home/logs" -Dtls.server.mode=disabled)

ns_port="$(free_block)"
printf 'listenPort=%s\nbindAddress=127.0.0.1\nkvConfigPath=%s\n' "$ns_port" "$work/kvConfig.json" > "$work/namesrv.conf"
java "${jvm[@]}" -cp "$namesrv_cp" org.apache.rocketmq.namesrv.NamesrvStartup -c "$work/namesrv.conf" > "$work/namesrv.log" 2>&1 &
pids+=($!); ns_pid=$!
wait_port "$ns_port" "$ns_pid" "name server" "$work/namesrv.log"
ns="127.0.0.1:$ns_port"

port="$(free_block)"
broker_name=golden-broker
topic=TimerGoldenTopic
store="$work/store"
cat > "$work/broker.conf" <<EOF
brokerClusterName=GoldenCluster
brokerName=$broker_name
brokerId=0
brokerIP1=127.0.0.1
brokerIP2=127.0.0.1
listenPort=$port
bindAddress=127.0.0.1
namesrvAddr=$ns
storePathRootDir=$store
storePathCommitLog=$store/commitlog
mappedFileSizeCommitLog=1048576
autoCreateTopicEnable=true
flushDiskType=ASYNC_FLUSH
warmMapedFileEnable=false
timerWheelEnable=true
timerPrecisionMs=1000
recallMessageEnable=true
EOF
java "${jvm[@]}" -cp "$broker_cp" org.apache.rocketmq.broker.BrokerStartup -c "$work/broker.conf" -n "$ns" > "$work/broker.log" 2>&1 &
pids+=($!); broker_pid=$!
wait_port "$port" "$broker_pid" "broker" "$work/broker.log"
addr="127.0.0.1:$port"

mqadmin() { java "${jvm[@]}" -cp "$tools_cp" org.apache.rocketmq.tools.command.MQAdminStartup "$@" -n "$ns"; }
mqadmin updateTopic -b "$addr" -t "$topic" -r 4 -w 4 > "$work/updateTopic.txt" 2>&1
for _ in $(seq 1 60); do
  if mqadmin topicRoute -t "$topic" 2>/dev/null | grep -q "$broker_name"; then break; fi
  sleep 1
done

java "${jvm[@]}" -cp "$client_cp" "$here/TimerGolden.java" send "$ns" "$broker_name" "$topic" | tee "$work/sent.txt"
grep -q '^RECALLED ' "$work/sent.txt" || die "the golden sends did not complete"
# the timer enqueues from its topic's queue within ~100 ms and writes its checkpoint every second
sleep 4
java "${jvm[@]}" -cp "$client_cp" "$here/TimerGolden.java" admin "$addr" > "$work/admin.txt"
mqadmin brokerStatus -b "$addr" > "$work/brokerStatus.txt" 2>> "$work/mqadmin.err"
mqadmin clusterList > "$work/clusterList.txt" 2>> "$work/mqadmin.err"

# a clean stop: Java's shutdown hook flushes the wheel, the timer log, the checkpoint and the metrics
kill -TERM "$broker_pid"
for _ in $(seq 1 300); do kill -0 "$broker_pid" 2>/dev/null || break; sleep 0.2; done
kill -0 "$broker_pid" 2>/dev/null && die "the broker did not stop within 60 s of SIGTERM"
code=0; wait "$broker_pid" || code=$?
echo "generate.sh: the broker exited with $code after SIGTERM (143: the JVM ran its shutdown hooks)" >&2
kill -TERM "$ns_pid" || true
wait "$ns_pid" || true

tmp="$out.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
python3 "$here/extract.py" "$store" "$tmp" > /dev/null
cp "$work/sent.txt" "$work/admin.txt" "$work/brokerStatus.txt" "$work/clusterList.txt" "$work/broker.conf" "$tmp/"
[ -f "$out/README.md" ] && cp "$out/README.md" "$tmp/"
rm -rf "$out"
mv "$tmp" "$out"
echo "generate.sh: golden timer files written to $out; update the values quoted in its README.md from decoded.txt" >&2
