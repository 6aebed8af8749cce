#!/usr/bin/env bash
# Side-by-side benchmark of our mqnamesrv/mqbroker against Java RocketMQ's, driven by the official
# Java client (our generator in scripts/bench/loadgen: Maven Central does not serve rocketmq-example).
#
#   scripts/bench.sh --quick          each workload ~20 s measured (about an hour for both systems)
#   scripts/bench.sh                  each workload 60 s measured
#   options: --with-4.9               also run the Java 4.9.7 name server and broker
#            --workloads a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q  a subset (default all; e also runs e', the lean route client;
#                                     f runs f0, its ASYNC_MASTER baseline, next to it; g is DLedger;
#                                     h is three brokers in DLedger mode, one DLedger group;
#                                     i is the gRPC front, mqbroker --enable-proxy; j is pop through Java's
#                                     proxy in cluster mode; k is 5.x timer messages; none of i-k runs for 4.9;
#                                     l is a', b', c' and f0': a, b, c and f0 driven by broker-load, the lean client of scripts/bench/load
#                                     (a-lean, b-lean, c-lean, f0-lean: one of them alone);
#                                     m is the fixed-rate latency workload, broker-load --mode rate;
#                                     n, o and p are the scale workloads: 1,000 producer connections,
#                                     1,000 topics x 8 queues, 8 consumer groups on one topic;
#                                     q is a consumer catching up a backlog dropped from the page cache)
#            --systems ours,java      a subset, in this order (java = Java 5.x; in g, Java DLedger 0.3.1.2)
#            --warmup S --duration S  override the phase lengths
#            --elections N            g: leader kills timed (default 5 quick, 10 full)
#            --timer-messages N --timer-window S --timer-lead S
#                                     k: N timers due over S s, the first due after the lead (default
#                                     1,000,000 over 600 s after 180 s; quick 150,000 over 120 s after 45 s)
#            --fixed-rate N --fixed-duration S
#                                     m: the rate (default half of Java's b' send rate when l ran earlier
#                                     in this run, else 12,000 msg/s) and the measured time (default 300 s,
#                                     quick 60 s), after a warm-up of at least 60 s: Java's JIT still
#                                     compiles after 15 s and its CPU would show in the latencies
#
# Every workload gets a fresh name server, a fresh broker and a fresh store, so the broker's CPU time
# and VmHWM (peak resident set) belong to that workload alone. The server under test is pinned to one
# core and the load generator (and the idle other server) to the other; in f (SYNC_MASTER) the master
# and its slave share the server's core, since the slave's work is part of what SYNC_MASTER costs.
# g is a 3-member DLedger group per system (3 `dledger server`s; 3 Java DLedger 0.3.1.2 members,
# compat-tests/dledger-node) with the default DLedgerConfig on both sides, all three members on the
# server core and one load generator for both (dledger-load in scripts/bench/load, our DLedgerClient, whose
# wire is Java's client's) on the other: 64 appenders of 1 KiB entries through the leader, then
# leader kills (SIGKILL) timed until a survivor's METADATA names a new leader and until an append is
# answered SUCCESS, the killed member restarted on its store after each.
# h is three brokers of one system in DLedger mode (enableDLegerCommitLog=true, one brokerName, one
# DLedger group: the leader is the master, brokerId 0), all three on the server core, the name server
# with the load generator: sync sends of 1 KiB from 64 threads through the master and a push consumer;
# the CPU per message is the three brokers' sum.
# i is the gRPC front in local mode (ours: mqbroker --enable-proxy; Java 5.3.3: ProxyStartup -pm local,
# broker and proxy in one JVM, as its bin/mqbroker --enable-proxy), driven by the official 5.x gRPC client
# rocketmq-client-java: a Producer sending 1 KiB (sendAsync, 1024 in flight, held while over 4096 sent
# but not yet received) to a NORMAL topic of 8 queues and 4 SimpleConsumers (4 receiving threads each)
# receiving batches of 32 with long polling and acking every message; the CPU is the one server
# process's, per message sent or consumed.
# j is pop consumption through Java's rocketmq-proxy 5.3.3 in cluster mode (ProxyStartup -pm cluster, its
# own JVM with bin/mqproxy's runserver.sh flags) in front of each system's broker: the broker alone on the
# server core (timerWheelEnable=true: Java pops only with the timer), the same proxy, the name server and
# i's load generator (same load, its own topic) on the client core. The broker's CPU per message sent or
# consumed is compared; the proxy's CPU is reported next to it, as the client core may be the limit.
# k is 5.x timer messages (timerWheelEnable=true on both brokers, the Java 5.3.3 default; everything
# else at its default, timerPrecisionMs 1000): the loadgen's TimerLoad sends N timers (the 5.3.3
# client's Message.setDeliverTimeMs, 128 B, async with 1024 in flight, topic of 8 queues) whose due
# times are spread uniformly at random over W seconds that open a lead L after the first send, as fast as
# the broker answers; a push consumer in the same JVM records receive time - due time per message
# (sequence number and due time in user properties). Reported: enqueue rate, lateness percentiles, early,
# missing and duplicate deliveries, broker CPU per timer over the whole run (send + delivery), peak RSS
# and the RSS when all timers are pending (send end, and just before the first due) vs at the end.
# m sends 1 KiB messages at one fixed rate to both brokers (half of Java's b' saturation rate, a rate
# both sustain) for 5 minutes, open loop from broker-load with a push consumer's pulls: send and
# end-to-end percentiles to p99.99, each measured from the send's scheduled time, so a stall counts
# for every send it held back (corrected for coordinated omission).
# n, o and p are b' spread out, all from broker-load: n sends from 1,000 connections (1,000 sync
# senders, 1 KiB, one topic of 8 queues), o sends async (1,024 in flight) over 1,000 topics of 8 queues
# each (auto-created by their first send) with one push consumer pulling all 8,000 queues, p sends as b'
# to one topic with 8 consumer groups each consuming every message.
# q is catch-up: 4 GiB (quick 2 GiB) of 1 KiB messages sent with nobody consuming, the broker's commit log
# dropped from the page cache (fsync, posix_fadvise DONTNEED on each file: a backlog the cache no
# longer holds), then a consumer starts from the backlog's head while the senders go on at m's fixed
# rate: how fast it catches up from the disk (consume TPS, seconds to hold the backlog) and what the
# senders see meanwhile (send percentiles from the scheduled time), 120 s (quick 60 s).
# Binaries: target/release of this checkout, built here; BENCH_BIN_DIR=DIR uses DIR's as they are.
# Results: a table on stdout and target/bench/results-<timestamp>.json; logs and stores under
# target/bench/run-<timestamp>/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/compat-tests/versions.env"

warmup=15 duration=60 drain=60 label=full
workloads="a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q" systems="ours,java" elections=10
fixed_rate="" fixed_duration=300 catchup_mib=4096 catchup_duration=120
timer_messages=1000000 timer_window=600 timer_lead=180
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) warmup=5 duration=20 drain=30 label=quick elections=5 timer_messages=150000 timer_window=120 timer_lead=45 fixed_duration=60 catchup_mib=2048 catchup_duration=60 ;;
    --with-4.9) systems="$systems,java49" ;;
    --workloads) workloads="$2"; shift ;;
    --systems) systems="$2"; shift ;;
    --warmup) warmup="$2"; shift ;;
    --duration) duration="$2"; shift ;;
    --elections) elections="$2"; shift ;;
    --timer-messages) timer_messages="$2"; shift ;;
    --timer-window) timer_window="$2"; shift ;;
    --timer-lead) timer_lead="$2"; shift ;;
    --fixed-rate) fixed_rate="$2"; shift ;;
    --fixed-duration) fixed_duration="$2"; shift ;;
    -h|--help) sed -n '2,71p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
# the core of the server under test, and the one shared by the load generator and everything else
server_cpu="${BENCH_SERVER_CPU:-0}"
client_cpu="${BENCH_CLIENT_CPU:-1}"

stamp="$(date +%Y%m%d-%H%M%S)"
run="$root/target/bench/run-$stamp"
results="$root/target/bench/results-$stamp.json"
mkdir -p "$run"
clk_tck="$(getconf CLK_TCK)"

# ---- what runs: binaries, Java parts, JVM flags -------------------------------------------------

# the broker workloads (a-f, h-q) need the broker, the name server and their load generators; g (DLedger) its own
wants_broker="" wants_dledger="" wants_routeload=""
case ",$workloads," in *,[a-fh-q],*|*-lean,*) wants_broker=1 ;; esac
case ",$workloads," in *,g,*) wants_dledger=1 ;; esac
case ",$workloads," in *,e,*) wants_routeload=1 ;; esac
bins=()
[ -z "$wants_broker" ] || bins+=(--bin mqnamesrv --bin mqbroker)
[ -z "$wants_dledger" ] || bins+=(--bin dledger --bin dledger-load)
case ",$workloads," in *,[lmnopq],*|*-lean,*) bins+=(--bin broker-load) ;; esac
# our binaries: built here into target/release, or (BENCH_BIN_DIR) taken as they are from another build
if [ -n "${BENCH_BIN_DIR:-}" ]; then
  bin_dir="$(cd "$BENCH_BIN_DIR" && pwd)"
  echo "== our binaries from $bin_dir (BENCH_BIN_DIR; not rebuilt)" >&2
  for b in "${bins[@]}"; do
    [ "$b" = --bin ] || [ -x "$bin_dir/$b" ] || { echo "no $bin_dir/$b; build it first (cargo build --release --bins)" >&2; exit 2; }
  done
else
  bin_dir="$root/target/release"
  echo "== building our release binaries" >&2
  cargo build --release --manifest-path "$root/Cargo.toml" "${bins[@]}" >&2
fi
echo "== resolving the Java name servers, brokers and clients (and DLedger) from Maven Central" >&2
"$root/compat-tests/resolve-runtime.sh"
loadgen_cp=""
if [ -n "$wants_broker" ]; then
  echo "== building the load generator" >&2
  mvn -B -q -f "$root/scripts/bench/loadgen/pom.xml" compile dependency:build-classpath \
    -Dbench.build.dir="$root/target/bench/loadgen" >&2
  loadgen_cp="$root/target/bench/loadgen/classes:$(cat "$root/target/bench/loadgen/classpath.txt")"
fi
if [ -n "$wants_routeload" ]; then
  (cd "$root/scripts/bench/routeload" && go build -o "$root/target/bench/routeload" .)
fi
if [ -n "$wants_dledger" ]; then
  # compiles the Java member's launcher now (run.sh compiles it on first use), so no member start pays for it
  "$root/compat-tests/dledger-node/run.sh" >/dev/null 2>&1 || true
fi
cpfile() { cat "$root/compat-tests/.runtime/cp/$1-$2.cp"; }

java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
# Java RocketMQ on JDK 17 needs these module openings (reported enough by its users and used by our compat tests)
jdk17_flags="--add-opens java.base/jdk.internal.ref=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/java.util=ALL-UNNAMED --add-opens java.base/java.lang=ALL-UNNAMED --add-exports java.base/sun.nio.ch=ALL-UNNAMED"
# The distribution's bin/runbroker.sh and bin/runserver.sh for JDK >= 9 (G1, its region size, reserve
# and IHOP, soft refs, pre-touched heap, GC log), with the sizes scaled to this machine: the scripts
# size a broker for a host of its own (8g heap, 15g direct, name server 4g); here the broker gets one
# core of two and shares 24 GiB with a name server, a load generator and the page cache, so 1/4 of each.
# Override with BENCH_JAVA_BROKER_HEAP / BENCH_JAVA_BROKER_DIRECT / BENCH_JAVA_NAMESRV_HEAP.
broker_heap="${BENCH_JAVA_BROKER_HEAP:-2g}"
broker_direct="${BENCH_JAVA_BROKER_DIRECT:-4g}"
namesrv_heap="${BENCH_JAVA_NAMESRV_HEAP:-1g}"
g1="-XX:+UseG1GC -XX:G1HeapRegionSize=16m -XX:G1ReservePercent=25 -XX:InitiatingHeapOccupancyPercent=30 -XX:SoftRefLRUPolicyMSPerMB=0"
java_broker_flags="-server -Xms$broker_heap -Xmx$broker_heap $g1 -XX:-OmitStackTraceInFastThrow -XX:+AlwaysPreTouch -XX:MaxDirectMemorySize=$broker_direct -XX:-UseLargePages -XX:-UseBiasedLocking"
java_namesrv_flags="-server -Xms$namesrv_heap -Xmx$namesrv_heap -XX:MetaspaceSize=128m -XX:MaxMetaspaceSize=320m $g1 -XX:-OmitStackTraceInFastThrow -XX:-UseLargePages"
# the load generator: a heap that keeps GC out of the way, and the ROCKETMQ header encoding that
# RocketMQ's own benchmark tools select
# j's Java proxy: bin/mqproxy runs ProxyStartup through runserver.sh, the name server's flags; its 4g heap
# scaled as the name server's (BENCH_JAVA_PROXY_HEAP)
proxy_heap="${BENCH_JAVA_PROXY_HEAP:-1g}"
java_proxy_flags="${java_namesrv_flags//-Xms$namesrv_heap -Xmx$namesrv_heap/-Xms$proxy_heap -Xmx$proxy_heap}"
loadgen_flags="-Xms1g -Xmx1g -XX:+UseParallelGC -Drocketmq.serialize.type=ROCKETMQ"

# ---- process bookkeeping: everything we start is stopped on exit ---------------------------------

started=()  # pids of our children still running; a pid leaves the list when stopped, so it is never reused
stop_pid() {  # pid grace_seconds: SIGTERM, then SIGKILL (stores are thrown away, a clean stop is not measured)
  local pid="$1" grace="${2:-5}" p rest=()
  [ -n "$pid" ] || return 0
  for p in "${started[@]}"; do [ "$p" = "$pid" ] || rest+=("$p"); done
  started=("${rest[@]}")
  if kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 1 $((grace * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local pid
  for pid in "${started[@]}"; do stop_pid "$pid" 3; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_ports() {  # count: the first of `count` consecutive free loopback ports
  python3 - "$1" <<'PY'
import socket, sys, random
n = int(sys.argv[1])
for _ in range(200):
    # below Linux's ephemeral range (32768-60999): a port found free here can still be taken by a
    # client's outgoing connection before the server binds it (a Java broker in m failed so)
    base = random.randrange(10000, 32768 - n)
    socks = []
    try:
        for p in range(base, base + n):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(base); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
PY
}

wait_port() {  # port pid log [tenths of a second, default 900]
  for _ in $(seq 1 "${4:-900}"); do
    if ! kill -0 "$2" 2>/dev/null; then echo "process $2 died during start-up; its log ($3):" >&2; tail -30 "$3" >&2; return 1; fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on $1 after $(( ${4:-900} / 10 )) s; see $3" >&2; return 1
}

# A folder a Java RocketMQ process uses as HOME, user.home and ROCKETMQ_HOME: its logs stay inside,
# and the 4.9 start classes find the logback files they insist on (warnings to the process output).
java_home_dir() {
  mkdir -p "$1/conf" "$1/tmp"
  local x
  for x in broker namesrv tools default; do
    cat > "$1/conf/logback_$x.xml" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level [%thread] %logger{24} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="OUT"/></root>
</configuration>
XML
  done
}
java_props() {  # dir
  echo "-Duser.home=$1 -Drocketmq.home.dir=$1 -Dlogback.configurationFile=$1/conf/logback_default.xml -Djava.io.tmpdir=$1/tmp"
}
java_version_of() { case "$1" in java) echo "$RMQ_JAVA_5" ;; java49) echo "$RMQ_JAVA_49" ;; esac; }

# start_namesrv system cpu dir: sets ns_pid, ns_addr
start_namesrv() {
  local sys="$1" cpu="$2" dir="$3" port
  mkdir -p "$dir"
  port="$(free_ports 1)"
  printf 'listenPort=%s\nbindAddress=127.0.0.1\nkvConfigPath=%s\nconfigStorePath=%s\n' \
    "$port" "$dir/kvConfig.json" "$dir/namesrv.properties" > "$dir/namesrv.conf"
  if [ "$sys" = ours ]; then
    env -u RUST_LOG HOME="$dir" taskset -c "$cpu" "$bin_dir/mqnamesrv" -c "$dir/namesrv.conf" \
      > "$dir/namesrv.log" 2>&1 &
  else
    java_home_dir "$dir"
    # shellcheck disable=SC2086 # flag lists are meant to split
    HOME="$dir" ROCKETMQ_HOME="$dir" taskset -c "$cpu" "$java_bin" $java_namesrv_flags \
      "-Xlog:gc*:file=$dir/rmq_srv_gc_%p_%t.log:time,tags:filecount=5,filesize=30M" $jdk17_flags $(java_props "$dir") \
      -cp "$(cpfile rocketmq-namesrv "$(java_version_of "$sys")")" org.apache.rocketmq.namesrv.NamesrvStartup \
      -c "$dir/namesrv.conf" > "$dir/namesrv.log" 2>&1 &
  fi
  ns_pid=$!
  started+=("$ns_pid")
  ns_addr="127.0.0.1:$port"
  wait_port "$port" "$ns_pid" "$dir/namesrv.log"
}

# start_broker system cpu dir flushDiskType namesrv_addr [brokerRole [timerWheelEnable]]: sets broker_pid and broker_addr.
# The same broker.conf for all (the 4.9 broker lacks bindAddress and listens on every interface; the
# clients only use 127.0.0.1). brokerRole defaults to ASYNC_MASTER; SLAVE makes brokerId 1 of the same
# brokerName, which finds its master (and the master's HA address brokerIP2:listenPort+1) through the
# name server. A SYNC_MASTER gets inSyncReplicas=2: Java 5.x waits for a slave only then (its default 1
# answers at once), Java 4.9 has no such key and waits for one slave, ours waits for one either way.
start_broker() {
  local sys="$1" cpu="$2" dir="$3" flush="$4" ns="$5" role="${6:-ASYNC_MASTER}" timer="${7:-false}" base port
  mkdir -p "$dir/store"
  base="$(free_ports 4)"
  port=$((base + 2))  # Java also opens listenPort-2 (fast channel) and listenPort+1 (HA; ours too)
  broker_conf "$sys" "$dir" "$flush" "$ns" "$role" "$port" "$timer" > "$dir/broker.conf"
  launch_broker "$sys" "$cpu" "$dir" "$ns" "$port"
  wait_port "$port" "$broker_pid" "$dir/broker.log"
}

broker_conf() {  # system dir flushDiskType namesrv_addr brokerRole listenPort [timerWheelEnable]: start_broker's broker.conf, to stdout
  local sys="$1" dir="$2" flush="$3" ns="$4" role="$5" port="$6" timer="${7:-false}"
  {
    echo "brokerClusterName=DefaultCluster"
    echo "brokerName=broker-a"
    if [ "$role" = SLAVE ]; then echo "brokerId=1"; else echo "brokerId=0"; fi
    echo "brokerIP1=127.0.0.1"
    echo "brokerIP2=127.0.0.1"
    echo "listenPort=$port"
    [ "$sys" = java49 ] || echo "bindAddress=127.0.0.1"
    echo "namesrvAddr=$ns"
    echo "storePathRootDir=$dir/store"
    echo "storePathCommitLog=$dir/store/commitlog"
    echo "autoCreateTopicEnable=true"
    echo "brokerRole=$role"
    if [ "$role" = SYNC_MASTER ]; then echo "inSyncReplicas=2"; fi
    echo "flushDiskType=$flush"
    # 5.x's timer wheel (timer messages) pre-allocates its own log; the workloads without timer messages run
    # without it on both (Java's default is true), k (timers), i and j (pops, which Java runs on it) with it
    echo "timerWheelEnable=$timer"
  }
}

# launch_broker system cpu dir namesrv_addr listenPort: starts a broker on dir/broker.conf (its store under
# dir) and returns at once; sets broker_pid and broker_addr
launch_broker() {
  local sys="$1" cpu="$2" dir="$3" ns="$4" port="$5"
  if [ "$sys" = ours ]; then
    env -u RUST_LOG HOME="$dir" taskset -c "$cpu" "$bin_dir/mqbroker" -c "$dir/broker.conf" \
      > "$dir/broker.log" 2>&1 &
  else
    java_home_dir "$dir"
    # shellcheck disable=SC2086
    HOME="$dir" ROCKETMQ_HOME="$dir" taskset -c "$cpu" "$java_bin" $java_broker_flags \
      "-Xlog:gc*:file=$dir/rmq_broker_gc_%p_%t.log:time,tags:filecount=5,filesize=30M" $jdk17_flags $(java_props "$dir") \
      -cp "$(cpfile rocketmq-broker "$(java_version_of "$sys")")" org.apache.rocketmq.broker.BrokerStartup \
      -c "$dir/broker.conf" -n "$ns" > "$dir/broker.log" 2>&1 &
  fi
  broker_pid=$!
  started+=("$broker_pid")
  broker_addr="127.0.0.1:$port"
}

loadgen() {  # dir kind args...: runs the generator on the client core; its output goes to dir/loadgen.log and stdout
  local dir="$1"; shift
  mkdir -p "$dir/loadgen-home"
  : > "$dir/loadgen.log"  # exists before tail follows it (the background job opens it later)
  # shellcheck disable=SC2086
  HOME="$dir/loadgen-home" taskset -c "$client_cpu" "$java_bin" $loadgen_flags -Duser.home="$dir/loadgen-home" \
    -cp "$loadgen_cp" rocketmq.bench.Main "$@" --warmup "$warmup" --duration "$duration" --drain "$drain" \
    --clk-tck "$clk_tck" --server-cpu "$server_cpu" --client-cpu "$client_cpu" --out "$dir/result.json" \
    > "$dir/loadgen.log" 2>&1 &
  local pid=$!
  started+=("$pid")
  # its progress lines, live; tail ends with the generator (which ends itself: it has a watchdog)
  tail -n +1 -f --pid="$pid" "$dir/loadgen.log" | grep --line-buffered '^\[loadgen\]' >&2 || true
  stop_pid "$pid" 1
  [ -s "$dir/result.json" ] || { echo "  the load generator wrote no result; see $dir/loadgen.log" >&2; tail -20 "$dir/loadgen.log" >&2; }
}

# ---- the workloads --------------------------------------------------------------------------------

# id | flushDiskType | loadgen arguments
declare -A wl_flush=( [a]=ASYNC_FLUSH [b]=ASYNC_FLUSH [c]=ASYNC_FLUSH [d]=SYNC_FLUSH [f]=ASYNC_FLUSH [f0]=ASYNC_FLUSH [k]=ASYNC_FLUSH
  [a-lean]=ASYNC_FLUSH [b-lean]=ASYNC_FLUSH [c-lean]=ASYNC_FLUSH [f0-lean]=ASYNC_FLUSH [m]=ASYNC_FLUSH [n]=ASYNC_FLUSH [o]=ASYNC_FLUSH [p]=ASYNC_FLUSH [q]=ASYNC_FLUSH )
# the brokerRole of the master; f runs a slave next to it, f0 is the same load on a lone ASYNC_MASTER
declare -A wl_role=( [a]=ASYNC_MASTER [b]=ASYNC_MASTER [c]=ASYNC_MASTER [d]=ASYNC_MASTER [f]=SYNC_MASTER [f0]=ASYNC_MASTER [k]=ASYNC_MASTER
  [a-lean]=ASYNC_MASTER [b-lean]=ASYNC_MASTER [c-lean]=ASYNC_MASTER [f0-lean]=ASYNC_MASTER [m]=ASYNC_MASTER [n]=ASYNC_MASTER [o]=ASYNC_MASTER [p]=ASYNC_MASTER [q]=ASYNC_MASTER )
# the load generator's kind (default broker: BrokerLoad) and timerWheelEnable (default false) where they differ
declare -A wl_load=( [k]=timer )
declare -A wl_timer_wheel=( [k]=true )
# a uses BenchmarkTest as RocketMQ's benchmark tools do: a system topic both brokers create with 1024
# queues (so the consumer keeps 1024 pulls going). b-d use an ordinary auto-created topic of 8 queues.
declare -A wl_args=(
  [a]="--mode sync --threads 64 --size 128 --topic BenchmarkTest"
  [b]="--mode async --threads 1 --size 1024 --inflight 1024 --topic bench_async"
  # a' and b': a's and b's load from broker-load, which sends the Java client's frames at a fraction of its
  # CPU, so the client core is not what limits them
  [a-lean]="--mode sync --threads 64 --size 128 --topic BenchmarkTest"
  [b-lean]="--mode async --threads 1 --size 1024 --inflight 1024 --topic bench_async"
  # c' and f0': c's and f0's load from broker-load (c': SEND_BATCH_MESSAGE as the Java producer's
  # send(Collection) writes it)
  [c-lean]="--mode batch --threads 64 --size 1024 --batch 16 --topic bench_batch"
  [f0-lean]="--mode sync --threads 64 --size 1024 --topic bench_replicated"
  # m: open loop at the fixed rate (added where it runs); a stall may hold up to 64Ki sends
  [m]="--mode rate --inflight 65536 --size 1024 --topic bench_rate"
  # n, o, p: the scale workloads
  [n]="--mode sync --threads 1000 --connections 1000 --size 1024 --topic bench_conns"
  [o]="--mode async --threads 1 --inflight 1024 --size 1024 --topics 1000 --topic bench_topics"
  [p]="--mode async --threads 1 --inflight 1024 --size 1024 --groups 8 --topic bench_groups"
  # q: m's senders after a backlog the page cache no longer holds (rate and store added where it runs)
  [q]="--mode rate --inflight 65536 --size 1024 --topic bench_catchup --backlog-mib $catchup_mib"
  [c]="--mode batch --threads 64 --size 1024 --batch 16 --topic bench_batch"
  [d]="--mode sync --threads 64 --size 1024 --topic bench_syncflush"
  [f]="--mode sync --threads 64 --size 1024 --topic bench_replicated"
  [f0]="--mode sync --threads 64 --size 1024 --topic bench_replicated"
  [h]="--mode sync --threads 64 --size 1024 --topic bench_dledger"
  # i: sendAsync with 1024 in flight loads a server more than 64 sync threads can (the one client core is the
  # limit: the Java gRPC client's sync send parks a thread per call), and the senders wait while more than
  # 4096 messages are sent but not received, so the consumers are not starved of the client's core
  [i]="--mode async --threads 4 --inflight 1024 --max-backlog 4096 --size 1024 --topic bench_grpc --queues 8 --consumers 4 --receivers 4 --batch 32 --await-s 5"
  # j: i's load through the cluster-mode proxy (SimpleConsumer receives are pops at the broker)
  [j]="--mode async --threads 4 --inflight 1024 --max-backlog 4096 --size 1024 --topic bench_pop --queues 8 --consumers 4 --receivers 4 --batch 32 --await-s 5 --group bench_pop_group"
  # k: timers sent as fast as the broker answers (b's window), 128 B; the drain runs from the last due time
  [k]="--messages $timer_messages --window-s $timer_window --lead-s $timer_lead --inflight 1024 --size 128 --topic bench_timer"
)

# A Java broker takes ~13 s to stop cleanly and ours ~1 s; nothing after the run is measured and the
# store is thrown away, so a Java broker still running after 2 s is killed.
stop_grace() { [ "$1" = ours ] && echo 5 || echo 2; }

broker_workload() {  # system workload
  local sys="$1" wl="$2" dir="$run/$1/$2" role="${wl_role[$2]}" master_pid="" master_addr slave_pid="" replica=()
  ns_pid="" broker_pid=""
  local with_slave=""; [ "$role" != SYNC_MASTER ] || with_slave=" + a SLAVE on cpu $server_cpu"
  echo "== [$wl] $role ${wl_flush[$wl]} $sys: ${wl_args[$wl]} + push consumer$with_slave" >&2
  if ! start_namesrv "$sys" "$client_cpu" "$dir/namesrv" ||
    ! start_broker "$sys" "$server_cpu" "$dir/broker" "${wl_flush[$wl]}" "$ns_addr" "$role" "${wl_timer_wheel[$wl]:-false}"; then
    echo "  $sys failed to start; skipping $wl" >&2
    stop_pid "$broker_pid" 1
  else
    master_pid="$broker_pid" master_addr="$broker_addr"
    # the slave shares the server's core with its master: its work is part of the cost of SYNC_MASTER
    if [ "$role" = SYNC_MASTER ] && ! start_broker "$sys" "$server_cpu" "$dir/slave" "${wl_flush[$wl]}" "$ns_addr" SLAVE; then
      echo "  the $sys SLAVE FAILED TO START; no $wl result for $sys" >&2
      stop_pid "$broker_pid" 1
      printf '{"valid": false, "invalid_because": ["the slave failed to start (see %s)"]}\n' "$dir/slave/broker.log" > "$dir/result.json"
    else
      if [ "$role" = SYNC_MASTER ]; then
        slave_pid="$broker_pid"
        replica=(--slave-pid "$slave_pid" --master-addr "$master_addr" --slave-addr "$broker_addr")
      fi
      # shellcheck disable=SC2086
      case "$wl" in
        *-lean|n|o|p) lean_load "$dir" --namesrv "$ns_addr" ${wl_args[$wl]} --queues 8 --broker-pid "$master_pid" ;;
        q) lean_duration="$catchup_duration" lean_load "$dir" --namesrv "$ns_addr" ${wl_args[$wl]} --rate "$(the_fixed_rate)" --store-dir "$dir/broker/store" --queues 8 --broker-pid "$master_pid" ;;
        m) lean_warmup=$((warmup > 60 ? warmup : 60)) lean_duration="$fixed_duration" lean_load "$dir" --namesrv "$ns_addr" ${wl_args[$wl]} --rate "$(the_fixed_rate)" --queues 8 --broker-pid "$master_pid" ;;
        *) loadgen "$dir" "${wl_load[$wl]:-broker}" --namesrv "$ns_addr" ${wl_args[$wl]} --queues 8 --broker-pid "$master_pid" "${replica[@]}" ;;
      esac
      if ! kill -0 "$master_pid" 2>/dev/null; then echo "  the $sys broker DIED during the run; see $dir/broker/broker.log" >&2; fi
      if [ -n "$slave_pid" ] && ! kill -0 "$slave_pid" 2>/dev/null; then echo "  the $sys slave DIED during the run; see $dir/slave/broker.log" >&2; fi
      if [ "$role" = SYNC_MASTER ] && [ ! -s "$dir/result.json" ]; then
        printf '{"valid": false, "invalid_because": ["the load generator wrote no result (see %s)"]}\n' "$dir/loadgen.log" > "$dir/result.json"
      fi
    fi
  fi
  stop_pid "$slave_pid" "$(stop_grace "$sys")"; stop_pid "$master_pid" "$(stop_grace "$sys")"; stop_pid "$ns_pid" 2
  rm -rf "$dir/broker/store" "$dir/slave/store"  # commit logs are large; logs stay
}

# The name server on the server core, a broker (idle but registered) and the load on the other core.
# First the official Java client (its remoting client, 128 queries in flight), then routeload, which
# replays the Java client's request frame at a fraction of its CPU cost and so can saturate a name
# server that the Java client cannot (a workload of its own in the table: e-lean).
namesrv_workload() {  # system
  local sys="$1" dir="$run/$1/e" pid
  ns_pid="" broker_pid=""
  echo "== [e] $sys name server: GET_ROUTEINFO_BY_TOPIC" >&2
  if ! start_namesrv "$sys" "$server_cpu" "$dir/namesrv" || ! start_broker "$sys" "$client_cpu" "$dir/broker" ASYNC_FLUSH "$ns_addr"; then
    echo "  $sys failed to start; skipping e" >&2
  else
    loadgen "$dir" namesrv --namesrv "$ns_addr" --topic BenchmarkRoute --threads 2 --inflight 128 --server-pid "$ns_pid" \
      --dump-frame "$dir/route-request.bin"
    if [ -s "$dir/route-request.bin" ]; then
      mkdir -p "$run/$sys/e-lean"
      taskset -c "$client_cpu" "$root/target/bench/routeload" -addr "$ns_addr" -frame "$dir/route-request.bin" \
        -conns 2 -window 128 -warmup "${warmup}s" -duration "${duration}s" -server-pid "$ns_pid" -clk-tck "$clk_tck" \
        -server-cpu "$server_cpu" -client-cpu "$client_cpu" -out "$run/$sys/e-lean/result.json" \
        > "$run/$sys/e-lean/loadgen.log" 2>&1 &
      pid=$!
      started+=("$pid")
      tail -n +1 -f --pid="$pid" "$run/$sys/e-lean/loadgen.log" >&2 || true
      stop_pid "$pid" 1
    fi
  fi
  stop_pid "$broker_pid" "$(stop_grace "$sys")"; stop_pid "$ns_pid" 2
  rm -rf "$dir/broker/store"
}

# ---- h: brokers in DLedger mode --------------------------------------------------------------------

# Three brokers of one system in DLedger mode (Java's keys: enableDLegerCommitLog, dLegerGroup,
# dLegerPeers, dLegerSelfId): one brokerName and one DLedger group, each broker with its own listenPort,
# DLedger port and store. The group elects; the leader's broker becomes the master (brokerId 0), the
# others slaves, and a send is answered once a quorum of the group holds it. broker.conf is
# start_broker's otherwise (ASYNC_MASTER and brokerId 0 are ignored in DLedger mode: the role follows
# the member's); DLedgerConfig's defaults on both sides, its data file the commit log's
# mappedFileSizeCommitLog (1 GiB, the default the other workloads run with) and its index file 160 MiB.
# All three brokers share the server core, as f's master and slave do; the name server and the load
# generator are on the other core. The load generator waits until the name server lists the three with
# one as brokerId 0 and a probe send is answered SEND_OK, then runs the sync 1 KiB load of d and f0.
dlb_conf_extra() {  # group peers selfId
  echo "enableDLegerCommitLog=true"
  echo "dLegerGroup=$1"
  echo "dLegerPeers=$2"
  echo "dLegerSelfId=$3"
  echo "mappedFileSizeCommitLog=1073741824"
}

# The warm-up is 3 times the other workloads' (45 s full, 15 s quick): the three brokers share one core,
# so each JVM gets a third of the CPU time a lone broker has to compile its send path in.
h_warmup=$((warmup * 3))

dledger_brokers_workload() {  # system
  local sys="$1" dir="$run/$1/h" base peers i ok=1 members="" bpids=() bports=() bdir
  ns_pid=""
  echo "== [h] 3 brokers in DLedger mode $sys (all on cpu $server_cpu): ${wl_args[h]} + push consumer, warm-up ${h_warmup}s" >&2
  if ! start_namesrv "$sys" "$client_cpu" "$dir/namesrv"; then
    echo "  $sys name server failed to start; skipping h" >&2
  else
    # ports: DLedger's 3, then per broker 4 (Java also opens listenPort-2, the fast channel, and 4.9 listenPort+1)
    base="$(free_ports 15)"
    peers="n0-127.0.0.1:$base;n1-127.0.0.1:$((base + 1));n2-127.0.0.1:$((base + 2))"
    # all three start at once, as a group would: the election needs two of them up
    for i in 0 1 2; do
      bdir="$dir/broker$i"
      mkdir -p "$bdir/store"
      bports[$i]=$((base + 3 + 4 * i + 2))
      { broker_conf "$sys" "$bdir" ASYNC_FLUSH "$ns_addr" ASYNC_MASTER "${bports[$i]}"
        dlb_conf_extra broker-a "$peers" "n$i"; } > "$bdir/broker.conf"
      launch_broker "$sys" "$server_cpu" "$bdir" "$ns_addr" "${bports[$i]}"
      bpids[$i]="$broker_pid"
      members="$members${members:+,}127.0.0.1:${bports[$i]}=$broker_pid"
    done
    # three JVMs booting on one core (each pre-touching its heap) take a while: up to 180 s
    for i in 0 1 2; do
      wait_port "${bports[$i]}" "${bpids[$i]}" "$dir/broker$i/broker.log" 1800 || ok=""
    done
    if [ -z "$ok" ]; then
      echo "  a $sys broker failed to start; skipping h" >&2
      printf '{"valid": false, "invalid_because": ["a broker failed to start (see %s)"]}\n' "$dir/broker*/broker.log" > "$dir/result.json"
    else
      # shellcheck disable=SC2086
      warmup="$h_warmup" loadgen "$dir" broker --namesrv "$ns_addr" ${wl_args[h]} --queues 8 --members "$members"
      for i in 0 1 2; do
        kill -0 "${bpids[$i]}" 2>/dev/null || echo "  the $sys broker n$i DIED during the run; see $dir/broker$i/broker.log" >&2
      done
      [ -s "$dir/result.json" ] ||
        printf '{"valid": false, "invalid_because": ["the load generator wrote no result (see %s)"]}\n' "$dir/loadgen.log" > "$dir/result.json"
    fi
  fi
  for i in 0 1 2; do stop_pid "${bpids[$i]:-}" "$(stop_grace "$sys")"; done
  stop_pid "$ns_pid" 2
  for i in 0 1 2; do rm -rf "$dir/broker$i/store"; done  # commit logs are large; logs stay
}

# ---- i: the gRPC front (RocketMQ 5's API) --------------------------------------------------------

# One broker with its gRPC front in local mode, as each system's `mqbroker --enable-proxy` runs it: ours
# is the one mqbroker process (`--enable-proxy -pc rmq-proxy.json`); Java's bin/mqbroker --enable-proxy
# starts runbroker.sh (the broker's JVM flags) on org.apache.rocketmq.proxy.ProxyStartup with
# `-pm local -bc broker.conf`, so its broker and proxy share one JVM, here on rocketmq-proxy 5.3.3's
# classpath. The same rmq-proxy.json for both (the ports; Java's proxy binds them on every address) and
# start_broker's broker.conf. Plain-text gRPC: Java's proxy gets tls.server.mode=disabled (as the compat
# tests run it), ours serves plain text to a client that does not start TLS. The name server shares the
# client core; the load generator (rocketmq-client-java, the official 5.x client) creates the topic with
# +message.type=NORMAL through the broker's remoting port, then sends and receives through gRPC.
grpc_workload() {  # system
  local sys="$1" dir="$run/$1/i" base port grpc_port bdir
  ns_pid="" broker_pid=""
  bdir="$dir/broker"
  echo "== [i] gRPC (local proxy) $sys: ${wl_args[i]} + SimpleConsumers" >&2
  if ! start_namesrv "$sys" "$client_cpu" "$dir/namesrv"; then
    echo "  $sys name server failed to start; skipping i" >&2
  else
    mkdir -p "$bdir/store"
    base="$(free_ports 6)"
    port=$((base + 2)) grpc_port=$((base + 4))  # base..base+3 the broker's (as start_broker), then gRPC and the proxy's remoting
    # a SimpleConsumer's receive is a pop, which Java refuses without the timer wheel (its invisible-time
    # revive runs on it): on for both here, unlike the other workloads
    broker_conf "$sys" "$bdir" ASYNC_FLUSH "$ns_addr" ASYNC_MASTER "$port" true > "$bdir/broker.conf"
    printf '{\n  "rocketMQClusterName": "DefaultCluster",\n  "namesrvAddr": "%s",\n  "grpcServerPort": %s,\n  "remotingListenPort": %s,\n  "grpcShutdownTimeSeconds": 1,\n  "enablePrintJstack": false\n}\n' \
      "$ns_addr" "$grpc_port" "$((base + 5))" > "$bdir/rmq-proxy.json"
    if [ "$sys" = ours ]; then
      env -u RUST_LOG HOME="$bdir" taskset -c "$server_cpu" "$bin_dir/mqbroker" -c "$bdir/broker.conf" \
        --enable-proxy -pc "$bdir/rmq-proxy.json" > "$bdir/broker.log" 2>&1 &
    else
      java_home_dir "$bdir"
      # shellcheck disable=SC2086
      HOME="$bdir" ROCKETMQ_HOME="$bdir" RMQ_PROXY_HOME="$bdir" taskset -c "$server_cpu" "$java_bin" $java_broker_flags \
        "-Xlog:gc*:file=$bdir/rmq_broker_gc_%p_%t.log:time,tags:filecount=5,filesize=30M" $jdk17_flags $(java_props "$bdir") \
        -Dtls.server.mode=disabled -cp "$(cpfile rocketmq-proxy "$RMQ_JAVA_5")" org.apache.rocketmq.proxy.ProxyStartup \
        -pm local -bc "$bdir/broker.conf" -pc "$bdir/rmq-proxy.json" -n "$ns_addr" > "$bdir/broker.log" 2>&1 &
    fi
    broker_pid=$!
    started+=("$broker_pid")
    if ! wait_port "$port" "$broker_pid" "$bdir/broker.log" || ! wait_port "$grpc_port" "$broker_pid" "$bdir/broker.log"; then
      echo "  $sys broker with the gRPC front failed to start; skipping i" >&2
    else
      # shellcheck disable=SC2086
      loadgen "$dir" grpc --namesrv "$ns_addr" --broker-addr "127.0.0.1:$port" --endpoint "127.0.0.1:$grpc_port" \
        ${wl_args[i]} --broker-pid "$broker_pid"
      kill -0 "$broker_pid" 2>/dev/null || echo "  the $sys broker DIED during the run; see $bdir/broker.log" >&2
    fi
  fi
  stop_pid "$broker_pid" "$(stop_grace "$sys")"; stop_pid "$ns_pid" 2
  rm -rf "$bdir/store"  # commit logs are large; logs stay
}

# ---- j: pop through Java's proxy in cluster mode ------------------------------------------------

# Java's rocketmq-proxy 5.3.3 as bin/mqproxy starts it (ProxyStartup -pm cluster, runserver.sh's flags), plain
# text (tls.server.mode=disabled, as the compat tests' JavaProxy): a process of its own on the client core,
# in front of the brokers of DefaultCluster that the name server lists. Its rmq-proxy.json has the keys
# JavaProxy writes; the same for both systems.
start_java_proxy() {  # dir namesrv_addr: sets proxy_pid and proxy_grpc_port
  local dir="$1" ns="$2" base
  mkdir -p "$dir"
  java_home_dir "$dir"
  base="$(free_ports 2)"
  proxy_grpc_port="$base"
  printf '{\n  "rocketMQClusterName": "DefaultCluster",\n  "proxyName": "bench-proxy",\n  "proxyMode": "cluster",\n  "namesrvAddr": "%s",\n  "grpcServerPort": %s,\n  "remotingListenPort": %s,\n  "localServeAddr": "127.0.0.1",\n  "grpcShutdownTimeSeconds": 1,\n  "enablePrintJstack": false\n}\n' \
    "$ns" "$base" "$((base + 1))" > "$dir/rmq-proxy.json"
  # shellcheck disable=SC2086
  HOME="$dir" ROCKETMQ_HOME="$dir" RMQ_PROXY_HOME="$dir" taskset -c "$client_cpu" "$java_bin" $java_proxy_flags \
    "-Xlog:gc*:file=$dir/rmq_srv_gc_%p_%t.log:time,tags:filecount=5,filesize=30M" $jdk17_flags $(java_props "$dir") \
    -Dtls.server.mode=disabled -cp "$(cpfile rocketmq-proxy "$RMQ_JAVA_5")" org.apache.rocketmq.proxy.ProxyStartup \
    -pm cluster -pc "$dir/rmq-proxy.json" -n "$ns" > "$dir/proxy.log" 2>&1 &
  proxy_pid=$!
  started+=("$proxy_pid")
  wait_port "$proxy_grpc_port" "$proxy_pid" "$dir/proxy.log" || return 1
  # the gRPC port opens before the proxy has its services up; it says so on its output
  for _ in $(seq 1 600); do
    grep -q 'rocketmq-proxy startup successfully' "$dir/proxy.log" && return 0
    kill -0 "$proxy_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "the proxy did not report its start-up; see $dir/proxy.log" >&2; tail -30 "$dir/proxy.log" >&2; return 1
}

pop_workload() {  # system
  local sys="$1" dir="$run/$1/j" base port bdir
  ns_pid="" broker_pid="" proxy_pid=""
  bdir="$dir/broker"
  echo "== [j] pop through Java's proxy $RMQ_JAVA_5 (cluster mode, cpu $client_cpu) in front of the $sys broker: ${wl_args[j]} + SimpleConsumers" >&2
  if ! start_namesrv "$sys" "$client_cpu" "$dir/namesrv"; then
    echo "  $sys name server failed to start; skipping j" >&2
  else
    mkdir -p "$bdir/store"
    base="$(free_ports 4)"
    port=$((base + 2))  # as start_broker: Java also opens listenPort-2 and listenPort+1
    # pop needs the timer wheel on Java's broker (see grpc_workload): on for both here
    broker_conf "$sys" "$bdir" ASYNC_FLUSH "$ns_addr" ASYNC_MASTER "$port" true > "$bdir/broker.conf"
    launch_broker "$sys" "$server_cpu" "$bdir" "$ns_addr" "$port"
    if ! wait_port "$port" "$broker_pid" "$bdir/broker.log"; then
      echo "  $sys broker failed to start; skipping j" >&2
    elif ! start_java_proxy "$dir/proxy" "$ns_addr"; then
      echo "  the Java proxy failed to start in front of $sys; skipping j" >&2
    else
      # shellcheck disable=SC2086
      loadgen "$dir" grpc --namesrv "$ns_addr" --broker-addr "127.0.0.1:$port" --endpoint "127.0.0.1:$proxy_grpc_port" \
        ${wl_args[j]} --broker-pid "$broker_pid" --proxy-pid "$proxy_pid"
      kill -0 "$broker_pid" 2>/dev/null || echo "  the $sys broker DIED during the run; see $bdir/broker.log" >&2
      kill -0 "$proxy_pid" 2>/dev/null || echo "  the Java proxy DIED during the run; see $dir/proxy/proxy.log" >&2
    fi
  fi
  stop_pid "$proxy_pid" 2; stop_pid "$broker_pid" "$(stop_grace "$sys")"; stop_pid "$ns_pid" 2
  rm -rf "$bdir/store"  # commit logs are large; logs stay
}

# ---- g: DLedger ----------------------------------------------------------------------------------

# The Java members' JVM: DLedger ships no tuned start script (its own run.sh is a bare `java -jar`), so
# run.sh's 512 MiB heap, fixed, and G1 named explicitly: pinned to one core the JVM's ergonomics would
# otherwise pick the Serial collector. Override with BENCH_JAVA_DLEDGER_OPTS.
java_dledger_opts="${BENCH_JAVA_DLEDGER_OPTS:--server -Xms512m -Xmx512m -XX:+UseG1GC -XX:-OmitStackTraceInFastThrow}"
dl_group=bench
declare -A dl_pid=()

start_member() {  # system dir id peers port: (re)starts one member on the server core, its store in dir/id
  local sys="$1" dir="$2" id="$3" peers="$4" port="$5" log="$2/$3/member.log"
  mkdir -p "$dir/$id/store"
  echo "--- start $(date +%T.%N)" >> "$log"
  if [ "$sys" = ours ]; then
    env -u RUST_LOG HOME="$dir/$id" taskset -c "$server_cpu" "$bin_dir/dledger" server \
      -g "$dl_group" -i "$id" -p "$peers" -s "$dir/$id/store" >> "$log" 2>&1 &
  else
    mkdir -p "$dir/$id/tmp"
    HOME="$dir/$id" JAVA_OPTS="$java_dledger_opts -Djava.io.tmpdir=$dir/$id/tmp -Duser.home=$dir/$id" \
      taskset -c "$server_cpu" "$root/compat-tests/dledger-node/run.sh" server \
      -g "$dl_group" -i "$id" -p "$peers" -s "$dir/$id/store" >> "$log" 2>&1 &
  fi
  dl_pid[$id]=$!
  started+=("${dl_pid[$id]}")
  wait_port "$port" "${dl_pid[$id]}" "$log"
}

# m's rate: --fixed-rate, else half of what Java's broker sustained in b' earlier in this run (a rate
# both brokers sustain), else 12,000 msg/s (half of Java 5.3.3's b' on the 2-core machine it was tuned on)
the_fixed_rate() {
  if [ -z "$fixed_rate" ]; then
    fixed_rate=12000
    local j="$run/java/b-lean/result.json"
    if [ -s "$j" ]; then
      fixed_rate="$(python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["send_tps"] / 2))' "$j" 2>/dev/null || echo 12000)"
    fi
  fi
  echo "$fixed_rate"
}

lean_load() {  # dir args...: broker-load on the client core, with loadgen's phases and output (lean_warmup, lean_duration: m's)
  local dir="$1" pid; shift
  mkdir -p "$dir"
  : > "$dir/loadgen.log"
  taskset -c "$client_cpu" "$bin_dir/broker-load" "$@" --warmup "${lean_warmup:-$warmup}" --duration "${lean_duration:-$duration}" --drain "$drain" \
    --clk-tck "$clk_tck" --server-cpu "$server_cpu" --client-cpu "$client_cpu" --out "$dir/result.json" > "$dir/loadgen.log" 2>&1 &
  pid=$!
  started+=("$pid")
  tail -n +1 -f --pid="$pid" "$dir/loadgen.log" | grep --line-buffered '^\[loadgen\]' >&2 || true
  stop_pid "$pid" 1
  [ -s "$dir/result.json" ] || { echo "  broker-load wrote no result; see $dir/loadgen.log" >&2; tail -20 "$dir/loadgen.log" >&2; }
}

dledger_load() {  # dir name args...: the generator on the client core; progress to stderr, output in dir/name.log
  local dir="$1" name="$2" pid; shift 2
  : > "$dir/$name.log"  # exists before tail follows it (the background job opens it later)
  taskset -c "$client_cpu" "$bin_dir/dledger-load" "$@" > "$dir/$name.log" 2>&1 &
  pid=$!
  started+=("$pid")
  tail -n +1 -f --pid="$pid" "$dir/$name.log" | grep --line-buffered '^\[dledger-load\]' >&2 || true
  stop_pid "$pid" 1
}

dledger_workload() {  # system
  local sys="$1" dir="$run/$1/g" base peers id i pids=() ok=1 old
  local ids=(n0 n1 n2)
  dl_pid=()
  mkdir -p "$dir"
  base="$(free_ports 3)"
  peers="n0-127.0.0.1:$base;n1-127.0.0.1:$((base + 1));n2-127.0.0.1:$((base + 2))"
  echo "== [g] DLedger 3 members $sys (all on cpu $server_cpu): 64 appenders x 1 KiB, then $elections leader kills" >&2
  for i in 0 1 2; do
    start_member "$sys" "$dir" "${ids[$i]}" "$peers" "$((base + i))" || { ok=""; break; }
  done
  if [ -z "$ok" ]; then
    echo "  $sys failed to start; skipping g" >&2
  else
    for id in "${ids[@]}"; do pids+=(--pid "$id=${dl_pid[$id]}"); done
    dledger_load "$dir" append append --group "$dl_group" --peers "$peers" "${pids[@]}" --threads 64 --size 1024 \
      --warmup "$warmup" --duration "$duration" --clk-tck "$clk_tck" --server-cpu "$server_cpu" --client-cpu "$client_cpu" \
      --out "$dir/result.json"
    [ -s "$dir/result.json" ] || { echo "  the load generator wrote no result; see $dir/append.log" >&2; tail -20 "$dir/append.log" >&2; }
    for id in "${ids[@]}"; do kill -0 "${dl_pid[$id]}" 2>/dev/null || echo "  the $sys member $id DIED during the run; see $dir/$id/member.log" >&2; done
    # elections: the generator kills the leader; the member is restarted on its store before the next round
    mkdir -p "$dir/elections"
    for i in $(seq 1 "$elections"); do
      pids=()
      for id in "${ids[@]}"; do pids+=(--pid "$id=${dl_pid[$id]}"); done
      dledger_load "$dir/elections" "$i" elect --group "$dl_group" --peers "$peers" "${pids[@]}" --out "$dir/elections/$i.json"
      [ -s "$dir/elections/$i.json" ] || { echo "  election round $i wrote no result; see $dir/elections/$i.log" >&2; break; }
      old="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["old_leader"])' "$dir/elections/$i.json")"
      stop_pid "${dl_pid[$old]}" 1  # already dead (SIGKILL): reaped here
      for j in 0 1 2; do
        [ "${ids[$j]}" = "$old" ] || continue
        start_member "$sys" "$dir" "$old" "$peers" "$((base + j))" || { echo "  $old did not restart; elections stop here" >&2; break 2; }
      done
    done
  fi
  for id in "${ids[@]}"; do stop_pid "${dl_pid[$id]:-}" "$(stop_grace "$sys")"; done
  for id in "${ids[@]}"; do rm -rf "$dir/$id/store"; done
}

# ---- run ------------------------------------------------------------------------------------------

load1="$(cut -d' ' -f1 /proc/loadavg)"
# o holds ~46 GiB of consume-queue files (8,000 queues, each file reserved whole, as Java's broker
# does): refuse to start a run that would fill the disk half-way through rather than fail at o.
case ",$workloads," in
  *,o,*)
    free_gib=$(( $(df -Pk "$run" | awk 'NR == 2 { print $4 }') / 1048576 ))
    if [ "$free_gib" -lt 50 ]; then
      echo "o needs ~50 GiB free under $run (~46 GiB of consume queues per system, one system at a time); $free_gib GiB free: free some or leave o out (--workloads)" >&2
      exit 2
    fi ;;
esac
echo "== $label run: warm-up ${warmup}s, measured ${duration}s per workload; server on cpu $server_cpu, load generator on cpu $client_cpu; load average now $load1" >&2
if awk "BEGIN { exit !($load1 > 0.5) }"; then
  echo "   WARNING: other work is running on this machine (load average $load1); the table shows how busy each core was besides our processes" >&2
fi
IFS=, read -r -a sys_list <<< "$systems"
IFS=, read -r -a wl_list <<< "$workloads"
for wl in "${wl_list[@]}"; do
  for sys in "${sys_list[@]}"; do
    case "$wl" in
      a|b|c|d) broker_workload "$sys" "$wl" ;;
      e) namesrv_workload "$sys" ;;
      # the ASYNC_MASTER baseline right before SYNC_MASTER, so the two see the same machine
      f) broker_workload "$sys" f0; broker_workload "$sys" f ;;
      # Java DLedger 0.3.1.2 is what both 4.9.x and 5.x pin: one Java group, under "java"
      g) [ "$sys" = java49 ] || dledger_workload "$sys" ;;
      h) dledger_brokers_workload "$sys" ;;
      i) [ "$sys" = java49 ] || grpc_workload "$sys" ;;  # 4.9 has no gRPC front
      j) [ "$sys" = java49 ] || pop_workload "$sys" ;;  # nor pop
      l) for lean in a-lean b-lean c-lean f0-lean; do broker_workload "$sys" "$lean"; done ;;
      a-lean|b-lean|c-lean|f0-lean) broker_workload "$sys" "$wl" ;;  # one of l's alone
      m|n|o|p|q) broker_workload "$sys" "$wl" ;;
      k) [ "$sys" = java49 ] || broker_workload "$sys" k ;;  # nor timer messages (5.x)
      *) echo "unknown workload $wl" >&2; exit 2 ;;
    esac
  done
done

# what the run was: written next to the figures so a comparison can be repeated
python3 - "$run/meta.json" <<PY
import json, platform, subprocess, sys
def out(cmd):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    return (r.stdout + r.stderr).strip()
meta = {
  "label": "$label", "started": "$stamp", "warmup_s": $warmup, "h_warmup_s": $h_warmup, "duration_s": $duration,
  "server_cpu": $server_cpu, "client_cpu": $client_cpu, "load_average_at_start": $load1,
  "machine": {"cpus": out("nproc"), "cpu_model": out("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"),
              "kernel": platform.release(), "memory": out("free -g | sed -n 2p"), "java": out("$java_bin -version 2>&1 | head -1")},
  "versions": {"java": "$RMQ_JAVA_5", "java49": "$RMQ_JAVA_49", "client": "5.3.3", "grpc_client": "rocketmq-client-java $RMQ_CLIENT_JAVA", "ours": out("git -C $root rev-parse --short HEAD")},
  "jvm": {"java_broker": "$java_broker_flags -Xlog:gc*:file=<run>/rmq_broker_gc_%p_%t.log:time,tags:filecount=5,filesize=30M $jdk17_flags",
          "java_namesrv": "$java_namesrv_flags -Xlog:gc*:file=<run>/rmq_srv_gc_%p_%t.log:time,tags:filecount=5,filesize=30M $jdk17_flags",
          "java_proxy": "$java_proxy_flags -Xlog:gc*:file=<run>/rmq_srv_gc_%p_%t.log:time,tags:filecount=5,filesize=30M $jdk17_flags -Dtls.server.mode=disabled",
          "loadgen": "$loadgen_flags", "java_dledger": "$java_dledger_opts (+ compat-tests/dledger-node/run.sh's --add-opens)"},
  "dledger": {"java": "$DLEDGER_JAVA", "members": 3, "config": "DLedgerConfig defaults on both sides (group $dl_group, loopback, store per member)",
              "elections": $elections},
  "timer": {"messages": $timer_messages, "window_s": $timer_window, "lead_s": $timer_lead},
  "broker_conf": "same for every system: ASYNC_MASTER, ASYNC_FLUSH (d: SYNC_FLUSH; f: SYNC_MASTER with inSyncReplicas=2 and a SLAVE, brokerId 1; h: enableDLegerCommitLog=true, dLegerGroup broker-a, dLegerPeers n0-n2 on loopback, dLegerSelfId n0/n1/n2, mappedFileSizeCommitLog=1073741824), autoCreateTopicEnable, timerWheelEnable=false (i, j, k: true), defaults otherwise (timerPrecisionMs 1000)",
  "workloads": {"a": "sync send 128 B, 64 threads, push consumer, topic BenchmarkTest (1024 queues)",
                "b": "async send 1 KiB, 1024 in flight, push consumer, 8 queues",
                "a-lean": "a's load from broker-load (scripts/bench/load: our remoting client on one thread, the Java client 4.9's SEND_MESSAGE_V2 frames and push-consumer pulls, one connection)",
                "b-lean": "b's load from broker-load",
                "c-lean": "c's load from broker-load (SEND_BATCH_MESSAGE of 16 x 1 KiB encoded as the Java producer's send(Collection))",
                "f0-lean": "f0's load from broker-load",
                "n": "1,000 producer connections: 1,000 sync senders of 1 KiB (broker-load --connections 1000), one topic of 8 queues, push consumer's pulls",
                "o": "1,000 topics x 8 queues: async 1 KiB sends, 1,024 in flight, spread over every queue (broker-load --topics 1000), one consumer pulling all 8,000 queues",
                "p": "8 consumer groups: b' (async 1 KiB, 1,024 in flight, 8 queues) with 8 groups each consuming every message (broker-load --groups 8); consume TPS counts every group's",
                "q": "catch-up: $catchup_mib MiB of 1 KiB messages sent with nobody consuming (8 queues), the commit log dropped from the page cache (fsync + posix_fadvise DONTNEED per file), then one consumer from the backlog's head while the senders go on at $(the_fixed_rate) msg/s (m's schedule) for $catchup_duration s",
                "m": "fixed rate: 1 KiB sends at $(the_fixed_rate) msg/s for ${fixed_duration} s, open loop (broker-load --mode rate, at most 65,536 outstanding), push consumer's pulls, 8 queues; send and e2e latency from each send's scheduled time (corrected for coordinated omission)",
                "c": "sync batch send 16 x 1 KiB, 64 threads, push consumer, 8 queues",
                "d": "SYNC_FLUSH: sync send 1 KiB, 64 threads, push consumer, 8 queues",
                "f0": "ASYNC_MASTER, no slave (f's baseline): sync send 1 KiB, 64 threads, push consumer, 8 queues",
                "f": "SYNC_MASTER + a slave of the same system, both on the server core, ASYNC_FLUSH: sync send 1 KiB, 64 threads, push consumer, 8 queues",
                "e": "name server GET_ROUTEINFO_BY_TOPIC, official Java client, 128 in flight on one connection",
                "e-lean": "name server GET_ROUTEINFO_BY_TOPIC, the Java client's frame replayed by routeload (Go), 2 connections x 128 in flight",
                "i": "gRPC front in local mode (ours: mqbroker --enable-proxy; Java: ProxyStartup -pm local, broker+proxy in one JVM with the broker's JVM flags), rocketmq-client-java $RMQ_CLIENT_JAVA: Producer sendAsync 1 KiB, 1024 in flight, held while over 4096 sent but not received, NORMAL topic of 8 queues (created with +message.type=NORMAL), 4 SimpleConsumers x 4 receivers, batches of 32, long polling 5 s, every message acked; timerWheelEnable=true (Java pops only with it); CPU = the one server process, per message sent or consumed",
                "j": "pop through Java's rocketmq-proxy $RMQ_JAVA_5 in cluster mode (ProxyStartup -pm cluster, its own JVM on the client core with the name server and the load generator; the same proxy for both systems) in front of one broker alone on the server core (timerWheelEnable=true); i's load on topic bench_pop: Producer sendAsync 1 KiB, 1024 in flight, held while over 4096 sent but not received, 4 SimpleConsumers x 4 receivers, batches of 32, long polling 5 s, every message acked; CPU = the broker process, per message sent or consumed; the proxy's CPU reported",
                "k": "5.x timer messages: $timer_messages timers (Message.setDeliverTimeMs, client 5.3.3, 128 B, async with 1024 in flight, topic bench_timer of 8 queues) due uniformly at random over $timer_window s opening $timer_lead s after the first send, sent as fast as the broker answers after a warm-up of timers due 1-3 s later; a push consumer in the same JVM; timerWheelEnable=true, timerPrecisionMs 1000 (defaults); CPU = the broker's from the first send to the last delivery, per timer",
                "h": "3 brokers of one system in DLedger mode (one brokerName, one DLedger group; the leader is the master), all on the server core, ASYNC_FLUSH: sync send 1 KiB, 64 threads, push consumer, 8 queues; CPU summed over the three",
                "g": "DLedger: 3 members of one system on the server core, 64 appenders x 1 KiB through the leader (dledger-load, our DLedgerClient); then leader SIGKILLs timed to METADATA naming a new leader and to the first append SUCCESS"},
}
json.dump(meta, open(sys.argv[1], "w"), indent=2)
PY
python3 "$root/scripts/bench/report.py" "$run" "$results" "$systems"
