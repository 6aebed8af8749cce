#!/usr/bin/env bash
# Drives the real Java DLedgerMmapFileStore (io.openmessaging.storage:dledger 0.3.1.2) through DLedgerInterop.java.
# Usage: compat-tests/dledger-interop/run.sh write <baseDir> <manifest> [options...]
#        compat-tests/dledger-interop/run.sh read  <baseDir> <selfId> <manifest> [options...]
# Options: --count N, --data-size BYTES, --index-size BYTES, --append M, --no-hook (see README.md).
# Exit codes: 0 ok, 2 usage, 255 the store called System.exit(-1) (load or recovery refused), other = failure.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
compat="$(cd "$here/.." && pwd)"
. "$compat/versions.env"

die() { echo "run.sh: $*" >&2; exit 1; }
[ $# -ge 3 ] || die "usage: run.sh write|read <baseDir> ..."
case "$1" in write|read) ;; *) die "command must be write or read, got '$1'" ;; esac

command -v java >/dev/null 2>&1 || die "java not found on PATH (Java 17 is expected)"
command -v javac >/dev/null 2>&1 || die "javac not found on PATH (a JDK, not a JRE, is needed)"

cpfile="$compat/.runtime/cp/dledger-$DLEDGER_JAVA.cp"
[ -s "$cpfile" ] || die "classpath file $cpfile missing: run compat-tests/resolve-runtime.sh first"
cp="$(cat "$cpfile")"
IFS=':' read -r -a jars <<< "$cp"
for jar in "${jars[@]}"; do
  [ -f "$jar" ] || die "classpath entry $jar (from $cpfile) does not exist"
done
case ":$cp:" in *"/dledger-$DLEDGER_JAVA.jar:"*) ;; *) die "$cpfile has no dledger-$DLEDGER_JAVA.jar" ;; esac

src="$here/DLedgerInterop.java"
logback="$here/logback-quiet.xml"
[ -f "$src" ] || die "missing $src"
[ -f "$logback" ] || die "missing $logback"

# Compile if the class is missing or older than the source or the classpath file.
classes="$here/out/classes-$DLEDGER_JAVA"
stamp="$classes/DLedgerInterop.class"
if [ ! -f "$stamp" ] || [ "$src" -nt "$stamp" ] || [ "$cpfile" -nt "$stamp" ]; then
  rm -rf "$classes"
  mkdir -p "$classes"
  javac -encoding UTF-8 -nowarn -d "$classes" -cp "$cp" "$src"
fi

# The mmap cleaner DefaultMmapFile calls reflectively needs these opens on JDK 17.
exec java -Xmx512m \
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED \
  --add-opens java.base/java.nio=ALL-UNNAMED \
  --add-opens java.base/java.lang=ALL-UNNAMED \
  --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
  -Dlogback.configurationFile="$logback" \
  -Dfile.encoding=UTF-8 \
  -cp "$cp:$classes" DLedgerInterop "$@"
