#!/usr/bin/env python3
"""Training traces whose collectives cannot be told apart: every one the same generic kernel name,
no collective name, no size (as RCCL's `ncclDevKernel_Generic_1` in a rocprofv3 trace of FSDP).

Writes one PyTorch-profiler (Kineto) JSON file, rank0.json, into OUT, and OUT.truth.json beside it:
the steps' GPU windows in ns. Times are integer ns from T0; the file's ts/dur are µs with 3 decimals.

  --scenario fsdp  per step 26 collectives on the communication stream: 1 + 8 forward all-gathers,
                   8 backward all-gathers and 8 + 1 reduce-scatters; each layer's compute waits for
                   its all-gather; backward pauses (compute between collectives) as long as the one
                   between steps. Step about 48.6 ms (the real run: 50 steps of ~48.6 ms).
  --scenario tp    per layer (8) an all-gather and a reduce-scatter in forward and in backward (32
                   per step), compute between them.
  --scenario ddp   one all-reduce per layer group (8 identical buckets) in backward, after a long
                   forward: the pause before a step's first bucket is clearly the longest.
  --startup-ms     start-up before the first step (12000): 10 collectives and a few kernels spread
                   over it, idle in between (initialization, parameter sync).
  --steps          training steps (50).
  --no-optimizer   no optimizer kernels (otherwise 3 multi_tensor_apply_kernel AdamW kernels end each
                   step, after its last collective).
  --markers        also write ProfilerStep#N host ranges around the steps (no correlation ids: the
                   host ranges are the windows).
"""
import argparse
import json
import os

US = 1000
MS = 1000 * US
T0 = 1_700_000_000_000_000  # ns


def ts(ns):
    return float(f"{ns // 1000}.{ns % 1000:03d}")


COMM = "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"
OPT = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
       "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, 1, 1>>(...)")


class Timeline:
    def __init__(self):
        self.ev = []
        self.compute_end = 0  # stream 7
        self.comm_end = 0  # stream 20

    def kernel(self, name, start, dur, stream):
        self.ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts(T0 + start),
                        "dur": ts(dur), "args": {"device": 0, "stream": stream}})
        return start + dur

    def compute(self, name, dur, after=0):
        start = max(self.compute_end, after)
        self.compute_end = self.kernel(name, start, dur, 7)
        return self.compute_end

    def comm(self, dur, after=0):
        start = max(self.comm_end, after)
        self.comm_end = self.kernel(COMM, start, dur, 20)
        return self.comm_end

    def memcpy(self, start, dur):
        self.ev.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7,
                        "ts": ts(T0 + start), "dur": ts(dur), "args": {"device": 0, "stream": 7, "bytes": 8 << 20}})
        self.compute_end = max(self.compute_end, start + dur)


def step_fsdp(tl, t):
    tl.memcpy(t, 300 * US)
    tl.comm(350 * US, after=t)  # root all-gather
    for layer in range(8):
        ag = tl.comm(400 * US, after=tl.compute_end - 600 * US)  # prefetched while the previous layer runs
        tl.compute("gemm_fwd", 1000 * US, after=ag)
        tl.compute("gelu_fwd", 300 * US)
    tl.compute("loss", 500 * US)
    for layer in range(8):
        ag = tl.comm(400 * US, after=tl.compute_end)  # not prefetched: the compute waits for it
        tl.compute("gemm_dgrad", 1700 * US, after=ag)
        done = tl.compute("gemm_wgrad", 1700 * US)
        tl.comm(500 * US, after=done)  # reduce-scatter of the layer's gradients
    tl.comm(300 * US, after=tl.compute_end)  # root reduce-scatter


def step_tp(tl, t):
    tl.memcpy(t, 300 * US)
    for phase_scale in (1, 2):
        for layer in range(8):
            ag = tl.comm(300 * US, after=tl.compute_end)
            tl.compute("gemm_chunk", 500 * phase_scale * US, after=ag)
            rs = tl.comm(300 * US, after=tl.compute_end)
            tl.compute("layernorm", 200 * phase_scale * US, after=rs)


def step_ddp(tl, t):
    tl.memcpy(t, 300 * US)
    for layer in range(16):
        tl.compute("gemm_fwd", 1200 * US)
    for bucket in range(8):
        tl.compute("gemm_dgrad", 900 * US)
        done = tl.compute("gemm_wgrad", 900 * US)
        tl.comm(1100 * US, after=done)


STEPS = {"fsdp": step_fsdp, "tp": step_tp, "ddp": step_ddp}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--scenario", choices=sorted(STEPS), default="fsdp")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--startup-ms", type=int, default=12000)
    ap.add_argument("--no-optimizer", action="store_true")
    ap.add_argument("--markers", action="store_true")
    a = ap.parse_args()

    tl = Timeline()
    # Start-up: 10 collectives (parameter sync) and a few kernels, idle in between.
    startup = a.startup_ms * MS
    for i in range(10):
        at = i * startup // 12
        tl.compute("init_kernel", 200 * US, after=at)
        tl.comm(300 * US, after=at + 250 * US)
    t = max(startup, tl.compute_end, tl.comm_end)
    windows = []
    for step in range(a.steps):
        start = t
        STEPS[a.scenario](tl, t)
        end = max(tl.compute_end, tl.comm_end)
        if not a.no_optimizer:
            tl.compute_end = end
            for k in range(3):
                end = tl.compute(OPT, 250 * US)
        t = end + 1500 * US  # the host loads the next batch
        windows.append([start, t])
    windows[-1][1] = end
    events = tl.ev
    if a.markers:
        for step, (s, e) in enumerate(windows):
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                           "ts": ts(T0 + s), "dur": ts(e - s)})
    events.sort(key=lambda e: e["ts"])
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "synthetic GPU"}],
           "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8}, "traceEvents": events}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "rank0.json"), "w") as f:
        json.dump(doc, f)
    truth = {"scenario": a.scenario, "steps": a.steps, "optimizer": not a.no_optimizer,
             "collectives_per_step": {"fsdp": 26, "tp": 32, "ddp": 8}[a.scenario],
             "windows_ns": [[T0 + s, T0 + e] for s, e in windows]}
    with open(a.out.rstrip("/") + ".truth.json", "w") as f:
        json.dump(truth, f)


if __name__ == "__main__":
    main()
