#!/usr/bin/env python3
"""Tensor parallel, serialized vs. async: a reference workload for overlapprof (samples/README.md).

    torchrun --standalone --nproc_per_node=2 samples/tp_overlap.py --mode sync     # bad: exposed collectives
    torchrun --standalone --nproc_per_node=2 samples/tp_overlap.py --mode async    # good (>= 2 GPUs, SM90)

Megatron-style tensor parallel with DTensor (`torch.distributed.tensor.parallel`): q/k/v and fc1
ColwiseParallel, proj and fc2 RowwiseParallel, with sequence parallel (LayerNorms SequenceParallel,
activations sharded on the sequence between blocks): each block all-gathers its input before the
column-parallel matmuls and reduce-scatters after the row-parallel ones, and the matmuls wait for them.
  --mode sync:  eager (or --compile) DTensor: NCCL all-gather / reduce-scatter, serialized with the matmuls.
  --mode async: async tensor parallel: torch.compile with `torch._inductor.config._micro_pipeline_tp = True`
                and symmetric memory (`torch.distributed._symmetric_memory.enable_symm_mem_for_group`):
                Inductor fuses all-gather+matmul and matmul+reduce-scatter into pipelined ops that move
                data through symmetric memory while the matmul chunks run.
                Needs PyTorch 2.5+, CUDA SM90+ and one GPU per rank with P2P (NVLink); otherwise the script
                says why in one line (exit 3). The fused ops' transfers are not NCCL calls, so overlapprof
                sees fewer NCCL collectives in this mode: compare exposed NCCL time and step time.
--no-sequence-parallel: plain column/row parallel (an all-reduce per block instead).

Needs a GPU and >= 2 ranks to have any communication (1 rank: runs, no collectives, says so); the sync
mode runs with 2 ranks sharing one GPU (NCCL_HOSTID per rank). Rank 0 writes --json
(overlapprof.sample.tp_overlap/1) and prints the expected signals.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload_common as wc  # noqa: E402

WORKLOAD = "tp_overlap"


def build(torch, layers, d, heads):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.q, self.k, self.v = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
            self.proj = nn.Linear(d, d, bias=False)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

        def forward(self, x):
            h = self.ln1(x)
            b, s = h.shape[0], h.shape[1]
            hd = d // heads
            # -1: the local number of heads (column parallel shards the heads across ranks)
            q, k, v = (t.view(b, s, -1, hd).transpose(1, 2) for t in (self.q(h), self.k(h), self.v(h)))
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, -1))
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))

    return nn.Sequential(*[Block() for _ in range(layers)])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("sync", "async"), default="sync")
    p.add_argument("--sequence-parallel", dest="sp", action="store_true", default=True)
    p.add_argument("--no-sequence-parallel", dest="sp", action="store_false")
    p.add_argument("--compile", action="store_true", help="torch.compile the sync mode too (async always is)")
    p.add_argument("--force", action="store_true", help="try async even where the checks say it cannot work")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3, help="untimed first steps (compilation in async mode)")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)

    import torch
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                                       parallelize_module)
        from torch.distributed.tensor import Shard
    except ImportError as e:
        wc.skip(WORKLOAD, f"torch {torch.__version__} has no torch.distributed.tensor.parallel / DeviceMesh "
                          f"(PyTorch 2.4+): {e}", args.json)
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        wc.skip(WORKLOAD, f"torch {torch.__version__} has no scaled_dot_product_attention", args.json)
    rt = wc.Runtime(WORKLOAD, allow_cpu=False, default_port=29561, json_path=args.json)
    if args.mode == "async":
        reason = None
        cap = torch.cuda.get_device_capability(rt.device)
        if not args.sp:
            reason = "async tensor parallel needs sequence parallel (all-gather/reduce-scatter around the matmuls)"
        elif rt.world < 2:
            reason = "async tensor parallel needs >= 2 ranks"
        elif rt.shared_gpu and not args.force:
            reason = "async tensor parallel (symmetric memory) needs one GPU per rank with P2P; these ranks share a GPU"
        elif cap < (9, 0) and not args.force:
            reason = f"async tensor parallel needs SM90+ (this GPU is SM{cap[0]}{cap[1]})"
        else:
            try:
                import torch._inductor.config as inductor_config
                import torch.distributed._symmetric_memory  # noqa: F401
                if not hasattr(inductor_config, "_micro_pipeline_tp"):
                    reason = f"torch {torch.__version__} has no torch._inductor.config._micro_pipeline_tp"
            except ImportError as e:
                reason = f"torch {torch.__version__}: {e}"
        if reason:
            rt.finish()
            wc.skip(WORKLOAD, reason, args.json)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(1234)
    mesh = init_device_mesh("cuda", (rt.world,))
    model = build(torch, args.layers, args.d_model, args.heads).to(rt.device, torch.bfloat16)
    for blk in model:
        if args.sp:
            plan = {
                "ln1": SequenceParallel(), "ln2": SequenceParallel(),
                "q": ColwiseParallel(input_layouts=Shard(1)), "k": ColwiseParallel(input_layouts=Shard(1)),
                "v": ColwiseParallel(input_layouts=Shard(1)), "proj": RowwiseParallel(output_layouts=Shard(1)),
                "fc1": ColwiseParallel(input_layouts=Shard(1)), "fc2": RowwiseParallel(output_layouts=Shard(1)),
            }
        else:
            plan = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
                    "proj": RowwiseParallel(), "fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
        parallelize_module(blk, mesh, plan)
    compiled = args.mode == "async" or args.compile
    if args.mode == "async":
        import torch._inductor.config as inductor_config
        import torch.distributed._symmetric_memory as symm_mem
        inductor_config._micro_pipeline_tp = True
        if hasattr(symm_mem, "enable_symm_mem_for_group"):  # not needed (deprecated) on the newest PyTorch
            symm_mem.enable_symm_mem_for_group(mesh.get_group().group_name)
    fwd = torch.compile(model) if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)
    # Sequence parallel: each rank holds its slice of the sequence between blocks.
    s_local = args.seq // rt.world if args.sp else args.seq
    gen = torch.Generator(device="cpu").manual_seed(7)  # the same input on every rank (no sequence parallel)
    x = torch.randn(args.batch, args.seq, args.d_model, generator=gen)
    if args.sp:
        x = x[:, rt.rank * s_local:(rt.rank + 1) * s_local]
    x = x.to(rt.device, torch.bfloat16).contiguous()

    timer = wc.StepTimer(rt, args.warmup)
    for _ in range(args.warmup + args.iters):
        with timer.step():
            opt.zero_grad(set_to_none=True)
            with rt.range("forward"):
                loss = fwd(x).float().pow(2).mean()
            with rt.range("backward"):
                loss.backward()
            opt.step()

    per_block = "1 all-gather + 1 reduce-scatter per matmul pair" if args.sp else "1 all-reduce per matmul pair"
    observed = {"mode": args.mode, "sequence_parallel": args.sp, "compiled": compiled, "tp_size": rt.world}
    if rt.world == 1:
        expect = ["world size 1: no tensor-parallel communication (run with >= 2 ranks)"]
    elif args.mode == "sync":
        expect = [f"{per_block} (x2 per block, forward and backward): op_types allgather/reducescatter counts "
                  "> 0, mostly exposed (the matmuls wait): low overlap_ratio; on the NCCL stream they appear in "
                  "fsdp[] as exposed all-gathers, on the compute stream in tp[] with the sharded finding"]
    else:
        expect = ["the all-gather/reduce-scatter around the matmuls become fused symmetric-memory ops (not NCCL): "
                  "fewer NCCL collectives and less exposed NCCL time per iteration than --mode sync; "
                  "step time below the sync mode's"]
    wc.report(rt, WORKLOAD, vars(args), timer, observed, expect, args.json)
    rt.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
