#!/usr/bin/env python3
"""Runs each good/bad pair of the PyTorch reference workloads under `overlapprof run` and asserts the
signals they are known to produce from the JSON summary (samples/README.md). Stdlib only.

    samples/check_expectations.py --overlapprof build/overlapprof [--pairs ddp,fsdp,tp,pp] [--nproc 2]
    samples/check_expectations.py --from OUT/runs      # check stored runs again, no GPU needed
    tests/gpu/run.sh --workloads                        # the GPU checks, then this (one command)

Each run: `overlapprof run -o OUT/runs/NAME/store --no-analyze -- python -m torch.distributed.run
--standalone --nproc_per_node=N samples/SCRIPT ARGS --json OUT/runs/NAME/sample.json`, then
`overlapprof analyze STORE --json OUT/runs/NAME/summary.json`. A script that cannot run here (an API, the
hardware) writes {"skipped": reason} and its checks are SKIP with that reason, never PASS. Checks that
need a section the summary lacks (the pipeline bubble: `point_to_point`, from send/recv pairing) are SKIP
with the reason while their key is absent from the summary, and run once it appears.

Result per check: PASS, FAIL or SKIP. Writes OUT/expectations.json and OUT/expectations.md; the last
line is `expectations: N passed, M failed, K skipped`. Exit 0: nothing failed; 1: a check failed;
2: could not run. The checking functions are unit-tested on CPU by samples/test_check_expectations.py.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
import check as gpu_check  # noqa: E402  (tests/gpu/check.py: data-quality rules)

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"

# ----------------------------------------------------------------------------------------------
# The pairs: run name -> (script, arguments). Sizes are the scripts' defaults, sized for 2 ranks on one
# H100 (NCCL over loopback sockets); iterations kept small.
RUNS = {
    "ddp": {
        "ddp_cap1": ("ddp_buckets.py", ["--bucket-cap-mb", "1", "--iters", "8"]),
        "ddp_cap25": ("ddp_buckets.py", ["--bucket-cap-mb", "25", "--iters", "8"]),
        "ddp_cap1000": ("ddp_buckets.py", ["--bucket-cap-mb", "1000", "--iters", "8"]),
        "ddp_accum4": ("ddp_buckets.py", ["--bucket-cap-mb", "25", "--accumulate", "4", "--iters", "6",
                                          "--gradient-as-bucket-view"]),
        "ddp_bf16": ("ddp_buckets.py", ["--bucket-cap-mb", "25", "--bf16-compress", "--iters", "8"]),
    },
    "fsdp": {
        "fsdp_prefetch_on": ("fsdp_prefetch.py", ["--prefetch", "on", "--mlp-repeat", "4"]),
        "fsdp_prefetch_off": ("fsdp_prefetch.py", ["--prefetch", "off", "--mlp-repeat", "4"]),
        "fsdp_no_reshard": ("fsdp_prefetch.py", ["--prefetch", "on", "--no-reshard-after-forward",
                                                 "--mlp-repeat", "4"]),
    },
    "tp": {
        "tp_sync": ("tp_overlap.py", ["--mode", "sync"]),
        "tp_async": ("tp_overlap.py", ["--mode", "async"]),
    },
    "pp": {
        "pp_gpipe": ("pp_schedule.py", ["--schedule", "gpipe"]),
        "pp_1f1b": ("pp_schedule.py", ["--schedule", "1f1b"]),
        "pp_interleaved": ("pp_schedule.py", ["--schedule", "interleaved"]),
        "pp_1f1b_slow1": ("pp_schedule.py", ["--schedule", "1f1b", "--slow-stage", "1"]),
    },
}



class Result:
    def __init__(self, pair, name, status, detail):
        self.pair, self.name, self.status, self.detail = pair, name, status, detail

    @property
    def ok(self):
        return self.status != FAIL

    def as_dict(self):
        return {"pair": self.pair, "check": self.name, "status": self.status, "detail": self.detail}

    def __repr__(self):
        return f"{self.status} {self.pair}: {self.name}: {self.detail}"


def verdict(pair, name, ok, detail):
    return Result(pair, name, PASS if ok else FAIL, detail)


class Run:
    """One recorded run: the summary (overlapprof.summary/1) and the script's own --json document."""

    def __init__(self, name, summary=None, sample=None, error=None):
        self.name, self.summary, self.sample, self.error = name, summary, sample or {}, error

    @property
    def skipped(self):
        return self.sample.get("skipped")

    @property
    def usable(self):
        return self.summary is not None and not self.skipped and not self.error


# ----------------------------------------------------------------------------------------------
# Summary accessors (pure).


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def rank_entry(summary, rank=0):
    for r in summary.get("ranks") or []:
        if r.get("rank") == rank:
            return r
    ranks = summary.get("ranks") or []
    return ranks[0] if ranks and rank == 0 else None


def overlap_ratio(summary, rank=0):
    r = rank_entry(summary, rank)
    return None if r is None else r.get("overlap_ratio")


def steady_iterations(summary, rank=0):
    return [it for it in summary.get("iterations") or [] if it.get("rank") == rank and not it.get("warmup")]


def findings(summary, analyzer=None, contains=None):
    out = []
    for f in summary.get("findings") or []:
        if analyzer and f.get("analyzer") != analyzer:
            continue
        if contains and contains not in f.get("message", ""):
            continue
        out.append(f)
    return out


def op_type(summary, op, rank=0):
    for row in summary.get("op_types") or []:
        if row.get("rank") == rank and row.get("op") == op:
            return row
    return None


def buckets_per_iteration(summary, rank=0):
    """Median over steady iterations of bucket_stalls[].buckets (DDP gradient buckets per backward)."""
    return median([r.get("buckets") for r in summary.get("bucket_stalls") or []
                   if r.get("rank") == rank and not r.get("warmup")])


def bucket_groups_per_iteration(summary, rank=0):
    """bucket_stalls rows (backward ranges with all-reduces) per steady iteration, median."""
    per = {}
    for r in summary.get("bucket_stalls") or []:
        if r.get("rank") == rank and not r.get("warmup"):
            per[r.get("iteration")] = per.get(r.get("iteration"), 0) + 1
    return median(list(per.values()))


def bucket_bytes_per_iteration(summary, rank=0):
    """Median over steady iterations of the summed bytes of buckets[] (None when a size is unknown)."""
    per = {}
    for b in summary.get("buckets") or []:
        if b.get("rank") != rank or b.get("warmup"):
            continue
        if b.get("bytes") is None:
            return None
        per[b.get("iteration")] = per.get(b.get("iteration"), 0) + b["bytes"]
    return median(list(per.values()))


def iteration_median(summary, key, rank=0):
    return median([it.get(key) for it in steady_iterations(summary, rank)])


def fsdp_row(summary, phase, op="allgather", rank=0):
    for r in summary.get("fsdp") or []:
        if r.get("rank") == rank and r.get("phase") == phase and r.get("op") == op:
            return r
    return None


def prefetch_findings(summary, phase=None):
    """The sharded analyzer's advice to prefetch ("... are exposed (prefetch stalls, ...): prefetch ..."),
    not its bandwidth-bound variant ("... and prefetching cannot hide them"), which says that more
    prefetch would not help (all-gathers and reduce-scatters longer than the phase's compute)."""
    return [f for f in findings(summary, "sharded", "parameter all-gathers in")
            if (phase is None or f"in {phase} are exposed" in f.get("message", ""))
            and "(prefetch stalls," in f.get("message", "")]


def idle_share(summary, rank):
    """1 - compute/wall over the rank's steady iterations (whole run without iterations): the share of
    the step a rank's GPU does no compute; today's proxy for the pipeline bubble."""
    its = steady_iterations(summary, rank)
    if its:
        wall = sum(it.get("wall_ns") or 0 for it in its)
        comp = sum(it.get("compute_ns") or 0 for it in its)
    else:
        r = rank_entry(summary, rank) or {}
        wall, comp = r.get("wall_ns") or 0, r.get("compute_ns") or 0
    return None if not wall else 1.0 - comp / wall


def mean_idle_share(summary):
    vals = [idle_share(summary, r.get("rank")) for r in summary.get("ranks") or []]
    vals = [v for v in vals if v is not None]
    return statistics.fmean(vals) if vals else None


def fmt(v, digits=4):
    return gpu_check.fmt(v, digits)


# ----------------------------------------------------------------------------------------------
# Checks (pure): each takes {run name: Run} and returns [Result].


def require(pair, runs, names):
    """[Result] for runs that are missing, skipped or broken (SKIP or FAIL), and the usable Runs."""
    out, usable = [], {}
    for n in names:
        r = runs.get(n)
        if r is None:
            out.append(Result(pair, n, SKIP, "not run"))
        elif r.skipped:
            out.append(Result(pair, n, SKIP, f"the script skipped: {r.skipped}"))
        elif r.error:
            out.append(Result(pair, n, FAIL, r.error))
        elif r.summary is None:
            out.append(Result(pair, n, FAIL, "no summary"))
        else:
            usable[n] = r
    return out, usable


def check_quality(pair, run):
    out = []
    world = run.sample.get("world_size")
    ranks = run.summary.get("ranks") or []
    if world is not None:
        out.append(verdict(pair, f"{run.name}: one store per rank", len(ranks) == world,
                           f"{len(ranks)} rank(s) analyzed, world size {world}"))
    for r in ranks:
        bad = gpu_check.quality_problems(r)
        out.append(verdict(pair, f"{run.name}: rank {r.get('rank')} data quality", not bad,
                           "clean" if not bad else ", ".join(bad)))
    return out


def skip_dependents(pair, names, usable, what):
    missing = [n for n in names if n not in usable]
    if missing:
        return Result(pair, what, SKIP, "needs " + ", ".join(missing))
    return None


def check_ddp(runs, serial_max=0.10, margin=0.05):
    pair = "ddp"
    out, u = require(pair, runs, list(RUNS[pair]))
    for r in u.values():
        out += check_quality(pair, r)
        obs = r.sample.get("observed", {})
        nb, want = buckets_per_iteration(r.summary), obs.get("buckets_per_step")
        out.append(verdict(pair, f"{r.name}: buckets per iteration", nb is not None and nb == want,
                           f"overlapprof bucket_stalls {fmt(nb)}, the comm hook saw {want}"))
        nbytes, want_b = bucket_bytes_per_iteration(r.summary), obs.get("bytes_per_step")
        out.append(verdict(pair, f"{r.name}: bucket bytes per iteration", nbytes is not None and nbytes == want_b,
                           f"overlapprof buckets[] {fmt(nbytes)} B, the comm hook saw {want_b} B"))
    # Ordering of bucket counts and overlap over bucket_cap_mb.
    s = skip_dependents(pair, ["ddp_cap1", "ddp_cap25", "ddp_cap1000"], u, "bucket count falls as buckets grow")
    if s:
        out.append(s)
    else:
        b1, b25, b1000 = (buckets_per_iteration(u[n].summary) for n in ("ddp_cap1", "ddp_cap25", "ddp_cap1000"))
        out.append(verdict(pair, "bucket count falls as buckets grow",
                           None not in (b1, b25, b1000) and b1 > b25 > b1000 == 1,
                           f"1 MB: {fmt(b1)}, 25 MB: {fmt(b25)}, 1000 MB: {fmt(b1000)} (want >, >, == 1)"))
    s = skip_dependents(pair, ["ddp_cap25", "ddp_cap1000"], u, "25 MB overlaps more than 1000 MB")
    if s:
        out.append(s)
    else:
        good, bad = (overlap_ratio(u[n].summary) for n in ("ddp_cap25", "ddp_cap1000"))
        out.append(verdict(pair, "25 MB overlaps more than 1000 MB",
                           good is not None and bad is not None and good >= bad + margin,
                           f"overlap_ratio 25 MB {fmt(good)} vs 1000 MB {fmt(bad)} (margin {margin})"))
        out.append(verdict(pair, "1000 MB: nothing hidden", bad is not None and bad <= serial_max,
                           f"overlap_ratio {fmt(bad)} <= {serial_max}"))
        late = [bool(findings(u[n].summary, "ddp_buckets", "first gradient bucket launched at"))
                for n in ("ddp_cap25", "ddp_cap1000")]
        out.append(verdict(pair, "late-bucket finding on 1000 MB only", late == [False, True],
                           f"fires on 25 MB: {late[0]}, on 1000 MB: {late[1]}"))
    # no_sync: the same all-reduces per optimizer step with 4 micro-batches as with 1.
    s = skip_dependents(pair, ["ddp_cap25", "ddp_accum4"], u, "no all-reduce inside no_sync")
    if s:
        out.append(s)
    else:
        a, base = u["ddp_accum4"], u["ddp_cap25"]
        in_ns = a.sample.get("observed", {}).get("allreduce_in_no_sync")
        ca, cb = iteration_median(a.summary, "comm_ops"), iteration_median(base.summary, "comm_ops")
        groups = bucket_groups_per_iteration(a.summary)
        out.append(verdict(pair, "no all-reduce inside no_sync",
                           in_ns == 0 and ca is not None and ca == cb and groups == 1,
                           f"comm_ops per iteration {fmt(ca)} with 4 micro-batches vs {fmt(cb)} with 1; "
                           f"backward ranges with all-reduces per iteration {fmt(groups)} (want 1); "
                           f"hook calls inside no_sync {in_ns}"))
    s = skip_dependents(pair, ["ddp_cap25", "ddp_bf16"], u, "bf16 compression halves the bytes")
    if s:
        out.append(s)
    else:
        bb, bf = bucket_bytes_per_iteration(u["ddp_cap25"].summary), bucket_bytes_per_iteration(u["ddp_bf16"].summary)
        ratio = None if not bb or bf is None else bf / bb
        out.append(verdict(pair, "bf16 compression halves the bytes", ratio is not None and abs(ratio - 0.5) <= 0.01,
                           f"bucket bytes per iteration {fmt(bf)} vs {fmt(bb)}: ratio {fmt(ratio)} (want 0.5)"))
    return out


def check_fsdp(runs, margin=0.05):
    pair = "fsdp"
    out, u = require(pair, runs, list(RUNS[pair]))
    for r in u.values():
        out += check_quality(pair, r)
    for n, want_stall in (("fsdp_prefetch_on", False), ("fsdp_prefetch_off", True)):
        if n not in u:
            continue
        s = u[n].summary
        row = fsdp_row(s, "backward")
        out.append(verdict(pair, f"{n}: backward all-gathers", row is not None and row.get("count", 0) > 0,
                           f"fsdp[backward, allgather] count {None if row is None else row.get('count')}"))
        # A silent finding only counts when the FSDP analyzer saw all-gathers at all (never pass on no data).
        seen = bool((row or {}).get("count")) and bool((fsdp_row(s, "forward") or {}).get("count"))
        fired = bool(prefetch_findings(s, "backward"))
        out.append(verdict(pair, f"{n}: backward prefetch finding {'fires' if want_stall else 'silent'}",
                           fired == want_stall and (want_stall or seen),
                           f"'parameter all-gathers in backward are exposed (prefetch stalls' fired: {fired}"
                           + ("" if seen else "; no forward/backward all-gathers recorded")))
        if not want_stall:
            fwd = bool(prefetch_findings(s, "forward"))
            out.append(verdict(pair, f"{n}: forward prefetch finding silent", not fwd and seen,
                               f"fired: {fwd}" + ("" if seen else "; no forward/backward all-gathers recorded")))
    s = skip_dependents(pair, ["fsdp_prefetch_on", "fsdp_prefetch_off"], u, "prefetch hides backward all-gathers")
    if s:
        out.append(s)
    else:
        on, off = u["fsdp_prefetch_on"].summary, u["fsdp_prefetch_off"].summary
        ron, roff = fsdp_row(on, "backward"), fsdp_row(off, "backward")
        eon = None if ron is None else ron.get("exposed_ns")
        eoff = None if roff is None else roff.get("exposed_ns")
        out.append(verdict(pair, "prefetch hides backward all-gathers",
                           eon is not None and eoff is not None and eon < eoff,
                           f"exposed backward all-gather ns: on {eon}, off {eoff}"))
        g, b = overlap_ratio(on), overlap_ratio(off)
        out.append(verdict(pair, "prefetch on overlaps more", g is not None and b is not None and g >= b + margin,
                           f"overlap_ratio on {fmt(g)} vs off {fmt(b)} (margin {margin})"))
    if "fsdp_no_reshard" in u:
        s = u["fsdp_no_reshard"].summary
        row, fwd = fsdp_row(s, "backward"), fsdp_row(s, "forward")
        n = 0 if row is None else row.get("count", 0)
        nf = 0 if fwd is None else fwd.get("count", 0)
        out.append(verdict(pair, "fsdp_no_reshard: no backward all-gathers", n == 0 and nf > 0,
                           f"fsdp[backward, allgather] count {n}, forward {nf} (want 0 and > 0)"))
    return out


def exposed_comm_per_iteration(summary):
    return iteration_median(summary, "exposed_comm_ns")


def check_tp(runs):
    pair = "tp"
    out, u = require(pair, runs, list(RUNS[pair]))
    for r in u.values():
        out += check_quality(pair, r)
    if "tp_sync" in u:
        s = u["tp_sync"].summary
        ag, rs = op_type(s, "allgather"), op_type(s, "reducescatter")
        n = sum(x.get("count", 0) for x in (ag, rs) if x)
        t = sum(x.get("time_ns", 0) for x in (ag, rs) if x)
        e = sum(x.get("exposed_ns", 0) for x in (ag, rs) if x)
        frac = None if not t else e / t
        out.append(verdict(pair, "tp_sync: sequence-parallel collectives recorded", n > 0,
                           f"{n} all-gather/reduce-scatter ops"))
        out.append(verdict(pair, "tp_sync: collectives serialized with the matmuls", frac is not None and frac >= 0.5,
                           f"exposed fraction {fmt(frac)} (want >= 0.5)"))
    s = skip_dependents(pair, ["tp_sync", "tp_async"], u, "async TP hides more than sync TP")
    if s:
        out.append(s)
    else:
        es, ea = (exposed_comm_per_iteration(u[n].summary) for n in ("tp_sync", "tp_async"))
        ts, ta = (u[n].sample.get("step_ms_median") for n in ("tp_sync", "tp_async"))
        out.append(verdict(pair, "async TP: less exposed NCCL time per iteration",
                           es is not None and ea is not None and ea < es,
                           f"exposed_comm_ns median: async {fmt(ea)}, sync {fmt(es)}"))
        out.append(verdict(pair, "async TP: faster step", ts is not None and ta is not None and ta < ts,
                           f"step ms median: async {fmt(ta, 3)}, sync {fmt(ts, 3)}"))
    return out


def check_pp(runs):
    pair = "pp"
    out, u = require(pair, runs, list(RUNS[pair]))
    for r in u.values():
        out += check_quality(pair, r)
        if (r.sample.get("world_size") or 1) > 1:
            p2p = op_type(r.summary, "p2p")
            out.append(verdict(pair, f"{r.name}: send/recv between stages recorded",
                               p2p is not None and p2p.get("count", 0) > 0,
                               f"op_types p2p count {None if p2p is None else p2p.get('count')}"))
        # The pipeline bubble that communication causes: the time recvs waited for their peer's
        # send (overlapprof's point_to_point section, docs/cross-rank.md), over the ranks' wall time.
        pp = r.summary.get("point_to_point")
        want = r.sample.get("observed", {}).get("theoretical_bubble_share")
        if not isinstance(pp, dict):
            out.append(Result(pair, f"{r.name}: pipeline bubble share", SKIP,
                              "the summary has no point_to_point section (no send/recv recorded, or an overlapprof "
                              f"without send/recv pairing); theoretical {fmt(want)}"))
            continue
        if (r.sample.get("world_size") or 1) > 1:
            out.append(verdict(pair, f"{r.name}: sends paired with recvs across stages", (pp.get("pairs") or 0) > 0,
                               f"point_to_point.pairs {pp.get('pairs')}, unpaired sends {pp.get('unpaired_sends')}, "
                               f"recvs {pp.get('unpaired_recvs')}"))
        wall = sum(x.get("wall_ns") or 0 for x in r.summary.get("ranks") or [])
        wait = sum(x.get("recv_wait_ns") or 0 for x in pp.get("ranks") or [] if isinstance(x, dict))
        got = wait / wall if wall > 0 else None
        out.append(verdict(pair, f"{r.name}: pipeline bubble share",
                           got is not None and want is not None and abs(got - want) <= 0.1,
                           f"recv wait / wall over the ranks: {fmt(got)}, theoretical {fmt(want)} (tolerance 0.1)"))
    s = skip_dependents(pair, ["pp_gpipe", "pp_interleaved"], u, "interleaved idles less than GPipe (proxy)")
    shared = [n for n in ("pp_gpipe", "pp_interleaved") if n in u and (u[n].sample or {}).get("shared_gpu")]
    if s:
        out.append(s)
    elif shared:
        # Interleaving shrinks the bubble by letting stages compute at once on their own GPUs. Ranks
        # time-sliced on one GPU never compute at once, and each rank's idle time holds the other's
        # slices (seen on an H100: interleaved 0.54 vs GPipe 0.42, more send/recv over sockets).
        out.append(Result(pair, "interleaved idles less than GPipe (proxy)", SKIP,
                          f"{', '.join(shared)}: the ranks share one GPU (time-sliced), where stages never compute "
                          "at once: needs one GPU per rank"))
    else:
        g, i = mean_idle_share(u["pp_gpipe"].summary), mean_idle_share(u["pp_interleaved"].summary)
        out.append(verdict(pair, "interleaved idles less than GPipe (proxy)", g is not None and i is not None and i < g,
                           f"mean idle share (1 - compute/wall): interleaved {fmt(i)}, gpipe {fmt(g)}"))
    if "pp_1f1b_slow1" in u:
        r = u["pp_1f1b_slow1"]
        want = r.sample.get("observed", {}).get("slow_rank")
        ranks = r.summary.get("ranks") or []
        top = max(ranks, key=lambda x: x.get("compute_ns") or 0) if ranks else None
        got = None if top is None else top.get("rank")
        out.append(verdict(pair, "pp_1f1b_slow1: slow stage named", want is not None and got == want,
                           f"rank with the most compute_ns: {got}, slow stage's rank: {want}"))
        pp = r.summary.get("point_to_point")
        if isinstance(pp, dict):
            waited = pp.get("bottleneck_rank")
            out.append(verdict(pair, "pp_1f1b_slow1: the stage everyone waits on", want is not None and waited == want,
                               f"point_to_point.bottleneck_rank {waited}, slow stage's rank {want}"))
        else:
            out.append(Result(pair, "pp_1f1b_slow1: the stage everyone waits on", SKIP,
                              "the summary has no point_to_point section"))
        if "pp_1f1b" in u:
            a, b = mean_idle_share(u["pp_1f1b"].summary), None
            others = [idle_share(r.summary, x.get("rank")) for x in ranks if x.get("rank") != want]
            others = [v for v in others if v is not None]
            b = statistics.fmean(others) if others else None
            out.append(verdict(pair, "slow stage: the other ranks idle more", a is not None and b is not None and b > a,
                               f"mean idle share of the other ranks {fmt(b)} vs {fmt(a)} without a slow stage"))
    return out


CHECKERS = {"ddp": check_ddp, "fsdp": check_fsdp, "tp": check_tp, "pp": check_pp}


def check_all(runs, pairs):
    out = []
    for p in pairs:
        out += CHECKERS[p](runs)
    return out


def render_markdown(results, meta):
    lines = [f"# overlapprof reference workloads ({meta.get('device', '?')})", "",
             f"{meta.get('started', '')}; torch {meta.get('torch_version', '?')}; {meta.get('nproc', '?')} rank(s)", "",
             "| pair | check | status | detail |", "|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.pair} | {r.name} | {'**FAIL**' if r.status == FAIL else r.status} | "
                     f"{r.detail.replace('|', '/')} |")
    lines.append("")
    return "\n".join(lines)


def load_runs(runs_dir):
    """{name: Run} from OUT/runs/NAME/{summary.json,sample.json} (what a previous run left)."""
    runs = {}
    for name in sorted(os.listdir(runs_dir)):
        d = os.path.join(runs_dir, name)
        if not os.path.isdir(d):
            continue
        sample = summary = None
        if os.path.exists(os.path.join(d, "sample.json")):
            with open(os.path.join(d, "sample.json")) as f:
                sample = json.load(f)
        if os.path.exists(os.path.join(d, "summary.json")):
            with open(os.path.join(d, "summary.json")) as f:
                summary = json.load(f)
        err = None
        if summary is None and not (sample or {}).get("skipped"):
            err = "no summary.json"
        runs[name] = Run(name, summary, sample, err)
    return runs


# ----------------------------------------------------------------------------------------------
# Driver.


def log(msg):
    print(f"[expectations {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def record_run(name, script, args, out_runs, prof, nproc, python, env, timeout, logfile):
    d = os.path.join(out_runs, name)
    os.makedirs(d, exist_ok=True)
    store, sample_path, summary_path = (os.path.join(d, x) for x in ("store", "sample.json", "summary.json"))
    cmd = [prof, "run", "-o", store, "--no-analyze", "--", python, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={nproc}", os.path.join(HERE, script)] + args + ["--json", sample_path]
    log("$ " + " ".join(cmd))
    with open(logfile, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return Run(name, error=f"timed out after {timeout} s (log: {logfile})")
    sample = None
    if os.path.exists(sample_path):
        with open(sample_path) as f:
            sample = json.load(f)
    if sample and sample.get("skipped"):
        log(f"{name}: skipped: {sample['skipped']}")
        return Run(name, sample=sample)
    if rc != 0 or sample is None:
        return Run(name, sample=sample, error=f"exit {rc}{'' if sample else ', no sample.json'} (log: {logfile})")
    with open(logfile, "a") as f:
        rc = subprocess.run([prof, "analyze", store, "--json", summary_path], stdout=f, stderr=subprocess.STDOUT,
                            env=env, timeout=600).returncode
    if rc not in (0, 4) or not os.path.exists(summary_path):
        return Run(name, sample=sample, error=f"overlapprof analyze exit {rc} (log: {logfile})")
    with open(summary_path) as f:
        return Run(name, json.load(f), sample)


def main(argv=None):
    ap = argparse.ArgumentParser(description="overlapprof reference-workload expectations (samples/README.md)")
    ap.add_argument("--overlapprof", default=os.path.join(ROOT, "build", "overlapprof"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "gpu", "out", "workloads"))
    ap.add_argument("--pairs", default="ddp,fsdp,tp,pp", help="comma-separated subset of " + ",".join(RUNS))
    ap.add_argument("--nproc", type=int, default=2, help="ranks per run (several share one GPU)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter with PyTorch")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per run")
    ap.add_argument("--from", dest="from_dir", default="", help="check OUT/runs left by a previous run; run nothing")
    args = ap.parse_args(argv)
    pairs = [p for p in args.pairs.split(",") if p]
    bad = [p for p in pairs if p not in RUNS]
    if bad:
        ap.error(f"unknown pair(s) {bad}; known: {list(RUNS)}")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    meta = {"schema": "overlapprof.expectations/1", "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "nproc": args.nproc, "pairs": pairs}
    if args.from_dir:
        if not os.path.isdir(args.from_dir):
            print(f"check_expectations.py: no directory {args.from_dir}", file=sys.stderr)
            return 2
        runs = load_runs(args.from_dir)
    else:
        prof = os.path.abspath(args.overlapprof)
        if not os.access(prof, os.X_OK):
            print(f"check_expectations.py: no overlapprof binary at {prof}", file=sys.stderr)
            return 2
        probe = subprocess.run([args.python, "-c", "import torch; print(torch.__version__, torch.cuda.is_available())"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            print(f"check_expectations.py: {args.python} cannot import torch", file=sys.stderr)
            return 2
        meta["torch_version"], cuda = probe.stdout.split()
        if cuda != "True":
            print("check_expectations.py: no CUDA device visible to PyTorch (these runs need a GPU)", file=sys.stderr)
            return 2
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.setdefault("NCCL_SOCKET_IFNAME", "lo")
        out_runs = os.path.join(out, "runs")
        os.makedirs(out_runs, exist_ok=True)
        logfile = os.path.join(out, "log.txt")
        open(logfile, "w").close()
        runs = {}
        for p in pairs:
            for name, (script, sargs) in RUNS[p].items():
                d = os.path.join(out_runs, name)
                subprocess.run(["rm", "-rf", d])
                runs[name] = record_run(name, script, sargs, out_runs, prof, args.nproc, args.python, env,
                                        args.timeout, logfile)
                if runs[name].sample.get("step_ms_median") is not None:
                    log(f"{name}: step median {runs[name].sample['step_ms_median']:.2f} ms")
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=60)
            meta["device"] = smi.stdout.strip().splitlines()[0]
        except (OSError, subprocess.TimeoutExpired, IndexError):
            meta["device"] = "?"
    results = check_all(runs, pairs)
    for r in results:
        print(repr(r), flush=True)
    with open(os.path.join(out, "expectations.json"), "w") as f:
        json.dump({**meta, "results": [r.as_dict() for r in results]}, f, indent=1)
    with open(os.path.join(out, "expectations.md"), "w") as f:
        f.write(render_markdown(results, meta))
    n = {s: sum(r.status == s for r in results) for s in (PASS, FAIL, SKIP)}
    print(f"expectations: {n[PASS]} passed, {n[FAIL]} failed, {n[SKIP]} skipped", flush=True)
    return 1 if n[FAIL] else 0


if __name__ == "__main__":
    sys.exit(main())
