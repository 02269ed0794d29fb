#!/usr/bin/env python3
"""Traces with a known overlap tax: compute kernels run a known factor slower while an all-reduce
runs beside them, and the all-reduce a known factor slower under compute (docs/interference.md).

Writes one PyTorch-profiler (Kineto) JSON file per rank, rank{r}.json, into OUT, and OUT.truth.json
beside it. Times are integer ns; the file's ts/dur are µs with 3 decimals (exact).

Every step on every rank runs the same program on stream 7 (compute) and stream 20 (NCCL), and is
marked by a ProfilerStep#N host range that is its GPU window (no correlation ids):
  forward  sm90_gemm_fwd 400 µs, elementwise_gelu 100 µs, sm90_gemm_fwd 400 µs, elementwise_gelu 100 µs
  backward sm90_gemm_bwd 800 µs x 4
  update   reduce_kernel 150 µs
and one all-reduce of 64 MiB (fp32) on process group "0". A step is either
  serialized  the all-reduce starts after the last compute kernel: everything runs alone;
  overlapped  the all-reduce starts with the first backward GEMM and ends with the last one: each
              backward GEMM lasts its time x (1 + --slowdown), and the all-reduce lasts the backward
              GEMMs' span, which is its alone time x (1 + --comm-slowdown) up to the noise.
Every compute kernel's time is also x (1 ± --noise), uniform, seeded. The all-reduce's alone time is
the step's backward GEMMs' alone times summed x (1 + slowdown) / (1 + comm-slowdown): the same noise
as its overlapped time, so that under / alone is exactly 1 + comm-slowdown for the same draw. A step
is followed by 200 µs of idle time.

  --pattern alternate  steps 0, 2, 4, ... overlapped, 1, 3, 5, ... serialized (the tax is measurable:
                       the backward GEMMs and the all-reduce run both alone and overlapped; the first
                       step is the short kind, so that no step is taken for warm-up)
  --pattern always     every step overlapped: the backward GEMMs never run alone, nothing is
                       measurable

The truth: per rank, the compute tax (sum over overlapped backward GEMMs of their time minus the
same draw's alone time), the hidden communication, the wall time of the steps, which identities are
measurable, and the injected factors.
"""
import argparse
import json
import os
import random

US = 1000
T0 = 1_700_000_000_000_000  # ns

FWD = [("sm90_gemm_fwd", 400), ("elementwise_gelu", 100), ("sm90_gemm_fwd", 400), ("elementwise_gelu", 100)]
BWD = [("sm90_gemm_bwd", 800)] * 4
UPD = [("reduce_kernel", 150)]
AR_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
AR_ELEMS = 16 << 20  # fp32: 64 MiB
GAP = 200 * US


def ts(ns):
    return f"{ns // 1000}.{ns % 1000:03d}"


def kernel_event(name, start, dur, stream, args=""):
    return (f'{{"ph":"X","cat":"kernel","name":{json.dumps(name)},"pid":0,"tid":{stream},"ts":{ts(T0 + start)},'
            f'"dur":{ts(dur)},"args":{{"device":0,"stream":{stream}{args}}}}}')


def allreduce_args(world):
    return (f',"Collective name":"allreduce","In msg nelems":{AR_ELEMS},"Out msg nelems":{AR_ELEMS},'
            f'"Group size":{world},"dtype":"Float","Process Group Name":"0","Process Group Description":"default_pg"')


def rank_trace(r, a):
    rng = random.Random(a.seed * 1000 + r)
    noise = lambda: 1.0 + rng.uniform(-a.noise, a.noise)
    events, t = [], 0
    truth = {"rank": r, "compute_tax_ns": 0, "hidden_comm_ns": 0, "wall_ns": 0, "comm_ns": 0, "steps": []}
    for step in range(a.steps):
        overlapped = a.pattern == "always" or step % 2 == 0
        start = t
        for name, base in FWD:
            d = round(base * US * noise())
            events.append(kernel_event(name, t, d, 7))
            t += d
        bwd_start, tax, bwd_alone = t, 0, 0
        for name, base in BWD:
            alone = round(base * US * noise())
            d = round(alone * (1 + a.slowdown)) if overlapped else alone
            tax += d - alone
            bwd_alone += alone
            events.append(kernel_event(name, t, d, 7))
            t += d
        if overlapped:  # the all-reduce spans the backward GEMMs exactly
            ar_start, ar_end = bwd_start, t
        for name, base in UPD:
            d = round(base * US * noise())
            events.append(kernel_event(name, t, d, 7))
            t += d
        if not overlapped:
            ar_start = t
            ar_end = t + round(bwd_alone * (1 + a.slowdown) / (1 + a.comm_slowdown))
            t = ar_end
        events.append(kernel_event(AR_KERNEL, ar_start, ar_end - ar_start, 20, allreduce_args(a.ranks)))
        end = t
        events.append(f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{step}","pid":1,"tid":1,'
                      f'"ts":{ts(T0 + start)},"dur":{ts(end - start)}}}')
        hidden = (ar_end - ar_start) if overlapped else 0
        truth["steps"].append({"step": step, "overlapped": overlapped, "compute_tax_ns": tax, "hidden_comm_ns": hidden,
                               "gpu_ns": end - start})
        truth["compute_tax_ns"] += tax
        truth["hidden_comm_ns"] += hidden
        # the step's window runs to the next step's start (the idle gap included), the last to its end
        truth["wall_ns"] += end - start + (GAP if step + 1 < a.steps else 0)
        truth["comm_ns"] += ar_end - ar_start
        t = end + GAP
    events.sort(key=lambda e: float(e.split('"ts":')[1].split(",")[0]))
    head = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "synthetic GPU"}],
            "distributedInfo": {"backend": "nccl", "rank": r, "world_size": a.ranks}}
    text = json.dumps(head)[:-1] + ',"traceEvents":[\n' + ",\n".join(events) + "\n]}\n"
    return text, truth


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--slowdown", type=float, default=0.2, help="compute under communication (0.2: 20%% slower)")
    ap.add_argument("--comm-slowdown", type=float, default=0.1, help="communication under compute")
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pattern", choices=["alternate", "always"], default="alternate")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    truths = []
    for r in range(a.ranks):
        text, truth = rank_trace(r, a)
        with open(os.path.join(a.out, f"rank{r}.json"), "w") as f:
            f.write(text)
        truths.append(truth)
    measurable = a.pattern == "alternate"
    truth = {"slowdown": a.slowdown, "comm_slowdown": a.comm_slowdown, "pattern": a.pattern, "steps": a.steps,
             "measurable": measurable,
             # the identities that run both alone and overlapped, at least 5 times each way
             "measurable_compute": [["sm90_gemm_bwd", k] for k in range(len(BWD))] if measurable else [],
             "measurable_comm": [["allreduce", AR_ELEMS * 4]] if measurable else [],
             "ranks": truths}
    with open(a.out.rstrip("/") + ".truth.json", "w") as f:
        json.dump(truth, f, indent=1)


if __name__ == "__main__":
    main()
