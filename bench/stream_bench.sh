#!/usr/bin/env bash
# Streaming import figures (docs/performance.md, "Streaming import"):
#
#   bench/stream_bench.sh                    # 1 GB, 5 GB and 20 GB rank files, and 1024 small ranks
#   bench/stream_bench.sh --sizes "1 5"      # only some sizes (GB of JSON text); --no-ranks skips 1024
#
# For each size S (GB = 10^9 bytes of uncompressed JSON, one rank):
#   a. bench/gen_kineto writes one gzip'd rank file of about S GB (1,852 bytes of JSON per GPU event);
#   b. the single-core limit: bench/stream_limit (inflate + simdjson parse of traceEvents, one
#      thread, no importer code) pinned to core $BENCH_CPU, REPEAT times; it measures the limit twice,
#      inflating with zlib and with the importer's inflater (ISA-L's igzip when built with it);
#   c. `overlapprof analyze FILE` (all analyzers, the default -j) on both cores under /usr/bin/time,
#      REPEAT times: wall, user + sys, peak RSS (max resident set size);
#   d. the file is deleted (the 20 GB one takes 1.8 GB of disk).
# Then, unless --no-ranks: a directory of 1024 small rank files (RANK_GPU_EVENTS GPU events each)
# analyzed the same way (and once with -j 1), then deleted.
# Prints a table: medians of REPEAT runs; ratio = analyze wall / limit wall (the goal: <= 0.6), against
# the zlib limit and against the limit with the importer's inflater;
# MB = 10^6 bytes. Before timing, waits (up to BENCH_MAX_WAIT s) for the 1-minute load average to fall below
# $BENCH_MAX_LOAD: the machine has 2 cores and other work there skews every figure.
#
# Options / environment:
#   --sizes "LIST" | SIZES    GB sizes to run (default "1 5 20")
#   --no-ranks                skip the 1024-rank directory
#   REPEAT=N                  runs per figure (default 3; the median is printed)
#   RANKS=N                   ranks of the small-file directory (default 1024)
#   RANK_GPU_EVENTS=N         GPU events per small rank (default 5000: ~9.3 MB of JSON, 3 steps)
#   BENCH_CPU=N               core for the single-core limit (default 0)
#   BENCH_MAX_LOAD=X          load average to wait for (default 0.5)
#   BENCH_MAX_WAIT=S          the longest wait for it, seconds (default 600; then timed anyway, said so)
#   BENCH_OUT=DIR             scratch folder (default bench/out/stream)
#   BENCH_BUILD=DIR           build folder (default build-bench, Release)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SIZES=${SIZES:-"1 5 20"}
DO_RANKS=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sizes) SIZES=$2; shift 2 ;;
    --no-ranks) DO_RANKS=0; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "stream_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
REPEAT=${REPEAT:-3}
RANKS=${RANKS:-1024}
RANK_GPU_EVENTS=${RANK_GPU_EVENTS:-5000}
CPU=${BENCH_CPU:-0}
MAX_LOAD=${BENCH_MAX_LOAD:-0.5}
MAX_WAIT=${BENCH_MAX_WAIT:-600}
OUT=${BENCH_OUT:-bench/out/stream}
BUILD=${BENCH_BUILD:-build-bench}
BYTES_PER_GPU_EVENT=1852  # gen_kineto's JSON per GPU event (1,000,214,282 bytes for 540,000)

for tool in taskset cmake ninja awk; do
  command -v "$tool" >/dev/null || { echo "stream_bench.sh: '$tool' is required" >&2; exit 1; }
done
[[ -x /usr/bin/time ]] || { echo "stream_bench.sh: GNU time (/usr/bin/time) is required (apt install time)" >&2; exit 1; }

if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
ninja -C "$BUILD" overlapprof gen_kineto stream_limit >/dev/null
OVERLAPPROF=$BUILD/overlapprof
mkdir -p "$OUT"
trap 'rm -rf "$OUT"' EXIT

BENCH_NAME=stream_bench.sh
# shellcheck source=bench/bench_lib.sh
source bench/bench_lib.sh

echo "stream_bench: $(nproc) CPUs, $(git rev-parse --short HEAD 2>/dev/null || echo '?'), medians of $REPEAT runs;" \
  "ratio z / i: analyze wall over the single-core limit inflating with zlib / with the importer's inflater"
printf '%-7s %12s %11s | %-30s | %-30s | %-32s | %-11s | %s\n' "size" "JSON bytes" "GPU events" \
  "limit zlib, 1 core: infl+parse" "limit igzip, 1 core" "analyze, 2 cores: wall cpu RSS" "ratio z / i" "load before"
for gb in $SIZES; do
  n=$(awk -v g="$gb" -v b="$BYTES_PER_GPU_EVENT" 'BEGIN { printf "%d", g * 1e9 / b }')
  dir=$OUT/g$gb
  "$BUILD/bench/gen_kineto" --ranks 1 --gpu-events-per-rank "$n" --out "$dir" --gzip \
    --manifest "$OUT/g$gb.manifest.json" >/dev/null 2>"$OUT/gen.log" || { cat "$OUT/gen.log" >&2; exit 1; }
  file=$dir/rank0.json.gz
  bytes=$(sed -n 's/.*"uncompressed_bytes": \([0-9]*\).*/\1/p' "$OUT/g$gb.manifest.json" | head -n1)
  wait_idle
  load=$(cut -d' ' -f1 /proc/loadavg)
  lims=() infl=() pars=() glims=() ginfl=() gpars=()
  for ((i = 0; i < REPEAT; i++)); do
    taskset -c "$CPU" "$BUILD/bench/stream_limit" "$file" >"$OUT/limit.txt"
    lims+=("$(awk '$1 == "total_s" { print $2 }' "$OUT/limit.txt")")
    infl+=("$(awk '$1 == "inflate_s" { print $2 }' "$OUT/limit.txt")")
    pars+=("$(awk '$1 == "parse_s" { print $2 }' "$OUT/limit.txt")")
    # The importer's inflater (igzip when built with ISA-L; else zlib, the same figures).
    glims+=("$(awk '$1 == "igzip_total_s" { v = $2 } $1 == "total_s" && v == "" { w = $2 } END { print (v != "" ? v : w) }' "$OUT/limit.txt")")
    ginfl+=("$(awk '$1 == "igzip_inflate_s" { v = $2 } $1 == "inflate_s" && v == "" { w = $2 } END { print (v != "" ? v : w) }' "$OUT/limit.txt")")
    gpars+=("$(awk '$1 == "igzip_parse_s" { v = $2 } $1 == "parse_s" && v == "" { w = $2 } END { print (v != "" ? v : w) }' "$OUT/limit.txt")")
  done
  INFLATER=$(awk '$1 == "importer_inflater" { print $2 }' "$OUT/limit.txt")
  LIMIT=$(printf '%s\n' "${lims[@]}" | median)
  INFL=$(printf '%s\n' "${infl[@]}" | median)
  PARS=$(printf '%s\n' "${pars[@]}" | median)
  GLIMIT=$(printf '%s\n' "${glims[@]}" | median)
  GINFL=$(printf '%s\n' "${ginfl[@]}" | median)
  GPARS=$(printf '%s\n' "${gpars[@]}" | median)
  wait_idle
  timed "$OVERLAPPROF" analyze "$file" --color never
  ratio=$(awk -v a="$WALL" -v l="$LIMIT" 'BEGIN { printf "%.2f", a / l }')
  gratio=$(awk -v a="$WALL" -v l="$GLIMIT" 'BEGIN { printf "%.2f", a / l }')
  printf '%-7s %12s %11s | %6.2f s = %5.2f + %5.2f s     | %6.2f s = %5.2f + %5.2f s     | %6.2f s %6.2f s %7s MB      | %4s / %4s | %s\n' \
    "${gb} GB" "$bytes" "$n" "$LIMIT" "$INFL" "$PARS" "$GLIMIT" "$GINFL" "$GPARS" "$WALL" "$CPU_S" "$RSS_MB" "$ratio" "$gratio" "$load"
  [[ -n ${SHOWN_INFLATER:-} ]] || { echo "        (the importer's inflater, in the igzip column: $INFLATER)"; SHOWN_INFLATER=1; }
  rm -rf "$dir"
done

if ((DO_RANKS)); then
  dir=$OUT/ranks$RANKS
  "$BUILD/bench/gen_kineto" --ranks "$RANKS" --gpu-events-per-rank "$RANK_GPU_EVENTS" --out "$dir" --gzip \
    --jobs "$(nproc)" --manifest "$OUT/ranks.manifest.json" >/dev/null 2>"$OUT/gen.log" || { cat "$OUT/gen.log" >&2; exit 1; }
  total=$(sed -n 's/.*"totals": {"gpu_events": \([0-9]*\).*/\1/p' "$OUT/ranks.manifest.json")
  json=$(sed -n 's/.*"totals".*"uncompressed_bytes": \([0-9]*\).*/\1/p' "$OUT/ranks.manifest.json")
  gz=$(du -sb "$dir" | cut -f1)
  echo
  echo "$RANKS ranks x $RANK_GPU_EVENTS GPU events ($total GPU events, $json bytes of JSON, $gz bytes gzip'd):"
  wait_idle
  load=$(cut -d' ' -f1 /proc/loadavg)
  timed "$OVERLAPPROF" analyze "$dir" --color never
  printf '  analyze DIR (default -j):  wall %6.2f s  cpu %6.2f s  peak RSS %6s MB  (load before %s)\n' "$WALL" "$CPU_S" "$RSS_MB" "$load"
  wait_idle
  load=$(cut -d' ' -f1 /proc/loadavg)
  timed "$OVERLAPPROF" analyze "$dir" --color never -j 1
  printf '  analyze DIR -j 1:          wall %6.2f s  cpu %6.2f s  peak RSS %6s MB  (load before %s)\n' "$WALL" "$CPU_S" "$RSS_MB" "$load"
  rm -rf "$dir"
fi
