#!/usr/bin/env python3
"""CPU unit tests of samples/check_expectations.py on synthetic summaries (stdlib unittest; ctest
`samples_expectations_logic`). Each pair's checks pass on a summary shaped like the known behaviour and
fail (or skip, never pass) when one signal is broken."""
import contextlib
import copy
import io
import json
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_expectations as ce  # noqa: E402

MB = 2**20


def summary(ranks=2, iters=4, overlap=0.5, comm_ops=10, compute=(100,), wall=(200,), exposed_comm=50, dq=None):
    rows, its = [], []
    for r in range(ranks):
        c = compute[r % len(compute)]
        w = wall[r % len(wall)]
        rows.append({"rank": r, "overlap_ratio": overlap, "comm_ops": comm_ops * iters, "compute_ns": c * iters,
                     "wall_ns": w * iters, "data_quality": copy.deepcopy(dq or [])})
        for i in range(iters):
            its.append({"rank": r, "index": i, "warmup": i == 0, "comm_ops": comm_ops, "compute_ns": c,
                        "wall_ns": w, "exposed_comm_ns": exposed_comm})
    return {"schema": "overlapprof.summary/1", "ranks": rows, "iterations": its, "findings": [], "op_types": [],
            "buckets": [], "bucket_stalls": [], "fsdp": [], "fsdp_allgathers": [], "tp": [],
            "data_quality": {"errors": 0, "warnings": 0}}


def sample(world=2, **observed):
    return {"schema": "x", "world_size": world, "observed": observed, "step_ms_median": observed.pop("step_ms", 10.0)}


def ddp_run(name, buckets, bucket_bytes, overlap, late=False, groups=1, comm_ops=None, hook_buckets=None,
            hook_bytes=None, in_no_sync=0, iters=4):
    s = summary(iters=iters, overlap=overlap, comm_ops=comm_ops if comm_ops is not None else buckets)
    for r in range(2):
        for i in range(iters):
            for g in range(groups):
                s["bucket_stalls"].append({"rank": r, "iteration": i, "warmup": i == 0, "buckets": buckets})
            for b in range(buckets):
                s["buckets"].append({"rank": r, "iteration": i, "warmup": i == 0, "index": b, "bytes": bucket_bytes})
    if late:
        s["findings"].append({"analyzer": "ddp_buckets", "rank": 0, "severity": "warning",
                              "message": "first gradient bucket launched at 97% of backward: bucket_cap_mb is too large"})
    obs = {"buckets_per_step": hook_buckets if hook_buckets is not None else buckets,
           "bytes_per_step": hook_bytes if hook_bytes is not None else buckets * bucket_bytes,
           "allreduce_in_no_sync": in_no_sync}
    return ce.Run(name, s, sample(**obs))


def ddp_runs():
    total = 400 * MB
    return {
        "ddp_cap1": ddp_run("ddp_cap1", 200, total // 200, 0.7),
        "ddp_cap25": ddp_run("ddp_cap25", 16, total // 16, 0.6),
        "ddp_cap1000": ddp_run("ddp_cap1000", 1, total, 0.01, late=True),
        "ddp_accum4": ddp_run("ddp_accum4", 16, total // 16, 0.6),
        "ddp_bf16": ddp_run("ddp_bf16", 16, total // 32, 0.7),
    }


def statuses(results):
    return {r.name: r.status for r in results}


def failed(results):
    return sorted(r.name for r in results if r.status == ce.FAIL)


class DdpTest(unittest.TestCase):
    def test_known_behaviour_passes(self):
        res = ce.check_ddp(ddp_runs())
        self.assertEqual(failed(res), [])
        self.assertFalse([r for r in res if r.status == ce.SKIP])
        st = statuses(res)
        for name in ("bucket count falls as buckets grow", "25 MB overlaps more than 1000 MB", "1000 MB: nothing hidden",
                     "late-bucket finding on 1000 MB only", "no all-reduce inside no_sync",
                     "bf16 compression halves the bytes", "ddp_cap25: buckets per iteration",
                     "ddp_bf16: bucket bytes per iteration"):
            self.assertEqual(st[name], ce.PASS, name)

    def test_bucket_count_differs_from_hook(self):
        runs = ddp_runs()
        runs["ddp_cap25"] = ddp_run("ddp_cap25", 16, 25 * MB, 0.6, hook_buckets=17, hook_bytes=16 * 25 * MB)
        self.assertIn("ddp_cap25: buckets per iteration", failed(ce.check_ddp(runs)))

    def test_bytes_differ_from_hook(self):
        runs = ddp_runs()
        runs["ddp_cap25"] = ddp_run("ddp_cap25", 16, 25 * MB, 0.6, hook_bytes=16 * 25 * MB + 4)
        self.assertEqual(failed(ce.check_ddp(runs)), ["ddp_cap25: bucket bytes per iteration"])

    def test_bucket_ordering(self):
        runs = ddp_runs()
        runs["ddp_cap1000"] = ddp_run("ddp_cap1000", 2, 200 * MB, 0.01, late=True)
        self.assertIn("bucket count falls as buckets grow", failed(ce.check_ddp(runs)))

    def test_overlap_ordering_and_serial(self):
        runs = ddp_runs()
        runs["ddp_cap1000"] = ddp_run("ddp_cap1000", 1, 400 * MB, 0.58, late=True)
        self.assertEqual(failed(ce.check_ddp(runs)), ["1000 MB: nothing hidden", "25 MB overlaps more than 1000 MB"])

    def test_late_finding_only_on_1000(self):
        runs = ddp_runs()
        runs["ddp_cap25"] = ddp_run("ddp_cap25", 16, 25 * MB, 0.6, late=True)
        self.assertEqual(failed(ce.check_ddp(runs)), ["late-bucket finding on 1000 MB only"])
        runs = ddp_runs()
        runs["ddp_cap1000"] = ddp_run("ddp_cap1000", 1, 400 * MB, 0.01, late=False)
        self.assertEqual(failed(ce.check_ddp(runs)), ["late-bucket finding on 1000 MB only"])

    def test_all_reduce_inside_no_sync(self):
        for kw in ({"comm_ops": 64}, {"groups": 4}, {"in_no_sync": 3}):
            runs = ddp_runs()
            runs["ddp_accum4"] = ddp_run("ddp_accum4", 16, 25 * MB, 0.6, **kw)
            self.assertEqual(failed(ce.check_ddp(runs)), ["no all-reduce inside no_sync"], kw)

    def test_compression_not_halved(self):
        runs = ddp_runs()
        runs["ddp_bf16"] = ddp_run("ddp_bf16", 16, 25 * MB, 0.6)
        self.assertEqual(failed(ce.check_ddp(runs)), ["bf16 compression halves the bytes"])

    def test_skipped_run_is_skip_not_pass(self):
        runs = ddp_runs()
        runs["ddp_bf16"] = ce.Run("ddp_bf16", sample={"skipped": "gloo cannot all-reduce bf16"})
        st = statuses(ce.check_ddp(runs))
        self.assertEqual(st["ddp_bf16"], ce.SKIP)
        self.assertEqual(st["bf16 compression halves the bytes"], ce.SKIP)
        self.assertNotIn("ddp_bf16: buckets per iteration", st)
        del runs["ddp_cap1"]
        st = statuses(ce.check_ddp(runs))
        self.assertEqual(st["ddp_cap1"], ce.SKIP)
        self.assertEqual(st["bucket count falls as buckets grow"], ce.SKIP)

    def test_failed_run_and_data_quality(self):
        runs = ddp_runs()
        runs["ddp_cap1"] = ce.Run("ddp_cap1", error="exit 1")
        self.assertIn("ddp_cap1", failed(ce.check_ddp(runs)))
        runs = ddp_runs()
        runs["ddp_cap25"].summary["ranks"][1]["data_quality"] = [
            {"counter": "comm_ops_without_gpu_activity", "severity": "warning", "value": 2}]
        self.assertEqual(failed(ce.check_ddp(runs)), ["ddp_cap25: rank 1 data quality"])
        runs = ddp_runs()
        runs["ddp_cap25"].summary["ranks"].pop()
        self.assertEqual(failed(ce.check_ddp(runs)), ["ddp_cap25: one store per rank"])


def fsdp_run(name, bwd_count=8, bwd_exposed=100, bwd_stalls=0, findings=(), overlap=0.6):
    s = summary(overlap=overlap)
    for r in range(2):
        s["fsdp"].append({"rank": r, "phase": "forward", "op": "allgather", "count": 8, "time_ns": 800,
                          "exposed_ns": 50, "prefetch_stalls": 0, "prefetch_stall_ns": 0})
        if bwd_count:
            s["fsdp"].append({"rank": r, "phase": "backward", "op": "allgather", "count": bwd_count,
                              "time_ns": 800, "exposed_ns": bwd_exposed, "prefetch_stalls": bwd_stalls,
                              "prefetch_stall_ns": 0})
        s["fsdp"].append({"rank": r, "phase": "backward", "op": "reducescatter", "count": 8, "time_ns": 800,
                          "exposed_ns": 100, "prefetch_stalls": 0, "prefetch_stall_ns": 0})
    for phase in findings:
        s["findings"].append({"analyzer": "sharded", "rank": 0, "severity": "warning",
                              "message": f"8 of 8 parameter all-gathers in {phase} are exposed (prefetch stalls, 5 ms "
                                         "in total): prefetch ..."})
    return ce.Run(name, s, sample())


def fsdp_runs():
    return {"fsdp_prefetch_on": fsdp_run("fsdp_prefetch_on", bwd_exposed=50, overlap=0.7),
            "fsdp_prefetch_off": fsdp_run("fsdp_prefetch_off", bwd_exposed=700, bwd_stalls=8,
                                          findings=("backward",), overlap=0.3),
            "fsdp_no_reshard": fsdp_run("fsdp_no_reshard", bwd_count=0)}


class FsdpTest(unittest.TestCase):
    def test_known_behaviour_passes(self):
        res = ce.check_fsdp(fsdp_runs())
        self.assertEqual(failed(res), [])
        self.assertEqual(statuses(res)["prefetch hides backward all-gathers"], ce.PASS)

    def test_finding_on_good_configuration(self):
        runs = fsdp_runs()
        runs["fsdp_prefetch_on"] = fsdp_run("fsdp_prefetch_on", bwd_exposed=50, overlap=0.7, findings=("forward",))
        self.assertEqual(failed(ce.check_fsdp(runs)), ["fsdp_prefetch_on: forward prefetch finding silent"])
        runs["fsdp_prefetch_on"] = fsdp_run("fsdp_prefetch_on", bwd_exposed=50, overlap=0.7, findings=("backward",))
        self.assertEqual(failed(ce.check_fsdp(runs)), ["fsdp_prefetch_on: backward prefetch finding silent"])

    def test_no_finding_on_bad_configuration(self):
        runs = fsdp_runs()
        runs["fsdp_prefetch_off"] = fsdp_run("fsdp_prefetch_off", bwd_exposed=700, overlap=0.3)
        self.assertEqual(failed(ce.check_fsdp(runs)), ["fsdp_prefetch_off: backward prefetch finding fires"])

    def test_prefetch_not_hiding(self):
        runs = fsdp_runs()
        runs["fsdp_prefetch_on"] = fsdp_run("fsdp_prefetch_on", bwd_exposed=800, overlap=0.3)
        self.assertEqual(failed(ce.check_fsdp(runs)), ["prefetch hides backward all-gathers",
                                                       "prefetch on overlaps more"])

    def test_no_allgathers_at_all_never_passes(self):
        runs = fsdp_runs()
        for n in runs:
            runs[n].summary["fsdp"] = []
            runs[n].summary["findings"] = []
        res = ce.check_fsdp(runs)
        passed = [r.name for r in res if r.status == ce.PASS]
        self.assertEqual([p for p in passed if "finding" in p or "all-gathers" in p], [], passed)

    def test_backward_allgathers_without_reshard(self):
        runs = fsdp_runs()
        runs["fsdp_no_reshard"] = fsdp_run("fsdp_no_reshard", bwd_count=8)
        self.assertEqual(failed(ce.check_fsdp(runs)), ["fsdp_no_reshard: no backward all-gathers"])


def tp_run(name, ag=8, rs=8, exposed_frac=0.9, exposed_comm=500, step_ms=20.0):
    s = summary(exposed_comm=exposed_comm)
    for r in range(2):
        for op, n in (("allgather", ag), ("reducescatter", rs)):
            if n:
                s["op_types"].append({"rank": r, "op": op, "count": n, "time_ns": 1000,
                                      "exposed_ns": int(1000 * exposed_frac)})
    return ce.Run(name, s, sample(step_ms=step_ms))


class TpTest(unittest.TestCase):
    def test_known_behaviour_passes(self):
        runs = {"tp_sync": tp_run("tp_sync"), "tp_async": tp_run("tp_async", ag=0, rs=0, exposed_comm=50, step_ms=15.0)}
        res = ce.check_tp(runs)
        self.assertEqual(failed(res), [])
        self.assertEqual(statuses(res)["async TP: faster step"], ce.PASS)

    def test_async_skipped_says_why(self):
        runs = {"tp_sync": tp_run("tp_sync"),
                "tp_async": ce.Run("tp_async", sample={"skipped": "needs one GPU per rank with P2P"})}
        res = ce.check_tp(runs)
        st = statuses(res)
        self.assertEqual(st["tp_async"], ce.SKIP)
        self.assertEqual(st["async TP hides more than sync TP"], ce.SKIP)
        self.assertIn("P2P", [r for r in res if r.name == "tp_async"][0].detail)
        self.assertEqual(failed(res), [])

    def test_sync_not_serialized_or_absent(self):
        runs = {"tp_sync": tp_run("tp_sync", exposed_frac=0.2),
                "tp_async": tp_run("tp_async", exposed_comm=50, step_ms=15.0)}
        self.assertEqual(failed(ce.check_tp(runs)), ["tp_sync: collectives serialized with the matmuls"])
        runs["tp_sync"] = tp_run("tp_sync", ag=0, rs=0)
        self.assertIn("tp_sync: sequence-parallel collectives recorded", failed(ce.check_tp(runs)))

    def test_async_not_better(self):
        runs = {"tp_sync": tp_run("tp_sync"), "tp_async": tp_run("tp_async", exposed_comm=600, step_ms=25.0)}
        self.assertEqual(failed(ce.check_tp(runs)), ["async TP: faster step",
                                                     "async TP: less exposed NCCL time per iteration"])


def pp_run(name, compute=(100, 100), wall=(200, 200), p2p=16, recv_wait=None, slow_rank=None, theory=0.11,
           bottleneck=None, pairs=16):
    s = summary(compute=compute, wall=wall)
    for r in range(2):
        if p2p:
            s["op_types"].append({"rank": r, "op": "p2p", "count": p2p, "time_ns": 100, "exposed_ns": 50})
    if recv_wait is not None:  # overlapprof's point_to_point section (docs/cross-rank.md)
        s["point_to_point"] = {"pairs": pairs, "unpaired_sends": 0, "unpaired_recvs": 0,
                               "recv_wait_ns": sum(recv_wait), "bottleneck_rank": bottleneck,
                               "ranks": [{"rank": r, "sends": 8, "recvs": 8, "recv_wait_ns": w, "waited_on_ns": 0}
                                         for r, w in enumerate(recv_wait)],
                               "iterations": [], "notices": []}
    return ce.Run(name, s, sample(theoretical_bubble_share=theory, slow_rank=slow_rank))


def pp_runs():
    return {"pp_gpipe": pp_run("pp_gpipe", compute=(120, 120), wall=(200, 200)),
            "pp_1f1b": pp_run("pp_1f1b", compute=(120, 120), wall=(200, 200)),
            "pp_interleaved": pp_run("pp_interleaved", compute=(150, 150), wall=(200, 200), theory=0.06),
            "pp_1f1b_slow1": pp_run("pp_1f1b_slow1", compute=(100, 300), wall=(400, 400), slow_rank=1)}


class PpTest(unittest.TestCase):
    def test_known_behaviour_passes_bubble_skipped(self):
        res = ce.check_pp(pp_runs())
        self.assertEqual(failed(res), [])
        skips = [r for r in res if r.status == ce.SKIP]
        self.assertEqual(len(skips), 5)  # 4 bubble shares, the stage everyone waits on
        self.assertTrue(all("no point_to_point section" in r.detail for r in skips))
        st = statuses(res)
        self.assertEqual(st["pp_1f1b_slow1: slow stage named"], ce.PASS)
        self.assertEqual(st["interleaved idles less than GPipe (proxy)"], ce.PASS)

    def test_bubble_from_point_to_point(self):
        runs = pp_runs()
        # recv wait 192 of 1600 ns of wall (2 ranks x 4 iterations x 200): 0.12, theoretical 0.11.
        runs["pp_gpipe"] = pp_run("pp_gpipe", compute=(120, 120), recv_wait=(90, 102))
        st = statuses(ce.check_pp(runs))
        self.assertEqual(st["pp_gpipe: pipeline bubble share"], ce.PASS)
        self.assertEqual(st["pp_gpipe: sends paired with recvs across stages"], ce.PASS)
        runs["pp_gpipe"] = pp_run("pp_gpipe", compute=(120, 120), recv_wait=(400, 400))  # 0.5
        self.assertEqual(failed(ce.check_pp(runs)), ["pp_gpipe: pipeline bubble share"])
        runs["pp_gpipe"] = pp_run("pp_gpipe", compute=(120, 120), recv_wait=(90, 102), pairs=0)
        self.assertEqual(failed(ce.check_pp(runs)), ["pp_gpipe: sends paired with recvs across stages"])

    def test_stage_everyone_waits_on(self):
        runs = pp_runs()
        runs["pp_1f1b_slow1"] = pp_run("pp_1f1b_slow1", compute=(100, 300), wall=(400, 400), slow_rank=1,
                                       recv_wait=(40, 50), bottleneck=1)
        st = statuses(ce.check_pp(runs))
        self.assertEqual(st["pp_1f1b_slow1: the stage everyone waits on"], ce.PASS)
        runs["pp_1f1b_slow1"] = pp_run("pp_1f1b_slow1", compute=(100, 300), wall=(400, 400), slow_rank=1,
                                       recv_wait=(40, 50), bottleneck=0)
        self.assertEqual(failed(ce.check_pp(runs)), ["pp_1f1b_slow1: the stage everyone waits on"])

    def test_wrong_slow_stage_and_ordering(self):
        runs = pp_runs()
        runs["pp_1f1b_slow1"] = pp_run("pp_1f1b_slow1", compute=(300, 100), wall=(400, 400), slow_rank=1)
        self.assertIn("pp_1f1b_slow1: slow stage named", failed(ce.check_pp(runs)))
        runs = pp_runs()
        runs["pp_interleaved"] = pp_run("pp_interleaved", compute=(100, 100), wall=(200, 200))
        self.assertEqual(failed(ce.check_pp(runs)), ["interleaved idles less than GPipe (proxy)"])
        # Ranks time-sliced on one GPU never compute at once: the comparison is skipped, and says why.
        runs["pp_interleaved"].sample["shared_gpu"] = True
        st = statuses(ce.check_pp(runs))
        self.assertEqual(st["interleaved idles less than GPipe (proxy)"], ce.SKIP)
        self.assertEqual(failed(ce.check_pp(runs)), [])

    def test_missing_p2p(self):
        runs = pp_runs()
        runs["pp_1f1b"] = pp_run("pp_1f1b", compute=(120, 120), p2p=0)
        self.assertEqual(failed(ce.check_pp(runs)), ["pp_1f1b: send/recv between stages recorded"])


class RealSummaryTest(unittest.TestCase):
    """The accessors on a real DDP summary (tests/golden, A100, 2 ranks, 5 buckets per backward): the keys
    they read are the ones overlapprof writes."""

    def test_golden_ddp(self):
        path = os.path.join(ce.ROOT, "tests", "golden", "a100_2rank_rank0.summary.json")
        with open(path) as f:
            s = json.load(f)
        self.assertEqual(ce.buckets_per_iteration(s), 5)
        self.assertEqual(ce.bucket_groups_per_iteration(s), 1)
        per_it = {}
        for b in s["buckets"]:
            per_it[b["iteration"]] = per_it.get(b["iteration"], 0) + b["bytes"]
        self.assertEqual(ce.bucket_bytes_per_iteration(s), sorted(per_it.values())[1])
        self.assertEqual(ce.op_type(s, "allreduce")["count"], 15)
        self.assertIsNotNone(ce.iteration_median(s, "exposed_comm_ns"))
        self.assertIsNotNone(ce.mean_idle_share(s))
        self.assertEqual(len(ce.findings(s, "ddp_buckets")), 1)
        self.assertEqual(ce.prefetch_findings(s), [])
        run = ce.Run("ddp_cap25", s, {"world_size": 1, "observed": {"buckets_per_step": 5,
                                                                     "bytes_per_step": ce.bucket_bytes_per_iteration(s)}})
        res = ce.check_ddp({"ddp_cap25": run})
        st = statuses(res)
        self.assertEqual(st["ddp_cap25: buckets per iteration"], ce.PASS)
        self.assertEqual(st["ddp_cap25: bucket bytes per iteration"], ce.PASS)
        self.assertEqual(st["ddp_cap25: one store per rank"], ce.PASS)


PROF = None  # overlapprof binary: the first argument (ctest passes it), else build/overlapprof


class SynthTest(unittest.TestCase):
    """The checks on summaries overlapprof itself writes, from tests/synth/synth.py's causal DDP (1, 25,
    1000 MB buckets), FSDP (prefetch on/off) and TP (overlap off/on) traces, 2 ranks: the known behaviour
    passes, the pairs swapped fail."""

    @classmethod
    def setUpClass(cls):
        import subprocess
        import tempfile as tf
        cls.tmp = tf.mkdtemp(prefix="ce_synth_")
        cls.s = {}
        if not PROF:
            return
        synth = os.path.join(ce.ROOT, "tests", "synth", "synth.py")
        cases = {"ddp1": ["--bucket-mb", "1"], "ddp25": ["--bucket-mb", "25"], "ddp1000": ["--bucket-mb", "1000"],
                 "fsdp_on": ["--scenario", "fsdp", "--layers", "12", "--model-mb", "500", "--prefetch", "on"],
                 "fsdp_off": ["--scenario", "fsdp", "--layers", "12", "--model-mb", "500", "--prefetch", "off"],
                 "tp_off": ["--scenario", "tp", "--layers", "8", "--tp-overlap", "off"],
                 "tp_on": ["--scenario", "tp", "--layers", "8", "--tp-overlap", "on"]}
        for name, args in cases.items():
            d = os.path.join(cls.tmp, name)
            subprocess.run([sys.executable, synth, d, "--quiet", "--ranks", "2", "--iterations", "5"] + args, check=True)
            out = os.path.join(cls.tmp, name + ".summary.json")
            subprocess.run([PROF, "analyze", d, "--json", out], check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                cls.s[name] = json.load(f)
            with open(d + ".truth.json") as f:
                cls.s[name + ".truth"] = json.load(f)

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        if not PROF:
            self.skipTest("no overlapprof binary (pass it as the first argument, or build build/overlapprof)")

    def ddp(self, name, key):
        truth = self.s[key + ".truth"]
        steady = [b for b in truth["buckets"] if b["rank"] == 0 and b["iteration"] == 2]
        obs = {"buckets_per_step": len(steady), "bytes_per_step": sum(b["bytes"] for b in steady),
               "allreduce_in_no_sync": 0}
        return ce.Run(name, self.s[key], {"world_size": 2, "observed": obs})

    def test_ddp(self):
        runs = {"ddp_cap1": self.ddp("ddp_cap1", "ddp1"), "ddp_cap25": self.ddp("ddp_cap25", "ddp25"),
                "ddp_cap1000": self.ddp("ddp_cap1000", "ddp1000")}
        res = ce.check_ddp(runs)
        self.assertEqual(failed(res), [], [repr(r) for r in res])
        st = statuses(res)
        for name in ("bucket count falls as buckets grow", "25 MB overlaps more than 1000 MB",
                     "1000 MB: nothing hidden", "late-bucket finding on 1000 MB only", "ddp_cap25: buckets per iteration",
                     "ddp_cap1: bucket bytes per iteration"):
            self.assertEqual(st[name], ce.PASS, name)
        swapped = {"ddp_cap1": runs["ddp_cap1"], "ddp_cap25": self.ddp("ddp_cap25", "ddp1000"),
                   "ddp_cap1000": self.ddp("ddp_cap1000", "ddp25")}
        self.assertIn("25 MB overlaps more than 1000 MB", failed(ce.check_ddp(swapped)))

    def test_fsdp(self):
        runs = {"fsdp_prefetch_on": ce.Run("fsdp_prefetch_on", self.s["fsdp_on"], {"world_size": 2}),
                "fsdp_prefetch_off": ce.Run("fsdp_prefetch_off", self.s["fsdp_off"], {"world_size": 2})}
        res = ce.check_fsdp(runs)
        self.assertEqual(failed(res), [], [repr(r) for r in res])
        self.assertEqual(statuses(res)["fsdp_prefetch_off: backward prefetch finding fires"], ce.PASS)
        swapped = {"fsdp_prefetch_on": ce.Run("fsdp_prefetch_on", self.s["fsdp_off"], {"world_size": 2}),
                   "fsdp_prefetch_off": ce.Run("fsdp_prefetch_off", self.s["fsdp_on"], {"world_size": 2})}
        self.assertIn("prefetch hides backward all-gathers", failed(ce.check_fsdp(swapped)))

    def test_bandwidth_bound_finding_is_not_prefetch_advice(self):
        # Prefetch on, but the all-gathers and reduce-scatters outlast the phase's compute (an H100
        # shared by 2 ranks over sockets): the analyzer says prefetching cannot hide them.
        s = copy.deepcopy(self.s["fsdp_on"])
        s["findings"].append({"analyzer": "sharded", "rank": 0, "severity": "warning",
                              "message": "79 of 96 parameter all-gathers in backward are exposed (2.30 s in total), "
                                         "and prefetching cannot hide them: ..."})
        self.assertEqual(ce.prefetch_findings(s, "backward"), [])
        runs = {"fsdp_prefetch_on": ce.Run("fsdp_prefetch_on", s, {"world_size": 2}),
                "fsdp_prefetch_off": ce.Run("fsdp_prefetch_off", self.s["fsdp_off"], {"world_size": 2})}
        self.assertEqual(statuses(ce.check_fsdp(runs))["fsdp_prefetch_on: backward prefetch finding silent"], ce.PASS)

    def test_tp(self):
        def run(name, key):
            ms = ce.iteration_median(self.s[key], "wall_ns") / 1e6
            return ce.Run(name, self.s[key], {"world_size": 2, "step_ms_median": ms})
        res = ce.check_tp({"tp_sync": run("tp_sync", "tp_off"), "tp_async": run("tp_async", "tp_on")})
        self.assertEqual(failed(res), [], [repr(r) for r in res])
        swapped = ce.check_tp({"tp_sync": run("tp_sync", "tp_on"), "tp_async": run("tp_async", "tp_off")})
        self.assertIn("tp_sync: collectives serialized with the matmuls", failed(swapped))


class DriverTest(unittest.TestCase):
    def write(self, root, runs):
        os.makedirs(root)
        for name, r in runs.items():
            d = os.path.join(root, name)
            os.makedirs(d)
            with open(os.path.join(d, "sample.json"), "w") as f:
                json.dump(r.sample, f)
            if r.summary is not None:
                with open(os.path.join(d, "summary.json"), "w") as f:
                    json.dump(r.summary, f)

    def run_main(self, runs, pairs):
        with tempfile.TemporaryDirectory() as tmp:
            self.write(os.path.join(tmp, "runs"), runs)
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                rc = ce.main(["--from", os.path.join(tmp, "runs"), "--out", tmp, "--pairs", pairs])
            with open(os.path.join(tmp, "expectations.json")) as f:
                doc = json.load(f)
            with open(os.path.join(tmp, "expectations.md")) as f:
                md = f.read()
        return rc, buf.getvalue().strip().splitlines()[-1], doc, md

    def test_from_stored_runs(self):
        runs = {**ddp_runs(), **fsdp_runs()}
        rc, last, doc, md = self.run_main(runs, "ddp,fsdp")
        self.assertEqual(rc, 0)
        self.assertRegex(last, r"^expectations: \d+ passed, 0 failed, 0 skipped$")
        self.assertEqual(doc["schema"], "overlapprof.expectations/1")
        self.assertIn("| ddp | bucket count falls as buckets grow | PASS |", md)

    def test_failure_exit_1_and_skips_counted(self):
        runs = ddp_runs()
        runs["ddp_cap1000"] = ddp_run("ddp_cap1000", 1, 400 * MB, 0.58, late=True)
        runs["ddp_bf16"] = ce.Run("ddp_bf16", sample={"skipped": "no bf16"})
        rc, last, doc, md = self.run_main(runs, "ddp")
        self.assertEqual(rc, 1)
        self.assertRegex(last, r"^expectations: \d+ passed, 2 failed, 2 skipped$")
        self.assertIn("**FAIL**", md)

    def test_pp_without_runs_all_skip(self):
        rc, last, _, _ = self.run_main({}, "pp")
        self.assertEqual(rc, 0)
        self.assertRegex(last, r"^expectations: 0 passed, 0 failed, \d+ skipped$")

    def test_bad_pair(self):
        with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
            ce.main(["--pairs", "ddp,nope", "--from", "/nonexistent"])


FAKE_PY = r'''#!/usr/bin/env python3
# A stand-in for a Python with PyTorch: answers the probe, and plays a torchrun'ed workload by copying the
# fixture FIXTURES/<run>/sample.json to --json (exit 1 when it says skipped, as torchrun does).
import json, os, shutil, sys
a = sys.argv[1:]
if a[0] == "-c":
    print("2.11.0 True")
    sys.exit(0)
out = a[a.index("--json") + 1]
run = os.path.basename(os.path.dirname(out))
fix = os.path.join(os.environ["FAKE_FIXTURES"], run)
with open(os.path.join(os.environ["FAKE_FIXTURES"], "calls.txt"), "a") as f:
    f.write(" ".join(a) + "\n")
if not os.path.exists(os.path.join(fix, "sample.json")):
    sys.exit(1)
shutil.copy(os.path.join(fix, "sample.json"), out)
sys.exit(1 if json.load(open(out)).get("skipped") else 0)
'''

FAKE_PROF = r'''#!/usr/bin/env python3
# A stand-in for overlapprof: `run -o STORE --no-analyze -- CMD` runs CMD; `analyze STORE --json PATH`
# copies FIXTURES/<run>/summary.json.
import os, shutil, subprocess, sys
a = sys.argv[1:]
if a[0] == "run":
    os.makedirs(a[a.index("-o") + 1])
    sys.exit(subprocess.run(a[a.index("--") + 1:]).returncode)
if a[0] == "analyze":
    run = os.path.basename(os.path.dirname(a[1]))
    src = os.path.join(os.environ["FAKE_FIXTURES"], run, "summary.json")
    if not os.path.exists(src):
        sys.exit(3)
    shutil.copy(src, a[a.index("--json") + 1])
    sys.exit(0)
sys.exit(2)
'''


class RecordRunTest(unittest.TestCase):
    """main() end to end with a fake overlapprof and a fake PyTorch interpreter."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ce_driver_")
        self.fix = os.path.join(self.tmp, "fixtures")
        os.makedirs(self.fix)
        self.py, self.prof = os.path.join(self.tmp, "python"), os.path.join(self.tmp, "overlapprof")
        for path, text in ((self.py, FAKE_PY), (self.prof, FAKE_PROF)):
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o755)
        os.environ["FAKE_FIXTURES"] = self.fix

    def tearDown(self):
        import shutil
        shutil.rmtree(self.tmp, ignore_errors=True)
        os.environ.pop("FAKE_FIXTURES", None)

    def fixture(self, runs):
        for name, r in runs.items():
            d = os.path.join(self.fix, name)
            os.makedirs(d)
            if r.sample:
                with open(os.path.join(d, "sample.json"), "w") as f:
                    json.dump(r.sample, f)
            if r.summary is not None:
                with open(os.path.join(d, "summary.json"), "w") as f:
                    json.dump(r.summary, f)

    def main(self, pairs="ddp"):
        out = os.path.join(self.tmp, "out")
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = ce.main(["--overlapprof", self.prof, "--python", self.py, "--out", out, "--pairs", pairs])
        with open(os.path.join(out, "expectations.json")) as f:
            doc = json.load(f)
        return rc, buf.getvalue(), {r["check"]: r["status"] for r in doc["results"]}

    def test_pairs_recorded_and_checked(self):
        runs = ddp_runs()
        runs["ddp_bf16"] = ce.Run("ddp_bf16", sample={"skipped": "no bf16 here"})
        self.fixture(runs)
        rc, text, st = self.main()
        self.assertEqual(rc, 0, text)
        self.assertEqual(st["ddp_bf16"], ce.SKIP)
        self.assertEqual(st["bucket count falls as buckets grow"], ce.PASS)
        self.assertRegex(text.strip().splitlines()[-1], r"^expectations: \d+ passed, 0 failed, 2 skipped$")
        with open(os.path.join(self.fix, "calls.txt")) as f:
            calls = f.read().splitlines()
        self.assertEqual(len(calls), 5)
        self.assertTrue(all(c.startswith("-m torch.distributed.run --standalone --nproc_per_node=2 ") for c in calls))
        self.assertTrue(any("ddp_buckets.py --bucket-cap-mb 1000 " in c for c in calls), calls)

    def test_crashed_run_fails(self):
        runs = ddp_runs()
        del runs["ddp_cap25"]  # no fixture: the fake workload exits 1 without --json
        self.fixture(runs)
        rc, text, st = self.main()
        self.assertEqual(rc, 1)
        self.assertEqual(st["ddp_cap25"], ce.FAIL)
        self.assertEqual(st["25 MB overlaps more than 1000 MB"], ce.SKIP)

    def test_no_cuda_is_exit_2(self):
        with open(self.py, "w") as f:
            f.write("#!/bin/sh\necho 2.11.0 False\n")
        with contextlib.redirect_stderr(io.StringIO()) as err:
            rc = ce.main(["--overlapprof", self.prof, "--python", self.py, "--out", os.path.join(self.tmp, "o")])
        self.assertEqual(rc, 2)
        self.assertIn("no CUDA device", err.getvalue())


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        PROF = os.path.abspath(sys.argv.pop(1))
    elif os.access(os.path.join(ce.ROOT, "build", "overlapprof"), os.X_OK):
        PROF = os.path.join(ce.ROOT, "build", "overlapprof")
    unittest.main(verbosity=1)
