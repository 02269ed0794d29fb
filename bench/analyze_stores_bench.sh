#!/usr/bin/env bash
# Full analysis of stores (docs/performance.md, "Analysis of stores, all analyzers"):
#
#   bench/analyze_stores_bench.sh                           # 2 ranks x 1M and 8 ranks x 1M GPU events
#   bench/analyze_stores_bench.sh --configs "2x1000000"     # RANKSxGPU_EVENTS_PER_RANK, space-separated
#
# For each configuration:
#   a. bench/gen_kineto writes RANKS gzip'd Kineto traces (its manifest goes beside the trace
#      directory, not into it), `overlapprof import TRACES -o STORES` makes one store per rank, and
#      the traces are deleted; the stores are kept under $BENCH_OUT for the next run (--fresh
#      makes them again);
#   b. `overlapprof analyze STORES` (all analyzers, terminal output to /dev/null) under
#      /usr/bin/time, REPEAT times with the default -j (the CPUs this process may use) and REPEAT
#      times with -j 1.
# Prints one row per (configuration, -j): GPU events (gen_kineto's count), median wall, user + sys
# and peak RSS (MB = 10^6 bytes) of the REPEAT runs, and two rates: GPU events per second of wall
# (all cores this process may use) and per second of CPU time (user + sys: per core busy), and
# the 1-minute load average just before the row's runs. Before timing, waits (up to
# BENCH_MAX_WAIT s) for the load average to fall below BENCH_MAX_LOAD: the machine is shared and
# other work there skews every figure, wall most.
#
# Options / environment:
#   --configs "LIST" | CONFIGS   configurations (default "2x1000000 8x1000000")
#   --fresh                      generate and import again even if the stores are there
#   REPEAT=N                     runs per row (default 3; medians)
#   BENCH_MAX_LOAD=X             load average to wait for (default 0.5)
#   BENCH_MAX_WAIT=S             the longest wait for it, seconds (default 600; then timed anyway, said so)
#   BENCH_OUT=DIR                where traces and stores go (default bench/out/analyze_stores; ~180 MB
#                                of stores per 1M GPU events)
#   BENCH_BUILD=DIR              build folder (default build-bench, Release; configured and built here)
#   BENCH_NO_BUILD=1             use BENCH_BUILD's binaries as they are (e.g. an older build to compare)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CONFIGS=${CONFIGS:-"2x1000000 8x1000000"}
FRESH=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --configs) CONFIGS=$2; shift 2 ;;
    --fresh) FRESH=1; shift ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "analyze_stores_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
REPEAT=${REPEAT:-3}
MAX_LOAD=${BENCH_MAX_LOAD:-0.5}
MAX_WAIT=${BENCH_MAX_WAIT:-600}
OUT=${BENCH_OUT:-bench/out/analyze_stores}
BUILD=${BENCH_BUILD:-build-bench}

for tool in cmake ninja awk; do
  command -v "$tool" >/dev/null || { echo "analyze_stores_bench.sh: '$tool' is required" >&2; exit 1; }
done
[[ -x /usr/bin/time ]] || { echo "analyze_stores_bench.sh: GNU time (/usr/bin/time) is required (apt install time)" >&2; exit 1; }

if [[ ${BENCH_NO_BUILD:-0} != 1 ]]; then
  if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  ninja -C "$BUILD" overlapprof gen_kineto >/dev/null
fi
OVERLAPPROF=$BUILD/overlapprof
GEN=${BENCH_GEN:-$BUILD/bench/gen_kineto}
mkdir -p "$OUT"

BENCH_NAME=analyze_stores_bench.sh
# shellcheck source=bench/bench_lib.sh
source bench/bench_lib.sh

echo "analyze_stores_bench: $(nproc) CPUs, $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $OVERLAPPROF, medians of $REPEAT runs"
printf '%-11s %11s %-9s %8s %8s %8s | %12s %14s | %s\n' "config" "GPU events" "-j" "wall s" "cpu s" "RSS MB" \
  "M ev/s wall" "M ev/s per core" "load before"
for cfg in $CONFIGS; do
  ranks=${cfg%x*}
  per_rank=${cfg#*x}
  dir=$OUT/$cfg
  if ((FRESH)) || [[ ! -f $dir/stores.ok ]]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    "$GEN" --ranks "$ranks" --gpu-events-per-rank "$per_rank" --out "$dir/traces" --gzip --jobs "$(nproc)" \
      --manifest "$dir/manifest.json" >/dev/null 2>"$dir/gen.log" || { cat "$dir/gen.log" >&2; exit 1; }
    # (an older gen_kineto wrote its manifest into the trace directory, where import would take it for a trace)
    [[ -f $dir/traces/manifest.json ]] && mv "$dir/traces/manifest.json" "$dir/manifest.json"
    "$OVERLAPPROF" import "$dir/traces" -o "$dir/stores" --force >/dev/null
    rm -rf "$dir/traces"
    touch "$dir/stores.ok"
  fi
  events=$(sed -n 's/.*"totals": {"gpu_events": \([0-9]*\).*/\1/p' "$dir/manifest.json")
  for jobs in default 1; do
    args=()
    [[ $jobs == default ]] || args=(-j "$jobs")
    wait_idle
    load=$(cut -d' ' -f1 /proc/loadavg)
    timed "$OVERLAPPROF" analyze "$dir/stores" --color never "${args[@]}"
    printf '%-11s %11s %-9s %8.2f %8.2f %8s | %12.1f %14.1f | %s\n' "$cfg" "$events" \
      "$([[ $jobs == default ]] && echo "default" || echo "$jobs")" "$WALL" "$CPU_S" "$RSS_MB" \
      "$(awk -v e="$events" -v w="$WALL" 'BEGIN { print e / w / 1e6 }')" \
      "$(awk -v e="$events" -v c="$CPU_S" 'BEGIN { print e / c / 1e6 }')" "$load"
  done
done
