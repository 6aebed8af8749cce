#!/usr/bin/env bash
# Resolves the Java RocketMQ parts (and DLedger) the compat tests and benchmarks run, from Maven Central, and writes
# one classpath file per part to compat-tests/.runtime/cp/<artifact>-<version>.cp.
# Usage: compat-tests/resolve-runtime.sh            (all parts)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/.runtime/cp"
mkdir -p "$out"
. "$here/versions.env"
parts=(
  "rocketmq-broker:$RMQ_JAVA_49"
  "rocketmq-broker:$RMQ_JAVA_5"
  "rocketmq-namesrv:$RMQ_JAVA_5"
  "rocketmq-namesrv:$RMQ_JAVA_49"
  "rocketmq-tools:$RMQ_JAVA_49"
  "rocketmq-tools:$RMQ_JAVA_5"
  "rocketmq-client:$RMQ_JAVA_49"
  "rocketmq-client:$RMQ_JAVA_5"
  "rocketmq-proxy:$RMQ_JAVA_5"
  "rocketmq-client-java:$RMQ_CLIENT_JAVA"
)
for part in "${parts[@]}"; do
  artifact="${part%%:*}"; version="${part##*:}"
  file="$out/$artifact-$version.cp"
  if [ -s "$file" ]; then continue; fi
  echo "resolving $artifact $version" >&2
  mvn -B -q -f "$here/runtime/pom.xml" validate \
    -Drmq.artifact="$artifact" -Drmq.version="$version" -Dcp.out="$file.tmp"
  mv "$file.tmp" "$file"
done
# DLedger (io.openmessaging.storage:dledger), for compat-tests/dledger-interop.
file="$out/dledger-$DLEDGER_JAVA.cp"
if [ ! -s "$file" ]; then
  echo "resolving dledger $DLEDGER_JAVA" >&2
  mvn -B -q -f "$here/dledger-interop/pom.xml" validate -Ddledger.version="$DLEDGER_JAVA" -Dcp.out="$file.tmp"
  mv "$file.tmp" "$file"
fi
