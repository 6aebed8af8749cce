#!/usr/bin/env bash
# Runs every test of the project: Rust unit and integration tests, the golden vectors regenerated
# from the real Java classes, and the compat tests that drive our binaries with the official
# Java client, Go client, Java broker and mqadmin. Nothing here skips: a missing Java, Maven or Go fails.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

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
# three lanes at once: the replication classes (ha, dledger), the other Java classes, and the Go
# client. Each lane's output is printed when it ends; any failed lane fails the run.
echo "== compat tests: Java broker, Java clients, mqadmin, Java DLedger members; Go client (three lanes)"
mvn -B -q -f compat-tests/java/pom.xml test-compile
lanes="$root/target/compat-lanes"
rm -rf "$lanes" && mkdir -p "$lanes"
surefire() {  # name, test pattern
  mvn -B -q -f compat-tests/java/pom.xml surefire:test -Drmq.bin.dir="$root/target/debug" -Dtest="$2" > "$lanes/$1.log" 2>&1
}
surefire replication '**/ha/*Test,**/dledger/*Test' & pids=($!)
surefire clients '!**/ha/*Test,!**/dledger/*Test' & pids+=($!)
(cd compat-tests/go && RMQ_BIN_DIR="$root/target/debug" go test -count=1 -v ./... > "$lanes/go.log" 2>&1) & pids+=($!)
failed=0
for i in 0 1 2; do
  name=(replication clients go)
  if wait "${pids[$i]}"; then status=ok; else status=FAILED; failed=1; fi
  echo "== lane ${name[$i]}: $status"
  if [ "${name[$i]}" = go ] && [ "$status" = ok ]; then tail -n 40 "$lanes/go.log"; else cat "$lanes/${name[$i]}.log"; fi
done
exit "$failed"
