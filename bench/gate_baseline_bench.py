#!/usr/bin/env python3
"""Reading a large baseline in `overlapprof compare` / `check` (docs/performance.md, "Reading a baseline").

    bench/gate_baseline_bench.py [--overlapprof build/overlapprof] [--mb 100] [--keep]

Writes two baselines of about MB megabytes (10^6 bytes) into bench/out/gate, then times
`overlapprof compare BASELINE SMALL` on each under /usr/bin/time (wall and CPU seconds, peak RSS), where
SMALL is a summary of the same ranks with a few iterations (so the comparison itself is trivial and
the figure is the baseline's read):
  realistic: a summary of 1024 ranks with as many iterations of the shape `analyze --json` writes
             (about 450 bytes each; 1024 ranks x 250 iterations is about 114 MB);
  ignored:   a small valid summary plus one key the gate does not read holding ~MB/2 million zeros.
The target: each read in under 2 s and under 4x the baseline's size in peak RSS. Not a test: a figure.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rank(r):
    return {"rank": r, "comm_ns": 85837536, "compute_ns": 2669736, "overlap_ns": 1000, "exposed_comm_ns": 85836536,
            "overlap_ratio": 0.0, "comm_ops": 21, "world_size": 1024, "source": f"trace/rank{r}.json.gz",
            "format": "kineto", "device": "NVIDIA H100", "host": "node", "start_ns": 1, "end_ns": 2, "wall_ns": 1,
            "busy_ns": 1, "idle_ns": 0, "memory_ns": 0, "achievable_ratio": 0.03, "overlap_ratio_reason": None,
            "kernels": 62, "comm_kernels": 1, "memcpys": 32, "memsets": 1, "streams": 3, "iterations": 0,
            "iteration_source": "ProfilerStep", "warmup_iterations": 0, "iteration_spread": None, "verdict": "x",
            "comm_rules": [], "timing_source": "kernels", "nccl_profiler_ops": 0, "notices": [],
            "data_quality": [{"counter": "rank_unknown", "severity": "warning", "value": 0,
                              "description": "the trace does not say its rank"}]}


def iteration(r, i):
    return {"rank": r, "index": i, "start_ns": 1795762332239135154 + i, "end_ns": 1795762332554264561 + i,
            "overlap_ratio": 0.25, "step": i, "warmup": False, "comm_ns": 85837536, "compute_ns": 2669736 + i % 7,
            "overlap_ns": 21459384, "exposed_comm_ns": 64378152, "comm_ops": 1, "wall_ns": 315129407 + i % 13,
            "busy_ns": 88701613, "idle_ns": 226427794, "memory_ns": 194341, "achievable_ratio": 0.0311,
            "overlap_ratio_reason": None, "kernels": 62, "comm_kernels": 1, "memcpys": 32, "memsets": 1}


def write_summary(path, ranks, iters_per_rank, padding_zeros=0):
    with open(path, "w") as f:
        f.write('{"schema": "overlapprof.summary/1", "ranks": [')
        rs = []
        for r in range(ranks):
            x = rank(r)
            x["iterations"] = iters_per_rank
            rs.append(json.dumps(x))
        f.write(", ".join(rs))
        f.write('], "iterations": [')
        first = True
        for r in range(ranks):
            chunk = ", ".join(json.dumps(iteration(r, i)) for i in range(iters_per_rank))
            if chunk:
                f.write(("" if first else ", ") + chunk)
                first = False
        f.write('], "data_quality": {"errors": 0, "warnings": 0}')
        f.write(', "op_types": [{"op": "allreduce", "count": %d, "bytes": %d, "time_ns": 100, "exposed_ns": 50}]'
                % (ranks * iters_per_rank * 21, ranks * iters_per_rank * 21 * 1024))
        if padding_zeros:
            f.write(', "padding": [')
            block = "0," * 1_000_000
            n = padding_zeros
            while n > 1_000_000:
                f.write(block)
                n -= 1_000_000
            f.write("0," * (n - 1) + "0]")
        f.write("}\n")


def timed(cmd):
    p = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M %U %S"] + cmd, capture_output=True, text=True)
    m = re.search(r"TIME ([\d.]+) (\d+) ([\d.]+) ([\d.]+)", p.stderr)
    if p.returncode != 0 or not m:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return float(m.group(1)), int(m.group(2)) * 1024, float(m.group(3)) + float(m.group(4))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--overlapprof", default=os.path.join(ROOT, "build/overlapprof"))
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--keep", action="store_true", help="keep the generated baselines")
    a = ap.parse_args()
    out = os.path.join(ROOT, "bench/out/gate")
    os.makedirs(out, exist_ok=True)
    ranks = 1024
    small = os.path.join(out, "small.summary.json")
    write_summary(small, ranks, 1)
    cases = []
    realistic = os.path.join(out, "realistic.summary.json")
    iters = max(1, int(a.mb * 1e6 / ranks / 450))
    write_summary(realistic, ranks, iters)
    cases.append((f"realistic ({ranks} ranks x {iters} iterations)", realistic))
    ignored = os.path.join(out, "ignored.summary.json")
    write_summary(ignored, ranks, 1, padding_zeros=int(a.mb * 1e6 / 2))
    cases.append((f"ignored ({int(a.mb * 1e6 / 2):,} zeros in an unread key)", ignored))
    print(f"{'baseline':<48} {'MB':>8} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12} {'RSS/size':>9}")
    for name, path in cases:
        size = os.path.getsize(path)
        wall, rss, cpu = timed([a.overlapprof, "compare", "--allow-different-runs", path, small])
        print(f"{name:<48} {size / 1e6:>8.1f} {wall:>8.2f} {cpu:>8.2f} {rss / 1e6:>12.1f} {rss / size:>9.2f}")
        if not a.keep:
            os.remove(path)
    if not a.keep:
        os.remove(small)


if __name__ == "__main__":
    main()
