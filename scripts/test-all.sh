#!/usr/bin/env bash
# Runs every test of the project: Rust unit and integration tests, the golden vectors regenerated
# from the real Java classes, and the compat tests that drive our binaries with the official
# Java client, Go client, Java broker and mqadmin. Nothing here skips: what is missing is installed
# first (scripts/setup-tools.sh), and a tool that cannot be had fails the run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# What a fresh machine lacks (a JDK, Maven, Go, a C compiler, Rust) is installed first.
. scripts/setup-tools.sh

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

echo "== compat tests: Java broker, Java clients, mqadmin, Java DLedger members"
mvn -B -q -f compat-tests/java/pom.xml test -Drmq.bin.dir="$root/target/debug"

echo "== compat tests: Go client"
(cd compat-tests/go && RMQ_BIN_DIR="$root/target/debug" go test -count=1 -v ./... 2>&1 | tail -n 40)
