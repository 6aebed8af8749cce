#!/usr/bin/env bash
# Compares two builds of our broker on the same machine in the same run: bench.sh (systems=ours) is
# run for each build in turn, interleaved A B B A A B ..., so drift and other work on the machine hit
# both alike, and the medians per build are printed.
#
#   scripts/bench/ab.sh OLD_DIR NEW_DIR [--runs N] [--workloads a,b] [bench.sh options...]
#
# OLD_DIR and NEW_DIR hold mqnamesrv and mqbroker (e.g. target/release of two worktrees; built
# with `cargo build --release --bins`). --runs: runs per build (default 5); the other options go to
# bench.sh as they are (default --quick). Each run's figures go to stdout as it ends (and to
# target/bench/ab-<timestamp>.tsv); then, per workload and build: the median and range of send TPS
# and broker CPU seconds per million messages, and the median of the server core's other work
# (a run on a busy machine says so: CPU per message grows with it).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"

[ $# -ge 2 ] || { sed -n '2,13p' "$0"; exit 2; }
old="$(cd "$1" && pwd)" new="$(cd "$2" && pwd)"
shift 2
runs=5 workloads="a,b" pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift ;;
    --workloads) workloads="$2"; shift ;;
    *) pass+=("$1") ;;
  esac
  shift
done
[ ${#pass[@]} -gt 0 ] || pass=(--quick)

mkdir -p "$root/target/bench"
tsv="$root/target/bench/ab-$(date +%Y%m%d-%H%M%S).tsv"
printf 'build\trun\tworkload\tsend_tps\tcpu_s_per_million\tbroker_cores\tother_work\tresults\n' > "$tsv"

# A B B A A B B A ...: each build goes first as often as the other
order=()
for i in $(seq 1 "$runs"); do
  if [ $((i % 2)) -eq 1 ]; then order+=(old new); else order+=(new old); fi
done

declare -A seen=([old]=0 [new]=0)
for build in "${order[@]}"; do
  seen[$build]=$((seen[$build] + 1))
  dir="$old"; [ "$build" = old ] || dir="$new"
  echo "== $build run ${seen[$build]}/$runs ($dir)" >&2
  log="$(mktemp)"
  if ! BENCH_BIN_DIR="$dir" "$root/scripts/bench.sh" "${pass[@]}" --workloads "$workloads" --systems ours > "$log" 2>&1; then
    echo "  bench.sh failed; its output:" >&2; tail -20 "$log" >&2
  fi
  results="$(awk '/^results:/ {print $2}' "$log")"
  rm -f "$log"
  [ -n "$results" ] || continue
  python3 - "$results" "$build" "${seen[$build]}" >> "$tsv" <<'PY'
import json, sys
path, build, run = sys.argv[1:]
for wl, w in json.load(open(path))["workloads"].items():
    r = w["results"].get("ours") or {}
    if "send_tps" not in r:
        continue
    other = max(0.0, r.get("server_core_busy", 0) - r.get("broker_cpu_util", 0))
    print(build, run, wl, round(r["send_tps"]), round(r["broker_cpu_s_per_million"], 2), round(r["broker_cpu_util"], 3), round(other, 3), path, sep="\t")
PY
  tail -n +2 "$tsv" | awk -v b="$build" -v n="${seen[$build]}" -F'\t' '$1 == b && $2 == n {printf "  %s %s: %s msg/s, %s CPU s/1M msg, other work on server core %s\n", $1, $3, $4, $5, $7}' >&2
done

python3 - "$tsv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print(f"{'workload':8} {'build':5} {'runs':>4}  {'send TPS median (range)':>26}  {'CPU s/1M median (range)':>24}  {'other work':>10}")
for wl in sorted({r["workload"] for r in rows}):
    med = {}
    for build in ("old", "new"):
        rs = [r for r in rows if r["workload"] == wl and r["build"] == build]
        if not rs:
            continue
        tps = [float(r["send_tps"]) for r in rs]
        cpu = [float(r["cpu_s_per_million"]) for r in rs]
        other = statistics.median(float(r["other_work"]) for r in rs)
        med[build] = (statistics.median(tps), statistics.median(cpu))
        print(f"{wl:8} {build:5} {len(rs):>4}  {med[build][0]:>10,.0f} ({min(tps):,.0f}-{max(tps):,.0f})  "
              f"{med[build][1]:>8.2f} ({min(cpu):.2f}-{max(cpu):.2f})  {other:>10.3f}")
    if len(med) == 2:
        print(f"{wl:8} new/old      TPS {med['new'][0] / med['old'][0]:.3f}, CPU per message {med['new'][1] / med['old'][1]:.3f}")
print(f"runs: {sys.argv[1]}")
PY
