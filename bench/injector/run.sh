#!/usr/bin/env bash
# Injector benchmarks: cost of a hooked NCCL call on the caller's thread (target < 500 ns)
# and writer throughput (target >= 1 M records/s). Usage: bench/injector/run.sh [BUILD_DIR]
# (default build-bench-injector, configured Release with the tests, whose NCCL double it
# uses). Pinned to one core when taskset exists.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build-bench-injector}"
if [[ ! -x "$build/bench/injector/bench_hooks" ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DOVERLAPPROF_BUILD_TESTS=ON -DOVERLAPPROF_BUILD_SAMPLES=OFF >/dev/null
  cmake --build "$build" -j2 --target bench_hooks overlapprof_inject >/dev/null
fi
bench="$build/bench/injector/bench_hooks"
inj="$build/injector/liboverlapprof_inject.so"
pin=(); command -v taskset >/dev/null && pin=(taskset -c 0)
out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT
N=${N:-2000000}
echo "== hooked call cost (N=$N calls, one thread)"
echo -n "plain (no injector):      "; "${pin[@]}" "$bench" calls "$N"
echo -n "preloaded, not recording: "; LD_PRELOAD="$inj" "${pin[@]}" "$bench" calls "$N"
echo    "recording:                "
OVERLAPPROF_OUTPUT_DIR="$out" OVERLAPPROF_RING_RECORDS=$((1<<22)) LD_PRELOAD="$inj" "${pin[@]}" "$bench" calls "$N"
echo "== recording, 4 threads (ring of 2^22 records; both cores)"
rm -f "$out"/*.db
OVERLAPPROF_OUTPUT_DIR="$out" OVERLAPPROF_RING_RECORDS=$((1<<22)) LD_PRELOAD="$inj" "$bench" calls $((N / 4)) 4
echo "== writer sustained, end to end (hook -> ring -> writer thread -> store), default ring, paced calls"
for rate in 1000000 1200000 1500000; do
  rm -f "$out"/*.db
  echo -n "$rate calls/s: "
  OVERLAPPROF_OUTPUT_DIR="$out" LD_PRELOAD="$inj" "$bench" calls 4000000 1 "$rate" | tail -1
done
echo "== writer, store side (StoreWriter kLive, chunks only)"
"${pin[@]}" "$bench" writer-ops 2000000
"${pin[@]}" "$bench" writer 4000000
