#!/usr/bin/env bash
# Runs every test of the project: Rust unit and integration tests, the golden vectors regenerated
# from the real Java classes, and the compat tests that drive our binaries with the official
# Java client, the Go, Python and Node.js clients, Java broker and mqadmin. Nothing here skips: what
# is missing is installed first (scripts/setup-tools.sh), and a tool that cannot be had fails the run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# What a fresh machine lacks (a JDK, Maven, Go, a C compiler, Python's venv, Node.js, Rust, the pinned
# Python and Node.js RocketMQ clients) is installed first.
. scripts/setup-tools.sh

echo "== format and lints"
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# No import cycle among any crate's modules.
for crate in remoting namesrv store ha dledger proxy broker; do python3 scripts/module-cycles.py "$crate/src"; done

echo "== build"
cargo build --workspace --bins

echo "== resolve the Java RocketMQ parts from Maven Central"
compat-tests/resolve-runtime.sh

echo "== regenerate the golden vectors with the Java remoting classes"
compat-tests/golden/generate.sh

echo "== regenerate the DLedger golden bodies with the Java DLedger 0.3.1.2 classes"
compat-tests/dledger-golden/generate.sh

echo "== cargo test"
cargo test --workspace

# The compat suites mostly wait (elections, registrations, consumers catching up), so they run in
# two lanes at once, one per core: the replication classes (ha, dledger) with two long classes of
# the others, GrpcClientsTest (the Python and Node.js clients, ~30 s) and ClusterProxyGrpcTest (mqproxy,
# ~2 min; this lane ended ~6 min before the other), and the other Java classes followed by the Go client. Each lane's output is printed
# when it ends; a failed lane fails the run. One after another they take more than the 40 minutes CI allows the whole run.
echo "== compat tests: Java broker, Java clients, mqadmin, Java DLedger members; Python, Node.js and Go clients (two lanes)"
mvn -B -q -f compat-tests/java/pom.xml test-compile
lanes="$root/target/compat-lanes"
rm -rf "$lanes" && mkdir -p "$lanes"
surefire() {  # test pattern
  mvn -B -q -f compat-tests/java/pom.xml surefire:test -Drmq.bin.dir="$root/target/debug" -Dtest="$1"
}
first_lane='**/ha/*Test,**/dledger/*Test,**/MqAdminRelaysTest,**/PrometheusMetricsTest,**/GrpcClientsTest,**/ClusterProxyGrpcTest'
surefire "$first_lane" > "$lanes/replication.log" 2>&1 & replication=$!
(
  set +e
  surefire "!${first_lane//,/,!}" > "$lanes/clients.log" 2>&1; java=$?
  (cd compat-tests/go && RMQ_BIN_DIR="$root/target/debug" go test -count=1 -v ./... > "$lanes/go.log" 2>&1); go=$?
  [ "$java" -eq 0 ] && [ "$go" -eq 0 ]
) & clients=$!
failed=0
wait "$replication" && echo "== lane replication: ok" || { echo "== lane replication: FAILED"; failed=1; }
cat "$lanes/replication.log"
wait "$clients" && echo "== lane clients + Go: ok" || { echo "== lane clients + Go: FAILED"; failed=1; }
cat "$lanes/clients.log"
tail -n 40 "$lanes/go.log"
exit "$failed"
