#!/usr/bin/env bash
# Runs DLedgerGolden.java against the real DLedger 0.3.1.2 classes of one classpath:
#   dledger-0.3.1.2   the standalone artifact io.openmessaging.storage:dledger:0.3.1.2 with the dependencies it
#                     declares (rocketmq-remoting 4.9.4, fastjson 1.2.69_noneautotype), resolved by ./pom.xml;
#   rocketmq-5.3.3    the Java broker 5.3.3's classpath (the same dledger jar with remoting 5.3.3 and
#                     fastjson 1.2.83, as a DLedger broker runs it), from ../resolve-runtime.sh.
# Usage: compat-tests/dledger-golden/run.sh <classpath> generate <out-dir>
#        compat-tests/dledger-golden/run.sh <classpath> server <store-dir> <group> <self-id> <peers>
#        compat-tests/dledger-golden/run.sh <classpath> client <group> <peers> <remote-id> <index>
# Fails (never skips) without java, javac or Maven.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
compat="$(cd "$here/.." && pwd)"

die() { echo "run.sh: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: run.sh dledger-0.3.1.2|rocketmq-5.3.3 generate|server|client args..."
name="$1"; shift

command -v java >/dev/null 2>&1 || die "java not found on PATH (Java 17 is expected)"
command -v javac >/dev/null 2>&1 || die "javac not found on PATH (a JDK, not a JRE, is needed)"

cpdir="$compat/.runtime/cp"
mkdir -p "$cpdir"
case "$name" in
  dledger-0.3.1.2)
    cpfile="$cpdir/dledger-0.3.1.2.cp"
    if [ ! -s "$cpfile" ]; then
      command -v mvn >/dev/null 2>&1 || die "mvn not found on PATH (needed once to resolve $name)"
      echo "run.sh: resolving io.openmessaging.storage:dledger:0.3.1.2" >&2
      mvn -B -q -f "$here/pom.xml" validate -Dcp.out="$cpfile.tmp" >&2
      mv "$cpfile.tmp" "$cpfile"
    fi
    ;;
  rocketmq-5.3.3)
    cpfile="$cpdir/rocketmq-broker-5.3.3.cp"
    if [ ! -s "$cpfile" ]; then
      echo "run.sh: classpath of rocketmq-broker 5.3.3 missing, running resolve-runtime.sh" >&2
      "$compat/resolve-runtime.sh" >&2
    fi
    ;;
  *) die "unknown classpath '$name' (dledger-0.3.1.2 or rocketmq-5.3.3)" ;;
esac
[ -s "$cpfile" ] || die "classpath file $cpfile still missing"
cp="$(cat "$cpfile")"
case ":$cp:" in *"/dledger-0.3.1.2.jar:"*) ;; *) die "$cpfile has no dledger-0.3.1.2.jar" ;; esac

# Compile when the class is missing or older than the source or the classpath file. Compiling into a
# fresh directory that is then renamed keeps concurrent callers (parallel tests) from seeing half a build.
src="$here/DLedgerGolden.java"
classes="$here/out/classes-$name"
stamp="$classes/DLedgerGolden.class"
if [ ! -f "$stamp" ] || [ "$src" -nt "$stamp" ] || [ "$cpfile" -nt "$stamp" ]; then
  mkdir -p "$here/out"
  tmp="$(mktemp -d "$here/out/classes-$name.XXXXXX")"
  javac -encoding UTF-8 -nowarn -d "$tmp" -cp "$cp" "$src"
  rm -rf "$classes"
  mv "$tmp" "$classes" 2>/dev/null || rm -rf "$tmp"
fi

cat > "$here/out/logback-quiet.xml.tmp.$$" <<'XML'
<configuration>
  <root level="OFF"/>
</configuration>
XML
mv "$here/out/logback-quiet.xml.tmp.$$" "$here/out/logback-quiet.xml"

# A private home: DLedger and RocketMQ's loggers must not write into the real ~/logs.
home="$(mktemp -d "${TMPDIR:-/tmp}/dledger-golden-home.XXXXXX")"
trap 'rm -rf "$home"' EXIT

java -Xmx256m \
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED \
  --add-opens java.base/java.nio=ALL-UNNAMED \
  --add-opens java.base/java.util=ALL-UNNAMED \
  --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
  --add-opens java.base/java.lang=ALL-UNNAMED \
  -Duser.home="$home" \
  -Drocketmq.home.dir="$home" \
  -Dlogback.configurationFile="$here/out/logback-quiet.xml" \
  -Drmq.logback.configurationFile="$here/out/logback-quiet.xml" \
  -Dfile.encoding=UTF-8 \
  -cp "$cp:$classes" DLedgerGolden "$@"
