#!/usr/bin/env bash
# Reproduces the figures in docs/performance.md with one command:
#
#   bench/run_bench.sh                 # full size: 8 ranks x 625,000 GPU events (.json.gz)
#   SCALE=0.05 bench/run_bench.sh      # quick smoke run (5% of the events)
#   bench/run_bench.sh --scale 0.05 --no-engine
#
# Steps:
#   a. builds build-bench/ (CMAKE_BUILD_TYPE=Release) if needed
#   b. generates the traces into bench/out/traces/ (gitignored) unless the ones there
#      match (bench/out/manifest.json says what they are)
#   c. times `overlapprof analyze bench/out/traces` (import + analyze, end to end)
#   d. times `overlapprof import bench/out/traces -o bench/out/stores --force`
#   e. times `overlapprof analyze bench/out/stores`, with and without --no-verify
#   f. peak RSS for 1, 2 and all ranks (memory must not depend on the rank count)
#   g. phase breakdown of one rank (bench_phases: read+gunzip, parse, analyze, store I/O)
#   h. bench_engine (Google Benchmark of the interval engine)
# Every timed command runs pinned to one core (taskset -c $BENCH_CPU) under
# /usr/bin/time -v; figures are wall-clock seconds and peak RSS (max resident set size),
# MB = 10^6 bytes throughout.
#
# Options / environment:
#   --scale X | SCALE=X          fraction of the 625,000 GPU events per rank (default 1)
#   --ranks N | RANKS=N          number of ranks (default 8)
#   --regen                      regenerate the traces even if they match
#   --no-engine                  skip bench_engine
#   --no-phases                  skip the phase breakdown
#   --wait-idle                  before timing, wait (up to 10 min) for the 1-minute load
#                                average to drop below 0.3: the machine has 2 cores and
#                                other work there skews wall times
#   BENCH_CPU=N                  core to pin to (default 0)
#   BENCH_OUT=DIR                output folder (default bench/out)
#   BENCH_BUILD=DIR              build folder (default build-bench)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)

SCALE=${SCALE:-1}
RANKS=${RANKS:-8}
REGEN=0
ENGINE=1
PHASES=1
WAIT_IDLE=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --scale) SCALE=$2; shift 2 ;;
    --scale=*) SCALE=${1#*=}; shift ;;
    --ranks) RANKS=$2; shift 2 ;;
    --ranks=*) RANKS=${1#*=}; shift ;;
    --regen) REGEN=1; shift ;;
    --no-engine) ENGINE=0; shift ;;
    --no-phases) PHASES=0; shift ;;
    --wait-idle) WAIT_IDLE=1; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "run_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

CPU=${BENCH_CPU:-0}
OUT=${BENCH_OUT:-bench/out}
BUILD=${BENCH_BUILD:-build-bench}
TRACES=$OUT/traces
STORES=$OUT/stores
MANIFEST=$OUT/manifest.json
GPU_PER_RANK=$(awk -v s="$SCALE" 'BEGIN { n = int(625000 * s + 0.5); if (n < 1) n = 1; print n }')
OVERLAPPROF=$BUILD/overlapprof

say() { printf '%s\n' "$*"; }
hr() { printf '%s\n' "------------------------------------------------------------------------"; }

# ---------------------------------------------------------------- prerequisites
if [[ ! -x /usr/bin/time ]]; then
  say "installing GNU time (/usr/bin/time is missing)"
  if [[ $(id -u) -eq 0 ]]; then apt-get update -qq && apt-get install -y -qq time >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq time >/dev/null; fi
fi
for tool in taskset python3 cmake ninja; do
  command -v "$tool" >/dev/null || { say "run_bench.sh: '$tool' is required" >&2; exit 1; }
done

# ---------------------------------------------------------------- a. build
hr
say "a. build ($BUILD, Release)"
if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DOVERLAPPROF_BUILD_TESTS=OFF \
    -DOVERLAPPROF_BUILD_BENCH=ON >/dev/null
fi
TARGETS="overlapprof gen_kineto bench_phases"
[[ $ENGINE -eq 1 ]] && TARGETS="$TARGETS bench_engine"
# shellcheck disable=SC2086
ninja -C "$BUILD" $TARGETS | tail -1

# ---------------------------------------------------------------- machine
hr
say "machine"
say "  cpu:      $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
say "  cores:    $(nproc) (timed commands pinned to core $CPU)"
say "  memory:   $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
say "  kernel:   $(uname -r)"
say "  source:   $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src analyzers reports CMakeLists.txt 2>/dev/null || echo ' + uncommitted changes in src/analyzers/reports')"
say "  load:     $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; other work on the machine skews the figures)"
say "  compiler: $(grep -m1 CMAKE_CXX_COMPILER: "$BUILD/CMakeCache.txt" | cut -d= -f2) ($("$(grep -m1 CMAKE_CXX_COMPILER: "$BUILD/CMakeCache.txt" | cut -d= -f2)" -dumpversion 2>/dev/null || echo '?'))"

# ---------------------------------------------------------------- b. traces
hr
say "b. traces: $RANKS ranks x $GPU_PER_RANK GPU events (.json.gz) in $TRACES"
manifest_matches() {
  [[ -f $MANIFEST ]] || return 1
  python3 - "$MANIFEST" "$RANKS" "$GPU_PER_RANK" "$TRACES" <<'EOF' || return 1
import json, os, sys
m = json.load(open(sys.argv[1]))
ok = (m["ranks"] == int(sys.argv[2]) and m["gpu_events_per_rank"] == int(sys.argv[3]) and m["gzip"]
      and all(os.path.exists(os.path.join(sys.argv[4], f["path"])) for f in m["files"])
      and len([n for n in os.listdir(sys.argv[4]) if n.endswith((".json", ".json.gz"))]) == len(m["files"]))
sys.exit(0 if ok else 1)
EOF
}
if [[ $REGEN -eq 1 ]] || ! manifest_matches; then
  rm -rf "$TRACES" "$STORES" "$MANIFEST"
  start=$(date +%s.%N)
  "$BUILD/bench/gen_kineto" --ranks "$RANKS" --gpu-events-per-rank "$GPU_PER_RANK" --out "$TRACES" \
    --manifest "$MANIFEST" --gzip --seed 1 2>&1 | sed 's/^/  /'
  say "  generated in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
else
  say "  reusing the traces there (manifest matches)"
fi

# Manifest figures as shell variables.
eval "$(python3 - "$MANIFEST" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
t = m["totals"]
f = m["files"]
print(f'TOTAL_EVENTS={t["total_events"]}')
print(f'GPU_EVENTS={t["gpu_events"]}')
print(f'RUNTIME_EVENTS={t["runtime_events"]}')
print(f'ANNOTATIONS={t["user_annotations"]}')
print(f'UNCOMPRESSED={t["uncompressed_bytes"]}')
print(f'ON_DISK={t["file_bytes"]}')
print(f'LARGEST={t["largest_uncompressed_bytes"]}')
print(f'COMM={t["comm_kernels"]}')
print(f'MEMOPS={t["memcpy"] + t["memset"]}')
print(f'R0_TOTAL={f[0]["total_events"]}')
print(f'R0_GPU={f[0]["gpu_events"]}')
print(f'R0_UNCOMPRESSED={f[0]["uncompressed_bytes"]}')
print(f'R0_FILE={f[0]["path"]}')
two = f[:2]
print(f'TWO_TOTAL={sum(x["total_events"] for x in two)}')
print(f'TWO_GPU={sum(x["gpu_events"] for x in two)}')
print(f'TWO_FILES="{" ".join(x["path"] for x in two)}"')
EOF
)"
STORE_ROWS=$((GPU_EVENTS + RUNTIME_EVENTS + ANNOTATIONS))
awk -v te="$TOTAL_EVENTS" -v ge="$GPU_EVENTS" -v c="$COMM" -v m="$MEMOPS" -v u="$UNCOMPRESSED" -v d="$ON_DISK" \
    -v l="$LARGEST" 'BEGIN {
  printf "  events:   %d in traceEvents, %d GPU events (%.1f%% NCCL kernels, %.1f%% memcpy/memset)\n", te, ge, 100*c/ge, 100*m/ge
  printf "  size:     %.2f GB JSON, %.2f GB gzip on disk, largest file %.1f MB uncompressed\n", u/1e9, d/1e9, l/1e6 }'

# ---------------------------------------------------------------- quiet machine
if [[ $WAIT_IDLE -eq 1 ]]; then
  for _ in $(seq 1 120); do
    awk '{ exit !($1 < 0.3) }' /proc/loadavg && break
    sleep 5
  done
  say "  load before timing: $(cut -d' ' -f1-3 /proc/loadavg)"
fi

# ---------------------------------------------------------------- timing helper
# timed LABEL EVENTS GPU_EVENTS CMD...: runs CMD pinned under /usr/bin/time -v and prints
# wall time, events/s, GPU events/s, peak RSS and peak RSS / largest uncompressed file.
# Sets LAST_WALL and LAST_RSS_KB.
LOG=$OUT/logs
mkdir -p "$LOG"
timed() {
  local label=$1 events=$2 gpu=$3
  shift 3
  local slug
  slug=$(printf '%s' "$label" | tr -c 'a-zA-Z0-9' '_')
  local tfile=$LOG/$slug.time ofile=$LOG/$slug.out
  local rc=0
  /usr/bin/time -v -o "$tfile" taskset -c "$CPU" "$@" >"$ofile" 2>&1 || rc=$?
  LAST_WALL=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$tfile")
  LAST_RSS_KB=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$tfile")
  local user sys
  user=$(awk -F': ' '/User time/ { print $2 }' "$tfile")
  sys=$(awk -F': ' '/System time/ { print $2 }' "$tfile")
  awk -v label="$label" -v w="$LAST_WALL" -v e="$events" -v g="$gpu" -v r="$LAST_RSS_KB" -v l="$LARGEST" \
      -v u="$user" -v s="$sys" 'BEGIN {
    printf "  %s\n", label
    printf "    wall %.2f s (user %.2f s, sys %.2f s)\n", w, u, s
    if (e > 0) printf "    %.0f events/s, %.0f GPU events/s\n", e / w, g / w
    else if (g > 0) printf "    %.0f GPU events/s\n", g / w
    printf "    peak RSS %.1f MB = %.2f x the largest uncompressed file (%.1f MB)\n", r * 1024 / 1e6, r * 1024 / l, l / 1e6 }'
  if [[ $rc -ne 0 ]]; then
    say "    exit code $rc; last lines of its output ($ofile):"
    tail -5 "$ofile" | sed 's/^/      /'
  fi
}

# ---------------------------------------------------------------- c. analyze JSON
hr
say "c. import + analyze, end to end: overlapprof analyze $TRACES"
timed "analyze traces (JSON, $RANKS ranks)" "$TOTAL_EVENTS" "$GPU_EVENTS" \
  "$OVERLAPPROF" analyze "$TRACES" --color never
ANALYZE_WALL=$LAST_WALL
ANALYZE_RSS=$LAST_RSS_KB
grep -E '^verdict' "$LOG/analyze_traces__JSON__${RANKS}_ranks_.out" | cut -c1-160 | sed 's/^/    /' || true

# ---------------------------------------------------------------- d. import
hr
say "d. import: overlapprof import $TRACES -o $STORES --force"
mkdir -p "$STORES"
timed "import (JSON -> stores, $RANKS ranks)" "$TOTAL_EVENTS" "$GPU_EVENTS" \
  "$OVERLAPPROF" import "$TRACES" -o "$STORES" --force
IMPORT_WALL=$LAST_WALL
IMPORT_RSS=$LAST_RSS_KB
say "    stores: $(du -sb "$STORES" | awk '{ printf "%.1f MB", $1 / 1e6 }') for $RANKS ranks"

# ---------------------------------------------------------------- e. analyze stores
hr
say "e. analysis of imported stores: overlapprof analyze $STORES"
say "  (events here = GPU activities; store rows = GPU activities + host calls + ranges = $STORE_ROWS)"
cat "$STORES"/*.db >/dev/null  # warm the page cache the same way for both runs
timed "analyze stores (quick_check)" 0 "$GPU_EVENTS" "$OVERLAPPROF" analyze "$STORES" --color never
STORE_WALL=$LAST_WALL
STORE_RSS=$LAST_RSS_KB
awk -v w="$LAST_WALL" -v r="$STORE_ROWS" 'BEGIN { printf "    %.0f store rows/s\n", r / w }'
timed "analyze stores (--no-verify)" 0 "$GPU_EVENTS" "$OVERLAPPROF" analyze "$STORES" --no-verify --color never
STORE_NV_WALL=$LAST_WALL
STORE_NV_RSS=$LAST_RSS_KB
awk -v w="$LAST_WALL" -v r="$STORE_ROWS" 'BEGIN { printf "    %.0f store rows/s\n", r / w }'

# ---------------------------------------------------------------- f. RSS vs rank count
hr
say "f. peak RSS against the number of ranks (analyze, JSON)"
timed "analyze 1 rank ($R0_FILE)" "$R0_TOTAL" "$R0_GPU" "$OVERLAPPROF" analyze "$TRACES/$R0_FILE" --color never
RSS1=$LAST_RSS_KB
# shellcheck disable=SC2086
timed "analyze 2 ranks" "$TWO_TOTAL" "$TWO_GPU" "$OVERLAPPROF" analyze $(for f in $TWO_FILES; do printf '%s ' "$TRACES/$f"; done) --color never
RSS2=$LAST_RSS_KB
RSS8=$ANALYZE_RSS
awk -v a="$RSS1" -v b="$RSS2" -v c="$RSS8" -v n="$RANKS" 'BEGIN {
  printf "  peak RSS: 1 rank %.1f MB, 2 ranks %.1f MB, %d ranks %.1f MB (%d/2 ratio %.3f)\n", a*1024/1e6, b*1024/1e6, n, c*1024/1e6, n, c/b }'

# ---------------------------------------------------------------- g. phases
if [[ $PHASES -eq 1 ]]; then
  hr
  say "g. phase breakdown of one rank (bench_phases $TRACES/$R0_FILE, pinned)"
  taskset -c "$CPU" "$BUILD/bench/bench_phases" --store-dir "$OUT/phase-stores" "$TRACES/$R0_FILE" | sed 's/^/  /'
  rm -rf "$OUT/phase-stores"
fi

# ---------------------------------------------------------------- h. engine
if [[ $ENGINE -eq 1 ]]; then
  hr
  say "h. bench_engine (Google Benchmark, pinned)"
  taskset -c "$CPU" "$BUILD/bench/bench_engine" --benchmark_min_time=1 2>&1 | sed 's/^/  /'
fi

# ---------------------------------------------------------------- summary
hr
say "summary (targets from the requirement)"
awk -v te="$TOTAL_EVENTS" -v ge="$GPU_EVENTS" -v rows="$STORE_ROWS" -v l="$LARGEST" \
    -v aw="$ANALYZE_WALL" -v ar="$ANALYZE_RSS" -v iw="$IMPORT_WALL" -v ir="$IMPORT_RSS" \
    -v sw="$STORE_WALL" -v sr="$STORE_RSS" -v nw="$STORE_NV_WALL" -v nr="$STORE_NV_RSS" \
    -v r1="$RSS1" -v r2="$RSS2" -v n="$RANKS" 'BEGIN {
  printf "  %-44s %14s %16s %12s\n", "measure", "measured", "target", "met"
  printf "  %-44s %14.0f %16s %12s\n", "analyze JSON: events/s (all traceEvents)", te/aw, ">= 1,000,000", (te/aw >= 1e6 ? "yes" : "NO")
  printf "  %-44s %14.0f %16s %12s\n", "analyze JSON: GPU events/s", ge/aw, ">= 1,000,000", (ge/aw >= 1e6 ? "yes" : "NO")
  printf "  %-44s %14.0f %16s %12s\n", "import JSON -> stores: events/s", te/iw, "(no target)", "-"
  printf "  %-44s %14.0f %16s %12s\n", "import JSON -> stores: GPU events/s", ge/iw, "(no target)", "-"
  printf "  %-44s %14.0f %16s %12s\n", "analyze stores: GPU events/s", ge/sw, ">= 10,000,000", (ge/sw >= 1e7 ? "yes" : "NO")
  printf "  %-44s %14.0f %16s %12s\n", "analyze stores --no-verify: GPU events/s", ge/nw, ">= 10,000,000", (ge/nw >= 1e7 ? "yes" : "NO")
  printf "  %-44s %14.0f %16s %12s\n", "analyze stores --no-verify: store rows/s", rows/nw, ">= 10,000,000", (rows/nw >= 1e7 ? "yes" : "NO")
  printf "  %-44s %14.2f %16s %12s\n", "analyze JSON: peak RSS / largest file", ar*1024/l, "<= ~2", (ar*1024/l <= 2.05 ? "yes" : "NO")
  printf "  %-44s %14.2f %16s %12s\n", "import: peak RSS / largest file", ir*1024/l, "<= ~2", (ir*1024/l <= 2.05 ? "yes" : "NO")
  printf "  %-44s %14.3f %16s %12s\n", sprintf("peak RSS %d ranks / 2 ranks", n), ar/r2, "~1", (ar/r2 < 1.05 ? "yes" : "NO")
}'
say "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
say "logs and /usr/bin/time output: $LOG"
