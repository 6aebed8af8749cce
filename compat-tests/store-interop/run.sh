#!/usr/bin/env bash
# Drives the real Java DefaultMessageStore (rocketmq-store <version>) through StoreInterop.java.
# Usage: compat-tests/store-interop/run.sh <version> write|read <storeDir> <manifest> [options...]
#   e.g. run.sh 4.9.7 write /tmp/x49 /tmp/m49.json
#        run.sh 5.3.3 read  /tmp/x49 /tmp/r53.json --keys key-0,nope
# Options: --count N, --commitlog-file-size BYTES, --cq-file-size BYTES, --keys k1,k2 (see README.md).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
compat="$(cd "$here/.." && pwd)"

die() { echo "run.sh: $*" >&2; exit 1; }
[ $# -ge 4 ] || die "usage: run.sh <version> write|read <storeDir> <manifest> [options...]"
version="$1"; shift
case "$1" in write|read) ;; *) die "command must be write or read, got '$1'" ;; esac

command -v java >/dev/null 2>&1 || die "java not found on PATH (Java 17 is expected)"
command -v javac >/dev/null 2>&1 || die "javac not found on PATH (a JDK, not a JRE, is needed)"

cpfile="$compat/.runtime/cp/rocketmq-broker-$version.cp"
[ -s "$cpfile" ] || die "classpath file $cpfile missing: run compat-tests/resolve-runtime.sh first"
cp="$(cat "$cpfile")"
IFS=':' read -r -a jars <<< "$cp"
for jar in "${jars[@]}"; do
  [ -f "$jar" ] || die "classpath entry $jar (from $cpfile) does not exist"
done
case ":$cp:" in *"/rocketmq-store-$version.jar:"*) ;; *) die "$cpfile has no rocketmq-store-$version.jar" ;; esac

src="$here/StoreInterop.java"
logback="$here/logback-quiet.xml"
[ -f "$src" ] || die "missing $src"
[ -f "$logback" ] || die "missing $logback"

# Compile if the class is missing or older than the source or the classpath file.
classes="$here/out/classes-$version"
stamp="$classes/StoreInterop.class"
if [ ! -f "$stamp" ] || [ "$src" -nt "$stamp" ] || [ "$cpfile" -nt "$stamp" ]; then
  rm -rf "$classes"
  mkdir -p "$classes"
  javac -encoding UTF-8 -nowarn -d "$classes" -cp "$cp" "$src"
fi

# A private home: the store (and 5.x extras) must not touch the real ~/store or ~/logs.
home="$(mktemp -d "${TMPDIR:-/tmp}/store-interop-home.XXXXXX")"
trap 'rm -rf "$home"' EXIT

java -Xmx1g \
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED \
  --add-opens java.base/java.nio=ALL-UNNAMED \
  --add-opens java.base/java.util=ALL-UNNAMED \
  --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
  --add-opens java.base/java.lang=ALL-UNNAMED \
  -Duser.home="$home" \
  -Drocketmq.home.dir="$home" \
  -Dlogback.configurationFile="$logback" \
  -Drmq.logback.configurationFile="$logback" \
  -Dfile.encoding=UTF-8 \
  -cp "$cp:$classes" StoreInterop "$@"
