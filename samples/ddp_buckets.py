#!/usr/bin/env python3
"""Bucketed DDP over a transformer-like stack: a reference workload for overlapprof (samples/README.md).

    torchrun --standalone --nproc_per_node=2 samples/ddp_buckets.py --bucket-cap-mb 25      # good
    torchrun --standalone --nproc_per_node=2 samples/ddp_buckets.py --bucket-cap-mb 1000    # bad
    overlapprof run -o trace/ -- torchrun --standalone --nproc_per_node=2 samples/ddp_buckets.py

Knobs: --bucket-cap-mb (1, 25, 1000), --gradient-as-bucket-view, --accumulate N (the first N-1
micro-batches under DDP.no_sync()), --bf16-compress (gradients all-reduced in bf16, as PyTorch's
default_hooks.bf16_compress_hook; --fp16-compress likewise with fp16, which gloo supports on CPU).

The gradient all-reduce goes through a comm hook that counts each bucket and its bytes (the script's
own ground truth): PyTorch's default_hooks.allreduce_hook / bf16_compress_hook / fp16_compress_hook,
except on one NCCL rank, where an in-place 1-rank SUM launches no GPU kernel; there the hook all-reduces
with ReduceOp.AVG (same result, a kernel runs, as tests/gpu/ddp_step.py).

Runs on a GPU (NCCL; several ranks may share one GPU) and on CPU with gloo (--cpu, or no GPU), at any
world size. Each step is an NVTX range ProfilerStep#N with `forward` and `backward` ranges inside it.
Rank 0 prints the expected overlapprof signals and writes --json (overlapprof.sample.ddp_buckets/1).
"""
import argparse
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload_common as wc  # noqa: E402

WORKLOAD = "ddp_buckets"


class BucketLog:
    """What the comm hook saw: per step, the bytes of each bucket all-reduce; calls inside no_sync."""

    def __init__(self):
        self.step, self.in_no_sync = -1, False
        self.per_step = {}
        self.in_no_sync_calls = 0

    def record(self, nbytes):
        if self.in_no_sync:
            self.in_no_sync_calls += 1
        self.per_step.setdefault(self.step, []).append(int(nbytes))


def make_hook(rt, compress, log, json_path=None):
    torch, dist = rt.torch, rt.dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    dtype = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}[compress]
    if rt.world > 1 or not rt.cuda:
        builtin = {"none": default_hooks.allreduce_hook, "bf16": getattr(default_hooks, "bf16_compress_hook", None),
                   "fp16": default_hooks.fp16_compress_hook}[compress]
        if builtin is None:
            wc.skip(WORKLOAD, f"torch {torch.__version__} has no default_hooks.bf16_compress_hook", json_path)

        def hook(state, bucket):
            buf = bucket.buffer()
            log.record(buf.numel() * (buf.element_size() if dtype is None else torch.finfo(dtype).bits // 8))
            return builtin(state, bucket)
        return hook

    # One NCCL rank: ReduceOp.AVG so that NCCL runs a kernel (a 1-rank in-place SUM runs none).
    def avg_hook(state, bucket):
        buf = bucket.buffer()
        t = buf if dtype is None else buf.to(dtype)
        log.record(t.numel() * t.element_size())
        fut = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True).get_future()
        if dtype is None:
            return fut.then(lambda f: f.value()[0])

        def decompress(f):
            buf.copy_(f.value()[0])
            return buf
        return fut.then(decompress)
    return avg_hook


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP bucket_cap_mb (1, 25, 1000)")
    p.add_argument("--first-bucket-mb", type=float, default=None,
                   help="DDP's first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES); default: --bucket-cap-mb, as PyTorch "
                        "2.x does when bucket_cap_mb is given (1.x always used 1 MB)")
    p.add_argument("--gradient-as-bucket-view", action="store_true")
    p.add_argument("--accumulate", type=int, default=1, help="micro-batches per step; N-1 under no_sync")
    p.add_argument("--bf16-compress", action="store_true", help="all-reduce gradients in bf16 (comm hook)")
    p.add_argument("--fp16-compress", action="store_true", help="all-reduce gradients in fp16 (comm hook)")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=8, help="per micro-batch and rank")
    p.add_argument("--iters", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed first steps (DDP rebuilds its buckets)")
    p.add_argument("--cpu", action="store_true", help="gloo on CPU even with a GPU")
    p.add_argument("--json", default="", help="rank 0 writes its figures here")
    args = p.parse_args(argv)
    if args.bf16_compress and args.fp16_compress:
        p.error("--bf16-compress and --fp16-compress exclude each other")
    compress = "bf16" if args.bf16_compress else "fp16" if args.fp16_compress else "none"

    rt = wc.Runtime(WORKLOAD, cpu=args.cpu, default_port=29541, json_path=args.json)
    torch, dist = rt.torch, rt.dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    if compress == "bf16" and rt.world > 1:
        probe = torch.zeros(1, dtype=torch.bfloat16, device=rt.device)
        try:
            dist.all_reduce(probe)
        except RuntimeError as e:
            wc.skip(WORKLOAD, f"--bf16-compress: the {rt.backend} backend of torch {torch.__version__} cannot "
                              f"all-reduce bf16 ({str(e).splitlines()[0]})", args.json)
    if rt.cuda:
        torch.backends.cuda.matmul.allow_tf32 = True

    torch.manual_seed(1234)
    model = wc.build_model(torch, args.layers, args.d_model, args.heads).to(rt.device)
    ddp_kwargs = dict(bucket_cap_mb=args.bucket_cap_mb, gradient_as_bucket_view=args.gradient_as_bucket_view)
    if rt.cuda:
        ddp_kwargs["device_ids"] = [rt.device.index]
    if rt.world == 1 and rt.cuda:
        import inspect  # the 1-rank parameter broadcast is an in-place no-op collective: skip it
        if "init_sync" in inspect.signature(DDP.__init__).parameters:
            ddp_kwargs["init_sync"] = False
    first_mb = args.bucket_cap_mb if args.first_bucket_mb is None else args.first_bucket_mb
    if hasattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES"):
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(first_mb * 2**20)
    ddp = DDP(model, **ddp_kwargs)
    log = BucketLog()
    ddp.register_comm_hook(None, make_hook(rt, compress, log, args.json))
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
    gen = torch.Generator(device="cpu").manual_seed(100 + rt.rank)
    xs = [torch.randn(args.batch, args.seq, args.d_model, generator=gen).to(rt.device) for _ in range(args.accumulate)]

    timer = wc.StepTimer(rt, args.warmup)
    for _ in range(args.warmup + args.iters):
        with timer.step() as i:
            log.step = i
            opt.zero_grad(set_to_none=True)
            for m, x in enumerate(xs):
                last = m == len(xs) - 1
                ctx = ddp.no_sync() if not last else contextlib.nullcontext()
                log.in_no_sync = not last
                with ctx:
                    with rt.range("forward"):
                        loss = ddp(x).float().pow(2).mean()
                    with rt.range("backward"):
                        loss.backward()
            log.in_no_sync = False
            opt.step()

    steady = [log.per_step.get(i, []) for i in range(args.warmup, args.warmup + args.iters)]
    counts = sorted({len(b) for b in steady})
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    bucket_bytes = [sum(b) for b in steady]
    observed = {
        "params": sum(p.numel() for p in model.parameters()),
        "grad_bytes": grad_bytes,
        "compress": compress,
        "buckets_per_step": counts[0] if len(counts) == 1 else counts,
        "buckets_first_step": len(log.per_step.get(0, [])),
        "allreduce_calls": sum(len(v) for v in log.per_step.values()),
        "allreduce_in_no_sync": log.in_no_sync_calls,
        "bytes_per_step": bucket_bytes[0] if len(set(bucket_bytes)) == 1 else bucket_bytes,
        "bucket_bytes_last_step": steady[-1] if steady else [],
        "bytes_ratio_to_fp32": round(bucket_bytes[-1] / grad_bytes, 4) if bucket_bytes else None,
    }
    nb = observed["buckets_per_step"]
    expect = [
        f"bucket_stalls[].buckets = {nb} per steady iteration (annotated `backward` ranges); "
        f"op_types allreduce bytes per iteration = {observed['bytes_per_step']}",
        f"iterations[].comm_ops the same with --accumulate {args.accumulate} as with 1: no all-reduce inside no_sync "
        f"(hook calls inside no_sync: {log.in_no_sync_calls})",
    ]
    if compress != "none":
        expect.append(f"{compress} compression: all-reduce bytes = half of the fp32 gradients ({grad_bytes} B)")
    if args.bucket_cap_mb * 2**20 >= grad_bytes:
        expect.append("one bucket, launched at the end of backward: nothing hidden (overlap_ratio near 0), the "
                      "ddp_buckets finding 'first gradient bucket launched at ..% of backward' fires")
    else:
        expect.append("several buckets launched during backward: overlap_ratio well above the 1000 MB run's")
    config = dict(vars(args), compress=compress)
    wc.report(rt, WORKLOAD, config, timer, observed, expect, args.json)
    rt.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
