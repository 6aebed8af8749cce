#!/usr/bin/env bash
# Runs one Java DLedger 0.3.1.2 member (io.openmessaging.storage:dledger from Maven Central) with the options of
# our `dledger server`: compat-tests/dledger-node/run.sh server -g G -i n0 -p 'n0-127.0.0.1:40911;...' -s DIR ...
# or the Java DLedgerClient load driver DLedgerLoad.java: run.sh append|get|transfer -g G -p PEERS ... (see that file).
# Needs Java 17 (JDK) and ../.runtime/cp/dledger-<version>.cp from ../resolve-runtime.sh.
# JAVA_OPTS adds JVM options (default -Xmx512m); logging is WARN and above.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
compat="$(cd "$here/.." && pwd)"
. "$compat/versions.env"

die() { echo "dledger-node/run.sh: $*" >&2; exit 1; }
command -v java >/dev/null 2>&1 || die "java not found on PATH (Java 17 is expected)"
command -v javac >/dev/null 2>&1 || die "javac not found on PATH (a JDK, not a JRE, is needed)"
cpfile="$compat/.runtime/cp/dledger-$DLEDGER_JAVA.cp"
[ -s "$cpfile" ] || die "classpath file $cpfile missing: run compat-tests/resolve-runtime.sh first"
cp="$(cat "$cpfile")"

case "${1:-}" in
  server) main=DLedgerNode ;;
  append|get|transfer) main=DLedgerLoad ;;
  *) die "usage: run.sh server|append|get|transfer ..." ;;
esac

srcs=("$here/DLedgerNode.java" "$here/DLedgerLoad.java")
classes="$here/out/classes-$DLEDGER_JAVA"
stamp="$classes/.compiled"
stale() {
  [ -f "$stamp" ] && [ ! "$cpfile" -nt "$stamp" ] || return 0
  for src in "${srcs[@]}"; do [ "$src" -nt "$stamp" ] && return 0; done
  return 1
}
# Compiled under a lock into a temporary directory and renamed, so processes started at once do not race.
if stale; then
  mkdir -p "$here/out"
  exec 9>"$here/out/.compile.lock"
  flock 9
  if stale; then
    tmp="$(mktemp -d "$here/out/tmp.XXXXXX")"
    javac -encoding UTF-8 -nowarn -d "$tmp" -cp "$cp" "${srcs[@]}"
    touch "$tmp/.compiled"
    rm -rf "$classes"
    mv "$tmp" "$classes"
  fi
  exec 9>&-
fi

# The mmap cleaner DefaultMmapFile calls reflectively needs these opens on JDK 17.
exec java ${JAVA_OPTS:--Xmx512m} \
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED \
  --add-opens java.base/java.nio=ALL-UNNAMED \
  --add-opens java.base/java.lang=ALL-UNNAMED \
  --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
  -Dlogback.configurationFile="$compat/dledger-interop/logback-quiet.xml" \
  -Dfile.encoding=UTF-8 \
  -cp "$cp:$classes" "$main" "$@"
