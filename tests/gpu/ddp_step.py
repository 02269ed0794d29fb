#!/usr/bin/env python3
"""A small PyTorch DDP training loop for tests/gpu (torch.profiler is NOT active).

A few Linear layers, DDP with a small bucket_cap_mb so gradients go out in several buckets while
backward still runs, several iterations. Launch with torchrun (any number of ranks; several ranks may
share one GPU) or plainly (one rank):

    torchrun --standalone --nproc_per_node=2 tests/gpu/ddp_step.py --json out.json

Two ranks on one GPU: NCCL refuses two ranks with the same host hash on the same GPU ("Duplicate GPU
detected"), so when the ranks outnumber the GPUs each rank sets NCCL_HOSTID=<host>-rank<R> (and, on
NCCL 2.30+, NCCL_MULTI_RANK_GPU_ENABLE=1) before the process group starts, unless already set. NCCL
then connects them through its socket transport (NCCL_SOCKET_IFNAME=lo is set when unset).

The gradient all-reduce goes through a comm hook that all-reduces each bucket with ReduceOp.AVG and
counts the calls: AVG on float makes NCCL run a kernel even on one rank (a 1-rank in-place SUM does
nothing on the GPU). Each step ends with torch.cuda.synchronize(); the step time is host wall time.
Rank 0 writes --json: {"world_size", "step_ms", "step_ms_median", "allreduce_calls", ...}.
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=30, help="timed iterations")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--bucket-cap-mb", type=float, default=8.0)
    p.add_argument("--json", default="", help="rank 0 writes its figures here")
    p.add_argument("--no-nvtx", action="store_true", help="no ProfilerStep#N NVTX range per step")
    args = p.parse_args()

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("WORLD_SIZE", str(world))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    if not torch.cuda.is_available():
        print("ddp_step.py: no CUDA device", file=sys.stderr)
        return 2
    ndev = torch.cuda.device_count()
    dev = local_rank % ndev
    shared_gpu = local_world > ndev
    nccl_version = torch.cuda.nccl.version()
    if shared_gpu and not os.environ.get("NCCL_HOSTID") and not os.environ.get("NCCL_MULTI_RANK_GPU_ENABLE"):
        os.environ["NCCL_HOSTID"] = f"{socket.gethostname()}-rank{rank}"
        if tuple(nccl_version) >= (2, 30, 0):
            os.environ["NCCL_MULTI_RANK_GPU_ENABLE"] = "1"
    if shared_gpu:
        os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=world)

    torch.manual_seed(1234)
    layers = []
    for _ in range(args.layers):
        layers += [nn.Linear(args.width, args.width), nn.ReLU()]
    model = nn.Sequential(*layers).cuda(dev)
    ddp_kwargs = dict(device_ids=[dev], bucket_cap_mb=args.bucket_cap_mb)
    if world == 1:
        # The initial parameter broadcast is an in-place 1-rank collective: NCCL does nothing on the
        # GPU for it, and it would show as an operation without GPU activity. Skip it where DDP can.
        import inspect
        if "init_sync" in inspect.signature(DDP.__init__).parameters:
            ddp_kwargs["init_sync"] = False
    ddp = DDP(model, **ddp_kwargs)

    calls = [0]

    def avg_hook(state, bucket):
        calls[0] += 1
        work = dist.all_reduce(bucket.buffer(), op=dist.ReduceOp.AVG, async_op=True)
        return work.get_future().then(lambda fut: fut.value()[0])

    ddp.register_comm_hook(None, avg_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(args.batch, args.width, device=dev)
    y = torch.randn(args.batch, args.width, device=dev)
    loss_fn = nn.MSELoss()

    step_ms = []
    for it in range(args.warmup + args.iters):
        if not args.no_nvtx:
            torch.cuda.nvtx.range_push(f"ProfilerStep#{it}")
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        if not args.no_nvtx:
            torch.cuda.nvtx.range_pop()
        if it >= args.warmup:
            step_ms.append((t1 - t0) * 1e3)

    params = sum(p.numel() for p in model.parameters())
    result = {
        "schema": "overlapprof.sample.ddp_step/1",
        "rank": rank,
        "world_size": world,
        "shared_gpu": shared_gpu,
        "device_name": torch.cuda.get_device_name(dev),
        "torch_version": torch.__version__,
        "nccl_version": ".".join(str(v) for v in nccl_version),
        "params": params,
        "grad_bytes": params * 4,
        "bucket_cap_mb": args.bucket_cap_mb,
        "iters": args.iters,
        "warmup": args.warmup,
        "allreduce_calls": calls[0],
        "buckets_per_step": calls[0] / float(args.warmup + args.iters),
        "step_ms": step_ms,
        "step_ms_median": statistics.median(step_ms),
        "step_ms_mean": statistics.fmean(step_ms),
    }
    print(f"ddp_step rank {rank}/{world}: {calls[0]} bucket all-reduces "
          f"({result['buckets_per_step']:.1f}/step), step median {result['step_ms_median']:.3f} ms", flush=True)
    if args.json and rank == 0:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if world > 1:
        dist.barrier()  # a 1-rank barrier is an in-place no-op collective (see init_sync above)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
