#!/usr/bin/env bash
# All analyzers on many ranks: time and peak memory must grow linearly with the events.
#
#   bench/analyzers.sh                     # 64 ranks, 10,000,000 GPU events in all, and 32/16-rank
#                                          # halves of it (same events per rank) for the growth
#   GPU_EVENTS=2000000 bench/analyzers.sh  # smaller
#
# Traces come from bench/gen_kineto (a DDP transformer loop: ~88% compute kernels, ~6% NCCL
# all-reduces with their Collective args, memcpy/memset; every rank has the same op sequence, so
# the cross-rank analyzer matches every collective). They are imported once into stores, and
# `overlapprof analyze STORES --json` (every registered analyzer: overlap, op types, DDP buckets,
# FSDP/TP, cross-rank) is timed under /usr/bin/time -v, pinned to one core, 3 runs, median wall;
# cpu_s (user + sys) of that run is the figure that other work on the machine disturbs least.
# Output: a table on stdout; bench/out/analyzers/ keeps traces, stores and summaries (gitignored).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RANKS=${RANKS:-64}
GPU_EVENTS=${GPU_EVENTS:-10000000}
BUILD=${BENCH_BUILD:-build-bench}
OUT=${BENCH_OUT:-bench/out}/analyzers
CPU=${BENCH_CPU:-0}
mkdir -p "$OUT"
if [[ ! -x /usr/bin/time ]]; then
  apt-get install -y -qq time >/dev/null
fi
if [[ ! -x $BUILD/overlapprof || ! -x $BUILD/bench/gen_kineto ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$BUILD" -j2 --target overlapprof gen_kineto >/dev/null
CLI=$BUILD/overlapprof
per_rank=$((GPU_EVENTS / RANKS))

printf "%6s %12s %10s %10s %14s %10s %12s\n" ranks gpu_events wall_s cpu_s "ns/event(cpu)" rss_MB collectives
for ranks in $((RANKS / 4)) $((RANKS / 2)) $RANKS; do
  d=$OUT/r$ranks
  if [[ ! -f $d/stores.ok ]]; then
    rm -rf "$d"
    mkdir -p "$d"
    "$BUILD/bench/gen_kineto" --ranks "$ranks" --gpu-events-per-rank "$per_rank" --out "$d/traces" --gzip \
      --manifest "$d/manifest.json" --jobs 2 >/dev/null 2>&1
    "$CLI" import "$d/traces" -o "$d/stores" --force >/dev/null
    rm -rf "$d/traces"  # the stores are what is timed; the JSON is many GB
    touch "$d/stores.ok"
  fi
  walls=()
  for k in 1 2 3; do
    /usr/bin/time -v -o "$d/time$k.txt" taskset -c "$CPU" "$CLI" analyze "$d/stores" --json "$d/summary.json" --force >/dev/null
    walls+=("$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$d/time$k.txt")")
  done
  med=$(printf "%s\n" "${walls[@]}" | sort -g | sed -n 2p)
  k=$(for i in 1 2 3; do echo "${walls[$((i-1))]} $i"; done | sort -g | sed -n 2p | cut -d' ' -f2)
  cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {print s}' "$d/time$k.txt")
  rss=$(awk -F': ' '/Maximum resident/ {printf "%.0f", $2*1024/1e6}' "$d/time$k.txt")
  read -r events colls < <(python3 - "$d/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ev = sum(r["kernels"] + r["memcpys"] + r["memsets"] for r in s["ranks"])
print(ev, s.get("collectives_summary", {}).get("matched", 0))
PY
)
  printf "%6d %12d %10.2f %10.2f %14.1f %10d %12s\n" "$ranks" "$events" "$med" "$cpu" \
    "$(python3 -c "print($cpu * 1e9 / $events)")" "$rss" "$colls"
done
