#!/usr/bin/env bash
# Regenerates the golden DLedger JSON bodies in compat-tests/dledger-golden/vectors/<classpath>/ with the real
# DLedger 0.3.1.2 classes (see README.md). Fails without Java or Maven.
# Usage: compat-tests/dledger-golden/generate.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
die() { echo "generate.sh: $*" >&2; exit 1; }
for name in dledger-0.3.1.2 rocketmq-5.3.3; do
  tmp="$here/out/vectors-$name.tmp"
  rm -rf "$tmp"
  "$here/run.sh" "$name" generate "$tmp"
  [ -s "$tmp/manifest.json" ] || die "no manifest.json produced for $name"
  # Replace the committed vectors only after a complete, successful run.
  dest="$here/vectors/$name"
  rm -rf "$dest"
  mkdir -p "$here/vectors"
  mv "$tmp" "$dest"
done
echo "generate.sh: vectors written to $here/vectors/{dledger-0.3.1.2,rocketmq-5.3.3}" >&2
