#!/usr/bin/env bash
# What the reports cost over the analysis (one pass; target: report <= 1.2 x analyze).
#
#   bench/report_vs_analyze.sh                        # 8 ranks x 50,000 GPU events
#   RANKS=8 EVENTS=300000 GZ_INPUTS=1 bench/report_vs_analyze.sh  # the target's input (gzipped)
#
# Generates RANKS rank files with bench/gen_kineto (into $OUT/traces, kept when they match),
# then times, on the same input, pinned to one core (taskset -c $BENCH_CPU):
#   overlapprof analyze TRACES
#   overlapprof report TRACES --html H --chrome-trace C --json J
# and prints both wall times and CPU times (user + sys; steadier on a shared machine), best of
# $REPEAT runs each, their ratios, peak RSS and the report sizes.
#
# Environment: RANKS (8), EVENTS (50000 GPU events per rank), GZ_INPUTS (0; 1: .json.gz inputs), REPEAT (3),
#   BENCH_CPU (0; "0,1": both cores, the report writes its files on two threads),
#   OUT (bench/out/report_vs_analyze), BUILD (build: overlapprof and bench/gen_kineto in it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

RANKS=${RANKS:-8}
EVENTS=${EVENTS:-50000}
REPEAT=${REPEAT:-3}
BENCH_CPU=${BENCH_CPU:-0}
OUT=${OUT:-bench/out/report_vs_analyze}
BUILD=${BUILD:-build}
CLI=$BUILD/overlapprof
GEN=$BUILD/bench/gen_kineto
for f in "$CLI" "$GEN"; do
  [[ -x $f ]] || { echo "report_vs_analyze: $f is not built (ninja -C $BUILD overlapprof gen_kineto)" >&2; exit 2; }
done

mkdir -p "$OUT"
GZ_INPUTS=${GZ_INPUTS:-0}
want="ranks=$RANKS events=$EVENTS gzip=$GZ_INPUTS"
if [[ ! -f $OUT/traces.id || $(cat "$OUT/traces.id") != "$want" ]]; then
  rm -rf "$OUT/traces"
  gz=(); [[ $GZ_INPUTS == 1 ]] && gz=(--gzip)
  "$GEN" --ranks "$RANKS" --gpu-events-per-rank "$EVENTS" --out "$OUT/traces" --manifest "$OUT/manifest.json" "${gz[@]}" 2>/dev/null
  echo "$want" > "$OUT/traces.id"
fi

# "WALL CPU RSS_MB" of REPEAT runs of "$@": the best wall and CPU times, the last peak RSS.
best() {
  local t u s kb bw="" bc=""
  for _ in $(seq "$REPEAT"); do
    /usr/bin/time -f "%e %U %S %M" -o "$OUT/time.txt" taskset -c "$BENCH_CPU" "$@" >/dev/null 2>"$OUT/stderr.txt"
    read -r t u s kb < "$OUT/time.txt"
    local c
    c=$(awk -v u="$u" -v s="$s" 'BEGIN{printf "%.2f", u + s}')
    if [[ -z $bw ]] || awk "BEGIN{exit !($t < $bw)}"; then bw=$t; fi
    if [[ -z $bc ]] || awk "BEGIN{exit !($c < $bc)}"; then bc=$c; fi
  done
  echo "$bw $bc $((kb / 1000))"
}

read -r aw ac arss < <(best "$CLI" analyze "$OUT/traces")
read -r rw rc rrss < <(best "$CLI" report "$OUT/traces" --html "$OUT/report.html" --chrome-trace "$OUT/trace.json" --json "$OUT/summary.json")
echo "input:   $RANKS ranks x $EVENTS GPU events ($(du -sh "$OUT/traces" | cut -f1) of JSON)"
echo "analyze: ${aw} s wall, ${ac} s CPU  (peak RSS ${arss} MB)"
echo "report:  ${rw} s wall, ${rc} s CPU  (peak RSS ${rrss} MB; --html --chrome-trace --json)"
awk -v aw="$aw" -v rw="$rw" -v ac="$ac" -v rc="$rc" \
  'BEGIN{printf "ratio:   %.2f wall, %.2f CPU (target <= 1.2)\n", rw / aw, rc / ac}'
echo "outputs: chrome trace $(du -h "$OUT/trace.json" | cut -f1), html $(du -h "$OUT/report.html" | cut -f1)"
grep -h "left out" "$OUT/stderr.txt" || true
