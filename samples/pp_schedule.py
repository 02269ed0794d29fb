#!/usr/bin/env python3
"""Pipeline parallel schedules: a reference workload for overlapprof (samples/README.md).

    torchrun --standalone --nproc_per_node=2 samples/pp_schedule.py --schedule gpipe
    torchrun --standalone --nproc_per_node=2 samples/pp_schedule.py --schedule 1f1b
    torchrun --standalone --nproc_per_node=2 samples/pp_schedule.py --schedule interleaved   # smaller bubble
    torchrun --standalone --nproc_per_node=2 samples/pp_schedule.py --schedule 1f1b --slow-stage 1

`torch.distributed.pipelining` (PyTorch 2.4+): the transformer stack is cut into stages, each rank runs
one stage (`--schedule gpipe|1f1b`: ScheduleGPipe, Schedule1F1B) or --stages-per-rank V >= 2 stages
(`interleaved`: ScheduleInterleaved1F1B; stage s on rank s % world). Activations go between stages as
NCCL send/recv. Bubble share in theory (p ranks, m micro-batches, v stages per rank): GPipe and 1F1B
(p-1)/(m+p-1) (1F1B saves activation memory, not bubble), interleaved (p-1)/(v*m+p-1).
--slow-stage K runs stage K's blocks --slow-factor times (extra compute): every other stage waits for it,
so their idle share grows and stage K (on rank K % world) has the most compute.

Needs a GPU (NCCL send/recv); several ranks may share one GPU (NCCL_HOSTID per rank). World size 1 runs
gpipe/1f1b with a single stage (no bubble, no send/recv: the baseline); interleaved needs >= 2 ranks.
Each step: NVTX ProfilerStep#N around schedule.step(). Rank 0 writes --json
(overlapprof.sample.pp_schedule/1) with the theoretical bubble shares and prints the expected signals.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload_common as wc  # noqa: E402

WORKLOAD = "pp_schedule"


def bubble_share(schedule, p, m, v):
    if p <= 1:
        return 0.0
    if schedule == "interleaved":
        return (p - 1) / (v * m + p - 1)
    return (p - 1) / (m + p - 1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--schedule", choices=("gpipe", "1f1b", "interleaved"), default="1f1b")
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--stages-per-rank", type=int, default=2, help="interleaved only")
    p.add_argument("--slow-stage", type=int, default=-1, help="stage K runs --slow-factor times the compute")
    p.add_argument("--slow-factor", type=int, default=3)
    p.add_argument("--layers", type=int, default=8, help="blocks in total, split evenly across stages")
    p.add_argument("--d-model", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=16, help="per step; split into --microbatches")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--json", default="")
    args = p.parse_args(argv)

    import torch
    try:
        from torch.distributed.pipelining import PipelineStage, ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B
    except ImportError as e:
        wc.skip(WORKLOAD, f"torch {torch.__version__} has no torch.distributed.pipelining (PyTorch 2.4+): {e}",
                args.json)
    rt = wc.Runtime(WORKLOAD, allow_cpu=False, default_port=29571, json_path=args.json)
    v = args.stages_per_rank if args.schedule == "interleaved" else 1
    if args.schedule == "interleaved" and (rt.world < 2 or v < 2):
        rt.finish()
        wc.skip(WORKLOAD, "the interleaved schedule needs >= 2 ranks and --stages-per-rank >= 2", args.json)
    n_stages = rt.world * v
    if args.layers % n_stages:
        rt.finish()
        wc.skip(WORKLOAD, f"--layers {args.layers} does not split into {n_stages} stages", args.json)
    if args.slow_stage >= n_stages:
        rt.finish()
        print(f"pp_schedule.py: --slow-stage {args.slow_stage}: there are only {n_stages} stages", file=sys.stderr)
        return 2
    if args.batch % args.microbatches:
        rt.finish()
        wc.skip(WORKLOAD, f"--batch {args.batch} does not split into {args.microbatches} micro-batches", args.json)
    torch.backends.cuda.matmul.allow_tf32 = True
    per_stage = args.layers // n_stages
    stage_ids = [rt.rank + i * rt.world for i in range(v)]  # loop placement: stage s on rank s % world
    stages, mods = [], []
    for sid in stage_ids:
        torch.manual_seed(1000 + sid)
        repeat = args.slow_factor if sid == args.slow_stage else 1
        blocks = wc.build_model(torch, per_stage, args.d_model, args.heads)

        class Stage(torch.nn.Module):
            def __init__(self, blocks, repeat):
                super().__init__()
                self.blocks, self.repeat = blocks, repeat

            def forward(self, x):
                for _ in range(self.repeat):  # the slow stage: the same blocks, more compute
                    x = self.blocks(x)
                return x

        mod = Stage(blocks, repeat).to(rt.device, torch.bfloat16)
        mods.append(mod)
        stages.append(PipelineStage(mod, sid, n_stages, rt.device))

    def loss_fn(out, target):
        return (out.float() - target.float()).pow(2).mean()

    if args.schedule == "gpipe":
        sched = ScheduleGPipe(stages[0], args.microbatches, loss_fn=loss_fn)
    elif args.schedule == "1f1b":
        sched = Schedule1F1B(stages[0], args.microbatches, loss_fn=loss_fn)
    else:
        sched = ScheduleInterleaved1F1B(stages, args.microbatches, loss_fn=loss_fn)
    params = [p for m in mods for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=1e-5)
    gen = torch.Generator(device="cpu").manual_seed(5)
    x = torch.randn(args.batch, args.seq, args.d_model, generator=gen).to(rt.device, torch.bfloat16)
    y = torch.randn(args.batch, args.seq, args.d_model, generator=gen).to(rt.device, torch.bfloat16)
    first, last = 0 in stage_ids, (n_stages - 1) in stage_ids

    timer = wc.StepTimer(rt, args.warmup)
    for _ in range(args.warmup + args.iters):
        with timer.step():
            opt.zero_grad(set_to_none=True)
            kw = {}
            if last:
                kw = {"target": y, "losses": []}
            if first:
                sched.step(x, **kw)
            else:
                sched.step(**kw)
            opt.step()

    slow_rank = args.slow_stage % rt.world if args.slow_stage >= 0 else None
    bubble = bubble_share(args.schedule, rt.world, args.microbatches, v)
    observed = {"stages": n_stages, "stages_per_rank": v, "stage_ids_rank0": list(range(0, n_stages, rt.world)),
                "blocks_per_stage": per_stage, "theoretical_bubble_share": round(bubble, 4),
                "slow_stage": args.slow_stage if args.slow_stage >= 0 else None, "slow_rank": slow_rank}
    expect = [f"bubble share {bubble:.3f} per rank ({args.schedule}, p={rt.world}, m={args.microbatches}, v={v}): "
              "pipeline bubble figures need the send/recv matching analyzer; today per-rank idle share "
              "(1 - compute_ns/wall_ns over steady iterations) is the proxy: interleaved < gpipe",
              "op_types p2p: the activation and gradient send/recv between stages" if rt.world > 1 else
              "world size 1: one stage, no send/recv"]
    if slow_rank is not None:
        expect.append(f"slow stage {args.slow_stage} on rank {slow_rank}: the rank with the most compute_ns; the "
                      "other ranks idle more")
    wc.report(rt, WORKLOAD, vars(args), timer, observed, expect, args.json)
    rt.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
