"""Shared plumbing of the PyTorch reference workloads in samples/ (ddp_buckets.py, fsdp_prefetch.py,
tp_overlap.py, pp_schedule.py). Not a workload itself.

- Process group: NCCL on a GPU; gloo on CPU (`--cpu`, or no CUDA device) where the workload allows it.
  World size 1 works without torchrun. Several ranks may share one GPU (tests/gpu/README.md): when the
  local ranks outnumber the GPUs, each rank sets NCCL_HOSTID=<host>-rank<R> (plus
  NCCL_MULTI_RANK_GPU_ENABLE=1 on NCCL 2.30+) before the process group starts, unless already set, and
  NCCL then uses its socket transport (NCCL_SOCKET_IFNAME=lo).
- Steps: an NVTX range `ProfilerStep#N` around each step (overlapprof's iteration source), and NVTX
  ranges `forward` / `backward` inside it (overlapprof's DDP bucket and FSDP phase attribution).
  No-ops on CPU.
- Results: the rank-0 `--json` document `overlapprof.sample.<name>/1` with the configuration, the
  timings, what the script observed itself and the signals it expects overlapprof to report.
- Skips: `skip(reason)` prints one line `SKIP <workload>: <reason>` and exits with code 3 (SKIP_EXIT):
  an API or the hardware is missing. Callers (tests, the checker) treat code 3 as skipped, not failed.
"""
import contextlib
import json
import os
import socket
import statistics
import sys
import time

SKIP_EXIT = 3


def skip(workload, reason, json_path=None):
    """One line, exit code 3; rank 0 also writes {"skipped": reason} to json_path (the checker reads it)."""
    print(f"SKIP {workload}: {reason}", flush=True)
    if json_path and os.environ.get("RANK", "0") == "0":
        with open(json_path, "w") as f:
            json.dump({"schema": f"overlapprof.sample.{workload}/1", "workload": workload, "skipped": reason}, f)
    sys.exit(SKIP_EXIT)


def dist_env(default_port=29531):
    """(rank, world, local_rank, local_world), with the rendezvous variables set for a plain launch."""
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("WORLD_SIZE", str(world))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(default_port))
    return rank, world, local_rank, local_world


class Runtime:
    """The process group, the device and the NVTX helpers of one rank."""

    def __init__(self, workload, cpu=False, allow_cpu=True, default_port=29531, json_path=None):
        import torch
        import torch.distributed as dist
        self.torch, self.dist, self.workload = torch, dist, workload
        self.rank, self.world, self.local_rank, self.local_world = dist_env(default_port)
        self.cuda = torch.cuda.is_available() and not cpu
        self.shared_gpu = False
        self.nccl_version = None
        if not self.cuda:
            if not allow_cpu:
                skip(workload, "needs a CUDA GPU (NCCL); " + (allow_cpu if isinstance(allow_cpu, str) else
                                                              "CPU/gloo cannot show this behaviour"), json_path)
            self.device = torch.device("cpu")
            self.backend = "gloo"
            if self.local_world == self.world:  # every rank on this machine: no host-name lookup by gloo
                os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        else:
            ndev = torch.cuda.device_count()
            dev = self.local_rank % ndev
            self.shared_gpu = self.local_world > ndev
            self.nccl_version = tuple(torch.cuda.nccl.version())
            if self.shared_gpu and not os.environ.get("NCCL_HOSTID") \
                    and not os.environ.get("NCCL_MULTI_RANK_GPU_ENABLE"):
                os.environ["NCCL_HOSTID"] = f"{socket.gethostname()}-rank{self.rank}"
                if self.nccl_version >= (2, 30, 0):
                    os.environ["NCCL_MULTI_RANK_GPU_ENABLE"] = "1"
            if self.shared_gpu:
                os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
            torch.cuda.set_device(dev)
            self.device = torch.device("cuda", dev)
            self.backend = "nccl"
        dist.init_process_group(backend=self.backend, rank=self.rank, world_size=self.world)

    # -- NVTX (overlapprof's injector records these; torch.cuda.nvtx is a no-op without CUDA) -------
    @contextlib.contextmanager
    def range(self, name):
        if self.cuda:
            self.torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            if self.cuda:
                self.torch.cuda.nvtx.range_pop()

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def info(self):
        t = self.torch
        return {"rank": self.rank, "world_size": self.world, "backend": self.backend,
                "device": str(self.device), "shared_gpu": self.shared_gpu,
                "device_name": t.cuda.get_device_name(self.device) if self.cuda else "cpu",
                "torch_version": t.__version__,
                "nccl_version": ".".join(map(str, self.nccl_version)) if self.nccl_version else None}

    def finish(self):
        if self.world > 1:
            self.dist.barrier()
        self.dist.destroy_process_group()


def build_model(torch, layers, d_model, heads, mlp_repeat=1):
    """A stack of pre-norm transformer blocks (nn.Sequential); mlp_repeat runs each MLP that many times
    (more compute per parameter byte, the same parameters and communication)."""
    nn = torch.nn

    class Block(nn.Module):
        """Pre-norm transformer block (attention + MLP); attention written out for old torch too."""

        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.fc1, self.fc2 = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-2, -1) / (d // heads) ** 0.5, dim=-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
            for _ in range(mlp_repeat):
                x = x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))
            return x

    return nn.Sequential(*[Block() for _ in range(layers)])


class StepTimer:
    """Host wall time per step, synchronized with the device at both ends."""

    def __init__(self, rt, warmup):
        self.rt, self.warmup, self.ms, self.i = rt, warmup, [], 0

    @contextlib.contextmanager
    def step(self):
        i = self.i
        self.i += 1
        with self.rt.range(f"ProfilerStep#{i}"):
            self.rt.sync()
            t0 = time.perf_counter()
            yield i
            self.rt.sync()
            t1 = time.perf_counter()
        if i >= self.warmup:
            self.ms.append((t1 - t0) * 1e3)

    def stats(self):
        if not self.ms:
            return {"step_ms": [], "step_ms_median": None}
        return {"step_ms": self.ms, "step_ms_median": statistics.median(self.ms),
                "step_ms_mean": statistics.fmean(self.ms)}


def report(rt, workload, config, timer, observed, expect, json_path):
    """Prints the timing, the observations and the expected signals; rank 0 writes --json."""
    st = timer.stats()
    med = st.get("step_ms_median")
    print(f"{workload} rank {rt.rank}/{rt.world}: step median "
          f"{'n/a' if med is None else f'{med:.3f}'} ms over {len(st['step_ms'])} steps", flush=True)
    if rt.rank == 0:
        for k, v in observed.items():
            if not isinstance(v, (list, dict)):
                print(f"  observed {k}: {v}", flush=True)
        for e in expect:
            print(f"  expect (overlapprof): {e}", flush=True)
    doc = {"schema": f"overlapprof.sample.{workload}/1", "workload": workload, "config": config,
           **rt.info(), **st, "observed": observed, "expect": expect}
    if json_path and rt.rank == 0:
        with open(json_path, "w") as f:
            json.dump(doc, f, indent=1)
    return doc
