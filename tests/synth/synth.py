#!/usr/bin/env python3
"""Synthetic multi-rank training traces (PyTorch-profiler / Kineto Chrome-trace JSON) with exact
ground truth.

Writes rank{r}.json (or rank{r}.json.gz with --gz) per rank into OUT and truth.json (integer ns)
beside them, or where --truth says. Every rank runs the same program (one op after the other,
all ranks in lock step), so the timelines are simulated causally:

  * the host thread launches each GPU op (cudaLaunchKernel / cudaMemcpyAsync) and spends time
    on it; a kernel starts at max(host launch + launch latency, its stream's previous end, the
    ends of what it waits on); work on one stream is FIFO;
  * a collective of a process group starts on rank r at its own s_r and ends on every rank at
    max_r(s_r) + transfer(bytes) + a per-rank jitter of 0-2 us;
  * the host waits for the GPU at the end of every iteration (as loss.item() would).

The truth is computed from the simulated integers (never read back from the files): interval
unions, windows, per-op exposure, cross-rank wait/transfer. See tests/synth/README.md for every
option and every key of truth.json. Python 3 standard library only.

  python3 tests/synth/synth.py --scenario ddp --ranks 4 --iterations 4 OUT
  python3 tests/synth/synth.py --scenario fsdp --prefetch off --straggler 1 --straggler-delay-us 3000 OUT
  python3 tests/synth/synth.py --scenario tp --tp-overlap on --hosts 2 --clock-offset-us 1500 OUT
  python3 tests/synth/synth.py --scale-events 10000000 --ranks 64 OUT
"""
import argparse
import gzip
import json
import os
import random
import sys
import time
from array import array
from bisect import bisect_right

SCHEMA = "overlapprof.synth.truth/1"

# Op kinds of a program.
K_KERNEL, K_COLL, K_MEM, K_HOST, K_ANNO_B, K_ANNO_E = range(6)

COMPUTE_STREAM = 7
NCCL_STREAM = 20       # the process group's NCCL stream (DDP, FSDP)
TP_COMM_STREAM = 28    # tensor parallel with --tp-overlap on
LAUNCH_LAT_NS = 4000   # cudaLaunchKernel start -> earliest GPU start
NCCL_PRE_NS = 8000     # nccl:* record_function + c10d work before the kernel launch
NCCL_POST_NS = 6000    # after it
STRAGGLER_SKEW_NS = 20000
TRUE_T0_NS = 1_712_000_000_000_000_000  # true clock at the start of the run (2024-04)
BASE_MARGIN_NS = 10_000_000_000         # ts of the first event is about 10 s after baseTimeNanoseconds

KERNEL_NAMES = {
    # name, grid, block, registers per thread
    "gemm_fwd": ("ampere_sgemm_128x64_tn", "[512, 2, 1]", "[128, 1, 1]", 122),
    "gelu_fwd": ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
                 "at::native::GeluType)::{lambda()#1}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >"
                 "(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#1}::"
                 "operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)", "[4096, 1, 1]", "[128, 1, 1]", 26),
    "gelu_bwd": ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, "
                 "at::native::GeluType)::{lambda()#1}::operator()() const::{lambda(float, float)#1}, at::detail::Array<char*, 3> >"
                 "(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#1}::"
                 "operator()() const::{lambda(float, float)#1}, at::detail::Array<char*, 3>)", "[4096, 1, 1]", "[128, 1, 1]", 28),
    "gemm_dgrad": ("ampere_sgemm_128x64_nn", "[512, 2, 1]", "[128, 1, 1]", 122),
    "gemm_wgrad": ("ampere_sgemm_128x128_nt", "[256, 4, 1]", "[256, 1, 1]", 126),
    "adam": ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
             "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, "
             "(at::native::ADAM_MODE)1, false>, bool, float, float, float, float, float, double*, float*, float*>"
             "(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::"
             "FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, bool, float, float, float, float, float, "
             "double*, float*, float*)", "[320, 1, 1]", "[512, 1, 1]", 64),
    "bf16_gemm": ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_"
                  "kernel__5x_cublas", "[132, 1, 1]", "[384, 1, 1]", 168),
    "bf16_gemm_nt": ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_"
                     "kernel__5x_cublas", "[132, 1, 1]", "[256, 1, 1]", 168),
    "layer_norm": ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
                   "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
                   "[8192, 1, 1]", "[256, 1, 1]", 40),
    "nccl_allreduce_f32": ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                           "[16, 1, 1]", "[512, 1, 1]", 96),
    "nccl_allgather": ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                       "[16, 1, 1]", "[512, 1, 1]", 96),
    "nccl_reducescatter_bf16": ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                                "[16, 1, 1]", "[512, 1, 1]", 96),
}

# --tp-comm symm_mem: the kernels and the host ops that launch them. The all-gather kernel is
# also known by name (kernel-name family symm_mem); the reduce-scatter kernel is not, only its
# host op makes it communication.
KERNEL_NAMES["symm_all_gather"] = ("void c10d::symmetric_memory::multimem_all_gather_kernel<16>(char*, char*, "
                                   "unsigned long, unsigned int**, unsigned long, unsigned long)",
                                   "[8, 1, 1]", "[1024, 1, 1]", 26)
KERNEL_NAMES["symm_reduce_scatter"] = ("void (anonymous namespace)::rs_lamport_kernel<c10::BFloat16, 8>(c10::BFloat16*, "
                                       "unsigned long, unsigned int**, unsigned long)",
                                       "[8, 1, 1]", "[1024, 1, 1]", 26)
SYMM_MEM_KERNELS = {"allgather": "symm_all_gather", "reducescatter": "symm_reduce_scatter"}
SYMM_MEM_HOST_OPS = {"allgather": "symm_mem::multimem_all_gather_out", "reducescatter": "symm_mem::reduce_scatter_out"}

DTYPE_SIZE = {"Float": 4, "BFloat16": 2}


def ts(ns):
    """Integer ns as Chrome-trace microseconds, exactly (3 decimals)."""
    if ns < 0:
        return "-" + ts(-ns)
    return f"{ns // 1000}.{ns % 1000:03d}"


def jstr(s):
    return json.dumps(s)


# ----------------------------------------------------------------------------------------------
# Process groups


class ProcessGroup:
    __slots__ = ("name", "desc", "ranks", "members", "seq", "stream", "ranks_str")

    def __init__(self, name, desc, ranks, stream):
        self.name, self.desc, self.ranks, self.stream = name, desc, list(ranks), stream
        self.members = []
        self.seq = 0
        self.ranks_str = "[" + ", ".join(str(r) for r in self.ranks) + "]"


# ----------------------------------------------------------------------------------------------
# One rank: host clock, stream tails, output buffer, and what the truth needs.


class Rank:
    def __init__(self, r, cfg, host_index, device, offset_ns, base_ns, out_path):
        self.r = r
        self.cfg = cfg
        self.host_index = host_index
        self.hostname = f"synth-host{host_index}"
        self.dev = device
        self.pid = 10000 + r
        self.tid_main = self.pid
        self.tid_bwd = self.pid + 1  # the autograd thread
        self.offset = offset_ns
        self.shift = offset_ns - base_ns  # true ns -> file ts (ns)
        self.rng = random.Random(cfg.seed * 1_000_003 + r * 7919 + 17)
        self.speed = 1.0
        self.noise = cfg.noise
        self.h = TRUE_T0_NS + self.rng.randrange(0, 50_000)
        self.sfree = {}
        self.keys = {}
        self.corr = 0
        self.pg = {}  # kind -> ProcessGroup
        # Output.
        self.path = out_path
        if cfg.gz:
            self.f = gzip.open(out_path, "wt", compresslevel=1, encoding="utf-8")
        else:
            self.f = open(out_path, "w", encoding="utf-8", buffering=1 << 20)
        self.buf = []
        self.first_chunk = True
        self.kpre = {}
        self.rt_pre = {}
        # Truth.
        self.comp_s, self.comp_e = array("q"), array("q")
        self.mem_s, self.mem_e = array("q"), array("q")
        self.comm = []  # (start, end, family, size, iteration, tag, launch, pg, seq, phase, stream)
        self.n_kernels = self.n_comm_kernels = self.n_memcpy = self.n_memset = 0
        self.n_p2p = 0  # --tp-comm p2p_copy: collectives run as peer-to-peer memcpys
        self.iter_first = []
        self.it_first = None
        self.last_end = None
        self.it = 0
        self.phase = "fwd"
        self.anno_open = {}
        self.annos = []      # (iteration, name, host start, host end)
        self.steps = []      # (iteration, step, host start, host end)
        self.bwd_last_end = {}  # iteration -> end of the last compute kernel launched in backward

    # -- output --------------------------------------------------------------------------------
    def emit(self, s):
        b = self.buf
        b.append(s)
        if len(b) >= 4096:
            self.flush()

    def flush(self):
        if not self.buf:
            return
        self.f.write(("" if self.first_chunk else ",\n") + ",\n".join(self.buf))
        self.first_chunk = False
        self.buf = []

    def write_header(self, world, pgs_all, ranks_per_host):
        cfg = self.cfg
        devs = []
        for d in range(ranks_per_host):
            devs.append({"id": d, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912, "computeMajor": 9,
                         "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
                         "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132,
                         "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448,
                         "sharedMemPerMultiprocessor": 233472})
        pg_config = [{"pg_name": pg.name, "pg_desc": pg.desc, "backend_config": "cuda:nccl", "pg_size": len(pg.ranks),
                      "ranks": pg.ranks} for pg in pgs_all]
        dist = {"backend": "nccl", "rank": self.r, "world_size": world, "pg_count": len(pgs_all),
                "pg_config": pg_config, "nccl_version": "2.21.5"}
        head = ('{\n  "schemaVersion": 1,\n  "deviceProperties": ' + json.dumps(devs) +
                ',\n  "distributedInfo": ' + json.dumps(dist) +
                ',\n  "hostname": ' + jstr(self.hostname) +
                ',\n  "record_shapes": 0,\n  "traceEvents": [\n')
        self.f.write(head)
        t0 = ts(self.h + self.shift)
        meta = [
            f'{{"name": "process_name", "ph": "M", "ts": {t0}, "pid": {self.pid}, "tid": 0, "args": {{"name": "python3"}}}}',
            f'{{"name": "process_labels", "ph": "M", "ts": {t0}, "pid": {self.pid}, "tid": 0, "args": {{"labels": "CPU"}}}}',
            f'{{"name": "process_name", "ph": "M", "ts": {t0}, "pid": {self.dev}, "tid": 0, "args": {{"name": "python3"}}}}',
            f'{{"name": "process_labels", "ph": "M", "ts": {t0}, "pid": {self.dev}, "tid": 0, "args": {{"labels": "GPU {self.dev}"}}}}',
            f'{{"name": "thread_name", "ph": "M", "ts": {t0}, "pid": {self.pid}, "tid": {self.tid_main}, "args": {{"name": "thread {self.tid_main} (python3)"}}}}',
            f'{{"name": "thread_name", "ph": "M", "ts": {t0}, "pid": {self.pid}, "tid": {self.tid_bwd}, "args": {{"name": "thread {self.tid_bwd} (pt_autograd_0)"}}}}',
        ]
        for s in cfg.streams:
            meta.append(f'{{"name": "thread_name", "ph": "M", "ts": {t0}, "pid": {self.dev}, "tid": {s}, '
                        f'"args": {{"name": "stream {s} "}}}}')
        for m in meta:
            self.emit(m)

    def close(self, base_ns):
        self.flush()
        self.f.write(f'\n  ],\n  "traceName": "{os.path.basename(self.path)}",\n  "displayTimeUnit": "ms",\n'
                     f'  "baseTimeNanoseconds": {base_ns}\n}}\n')
        self.f.close()

    def kernel_prefix(self, kid, stream):
        key = (kid, stream)
        p = self.kpre.get(key)
        if p is None:
            name, grid, block, regs = KERNEL_NAMES[kid]
            p = (f'{{"ph":"X","cat":"kernel","name":{jstr(name)},"pid":{self.dev},"tid":{stream},"ts":',
                 f',"args":{{"queued":0,"device":{self.dev},"context":1,"stream":{stream},"registers per thread":{regs},'
                 f'"shared memory":0,"grid":{grid},"block":{block},"correlation":')
            self.kpre[key] = p
        return p

    def runtime(self, name, cbid, start, dur, corr):
        tid = self.tid_bwd if self.phase == "bwd" else self.tid_main
        key = (name, tid)
        p = self.rt_pre.get(key)
        if p is None:
            p = f'{{"ph":"X","cat":"cuda_runtime","name":"{name}","pid":{self.pid},"tid":{tid},"ts":'
            self.rt_pre[key] = p
        v = start + self.shift
        self.emit(f'{p}{v // 1000}.{v % 1000:03d},"dur":{dur // 1000}.{dur % 1000:03d},'
                  f'"args":{{"External id":{corr},"cbid":{cbid},"correlation":{corr}}}}}')

    # -- simulation ------------------------------------------------------------------------------
    def api_ns(self):
        return 2500 + int(self.rng.random() * 3000)

    def note_activity(self, st, en):
        if self.it_first is None or st < self.it_first:
            self.it_first = st
        if self.last_end is None or en > self.last_end:
            self.last_end = en

    def kernel(self, op):
        # (K_KERNEL, stream, kid, base_ns, dep_streams, dep_keys, store_key, phase, host_ratio_applies)
        _, stream, kid, base, dep_streams, dep_keys, store, phase, _tag = op
        rng = self.rng
        self.phase = phase
        h = self.h
        api = 2500 + int(rng.random() * 3000)
        self.corr += 1
        c = self.corr
        st = h + LAUNCH_LAT_NS
        sf = self.sfree
        x = sf.get(stream, 0)
        if x > st:
            st = x
        for ds in dep_streams:
            x = sf.get(ds, 0)
            if x > st:
                st = x
        for dk in dep_keys:
            x = self.keys[dk]
            if x > st:
                st = x
        scaled = base * self.speed
        d = int(scaled * (1.0 + self.noise * (2.0 * rng.random() - 1.0)))
        if d < 1000:
            d = 1000
        en = st + d
        sf[stream] = en
        if store is not None:
            self.keys[store] = en
        hc = int(scaled * self.cfg.host_ratio)
        if hc < api + 1500:
            hc = api + 1500
        self.h = h + hc
        self.comp_s.append(st)
        self.comp_e.append(en)
        self.n_kernels += 1
        if self.it_first is None or st < self.it_first:
            self.it_first = st
        if self.last_end is None or en > self.last_end:
            self.last_end = en
        if phase == "bwd":
            if en > self.bwd_last_end.get(self.it, 0):
                self.bwd_last_end[self.it] = en
        for a in self.anno_open.values():
            if stream == COMPUTE_STREAM:
                if a[1] is None or st < a[1]:
                    a[1] = st
                if a[2] is None or en > a[2]:
                    a[2] = en
        self.runtime("cudaLaunchKernel", 211, h, api, c)
        pre, mid = self.kernel_prefix(kid, stream)
        v = st + self.shift
        self.emit(f'{pre}{v // 1000}.{v % 1000:03d},"dur":{d // 1000}.{d % 1000:03d}{mid}{c},"External id":{c}}}}}')

    def memop(self, op):
        # (K_MEM, kind, stream, nbytes, base_ns, phase)
        _, kind, stream, nbytes, base, phase = op
        self.phase = phase
        h = self.h
        api = self.api_ns()
        self.corr += 1
        c = self.corr
        st = max(h + LAUNCH_LAT_NS, self.sfree.get(stream, 0))
        d = max(1000, int(base * (1.0 + self.noise * (2.0 * self.rng.random() - 1.0))))
        en = st + d
        self.sfree[stream] = en
        self.h = h + api + 2000
        self.mem_s.append(st)
        self.mem_e.append(en)
        self.note_activity(st, en)
        v = st + self.shift
        bw = round(nbytes / d, 3)
        if kind == "memcpy":
            self.n_memcpy += 1
            self.runtime("cudaMemcpyAsync", 41, h, api, c)
            self.emit(f'{{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pinned -> Device)","pid":{self.dev},'
                      f'"tid":{stream},"ts":{ts(v)},"dur":{ts(d)},"args":{{"External id":{c},"device":{self.dev},'
                      f'"context":1,"stream":{stream},"correlation":{c},"bytes":{nbytes},"memory bandwidth (GB/s)":{bw}}}}}')
        else:
            self.n_memset += 1
            self.runtime("cudaMemsetAsync", 51, h, api, c)
            self.emit(f'{{"ph":"X","cat":"gpu_memset","name":"Memset (Device)","pid":{self.dev},"tid":{stream},'
                      f'"ts":{ts(v)},"dur":{ts(d)},"args":{{"External id":{c},"device":{self.dev},"context":1,'
                      f'"stream":{stream},"correlation":{c},"bytes":{nbytes},"memory bandwidth (GB/s)":{bw}}}}}')

    def host(self, op):
        _, base, _label = op
        self.h += int(base * (1.0 + 0.2 * (2.0 * self.rng.random() - 1.0)))

    def anno_begin(self, op):
        _, name = op
        self.anno_open[name] = [self.h, None, None]
        self.h += 2000

    def anno_end(self, op):
        _, name = op
        a = self.anno_open.pop(name)
        self.h += 2000
        self.annos.append((self.it, name, a[0], self.h))
        if self.cfg.phase_annotations:
            self.emit(f'{{"ph":"X","cat":"user_annotation","name":{jstr(name)},"pid":{self.pid},"tid":{self.tid_main},'
                      f'"ts":{ts(a[0] + self.shift)},"dur":{ts(self.h - a[0])},"args":{{"External id":{self.corr}}}}}')
            if a[1] is not None:
                self.emit(f'{{"ph":"X","cat":"gpu_user_annotation","name":{jstr(name)},"pid":{self.dev},'
                          f'"tid":{COMPUTE_STREAM},"ts":{ts(a[1] + self.shift)},"dur":{ts(a[2] - a[1])},'
                          f'"args":{{"External id":{self.corr}}}}}')

    def coll_launch(self, op, pg):
        """Host side of a collective; returns (host launch, own GPU start)."""
        (_, _kind, kid, fam, cname, in_n, out_n, dtype, size, tbase, dep_streams, dep_keys, store, phase, tag) = op
        self.phase = phase
        h = self.h
        launch = h + NCCL_PRE_NS
        api = self.api_ns()
        self.corr += 1
        st = launch + LAUNCH_LAT_NS
        sf = self.sfree
        x = sf.get(pg.stream, 0)
        if x > st:
            st = x
        for ds in dep_streams:
            x = sf.get(ds, 0)
            if x > st:
                st = x
        for dk in dep_keys:
            x = self.keys[dk]
            if x > st:
                st = x
        self.h = launch + api + NCCL_POST_NS
        mode = self.cfg.tp_comm
        self.runtime("cudaMemcpyPeerAsync" if mode == "p2p_copy" else "cudaLaunchKernel", 211, launch, api, self.corr)
        tid = self.tid_bwd if phase == "bwd" else self.tid_main
        if mode == "nccl":
            self.emit(f'{{"ph":"X","cat":"user_annotation","name":"nccl:{cname}","pid":{self.pid},'
                      f'"tid":{tid},"ts":{ts(h + self.shift)},'
                      f'"dur":{ts(self.h - h)},"args":{{"External id":{self.corr}}}}}')
        elif mode == "symm_mem":
            # The host op that launched the kernel, linked to it by External id (rule 2).
            op_name = SYMM_MEM_HOST_OPS[fam]
            self.emit(f'{{"ph":"X","cat":"cpu_op","name":"{op_name}","pid":{self.pid},"tid":{tid},'
                      f'"ts":{ts(h + self.shift)},"dur":{ts(self.h - h)},'
                      f'"args":{{"External id":{self.corr},"Record function id":0,"Ev Idx":{self.corr}}}}}')
        return launch, st, self.corr

    def coll_finish(self, op, pg, seq, launch, st, en, corr):
        (_, _kind, kid, fam, cname, in_n, out_n, dtype, size, tbase, dep_streams, dep_keys, store, phase, tag) = op
        self.sfree[pg.stream] = en
        if store is not None:
            self.keys[store] = en
        mode = self.cfg.tp_comm
        if mode == "p2p_copy":
            self.n_memcpy += 1
            self.n_p2p += 1
        else:
            self.n_kernels += 1
            self.n_comm_kernels += 1
        self.note_activity(st, en)
        for a in self.anno_open.values():
            if pg.stream == COMPUTE_STREAM:
                if a[1] is None or st < a[1]:
                    a[1] = st
                if a[2] is None or en > a[2]:
                    a[2] = en
        self.comm.append((st, en, fam, size, self.it, tag, launch, pg.name, seq, phase, pg.stream))
        v = st + self.shift
        d = en - st
        if mode == "p2p_copy":
            self.emit(f'{{"ph":"X","cat":"gpu_memcpy","name":"Memcpy PtoP (Device -> Device)","pid":{self.dev},'
                      f'"tid":{pg.stream},"ts":{ts(v)},"dur":{ts(d)},"args":{{"External id":{corr},"device":{self.dev},'
                      f'"context":1,"stream":{pg.stream},"correlation":{corr},"bytes":{size}}}}}')
            return
        if mode == "symm_mem":
            pre, mid = self.kernel_prefix(SYMM_MEM_KERNELS[fam], pg.stream)
            self.emit(f'{pre}{v // 1000}.{v % 1000:03d},"dur":{d // 1000}.{d % 1000:03d}{mid}{corr},'
                      f'"External id":{corr}}}}}')
            return
        pre, mid = self.kernel_prefix(kid, pg.stream)
        seq_arg = f',"Seq":{seq}' if self.cfg.seq else ""
        self.emit(f'{pre}{v // 1000}.{v % 1000:03d},"dur":{d // 1000}.{d % 1000:03d}{mid}{corr},"External id":{corr},'
                  f'"Collective name":"{cname}","In msg nelems":{in_n},"Out msg nelems":{out_n},'
                  f'"Group size":{len(pg.ranks)},"dtype":"{dtype}","In split size":"[]","Out split size":"[]",'
                  f'"Process Group Name":"{pg.name}","Process Group Description":"{pg.desc}",'
                  f'"Process Group Ranks":"{pg.ranks_str}"{seq_arg}}}}}')

    def begin_iter(self, it):
        self.it = it
        self.it_first = None
        self.step_start = self.h
        self.phase = "fwd"

    def end_iter(self, it, step):
        # The host waits for the GPU (loss.item()), then the step ends and data loading runs.
        self.phase = "sync"
        hb = self.h
        gpu_done = max(self.sfree.values()) if self.sfree else hb
        self.h = max(hb, gpu_done) + 3000 + int(self.rng.random() * 2000)
        self.corr += 1
        self.runtime("cudaDeviceSynchronize", 165, hb, self.h - hb, self.corr)
        self.h += 2000
        self.iter_first.append(self.it_first)
        self.steps.append((it, step, self.step_start, self.h))
        if self.cfg.steps:
            self.emit(f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{step}","pid":{self.pid},'
                      f'"tid":{self.tid_main},"ts":{ts(self.step_start + self.shift)},"dur":{ts(self.h - self.step_start)},'
                      f'"args":{{"External id":{self.corr}}}}}')
        self.h += self.cfg.gap_ns + int(self.rng.random() * 50_000)


# ----------------------------------------------------------------------------------------------
# Programs: one list of ops per iteration kind (warm-up / steady), the same on every rank.


def layer_sizes(total_bytes, layers, quantum, rng):
    w = [0.5 + rng.random() for _ in range(layers)]
    sw = sum(w)
    sizes = []
    for x in w:
        s = int(total_bytes * x / sw) // quantum * quantum
        sizes.append(max(quantum, s))
    return sizes


def transfer_ns(cfg, fam, size, n):
    if fam == "allreduce":
        factor = 2.0 * (n - 1) / n
    else:
        factor = (n - 1) / n
    # bandwidth in GB/s = bytes/ns
    return int(cfg.latency_us * 1000) + int(size * factor / cfg.bandwidth_gbps)


def coll_op(cfg, pg_kind, n, fam, size, dtype, dep_streams=(), dep_keys=(), store=None, phase="bwd", tag=None):
    dsz = DTYPE_SIZE[dtype]
    if fam == "allreduce":
        kid, cname = "nccl_allreduce_f32", "allreduce"
        in_n = out_n = size // dsz
    elif fam == "allgather":
        kid = "nccl_allgather"
        cname = "_allgather_base" if cfg.scenario == "fsdp" else "all_gather_into_tensor"
        in_n, out_n = size // dsz // n, size // dsz
    elif fam == "reducescatter":
        kid = "nccl_reducescatter_bf16"
        cname = "_reduce_scatter_base" if cfg.scenario == "fsdp" else "reduce_scatter_tensor"
        in_n, out_n = size // dsz, size // dsz // n
    else:
        raise ValueError(fam)
    return (K_COLL, pg_kind, kid, fam, cname, in_n, out_n, dtype, size, transfer_ns(cfg, fam, size, n),
            tuple(dep_streams), tuple(dep_keys), store, phase, tag)


def kern(kid, base, phase, stream=COMPUTE_STREAM, dep_streams=(), dep_keys=(), store=None, tag=None):
    return (K_KERNEL, stream, kid, int(base), tuple(dep_streams), tuple(dep_keys), store, phase, tag)


def common_prologue(cfg, cm):
    batch = 8 << 20
    return [(K_HOST, 40_000, "zero_grad"),
            (K_MEM, "memset", COMPUTE_STREAM, 1 << 20, 8_000, "fwd"),
            (K_MEM, "memcpy", COMPUTE_STREAM, batch, batch // 25, "fwd")]  # 25 GB/s HtoD


def ddp_program(cfg, warm, no_sync=False):
    cm = 3 if warm else 1
    n = cfg.ranks
    sizes = cfg.layer_bytes
    mean = sum(sizes) / len(sizes)
    L = len(sizes)
    ops = common_prologue(cfg, cm)
    ops.append((K_ANNO_B, "## forward ##"))
    for l in range(L):
        f = cfg.layer_us * 1000 * sizes[l] / mean * cm
        ops.append(kern("gemm_fwd", 0.8 * f, "fwd"))
        ops.append(kern("gelu_fwd", 0.2 * f, "fwd"))
    ops.append((K_ANNO_E, "## forward ##"))
    ops.append((K_ANNO_B, "## backward ##"))
    # Buckets in reverse parameter order; a bucket is ready after its lowest layer's wgrad.
    bucket_lo = {}  # lowest layer -> (index, bytes, layers)
    if warm:
        bucket_lo[0] = (0, sum(sizes), list(range(L - 1, -1, -1)))
    else:
        acc, members, idx = 0, [], 0
        for l in range(L - 1, -1, -1):
            acc += sizes[l]
            members.append(l)
            if acc >= cfg.bucket_bytes or l == 0:
                bucket_lo[l] = (idx, acc, members)
                idx += 1
                acc, members = 0, []
    for l in range(L - 1, -1, -1):
        f = cfg.layer_us * 1000 * sizes[l] / mean * cm
        ops.append(kern("gelu_bwd", 0.2 * f, "bwd"))
        ops.append(kern("gemm_dgrad", 0.9 * f, "bwd"))
        ops.append(kern("gemm_wgrad", 0.9 * f, "bwd"))
        if l in bucket_lo:
            idx, nbytes, members = bucket_lo[l]
            if no_sync:  # gradient accumulation: no hook, no all-reduce in this micro-step
                continue
            ops.append((K_HOST, cfg.hook_delay_us * 1000, "ddp hook"))
            # The reducer's NCCL stream waits for the gradients (all compute launched so far).
            # --grad-compress: a comm hook all-reduces the bucket as 16-bit floats (half the bytes).
            ar_bytes, ar_dtype = (nbytes // 2, "BFloat16") if cfg.grad_compress != "none" else (nbytes, "Float")
            ops.append(coll_op(cfg, "dp", n, "allreduce", ar_bytes, ar_dtype, dep_streams=(COMPUTE_STREAM,),
                               phase="bwd", tag=("bucket", idx, tuple(members))))
    ops.append((K_ANNO_E, "## backward ##"))
    optimizer_step(ops, cfg.layer_us * 1000 * L * 0.02 * cm, 3, NCCL_STREAM)
    return ops


def optimizer_step(ops, kernel_ns, kernels, wait_stream):
    """The "## optimizer ##" range: `kernels` adam kernels, the first waiting for every collective
    on `wait_stream` (the tail stall)."""
    ops.append((K_ANNO_B, "## optimizer ##"))
    for k in range(kernels):
        ops.append(kern("adam", kernel_ns, "opt", dep_streams=(wait_stream,) if k == 0 else ()))
    ops.append((K_ANNO_E, "## optimizer ##"))


def fsdp_program(cfg, warm):
    cm = 3 if warm else 1
    n = cfg.ranks
    sizes = cfg.layer_bytes
    mean = sum(sizes) / len(sizes)
    L = len(sizes)
    pre = cfg.prefetch
    ops = common_prologue(cfg, cm)

    def ag(l, phase, prefetched):
        # The all-gather waits for the compute launched before it (FSDP's unshard stream waits for
        # the current stream): issued before layer l-1's compute (prefetch) it overlaps that compute;
        # issued when layer l is needed it runs after it, and layer l's compute waits for it.
        return coll_op(cfg, "dp", n, "allgather", sizes[l], "BFloat16", dep_streams=(COMPUTE_STREAM,),
                       store=f"ag{l}", phase=phase, tag=("ag", l, phase, prefetched))

    ops.append((K_ANNO_B, "## forward ##"))
    if pre:
        ops.append(ag(0, "fwd", False))
    for l in range(L):
        f = cfg.layer_us * 1000 * sizes[l] / mean * cm
        if pre:
            if l + 1 < L:
                ops.append(ag(l + 1, "fwd", True))
        else:
            ops.append(ag(l, "fwd", False))
        ops.append(kern("bf16_gemm", 0.8 * f, "fwd", dep_keys=(f"ag{l}",)))
        ops.append(kern("gelu_fwd", 0.2 * f, "fwd"))
    ops.append((K_ANNO_E, "## forward ##"))
    ops.append((K_ANNO_B, "## backward ##"))
    if pre:
        ops.append(ag(L - 1, "bwd", False))
    for l in range(L - 1, -1, -1):
        f = cfg.layer_us * 1000 * sizes[l] / mean * cm
        if pre:
            if l - 1 >= 0:
                ops.append(ag(l - 1, "bwd", True))
        else:
            ops.append(ag(l, "bwd", False))
        ops.append(kern("gelu_bwd", 0.2 * f, "bwd", dep_keys=(f"ag{l}",)))
        ops.append(kern("bf16_gemm_nt", 0.9 * f, "bwd"))
        ops.append(kern("bf16_gemm", 0.9 * f, "bwd"))
        ops.append(coll_op(cfg, "dp", n, "reducescatter", sizes[l], "BFloat16", dep_streams=(COMPUTE_STREAM,),
                           phase="bwd", tag=("rs", l, "bwd", False)))
    ops.append((K_ANNO_E, "## backward ##"))
    optimizer_step(ops, cfg.layer_us * 1000 * L * 0.01 * cm, 2, NCCL_STREAM)
    return ops


def tp_program(cfg, warm):
    cm = 3 if warm else 1
    n = cfg.tp_size
    L = cfg.layers
    size = cfg.tp_bytes
    u = cfg.layer_us * 1000 * cm
    on = cfg.tp_overlap
    cs = TP_COMM_STREAM if on else COMPUTE_STREAM
    ops = common_prologue(cfg, cm)

    def region(l, phase, mul):
        # all-gather -> [independent chunk || all-gather] -> dependent matmul -> first output chunk
        # -> [reduce-scatter || second output chunk] -> layer norm (needs the reduce-scatter)
        # (Backward mirrors it: the gradient of a reduce-scatter is an all-gather and vice versa.)
        first, second = "allgather", "reducescatter"
        out = []
        out.append(coll_op(cfg, "tp", n, first, size, "BFloat16", dep_streams=(COMPUTE_STREAM,) if on else (),
                           store=f"c1_{l}", phase=phase, tag=(first, l, phase, on)))
        out.append(kern("bf16_gemm", 0.25 * u * mul, phase))                       # independent chunk
        out.append(kern("bf16_gemm", 0.45 * u * mul, phase, dep_keys=(f"c1_{l}",)))  # needs the gathered input
        out.append(kern("bf16_gemm_nt", 0.15 * u * mul, phase))                    # output chunk 1
        out.append(coll_op(cfg, "tp", n, second, size, "BFloat16", dep_streams=(COMPUTE_STREAM,) if on else (),
                           store=f"c2_{l}", phase=phase, tag=(second, l, phase, on)))
        out.append(kern("bf16_gemm_nt", 0.15 * u * mul, phase))                    # output chunk 2 (independent)
        out.append(kern("layer_norm", 0.05 * u * mul, phase, dep_keys=(f"c2_{l}",)))
        return out

    ops.append((K_ANNO_B, "## forward ##"))
    for l in range(L):
        ops.extend(region(l, "fwd", 1.0))
    ops.append((K_ANNO_E, "## forward ##"))
    ops.append((K_ANNO_B, "## backward ##"))
    for l in range(L - 1, -1, -1):
        ops.extend(region(l, "bwd", 2.0))
    ops.append((K_ANNO_E, "## backward ##"))
    optimizer_step(ops, u * L * 0.01, 2, cs)
    return ops


PROGRAMS = {"ddp": ddp_program, "fsdp": fsdp_program, "tp": tp_program}


def gpu_ops(prog):
    return sum(1 for op in prog if op[0] in (K_KERNEL, K_COLL, K_MEM))


def compute_base(prog):
    return sum(op[3] for op in prog if op[0] == K_KERNEL)


# ----------------------------------------------------------------------------------------------
# Interval arithmetic for the truth (half-open [s, e), integer ns).


def union(pairs):
    """Merged, sorted intervals of (start, end) pairs; empty ones count for nothing."""
    pairs = sorted(p for p in pairs if p[1] > p[0])
    ms, me = [], []
    for s, e in pairs:
        if ms and s <= me[-1]:  # touching intervals merge; the length is the same either way
            if e > me[-1]:
                me[-1] = e
        else:
            ms.append(s)
            me.append(e)
    return ms, me


def intersect(a, b):
    (as_, ae), (bs, be) = a, b
    i = j = 0
    os_, oe = [], []
    while i < len(as_) and j < len(bs):
        lo = max(as_[i], bs[j])
        hi = min(ae[i], be[j])
        if lo < hi:
            os_.append(lo)
            oe.append(hi)
        if ae[i] < be[j]:
            i += 1
        else:
            j += 1
    return os_, oe


class Cover:
    """Length of a union inside [lo, hi) in O(log n)."""

    def __init__(self, u):
        self.s, self.e = u
        self.pre = [0]
        for s, e in zip(self.s, self.e):
            self.pre.append(self.pre[-1] + e - s)

    def total(self):
        return self.pre[-1]

    def upto(self, x):
        k = bisect_right(self.s, x) - 1
        if k < 0:
            return 0
        return self.pre[k] + min(x, self.e[k]) - self.s[k]

    def within(self, lo, hi):
        if hi <= lo:
            return 0
        return self.upto(hi) - self.upto(lo)


# ----------------------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="output directory (created)")
    p.add_argument("--scenario", choices=["ddp", "fsdp", "tp", "moe", "pp"], default="ddp",
                   help="moe and pp: synth_comm.py, with its own options")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--iterations", type=int, default=4, help="iterations, the warm-up one included")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--noise", type=float, default=0.05, help="relative jitter of kernel durations (0.05 = +-5%%)")
    p.add_argument("--straggler", type=int, default=None, metavar="RANK")
    p.add_argument("--straggler-delay-us", type=float, default=2000.0,
                   help="extra compute per steady iteration on the straggler (us)")
    p.add_argument("--hosts", type=int, default=1)
    p.add_argument("--clock-offset-us", type=float, default=0.0, help="host h's clock is shifted by about h*O us")
    p.add_argument("--no-steps", dest="steps", action="store_false", help="omit ProfilerStep#N")
    p.add_argument("--no-seq", dest="seq", action="store_false", help="omit the Seq arg of NCCL kernels")
    p.add_argument("--no-phase-annotations", dest="phase_annotations", action="store_false",
                   help="omit ## forward/backward/optimizer ## (host and GPU)")
    p.add_argument("--no-warmup", dest="warmup", action="store_false", help="iteration 0 like the others")
    p.add_argument("--first-step", type=int, default=0, help="N of the first ProfilerStep#N")
    p.add_argument("--gz", action="store_true", help="write rank{r}.json.gz")
    p.add_argument("--truth", default=None, help="where to write the truth (default OUT.truth.json, beside the trace directory, so that "
                        "`overlapprof analyze OUT` sees only traces)")
    p.add_argument("--bandwidth-gbps", type=float, default=50.0, help="bus bandwidth (GB/s)")
    p.add_argument("--latency-us", type=float, default=20.0, help="fixed cost of every collective (us)")
    p.add_argument("--host-ratio", type=float, default=0.85,
                   help="host time spent per compute kernel, as a fraction of its GPU time")
    p.add_argument("--gap-us", type=float, default=150.0, help="host gap between iterations (data loading)")
    p.add_argument("--layers", type=int, default=None, help="default: ddp 48, fsdp 24, tp 24")
    p.add_argument("--layer-us", type=float, default=None,
                   help="forward GPU time of an average layer (us); default ddp 400, fsdp 800, tp 1000")
    p.add_argument("--model-mb", type=float, default=None, help="parameter bytes (MB); default ddp 750, fsdp 1000")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb (MiB)")
    p.add_argument("--grad-compress", choices=["none", "bf16", "fp16"], default="none",
                   help="DDP: gradient all-reduces as 16-bit floats (half the bytes; compression kernels not modeled)")
    p.add_argument("--accumulate", type=int, default=1,
                   help="DDP: gradient accumulation over N micro-steps (iterations): only every N-th one all-reduces")
    p.add_argument("--hook-delay-us", type=float, default=30.0, help="DDP hook time before a bucket's launch")
    p.add_argument("--prefetch", choices=["on", "off"], default="on", help="FSDP all-gather prefetch")
    p.add_argument("--tp-overlap", choices=["on", "off"], default="on")
    p.add_argument("--tp-size", type=int, default=None, help="tensor-parallel group size (default: all ranks)")
    p.add_argument("--tp-mb", type=float, default=16.0, help="TP collective size (MB, full buffer)")
    p.add_argument("--tp-comm", choices=["nccl", "symm_mem", "p2p_copy"], default="nccl",
                   help="tp: how the TP collectives run: NCCL kernels with Collective args; PyTorch symmetric-memory "
                        "kernels launched by symm_mem:: host ops (External id), no NCCL args; or peer-to-peer "
                        "memcpys (Memcpy PtoP) on the TP stream")
    p.add_argument("--scale-events", type=int, default=None,
                   help="benchmark mode: about N GPU events in total (sets --iterations)")
    p.add_argument("--full-truth", action="store_true",
                   help="in scale mode, list every collective and bucket in truth.json too")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    if a.ranks < 1 or a.iterations < 1 or a.hosts < 1 or a.hosts > a.ranks:
        p.error("need ranks >= 1, iterations >= 1, 1 <= hosts <= ranks")
    if a.accumulate < 1:
        p.error("--accumulate must be >= 1")
    if a.straggler is not None and not (0 <= a.straggler < a.ranks):
        p.error("--straggler must be a rank")
    defaults = {"ddp": (48, 400.0, 750.0), "fsdp": (24, 800.0, 1000.0), "tp": (24, 1000.0, 0.0)}
    dl, du, dm = defaults[a.scenario]
    a.layers = a.layers or dl
    a.layer_us = a.layer_us or du
    a.model_mb = a.model_mb or dm
    a.tp_size = a.tp_size or a.ranks
    if a.scenario == "tp" and a.ranks % a.tp_size:
        p.error("--tp-size must divide --ranks")
    if a.tp_comm != "nccl" and a.scenario != "tp":
        p.error("--tp-comm applies to --scenario tp")
    a.prefetch = a.prefetch == "on"
    a.tp_overlap = a.tp_overlap == "on"
    a.gap_ns = int(a.gap_us * 1000)
    return a


def main(argv=None):
    t_begin = time.time()
    argv = sys.argv[1:] if argv is None else argv
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--scenario")
    if pre.parse_known_args(argv)[0].scenario in ("moe", "pp"):
        # All-to-all (MoE) and pipeline-parallel scenarios: synth_comm.py (README.md, "moe" and "pp").
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import synth_comm
        return synth_comm.main(argv)
    cfg = parse_args(argv)
    N = cfg.ranks
    cfg_rng = random.Random(cfg.seed)
    if cfg.scenario in ("ddp", "fsdp"):
        quantum = 4 if cfg.scenario == "ddp" else 2 * N
        cfg.layer_bytes = layer_sizes(int(cfg.model_mb * 1e6), cfg.layers, quantum, cfg_rng)
    cfg.bucket_bytes = int(cfg.bucket_mb * (1 << 20))
    cfg.tp_bytes = max(2 * cfg.tp_size, int(cfg.tp_mb * 1e6) // (2 * cfg.tp_size) * (2 * cfg.tp_size))
    cfg.streams = {"ddp": [COMPUTE_STREAM, NCCL_STREAM], "fsdp": [COMPUTE_STREAM, NCCL_STREAM],
                   "tp": [COMPUTE_STREAM, TP_COMM_STREAM] if cfg.tp_overlap else [COMPUTE_STREAM]}[cfg.scenario]

    build = PROGRAMS[cfg.scenario]
    steady = build(cfg, False)
    warm = build(cfg, True) if cfg.warmup else steady
    # --accumulate N (ddp): steady iteration it all-reduces only when it % N == N - 1.
    no_sync = ddp_program(cfg, False, no_sync=True) if cfg.scenario == "ddp" and cfg.accumulate > 1 else steady
    if cfg.scale_events:
        per_iter = gpu_ops(steady) * N
        first = gpu_ops(warm) * N
        cfg.iterations = max(1, 1 + round((cfg.scale_events - first) / per_iter))
    iters = cfg.iterations
    detail = not cfg.scale_events or cfg.full_truth

    # Hosts and clocks.
    H = cfg.hosts
    host_of = [r * H // N for r in range(N)]
    clock_rng = random.Random(cfg.seed * 31 + 5)
    host_offset = []
    for h in range(H):
        off = int(round(h * cfg.clock_offset_us * 1000))
        if h > 0 and cfg.clock_offset_us != 0:
            off += clock_rng.randint(-5000, 5000)
        host_offset.append(off)
    offsets = [host_offset[host_of[r]] for r in range(N)]
    base_ns = TRUE_T0_NS - BASE_MARGIN_NS + min(0, min(offsets))
    ranks_per_host = [host_of.count(h) for h in range(H)]
    device_of = [r - host_of.index(host_of[r]) for r in range(N)]

    os.makedirs(cfg.out, exist_ok=True)
    ext = ".json.gz" if cfg.gz else ".json"
    ranks = [Rank(r, cfg, host_of[r], device_of[r], offsets[r], base_ns, os.path.join(cfg.out, f"rank{r}{ext}"))
             for r in range(N)]

    # Process groups: "dp" spans every rank (DDP, FSDP); "tp" groups of tp_size consecutive ranks.
    pgs = {}
    if cfg.scenario in ("ddp", "fsdp"):
        pgs["dp"] = [ProcessGroup("0", "default_pg", range(N), NCCL_STREAM)]
        pgs_all = pgs["dp"]
    else:
        cs = TP_COMM_STREAM if cfg.tp_overlap else COMPUTE_STREAM
        if cfg.tp_size == N:
            pgs["tp"] = [ProcessGroup("0", "default_pg", range(N), cs)]
            pgs_all = pgs["tp"]
        else:
            groups = [ProcessGroup(str(g + 1), f"tp_group_{g}", range(g * cfg.tp_size, (g + 1) * cfg.tp_size), cs)
                      for g in range(N // cfg.tp_size)]
            pgs["tp"] = groups
            pgs_all = [ProcessGroup("0", "default_pg", range(N), NCCL_STREAM)] + groups
    for kind, groups in pgs.items():
        for g in groups:
            g.members = [ranks[r] for r in g.ranks]
    for R in ranks:
        R.write_header(N, pgs_all, ranks_per_host[R.host_index])

    # The straggler: its compute (GPU and host) is slower by about D us per steady iteration.
    if cfg.straggler is not None:
        base = compute_base(steady)
        ranks[cfg.straggler].speed = 1.0 + cfg.straggler_delay_us * 1000.0 / base

    coll_rng = random.Random(cfg.seed * 97 + 3)
    collectives = []  # (pg, seq, op, size, iteration, tag, [(rank, start, end)])
    for it in range(iters):
        prog = warm if (it == 0 and cfg.warmup) else steady
        if prog is steady and it % cfg.accumulate != cfg.accumulate - 1:
            prog = no_sync
        step = cfg.first_step + it
        for R in ranks:
            R.begin_iter(it)
        for op in prog:
            k = op[0]
            if k == K_KERNEL:
                for R in ranks:
                    R.kernel(op)
            elif k == K_COLL:
                for pg in pgs[op[1]]:
                    pg.seq += 1
                    seq = pg.seq
                    launched = [R.coll_launch(op, pg) for R in pg.members]
                    last = max(x[1] for x in launched)
                    tr = max(1000, int(op[9] * (1.0 + cfg.noise * (2.0 * coll_rng.random() - 1.0))))
                    rec = []
                    for R, (launch, st, corr) in zip(pg.members, launched):
                        en = last + tr + R.rng.randint(0, 2000)
                        R.coll_finish(op, pg, seq, launch, st, en, corr)
                        rec.append((R.r, st, en))
                    collectives.append((pg.name, seq, op[3], op[8], it, op[14], rec))
            elif k == K_MEM:
                for R in ranks:
                    R.memop(op)
            elif k == K_HOST:
                for R in ranks:
                    R.host(op)
            elif k == K_ANNO_B:
                for R in ranks:
                    R.anno_begin(op)
            elif k == K_ANNO_E:
                for R in ranks:
                    R.anno_end(op)
        for R in ranks:
            R.end_iter(it, step)
    for R in ranks:
        R.close(base_ns)
    t_written = time.time()

    truth = compute_truth(cfg, ranks, collectives, offsets, host_of, base_ns, pgs_all, iters, detail)
    truth_path = cfg.truth or os.path.normpath(cfg.out) + ".truth.json"
    with open(truth_path, "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    t_end = time.time()
    if not cfg.quiet:
        total_bytes = sum(os.path.getsize(R.path) for R in ranks)
        gpu_events = sum(R.n_kernels + R.n_memcpy + R.n_memset for R in ranks)
        print(f"synth: {cfg.scenario}, {N} ranks, {iters} iterations, {gpu_events} GPU events, "
              f"{total_bytes} bytes in {N} files, truth {truth_path}; "
              f"{t_written - t_begin:.1f} s to write the traces, {t_end - t_written:.1f} s for the truth", file=sys.stderr)
    return 0


def compute_truth(cfg, ranks, collectives, offsets, host_of, base_ns, pgs_all, iters, detail):
    N = len(ranks)
    truth = {
        "schema": SCHEMA,
        "scenario": cfg.scenario,
        "options": {k: v for k, v in sorted(vars(cfg).items())
                    if k not in ("layer_bytes", "streams", "out", "truth", "quiet")},
        "world_size": N,
        "iterations": iters,
        "hosts": cfg.hosts,
        "host_of_rank": {str(r): host_of[r] for r in range(N)},
        "clock_offsets_ns": {str(r): offsets[r] for r in range(N)},
        "base_time_ns": base_ns,
        "true_t0_ns": TRUE_T0_NS,
        "files": {str(R.r): os.path.basename(R.path) for R in ranks},
        "process_groups": [{"name": g.name, "desc": g.desc, "ranks": g.ranks, "collectives": g.seq} for g in pgs_all],
        "layer_bytes": getattr(cfg, "layer_bytes", None),
        "ranks": [],
    }
    warm_flags = [cfg.warmup and i == 0 for i in range(iters)]
    per_rank_cover = {}
    for R in ranks:
        off = R.offset
        comp = union(zip(R.comp_s, R.comp_e))
        comm = union((c[0], c[1]) for c in R.comm)
        mem = union(zip(R.mem_s, R.mem_e))
        ov = intersect(comp, comm)
        busy = union(list(zip(comp[0], comp[1])) + list(zip(comm[0], comm[1])) + list(zip(mem[0], mem[1])))
        C, M, O, Y, B = Cover(comp), Cover(comm), Cover(ov), Cover(mem), Cover(busy)
        per_rank_cover[R.r] = C
        first = R.iter_first
        win = []
        for i in range(iters):
            lo = first[i]
            hi = first[i + 1] if i + 1 < iters else R.last_end
            cn, mn, on = C.within(lo, hi), M.within(lo, hi), O.within(lo, hi)
            win.append({"index": i, "step": cfg.first_step + i if cfg.steps else None, "warmup": warm_flags[i],
                        "start_ns": lo + off, "end_ns": hi + off, "wall_ns": hi - lo,
                        "compute_ns": cn, "comm_ns": mn, "overlap_ns": on, "exposed_comm_ns": mn - on,
                        "memory_ns": Y.within(lo, hi), "busy_ns": B.within(lo, hi)})
        # Per op type.
        # --tp-comm p2p_copy: every collective is a peer copy of `size` bytes (op p2p_copy);
        # symm_mem: the kernels carry no sizes (bytes unknown: null).
        fams = {}
        for c in R.comm:
            st, en, fam, size = c[0], c[1], c[2], c[3]
            if cfg.tp_comm == "p2p_copy":
                fam = "p2p_copy"
            d = fams.setdefault(fam, {"count": 0, "bytes": 0, "time_ns": 0, "exposed_ns": 0})
            d["count"] += 1
            if cfg.tp_comm == "symm_mem":
                d["bytes"] = None
            else:
                d["bytes"] += size
            d["time_ns"] += en - st
            d["exposed_ns"] += (en - st) - C.within(st, en)
        start = first[0]
        entry = {
            "rank": R.r, "file": os.path.basename(R.path), "host": R.hostname, "clock_offset_ns": off,
            "start_ns": start + off, "end_ns": R.last_end + off, "wall_ns": R.last_end - start,
            "compute_ns": C.total(), "comm_ns": M.total(), "overlap_ns": O.total(),
            "exposed_comm_ns": M.total() - O.total(), "memory_ns": Y.total(), "busy_ns": B.total(),
            "kernels": R.n_kernels, "comm_kernels": R.n_comm_kernels, "memcpys": R.n_memcpy, "memsets": R.n_memset,
            "comm_ops": R.n_comm_kernels + R.n_p2p, "p2p_copies": R.n_p2p,
            "speed": R.speed,
            "iterations": iters, "warmup": warm_flags, "iteration_figures": win,
            "op_types": dict(sorted(fams.items())),
        }
        truth["ranks"].append(entry)

    # Collectives (true clock), per-rank wait/transfer, stragglers.
    wait_tot = [0] * N
    xfer_tot = [0] * N
    last_arr = [0] * N
    counted = [0] * N
    lost = [0] * N
    coll_rows = []
    for pgname, seq, fam, size, it, tag, rec in collectives:
        last = max(s for _, s, _ in rec)
        first_s = min(s for _, s, _ in rec)
        skew = last - first_s
        last_rank = min(r for r, s, _ in rec if s == last)
        waits = {r: last - s for r, s, _ in rec}
        xfers = {r: e - last for r, _, e in rec}
        for r, s, e in rec:
            wait_tot[r] += waits[r]
            xfer_tot[r] += xfers[r]
        if skew > STRAGGLER_SKEW_NS:
            for r, _, _ in rec:
                counted[r] += 1
            last_arr[last_rank] += 1
            lost[last_rank] += sum(w for r, w in waits.items() if r != last_rank)
        if detail:
            coll_rows.append({"process_group": pgname, "seq": seq, "op": fam, "bytes": size, "iteration": it,
                              "ranks": [r for r, _, _ in rec],
                              "start_ns": {str(r): s for r, s, _ in rec}, "end_ns": {str(r): e for r, _, e in rec},
                              "skew_ns": skew, "last_rank": last_rank,
                              "wait_ns": {str(r): w for r, w in waits.items()},
                              "transfer_ns": {str(r): x for r, x in xfers.items()}})
    for e in truth["ranks"]:
        e["collective_wait_ns"] = wait_tot[e["rank"]]
        e["collective_transfer_ns"] = xfer_tot[e["rank"]]
    truth["collectives_count"] = len(collectives)
    truth["collectives_listed"] = detail
    truth["collectives"] = coll_rows
    truth["stragglers"] = {
        "threshold_ns": STRAGGLER_SKEW_NS,
        "configured": {"rank": cfg.straggler, "delay_us": cfg.straggler_delay_us} if cfg.straggler is not None else None,
        "ranks": [{"rank": r, "last_arrivals": last_arr[r], "collectives_counted": counted[r], "lost_ns": lost[r]}
                  for r in range(N)],
    }

    # Scenario sections.
    if cfg.scenario == "ddp":
        rows, tails = [], []
        for R in ranks:
            C = per_rank_cover[R.r]
            bwd = {it: (s, e) for it, name, s, e in R.annos if name == "## backward ##"}
            by_it = {}
            for c in R.comm:
                by_it.setdefault(c[4], []).append(c)
            for it in range(iters):
                bs, be = bwd[it]
                blist = sorted(by_it.get(it, []), key=lambda c: c[0])
                for c in blist:
                    st, en, size, tag, launch = c[0], c[1], c[3], c[5], c[6]
                    ovl = C.within(st, en)
                    if detail:
                        rows.append({"rank": R.r, "iteration": it, "warmup": warm_flags[it], "index": tag[1],
                                     "bytes": size, "layers": list(tag[2]),
                                     "launch_ns": launch + R.offset, "launch_offset_ns": launch - bs,
                                     "launch_fraction": (launch - bs) / (be - bs), "queue_ns": st - launch,
                                     "start_ns": st + R.offset, "duration_ns": en - st, "overlap_ns": ovl,
                                     "exposed_ns": (en - st) - ovl, "seq": c[8]})
                E = R.bwd_last_end[it]
                if not blist:  # an accumulation micro-step (--accumulate): no bucket
                    continue
                last_bucket_end = max(c[1] for c in blist)
                tails.append({"rank": R.r, "iteration": it, "warmup": warm_flags[it], "buckets": len(blist),
                              "backward_host_start_ns": bs + R.offset, "backward_host_ns": be - bs,
                              "last_backward_compute_end_ns": E + R.offset,
                              "last_bucket_end_ns": last_bucket_end + R.offset,
                              "tail_ns": max(0, last_bucket_end - E),
                              "tail_comm_ns": Cover(union((c[0], c[1]) for c in blist)).within(E, last_bucket_end)})
        truth["buckets"] = rows
        truth["bucket_tails"] = tails
    elif cfg.scenario == "fsdp":
        ag_rows, rs_rows = [], []
        for R in ranks:
            C = per_rank_cover[R.r]
            for c in R.comm:
                st, en, fam, size, it, tag = c[:6]
                ovl = C.within(st, en)
                row = {"rank": R.r, "iteration": it, "warmup": warm_flags[it], "layer": tag[1],
                       "phase": "forward" if tag[2] == "fwd" else "backward", "bytes": size,
                       "start_ns": st + R.offset, "duration_ns": en - st, "queue_ns": st - c[6],
                       "overlap_ns": ovl, "exposed_ns": (en - st) - ovl}
                if fam == "allgather":
                    row["prefetched"] = tag[3]
                    ag_rows.append(row)
                else:
                    rs_rows.append(row)
        truth["fsdp_allgathers"] = ag_rows
        truth["fsdp_reducescatters"] = rs_rows
    elif cfg.scenario == "tp":
        tp_rows, tp_sum = [], []
        for R in ranks:
            C = per_rank_cover[R.r]
            agg = {}
            for c in R.comm:
                st, en, fam, size, it, tag = c[:6]
                ovl = C.within(st, en)
                if detail:
                    tp_rows.append({"rank": R.r, "iteration": it, "warmup": warm_flags[it], "layer": tag[1],
                                    "phase": "forward" if tag[2] == "fwd" else "backward", "op": fam, "bytes": size,
                                    "stream": c[10], "start_ns": st + R.offset, "duration_ns": en - st,
                                    "overlap_ns": ovl, "exposed_ns": (en - st) - ovl})
                a = agg.setdefault(fam, {"count": 0, "time_ns": 0, "exposed_ns": 0})
                a["count"] += 1
                a["time_ns"] += en - st
                a["exposed_ns"] += (en - st) - ovl
            for fam, a in sorted(agg.items()):
                tp_sum.append({"rank": R.r, "op": fam, **a, "on_compute_stream": not cfg.tp_overlap})
        truth["tp_ops"] = tp_rows
        truth["tp"] = tp_sum
    return truth


if __name__ == "__main__":
    sys.exit(main())
