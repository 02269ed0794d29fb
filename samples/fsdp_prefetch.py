#!/usr/bin/env python3
"""FSDP with and without prefetch: a reference workload for overlapprof (samples/README.md).

    torchrun --standalone --nproc_per_node=2 samples/fsdp_prefetch.py --prefetch on     # good
    torchrun --standalone --nproc_per_node=2 samples/fsdp_prefetch.py --prefetch off    # bad
    torchrun --standalone --nproc_per_node=2 samples/fsdp_prefetch.py --no-reshard-after-forward

FSDP2 (`torch.distributed.fsdp.fully_shard`, PyTorch 2.6+; `torch.distributed._composable.fsdp` on
2.4/2.5): every transformer block and the root are sharded.
  --prefetch on:  explicit prefetch, --prefetch-depth blocks ahead: `set_modules_to_forward_prefetch`
                  and `set_modules_to_backward_prefetch` on each block.
  --prefetch off: no explicit prefetch, and FSDP2's implicit one-block backward prefetch turned off
                  (private FSDPParamGroup._backward_prefetch replaced by a no-op; the script says when
                  it cannot): each block's parameters are all-gathered only when its backward starts,
                  serialized with the gradients of the block before it.
  --reshard-after-forward / --no-reshard-after-forward: with False, parameters stay unsharded from
                  forward to backward, and backward issues no all-gathers at all.
FSDP1 (`FullyShardedDataParallel`, --api fsdp1, or where FSDP2 does not exist): on = forward_prefetch=True
and backward_prefetch=BACKWARD_PRE; off = forward_prefetch=False and backward_prefetch=None;
--no-reshard-after-forward = ShardingStrategy.SHARD_GRAD_OP.

Needs a GPU (NCCL); several ranks may share one GPU (NCCL_HOSTID per rank, samples/workload_common.py).
At world size 1 FSDP still all-gathers (1 rank), so the script runs, but hiding communication needs >= 2.
Each step: NVTX ProfilerStep#N with `forward` and `backward` inside (overlapprof's phase attribution).
Rank 0 writes --json (overlapprof.sample.fsdp_prefetch/1) and prints the expected signals.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload_common as wc  # noqa: E402

WORKLOAD = "fsdp_prefetch"


def import_fsdp2():
    """(fully_shard from where this PyTorch has it, else None; the import error)."""
    err = None
    try:
        from torch.distributed.fsdp import fully_shard  # 2.6+
        return fully_shard, None
    except Exception as e:  # ImportError; Debian's 1.13 on Python 3.11 raises ValueError importing fsdp
        err = f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
    try:
        from torch.distributed._composable.fsdp import fully_shard  # 2.4, 2.5
        return fully_shard, None
    except Exception:
        return None, err


def disable_implicit_backward_prefetch(module):
    """FSDP2 prefetches the next block in backward by default (FSDPParamGroup._backward_prefetch, called
    from pre_backward when no explicit backward prefetch is set); turn that off for the bad configuration.
    Private API (FSDPState._fsdp_param_group up to ~2.9, the list _fsdp_param_groups after): returns False
    when this PyTorch does not have it. The post-forward indices it would pop are cleared when backward
    finishes (finalize_backward)."""
    try:
        state = module._get_fsdp_state()
    except AttributeError:
        return False
    groups = getattr(state, "_fsdp_param_groups", None)
    if groups is None:
        groups = [getattr(state, "_fsdp_param_group", None)]
    groups = [g for g in groups if g is not None]
    if not groups or not all(hasattr(g, "_backward_prefetch") for g in groups):
        return False
    for g in groups:
        g._backward_prefetch = lambda *a, **k: None
    return True


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prefetch", choices=("on", "off"), default="on")
    p.add_argument("--prefetch-depth", type=int, default=1, help="blocks prefetched ahead (--prefetch on)")
    p.add_argument("--reshard-after-forward", dest="reshard", action="store_true", default=True)
    p.add_argument("--no-reshard-after-forward", dest="reshard", action="store_false")
    p.add_argument("--api", choices=("auto", "fsdp2", "fsdp1"), default="auto")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d-model", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--mlp-repeat", type=int, default=1,
                   help="run each MLP N times: more compute per all-gathered byte (ranks sharing one GPU talk "
                        "over sockets, slower than NVLink: raise it there)")
    p.add_argument("--bf16", action="store_true", default=True, help="bf16 parameters for compute (default)")
    p.add_argument("--fp32", dest="bf16", action="store_false")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--json", default="")
    args = p.parse_args(argv)

    import torch
    fully_shard, fsdp2_error = import_fsdp2()
    api = args.api if args.api != "auto" else ("fsdp2" if fully_shard else "fsdp1")
    if api == "fsdp2" and fully_shard is None:
        wc.skip(WORKLOAD, f"torch {torch.__version__} has no FSDP2 fully_shard (PyTorch 2.4+; {fsdp2_error})", args.json)
    if api == "fsdp1":
        try:
            from torch.distributed.fsdp import FullyShardedDataParallel  # noqa: F401
        except Exception as e:  # Debian's 1.13 on Python 3.11 fails to import it
            wc.skip(WORKLOAD, f"torch {torch.__version__}: FSDP1 cannot be imported "
                              f"({type(e).__name__}: {str(e).splitlines()[0][:80]})", args.json)
    rt = wc.Runtime(WORKLOAD, allow_cpu=False, default_port=29551, json_path=args.json)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(1234)
    model = wc.build_model(torch, args.layers, args.d_model, args.heads, args.mlp_repeat).to(rt.device)
    blocks = list(model)
    implicit_off = None
    if api == "fsdp2":
        kw = {"reshard_after_forward": args.reshard}
        if args.bf16:
            try:
                from torch.distributed.fsdp import MixedPrecisionPolicy
            except ImportError:
                from torch.distributed._composable.fsdp import MixedPrecisionPolicy
            kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for b in blocks:
            fully_shard(b, **kw)
        fully_shard(model, **kw)
        if args.prefetch == "on":
            d = args.prefetch_depth
            for i, b in enumerate(blocks):
                nxt = blocks[i + 1:i + 1 + d]
                prv = list(reversed(blocks[max(0, i - d):i]))
                if nxt:
                    b.set_modules_to_forward_prefetch(nxt)
                if prv:
                    b.set_modules_to_backward_prefetch(prv)
        else:
            implicit_off = all([disable_implicit_backward_prefetch(b) for b in blocks])
            if not implicit_off:
                print(f"{WORKLOAD}: cannot turn off FSDP2's implicit backward prefetch in torch {torch.__version__} "
                      "(private FSDPParamGroup._backward_prefetch missing): the bad configuration only drops the "
                      "explicit prefetch", flush=True)
        fsdp = model
    else:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, BackwardPrefetch, ShardingStrategy
        from torch.distributed.fsdp import MixedPrecision
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        fsdp = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({type(blocks[0])}), device_id=rt.device,
                    sharding_strategy=ShardingStrategy.FULL_SHARD if args.reshard else ShardingStrategy.SHARD_GRAD_OP,
                    forward_prefetch=args.prefetch == "on",
                    backward_prefetch=BackwardPrefetch.BACKWARD_PRE if args.prefetch == "on" else None,
                    mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
                    if args.bf16 else None)
    opt = torch.optim.AdamW(fsdp.parameters(), lr=1e-5)
    x = torch.randn(args.batch, args.seq, args.d_model, device=rt.device)

    timer = wc.StepTimer(rt, args.warmup)
    for _ in range(args.warmup + args.iters):
        with timer.step():
            opt.zero_grad(set_to_none=True)
            with rt.range("forward"):
                loss = fsdp(x).float().pow(2).mean()
            with rt.range("backward"):
                loss.backward()
            opt.step()

    params = sum(p.numel() for p in model.parameters())  # sharded: local numel; the full count below
    full = sum(12 * args.d_model ** 2 + 13 * args.d_model for _ in blocks)
    observed = {"api": api, "blocks": len(blocks), "params_full": full, "local_params": params,
                "implicit_backward_prefetch_disabled": implicit_off}
    if args.reshard:
        bwd = (f"backward: {len(blocks)} block all-gathers per iteration, "
               + ("prefetched: hidden behind the previous block's gradients (fsdp_allgathers[].prefetched true, "
                  "no prefetch finding)" if args.prefetch == "on" else
                  "serialized: each more than half exposed (prefetched false), the sharded finding "
                  "'parameter all-gathers in backward are exposed' fires"))
    else:
        bwd = "no backward all-gathers (reshard_after_forward=False): fsdp[] has no backward allgather row"
    expect = [bwd, "forward: one all-gather per block; reduce-scatter per block in backward"]
    wc.report(rt, WORKLOAD, dict(vars(args), api=api), timer, observed, expect, args.json)
    rt.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
