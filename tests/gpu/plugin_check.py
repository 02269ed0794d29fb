#!/usr/bin/env python3
"""GPU checks of NCCL's profiler plugin as overlapprof records it (docs/nccl-profiler.md).

Run by `tests/gpu/run.sh [BUILD_DIR] --plugin` (or alone: plugin_check.py --build-dir BUILD_DIR). Needs a
GPU; writes tests/gpu/out/plugin/{results.json,log.txt,runs/}. Exit 0 all passed, 1 a check failed,
2 could not run. Checks, on samples/gemm_allreduce (2 ranks on the GPU: NCCL reports no profiler event
on a 1-rank communicator) and, unless --no-ddp, tests/gpu/ddp_step.py:
  - plugin on: timing_source "nccl_profiler", every plugin op joined and used (nccl_profiler_ops timed ==
    total), no unmatched/dropped counter, and nccl_plugin_kernel_time_mismatch absent: on every op alone in
    its kernel the plugin's GPU start agrees with CUPTI's kernel start within 100 us (the analysis' check);
  - the same store analyzed with --comm-timing kernels: the plugin's comm time is not longer;
  - grouped calls (the sample's --group: 4 all-reduces in one kernel): every op of every such launch
    timed on its own by the plugin and joined to its call;
  - overhead of the plugin alone: median step time traced with the plugin vs traced without it
    (NCCL_PROFILER_PLUGIN=none, which `overlapprof run` keeps), alternated --reps times: below
    --max-plugin-overhead-pct (0.3).
No figure is invented: what could not run is reported as such.
"""
import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check  # noqa: E402  (tests/gpu/check.py: run_cmd, Check, Fatal, find_sample, overhead, log)

JOIN_COUNTERS = ("nccl_plugin_ops_unmatched", "nccl_plugin_calls_unmatched", "nccl_plugin_ops_dropped",
                 "nccl_plugin_kernel_time_mismatch", "nccl_profiler_slot_taken")


def counters(rank):
    return {d["counter"]: d["value"] for d in rank.get("data_quality", [])}


def check_plugin_rank(workload, rank):
    """Checks one rank of a run with the plugin on (JSON summary rank object)."""
    out = []
    out.append(check.Check(workload, "timing_source", rank.get("timing_source") == "nccl_profiler",
                           f"timing_source {rank.get('timing_source')!r}"))
    ops = rank.get("nccl_profiler_ops") or {}
    out.append(check.Check(workload, "every plugin op used", ops.get("total", 0) > 0 and ops.get("timed") == ops.get("total"),
                           f"nccl_profiler_ops {ops}"))
    c = counters(rank)
    bad = {k: v for k, v in c.items() if k in JOIN_COUNTERS}
    out.append(check.Check(workload, "join and clock counters", not bad, f"{bad or 'none set'}"))
    return out


def check_grouped(workload, store_dir, per_launch):
    """Grouped calls: in every rank store, launches (NCCL groups) of `per_launch` all-reduces whose
    every op the plugin timed on its own (GPU start and end) and joined to its call."""
    import glob
    import sqlite3
    launches, split = 0, 0
    for db in sorted(glob.glob(os.path.join(store_dir, "*.db"))):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            for n, timed, distinct in con.execute(
                    "SELECT count(*), sum(start_ns IS NOT NULL AND comm_op_id IS NOT NULL), "
                    "count(DISTINCT start_ns) FROM nccl_profiler_op GROUP BY group_id"):
                if n == per_launch:
                    launches += 1
                    split += timed == n and distinct > 1
        finally:
            con.close()
    return check.Check(workload, "grouped calls timed per op", launches > 0 and split == launches,
                       f"{split} of {launches} launches of {per_launch} all-reduces with each op timed on its own "
                       "(distinct GPU starts, joined to its call)")


def main(argv=None):
    ap = argparse.ArgumentParser(description="overlapprof GPU checks of NCCL's profiler plugin")
    ap.add_argument("--build-dir", default=os.path.join(check.ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(HERE, "out", "plugin"))
    ap.add_argument("--overlapprof", default="")
    ap.add_argument("--sample", default="")
    ap.add_argument("--reps", type=int, default=5, help="alternated runs per side for the overhead")
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--max-plugin-overhead-pct", type=float, default=0.3)
    ap.add_argument("--no-ddp", action="store_true")
    args = ap.parse_args(argv)

    out = os.path.abspath(args.out)
    runs = os.path.join(out, "runs")
    shutil.rmtree(runs, ignore_errors=True)
    os.makedirs(runs)
    logfile = os.path.join(out, "log.txt")
    open(logfile, "w").close()
    prof = os.path.abspath(args.overlapprof or os.path.join(args.build_dir, "overlapprof"))
    if not os.access(prof, os.X_OK):
        raise check.Fatal(f"no overlapprof binary at {prof}")
    sample = os.path.abspath(args.sample or check.find_sample(args.build_dir))
    env = dict(os.environ)
    env.setdefault("NCCL_SOCKET_IFNAME", "lo")
    env.pop("NCCL_PROFILER_PLUGIN", None)  # the plugin side: overlapprof run sets it
    env_off = dict(env, NCCL_PROFILER_PLUGIN="none")  # kept by overlapprof run: NCCL loads no plugin
    results = {"schema": "overlapprof.gpu_plugin_check/1", "checks": [], "runs": {}, "overhead": None}

    def record(cs):
        for c in cs:
            check.log(repr(c))
            results["checks"].append(c.as_dict())

    def traced(name, cmd, e):
        d = os.path.join(runs, name)
        store = os.path.join(d, "store")
        os.makedirs(d, exist_ok=True)
        check.run_cmd([prof, "run", "-o", store, "--no-analyze", "--"] + cmd, logfile, env=e)
        summary_path = os.path.join(d, "summary.json")
        check.run_cmd([prof, "analyze", store, "--json", summary_path], logfile, env=e, ok_codes=(0, 4))
        with open(summary_path) as f:
            s = json.load(f)
        results["runs"][name] = {"cmd": cmd, "store": store, "summary": summary_path}
        return s, store

    def kernel_timed(name, store, e):
        """The same store analyzed with --comm-timing kernels: what the run gives without the plugin."""
        path = os.path.join(runs, name, "summary_kernels.json")
        check.run_cmd([prof, "analyze", store, "--comm-timing", "kernels", "--json", path], logfile, env=e,
                      ok_codes=(0, 4))
        with open(path) as f:
            return json.load(f)

    def sample_cmd(json_path, iters, group=False):
        # 2 ranks: NCCL reports no profiler event for a 1-rank communicator (its one-rank path runs
        # a local kernel of its own, seen with 2.28.9), so the plugin needs 2.
        cmd = [sample, "--mode", "overlapped", "--nranks", "2", "--iters", str(iters), "--warmup", "5",
               "--json", json_path, "--timeout", "240", "--quiet"]
        return cmd + (["--group"] if group else [])

    # 1. Per-op vs kernel timing on the sample (2 ranks): the collectives one kernel each, then
    #    grouped (--group: the iteration's 4 all-reduces in one kernel, which only the plugin splits).
    for group in (False, True):
        name = "gemm_grouped" if group else "gemm_overlapped"
        try:
            on, store = traced(f"{name}_plugin", sample_cmd(os.path.join(runs, f"{name}.json"), 20, group), env)
            off = kernel_timed(f"{name}_plugin", store, env)
            rows_off = {r.get("rank"): r for r in off.get("ranks", [])}
            for r_on in on.get("ranks", []):
                w = f"{name} rank {r_on.get('rank')}"
                r_off = rows_off.get(r_on.get("rank"), {})
                record(check_plugin_rank(w, r_on))
                record([check.Check(w, "plugin comm time within the kernels'",
                                    r_on["comm_ns"] <= r_off.get("comm_ns", 0) * 1.01,
                                    f"comm_ns {r_on['comm_ns']} by the plugin, {r_off.get('comm_ns')} by kernels "
                                    "(same run)")])
                results.setdefault("timing", []).append(
                    {"workload": name, "rank": r_on.get("rank"), "plugin_comm_ns": r_on["comm_ns"],
                     "kernel_comm_ns": r_off.get("comm_ns"), "plugin_overlap_ratio": r_on.get("overlap_ratio"),
                     "kernel_overlap_ratio": r_off.get("overlap_ratio")})
            if group:
                record([check_grouped(name, store, 4)])
        except check.Fatal as e:
            record([check.Check(name, "run", False, str(e))])

    # 2. Overhead of the plugin alone: traced with vs without it, alternated (2 ranks, overlapped).
    on_ms, off_ms, on_steps, off_steps = [], [], [], []
    try:
        for i in range(args.reps):
            for side, e in (("off", env_off), ("on", env)):
                tp = os.path.join(runs, f"overhead_{side}_{i}.json")
                store = os.path.join(runs, f"overhead_store_{side}_{i}")
                check.run_cmd([prof, "run", "-o", store, "--no-analyze", "--"] + sample_cmd(tp, args.iters),
                              logfile, env=e)
                shutil.rmtree(store, ignore_errors=True)
                with open(tp) as f:
                    r0 = min(json.load(f)["ranks"], key=lambda r: r["rank"])  # steps end synchronized
                (on_ms if side == "on" else off_ms).append(r0["step_ms_median"])
                (on_steps if side == "on" else off_steps).extend(r0.get("step_ms") or [])
        ov = check.overhead(off_ms, on_ms, off_steps, on_steps)
        results["overhead"] = ov
        pct = ov["overhead_pct"]
        record([check.Check("gemm_overlapped", "plugin overhead", pct is not None and pct < args.max_plugin_overhead_pct,
                            f"median step {ov['base_median_ms']} ms without the plugin, {ov['traced_median_ms']} ms "
                            f"with it: {pct} % (limit {args.max_plugin_overhead_pct} %; runs {off_ms} / {on_ms})")])
    except check.Fatal as e:
        record([check.Check("gemm_overlapped", "plugin overhead", False, str(e))])

    # 3. DDP with the plugin on (2 ranks on the GPU, else 1).
    if not args.no_ddp:
        ddp = os.path.join(HERE, "ddp_step.py")
        for nproc in (2, 1):
            try:
                cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", ddp,
                       "--iters", "15", "--warmup", "3", "--json", os.path.join(runs, f"ddp_{nproc}.json")]
                s, _ = traced(f"ddp_{nproc}rank_plugin", cmd, env)
                # One store per rank (no empty one of torchrun's agent) and every op with its GPU work.
                record(check.check_quality(f"ddp_{nproc}rank", s, nproc))
                for r in s["ranks"]:
                    record(check_plugin_rank(f"ddp_{nproc}rank", r))
                break
            except check.Fatal as e:
                if nproc == 1:
                    record([check.Check("ddp", "run", False, str(e))])

    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    failed = [c for c in results["checks"] if not c["ok"]]
    check.log(f"{len(results['checks']) - len(failed)} of {len(results['checks'])} plugin checks passed; "
              f"results in {out}/results.json")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except check.Fatal as e:
        check.log(f"cannot run: {e}")
        sys.exit(2)
