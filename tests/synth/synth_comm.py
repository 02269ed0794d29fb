#!/usr/bin/env python3
"""All-to-all (MoE) and pipeline-parallel (1F1B) synthetic traces with exact ground truth.

Called by synth.py for `--scenario moe` and `--scenario pp` (or on its own with the same
arguments); writes rank{r}.json (Kineto) into OUT and the truth beside it (README.md, "moe" and
"pp"). Times are integer ns on a true common clock; a file time is true time + its host's offset.

moe: N ranks (8) run 5 all-to-alls and 3 all-reduces in one step, each after a compute kernel.
  The all-to-all runs as NCCL does it, one `ncclDevKernel_SendRecv` kernel without metadata: its
  name comes from the host op (`record_param_comms` with "Collective name" linked by External id,
  under `c10d::alltoall_base_` and `nccl:all_to_all`; with --host-ops minimal only the
  `nccl:all_to_all` annotation around the launch, no External ids). Rank 5 arrives last at 4 of the
  5 all-to-alls (4, 1.5, 0.8 and 1.2 ms late), rank 2 at the third (0.3 ms). A collective ends on
  every rank at the last arrival + transfer (all-to-all 600 us, all-reduce 900 us) + 0-2 us.
pp: P stages (4), M microbatches (4), 2 steps, 1F1B; stage --slow-stage (2) computes twice as slow
  (forward 400 us, backward 800 us otherwise). Activations go forward, gradients backward, as
  send/recv (`ncclDevKernel_SendRecv`, host op `record_param_comms` with "Src Rank"/"Dst Rank"):
  sends on stream 21 when the compute that produced them ends, recvs on stream 22 posted when the
  stage is ready for the compute that needs them; both kernels of a pair end at max(send start,
  recv start) + 50 us, so a recv waits exactly max(0, send start - recv start).
"""
import argparse
import json
import os
import sys

US = 1000
T0 = 1_000_000_000_000  # ns: where true time 0 is written (µs text near 1e9)


def ts(ns):
    # A float whose shortest repr (what json writes) is exactly this decimal text: below 2**53 / 1000 µs.
    return float(f"{ns // 1000}.{ns % 1000:03d}")


class RankFile:
    def __init__(self, rank, world, host, offset):
        self.rank, self.world, self.host, self.offset = rank, world, host, offset
        self.ev = []
        self.corr = 1
        self.ext = 1

    def t(self, ns):
        return ts(T0 + ns + self.offset)

    def x(self, cat, name, start, end, tid, args=None, pid=None):
        e = {"ph": "X", "cat": cat, "name": name, "pid": pid if pid is not None else 1000 + self.rank, "tid": tid,
             "ts": self.t(start), "dur": ts(end - start)}
        if args:
            e["args"] = args
        self.ev.append(e)

    def kernel(self, name, start, end, stream, host_at, ext=None, args=None):
        corr = self.corr
        self.corr += 1
        ka = {"device": self.rank % 8, "stream": stream, "correlation": corr}
        ra = {"correlation": corr}
        if ext is not None:
            ka["External id"] = ext
            ra["External id"] = ext
        if args:
            ka.update(args)
        self.x("cuda_runtime", "cudaLaunchKernel", host_at, host_at + 3 * US, 100, ra)
        self.x("kernel", name, start, end, stream, ka, pid=self.rank % 8)

    def write(self, out):
        doc = {"schemaVersion": 1,
               "distributedInfo": {"backend": "nccl", "rank": self.rank, "world_size": self.world},
               "hostname": self.host, "traceEvents": self.ev, "displayTimeUnit": "ms"}
        with open(os.path.join(out, f"rank{self.rank}.json"), "w") as f:
            json.dump(doc, f)


def send_recv_kernel():
    return "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"


# ---- moe ---------------------------------------------------------------------------------
def moe(a):
    N = a.ranks
    ops = ["a2a", "a2a", "ar", "a2a", "a2a", "ar", "a2a", "ar"]
    late = {0: (5, 4000), 1: (5, 1500), 3: (2, 300), 4: (5, 800), 6: (5, 1200)}  # op index -> (rank, us)
    nhosts = a.hosts
    host_of = [r * nhosts // N for r in range(N)]
    offsets = [h * int(a.clock_offset_us * US) + (3 * US * h if h else 0) for h in host_of]
    files = [RankFile(r, N, f"synth-host{host_of[r]}", offsets[r]) for r in range(N)]
    end = [50 * US] * N  # each rank's last GPU end
    colls = []
    seq = 0
    a2a_nelems, ar_nelems = 4 * 1024 * 1024, 8 * 1024 * 1024
    for k, kind in enumerate(ops):
        seq += 1
        starts = []
        for r in range(N):
            c = (800 + 100 * k) * US + ((r * 7 + k * 3) % 8) * US
            if k in late and late[k][0] == r:
                c += late[k][1] * US
            cs = end[r]
            files[r].kernel("gemm_moe_expert", cs, cs + c, 7, cs - 6 * US)
            starts.append(cs + c)
        smax = max(starts)
        transfer = (600 if kind == "a2a" else 900) * US
        ends = [smax + transfer + ((r * 3 + k) % 3) * US for r in range(N)]
        for r in range(N):
            f, s, e = files[r], starts[r], ends[r]
            h = s - 6 * US
            if kind == "a2a":
                ext = f.ext
                f.ext += 2
                f.x("user_annotation", "nccl:all_to_all", h - 4 * US, h + 6 * US, 100)
                if a.host_ops == "full":
                    f.x("cpu_op", "c10d::alltoall_base_", h - 3 * US, h + 5 * US, 100, {"External id": ext + 1})
                    f.x("cpu_op", "record_param_comms", h - 2 * US, h + 4 * US, 100,
                        {"External id": ext, "Collective name": "all_to_allv", "In msg nelems": a2a_nelems,
                         "Out msg nelems": a2a_nelems, "Group size": N, "dtype": "BFloat16",
                         "Process Group Name": "0", "Process Group Description": "default_pg", "Seq": seq})
                f.kernel(send_recv_kernel(), s, e, 20, h, ext=ext if a.host_ops == "full" else None)
            else:
                f.x("user_annotation", "nccl:all_reduce", h - 4 * US, h + 6 * US, 100)
                f.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", s, e, 20, h,
                         args={"Collective name": "allreduce", "In msg nelems": ar_nelems, "Out msg nelems": ar_nelems,
                               "Group size": N, "dtype": "BFloat16", "Process Group Name": "0",
                               "Process Group Description": "default_pg",
                               **({"Seq": seq} if a.host_ops == "full" else {})})
            end[r] = e
        colls.append({"op": "alltoall" if kind == "a2a" else "allreduce", "starts": starts, "ends": ends})
    for r in range(N):
        files[r].kernel("gemm_tail", end[r], end[r] + 200 * US, 7, end[r] - 6 * US)
        files[r].x("user_annotation", "ProfilerStep#1", 0, end[r] + 300 * US, 100)

    # Truth: wait = min(last start, own end) - own start, transfer = own end - last start.
    ranks = [{"rank": r, "wait_ns": 0, "transfer_ns": 0, "collectives": len(ops)} for r in range(N)]
    strag = {r: {"rank": r, "last_arrivals": 0, "others_wait_ns": 0, "collectives_counted": 0} for r in range(N)}
    for c in colls:
        smax = max(c["starts"])
        waits = [min(smax, c["ends"][r]) - c["starts"][r] for r in range(N)]
        for r in range(N):
            ranks[r]["wait_ns"] += waits[r]
            ranks[r]["transfer_ns"] += c["ends"][r] - smax
        if smax - min(c["starts"]) > 20000:  # kStragglerSkewNs
            last = c["starts"].index(smax)
            assert c["starts"].count(smax) == 1
            strag[last]["last_arrivals"] += 1
            strag[last]["others_wait_ns"] += sum(waits)
            for r in range(N):
                strag[r]["collectives_counted"] += 1
    truth = {"scenario": "moe", "ranks_n": N, "host_ops": a.host_ops,
             "alltoalls_per_rank": ops.count("a2a"), "allreduces_per_rank": ops.count("ar"),
             "alltoall_bytes": a2a_nelems * 2 if a.host_ops == "full" else None,
             "matched": len(ops), "matched_by": "seq" if a.host_ops == "full" else "step_ordinal",
             "first_alltoall_others_wait_ns": sum(min(max(colls[0]["starts"]), colls[0]["ends"][r]) - colls[0]["starts"][r]
                                                  for r in range(N)),
             "cross_rank": ranks, "stragglers": [strag[r] for r in range(N) if strag[r]["last_arrivals"] > 0],
             "clock_offsets_ns": {str(r): offsets[r] for r in range(N)}}
    return files, truth


# ---- pp ----------------------------------------------------------------------------------
def schedule_1f1b(s, P, M):
    warm = min(P - s - 1, M)
    out = [("F", m) for m in range(warm)]
    for i in range(M - warm):
        out += [("F", warm + i), ("B", i)]
    out += [("B", m) for m in range(M - warm, M)]
    return out


def pp(a):
    P, M, iters = a.ranks, a.microbatches, a.iterations
    F, B, T = 400 * US, 800 * US, 50 * US
    comp = {s: (F * (2 if s == a.slow_stage else 1), B * (2 if s == a.slow_stage else 1)) for s in range(P)}
    files = [RankFile(s, P, "synth-host0", 0) for s in range(P)]
    pairs = []  # every (send, recv) with true times
    t_iter = 0
    for it in range(iters):
        step = it + 1
        # Relaxation to the fixpoint: send/recv starts of every pair (key: src, dst, m).
        ss, rs = {}, {}
        for _ in range(1000):
            changed = False
            plan = {}
            for s in range(P):
                ready, rtail, stail = t_iter + 20 * US, 0, 0
                items = []
                for kind, m in schedule_1f1b(s, P, M):
                    src = s - 1 if kind == "F" else s + 1
                    if 0 <= src < P:
                        key = (src, s, m, kind)
                        r0 = max(ready, rtail)
                        re = max(r0, ss.get(key, 0)) + T
                        if rs.get(key) != r0:
                            rs[key] = r0
                            changed = True
                        items.append(("recv", key, r0, re))
                        rtail = re
                        ready = re
                    c = comp[s][0 if kind == "F" else 1]
                    items.append(("comp", kind, ready, ready + c))
                    ready += c
                    dst = s + 1 if kind == "F" else s - 1
                    if 0 <= dst < P:
                        key = (s, dst, m, kind)
                        s0 = max(ready, stail)
                        se = max(s0, rs.get(key, 0)) + T
                        if ss.get(key) != s0:
                            ss[key] = s0
                            changed = True
                        items.append(("send", key, s0, se))
                        stail = se
                plan[s] = items
            if not changed:
                break
        else:
            raise SystemExit("pp: no fixpoint")
        last = t_iter
        for s in range(P):
            f = files[s]
            for item in plan[s]:
                what, key, b, e = item
                last = max(last, e)
                if what == "comp":
                    f.kernel(f"gemm_{'fwd' if key == 'F' else 'bwd'}", b, e, 7, b - 6 * US)
                    continue
                src, dst, m, kind = key
                h = b - 6 * US
                ext = f.ext
                f.ext += 1
                name = "send" if what == "send" else "recv"
                f.x("user_annotation", f"nccl:{name} {src}->{dst}" if name == "send" else f"nccl:recv {dst}<-{src}",
                    h - 3 * US, h + 5 * US, 100)
                f.x("cpu_op", "record_param_comms", h - 2 * US, h + 4 * US, 100,
                    {"External id": ext, "Collective name": name, "In msg nelems": 1048576, "Out msg nelems": 1048576,
                     "Group size": P, "dtype": "BFloat16", "Process Group Name": "1",
                     "Process Group Description": "pp", "Process Group Ranks": "[" + ", ".join(map(str, range(P))) + "]",
                     "Src Rank": src, "Dst Rank": dst})
                f.kernel(send_recv_kernel(), b, e, 21 if what == "send" else 22, h, ext=ext)
                if what == "recv":
                    pairs.append({"src": src, "dst": dst, "step": step, "send_start": ss[key], "recv_start": b})
        for s in range(P):
            files[s].x("user_annotation", f"ProfilerStep#{step}", t_iter, last + 100 * US, 100)
        t_iter = last + 300 * US

    rank_rows = {s: {"rank": s, "sends": 0, "recvs": 0, "recv_wait_ns": 0, "waited_on_ns": 0} for s in range(P)}
    steps = {}
    for p in pairs:
        w = max(0, p["send_start"] - p["recv_start"])
        rank_rows[p["src"]]["sends"] += 1
        rank_rows[p["dst"]]["recvs"] += 1
        rank_rows[p["dst"]]["recv_wait_ns"] += w
        rank_rows[p["src"]]["waited_on_ns"] += w
        st = steps.setdefault((p["dst"], p["step"]), {"rank": p["dst"], "step": p["step"], "recvs": 0,
                                                       "recv_wait_ns": 0, "by_peer": {}})
        st["recvs"] += 1
        st["recv_wait_ns"] += w
        if w > 0:
            st["by_peer"][p["src"]] = st["by_peer"].get(p["src"], 0) + w
    its = []
    for k in sorted(steps):
        st = steps[k]
        bp = st.pop("by_peer")
        st["waited_most_on"] = max(sorted(bp), key=lambda q: bp[q]) if bp else None
        its.append(st)
    scores = {s: r["waited_on_ns"] - r["recv_wait_ns"] for s, r in rank_rows.items() if r["waited_on_ns"] > 0}
    bottleneck = max(sorted(scores), key=lambda s: scores[s]) if scores and max(scores.values()) > 0 else None
    truth = {"scenario": "pp", "stages": P, "microbatches": M, "iterations": iters, "slow_stage": a.slow_stage,
             "pairs": len(pairs), "recv_wait_ns": sum(r["recv_wait_ns"] for r in rank_rows.values()),
             "bottleneck_rank": bottleneck, "ranks": [rank_rows[s] for s in range(P)], "iterations_rows": its}
    return files, truth


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--scenario", choices=["moe", "pp"], required=True)
    p.add_argument("--ranks", type=int, default=None, help="moe: 8 ranks; pp: 4 stages")
    p.add_argument("--hosts", type=int, default=1)
    p.add_argument("--clock-offset-us", type=float, default=0.0)
    p.add_argument("--host-ops", choices=["full", "minimal"], default="full")
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--iterations", type=int, default=2)
    p.add_argument("--slow-stage", type=int, default=2)
    p.add_argument("--truth", default=None)
    p.add_argument("--quiet", action="store_true")
    a, _ = p.parse_known_args(argv)
    a.ranks = a.ranks or (8 if a.scenario == "moe" else 4)
    files, truth = (moe if a.scenario == "moe" else pp)(a)
    os.makedirs(a.out, exist_ok=True)
    for f in files:
        f.write(a.out)
    with open(a.truth or a.out.rstrip("/") + ".truth.json", "w") as f:
        json.dump(truth, f, indent=1)
    if not a.quiet:
        print(f"synth_comm: {a.scenario}, {len(files)} ranks -> {a.out}")


if __name__ == "__main__":
    main()
