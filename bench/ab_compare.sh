#!/bin/bash
# A/B speed check of two builds (docs/performance.md): bench/ab_compare.sh BUILD_A BUILD_B [ROUNDS=5].
# Generates the inputs once in $AB_DATA (default /tmp/overlapprof_ab): a Kineto trace of 300 k GPU
# events (.gz and plain), Nsight Systems exports of 5 M kernels over 1 and 8 processes, and a store.
# Then runs A and B alternately, ROUNDS times, printing CPU s (user + system), wall s and peak RSS
# per run, and at the end the medians per input and B/A.
A=$1; B=$2; R=${3:-5}; D=${AB_DATA:-/tmp/overlapprof_ab}; mkdir -p $D
[ -f $D/k/rank0.json.gz ] || $A/bench/gen_kineto --ranks 1 --gpu-events-per-rank 300000 --out $D/k --gzip >/dev/null
[ -f $D/k/rank0.json ] || gunzip -k $D/k/rank0.json.gz
for p in 1 8; do [ -f $D/nsys_p$p.sqlite ] || $A/bench/bench_nsys $D/nsys_p$p.sqlite 5 $p | head -1; done
[ -f $D/store.db ] || $A/overlapprof import $D/k/rank0.json.gz -o $D/store.db >/dev/null 2>&1 || echo "store import failed"
run() { # label bin args...
  local l=$1; shift
  /usr/bin/time -f "%U %S %e %M" -o /tmp/ab_time "$@" >/dev/null 2>&1
  read u s e m < /tmp/ab_time; echo "$l $(awk "BEGIN{print $u + $s}") $e $m"
}
for r in $(seq $R); do
  for X in A B; do
    bin=$([ $X = A ] && echo $A || echo $B)
    run "$X kineto_gz" $bin/overlapprof analyze $D/k/rank0.json.gz --json -
    run "$X kineto_json" $bin/overlapprof analyze $D/k/rank0.json --json -
    run "$X nsys_p1" taskset -c 0 $bin/bench/bench_nsys $D/nsys_p1.sqlite 5 1
    run "$X nsys_p8" taskset -c 0 $bin/bench/bench_nsys $D/nsys_p8.sqlite 5 8
    [ -f $D/store.db ] && run "$X store" $bin/overlapprof analyze $D/store.db --json -
  done
done | tee $D/last.txt
AB_LAST=$D/last.txt python3 - <<'PY'
import collections,os,statistics
d=collections.defaultdict(list)
for l in open(os.environ['AB_LAST']):
    x,k,c,w,m=l.split(); d[(k,x)].append((float(c),float(w),int(m)))
for k in sorted({k for k,_ in d}):
    a=[c for c,_,_ in d[(k,'A')]]; b=[c for c,_,_ in d[(k,'B')]]
    ma,mb=statistics.median(a),statistics.median(b)
    print(f"{k:12s} CPU median A {ma:.3f}s B {mb:.3f}s  B/A {mb/ma:.3f}  wall A {statistics.median([w for _,w,_ in d[(k,'A')]]):.2f} B {statistics.median([w for _,w,_ in d[(k,'B')]]):.2f}  RSS A {max(m for *_,m in d[(k,'A')])//1024}MB B {max(m for *_,m in d[(k,'B')])//1024}MB")
PY
