#!/usr/bin/env bash
# Regenerates the golden remoting frames in compat-tests/golden/vectors/java-<version>/ with the real Java
# rocketmq-remoting classes of each client version in ../versions.env (see README.md).
# Usage: compat-tests/golden/generate.sh
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
compat="$(cd "$here/.." && pwd)"
. "$compat/versions.env"

die() { echo "generate.sh: $*" >&2; exit 1; }
command -v java >/dev/null 2>&1 || die "java not found on PATH (Java 17 is expected)"
command -v javac >/dev/null 2>&1 || die "javac not found on PATH (a JDK, not a JRE, is needed)"

versions=("$RMQ_JAVA_49" "$RMQ_JAVA_5")
cpdir="$compat/.runtime/cp"
for v in "${versions[@]}"; do
  if [ ! -s "$cpdir/rocketmq-client-$v.cp" ]; then
    echo "generate.sh: classpath for rocketmq-client $v missing, running resolve-runtime.sh" >&2
    "$compat/resolve-runtime.sh"
    break
  fi
done

out="$here/out"
mkdir -p "$out"
# Silence Netty's DEBUG chatter (logback's default is DEBUG to the console) and RocketMQ's own loggers.
cat > "$out/logback-quiet.xml" <<'EOF'
<configuration>
  <root level="OFF"/>
</configuration>
EOF

# The serialize type is set per command by GoldenVectors; make sure a stray setting cannot break class init.
unset ROCKETMQ_SERIALIZE_TYPE

for v in "${versions[@]}"; do
  cpfile="$cpdir/rocketmq-client-$v.cp"
  [ -s "$cpfile" ] || die "classpath file $cpfile still missing"
  cp="$(cat "$cpfile")"
  classes="$out/classes-$v"
  rm -rf "$classes"
  mkdir -p "$classes"
  javac -encoding UTF-8 -nowarn -d "$classes" -cp "$cp" "$here/GoldenVectors.java"

  tmp="$out/vectors-$v.tmp"
  rm -rf "$tmp"
  java -Dlogback.configurationFile="$out/logback-quiet.xml" \
       -Drmq.logback.configurationFile="$out/logback-quiet.xml" \
       -Dfile.encoding=UTF-8 \
       -cp "$cp:$classes" GoldenVectors "$tmp"
  [ -s "$tmp/manifest.json" ] || die "no manifest.json produced for $v"

  # Replace the committed vectors only after a complete, successful run.
  dest="$here/vectors/java-$v"
  mkdir -p "$dest"
  rm -f "$dest"/*.bin "$dest/manifest.json"
  mv "$tmp"/* "$dest"/
  rmdir "$tmp"
done
# The 5.x pop data formats (PopGoldenVectors.java), from the real 5.3.3 broker and store classes, into
# vectors/java-<5.x>/pop/ (4.9.x has no pop).
v="$RMQ_JAVA_5"
cpfile="$cpdir/rocketmq-broker-$v.cp"
if [ ! -s "$cpfile" ]; then
  echo "generate.sh: classpath for rocketmq-broker $v missing, running resolve-runtime.sh" >&2
  "$compat/resolve-runtime.sh"
fi
[ -s "$cpfile" ] || die "classpath file $cpfile still missing"
cp="$(cat "$cpfile")"
classes="$out/classes-pop-$v"
rm -rf "$classes"
mkdir -p "$classes"
javac -encoding UTF-8 -nowarn -d "$classes" -cp "$cp" "$here/PopGoldenVectors.java"
tmp="$out/pop-$v.tmp"
rm -rf "$tmp"
java -Dlogback.configurationFile="$out/logback-quiet.xml" \
     -Drmq.logback.configurationFile="$out/logback-quiet.xml" \
     -Dfile.encoding=UTF-8 \
     -cp "$cp:$classes" PopGoldenVectors "$tmp"
[ -s "$tmp/strings.txt" ] || die "no strings.txt produced by PopGoldenVectors"
rm -rf "$here/vectors/java-$v/pop"
mv "$tmp" "$here/vectors/java-$v/pop"

echo "generate.sh: vectors written to $here/vectors/java-{$(IFS=,; echo "${versions[*]}")}" >&2
