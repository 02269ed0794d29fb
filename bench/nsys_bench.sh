#!/usr/bin/env bash
# The Nsight Systems importer's figures in docs/performance.md ("Nsight Systems exports"), one
# command:
#
#   bench/nsys_bench.sh [BUILD_DIR=build] [MILLION_KERNELS=5]
#
# Generates (once, in $BENCH_NSYS_DIR, default /tmp) exports of MILLION_KERNELS kernels spread
# over 1, 2 and 8 processes (bench_nsys' layout: nsys' real 40-column kernel table, one runtime
# launch per kernel), then reads each, pinned to one core, four ways:
#   sql       OVERLAPPROF_NSYS_SQL=1: SQL, one filtered query per rank (the reference the
#             direct read is tested against)
#   per-rank  OVERLAPPROF_NSYS_PARTITION=0: the direct B-tree read, a listing scan, then one
#             scan per rank
#   spilled   OVERLAPPROF_NSYS_BUILD=0: a listing scan, then the direct read once per export
#             for all its ranks, rows spilled by rank (what an export over the build budget gets)
#   built     the default: the ranks built while the export is listed, one read of each table
# each with the default verification (quick_check of the tables read through SQL) and prints
# bench_nsys' line: CPU seconds, kernel rows per second per core, wall, peak RSS. The runs
# alternate (sql, per-rank, spilled, built, sql, ...) REPEAT times (default 2) so that a change
# in the machine's load hits all alike; the 1-minute load average is printed with each run.
# WAYS="spilled built" runs only those.
set -euo pipefail
BUILD="${1:-build}"
MILLIONS="${2:-5}"
DIR="${BENCH_NSYS_DIR:-/tmp}"
REPEAT="${REPEAT:-2}"
CPU="${BENCH_CPU:-0}"
BIN="$BUILD/bench/bench_nsys"
[ -x "$BIN" ] || { echo "nsys_bench: $BIN missing (ninja -C $BUILD bench_nsys)" >&2; exit 2; }
for p in 1 2 8; do
  f="$DIR/overlapprof_nsys_${MILLIONS}m_p$p.sqlite"
  [ -f "$f" ] || "$BIN" "$f" "$MILLIONS" "$p" | head -1
done
for p in 1 2 8; do
  f="$DIR/overlapprof_nsys_${MILLIONS}m_p$p.sqlite"
  for r in $(seq "$REPEAT"); do
    for way in ${WAYS:-sql per-rank spilled built}; do
      env=()
      case $way in
        sql) env=(OVERLAPPROF_NSYS_SQL=1) ;;
        per-rank) env=(OVERLAPPROF_NSYS_PARTITION=0) ;;
        spilled) env=(OVERLAPPROF_NSYS_BUILD=0) ;;
        built) ;;
        *) echo "nsys_bench: unknown way $way" >&2; exit 2 ;;
      esac
      load=$(cut -d' ' -f1 /proc/loadavg)
      line=$(env "${env[@]}" taskset -c "$CPU" "$BIN" "$f" "$MILLIONS" "$p" | tail -1)
      printf '%s ranks  %-8s load %-5s %s\n' "$p" "$way" "$load" "$line"
    done
  done
done
