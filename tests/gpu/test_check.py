#!/usr/bin/env python3
"""CPU unit tests of tests/gpu/check.py's checking logic on synthetic summaries (stdlib only)."""
import copy
import json
import os
import stat
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402


def truth(mode="overlapped", world=1, ratios=(0.75,), comm_ops=100):
    ranks = []
    for r, ratio in enumerate(ratios[:world] if len(ratios) >= world else list(ratios) * world):
        comm = 10_000_000
        ranks.append({"rank": r, "all": {"iterations": 25, "gemms": 200, "comm_ops": comm_ops,
                                         "compute_ns": 50_000_000, "comm_ns": comm,
                                         "overlap_ns": int(comm * ratio), "overlap_ratio": ratio},
                      "step_ms_median": 15.0})
    return {"schema": "overlapprof.sample.gemm_allreduce/1",
            "config": {"mode": mode, "world_size": world, "nccl_version": 22809}, "ranks": ranks}


def summary(ratios=(0.76,), comm_ops=100, dq=None, errors=0, ranks=None):
    out = []
    for r, ratio in enumerate(ratios):
        out.append({"rank": r if ranks is None else ranks[r], "comm_ns": 9_900_000, "compute_ns": 49_000_000,
                    "overlap_ns": None if ratio is None else int(9_900_000 * ratio),
                    "overlap_ratio": ratio, "comm_ops": comm_ops,
                    "data_quality": copy.deepcopy(dq or [])})
    return {"schema": "overlapprof.summary/1", "ranks": out,
            "data_quality": {"errors": errors, "warnings": 0}}


def failed(checks):
    return [c for c in checks if not c.ok]


class QualityTest(unittest.TestCase):
    def test_clean(self):
        self.assertEqual(check.quality_problems({"data_quality": []}), [])
        self.assertEqual(check.quality_problems({}), [])

    def test_info_and_other_warnings_pass(self):
        dq = [{"counter": "activities_zero_duration", "severity": "info", "value": 3},
              {"counter": "rank_unknown", "severity": "warning", "value": 1}]
        self.assertEqual(check.quality_problems({"data_quality": dq}), [])

    def test_comm_without_gpu_activity_fails(self):
        dq = [{"counter": "comm_ops_without_gpu_activity", "severity": "warning", "value": 2}]
        self.assertEqual(check.quality_problems({"data_quality": dq}), ["comm_ops_without_gpu_activity=2"])

    def test_dropped_and_error_fail(self):
        dq = [{"counter": "records_dropped_cupti", "severity": "error", "value": 7},
              {"counter": "records_dropped_hooks", "severity": "warning", "value": 1},
              {"counter": "some_future_counter", "severity": "error", "value": 1},
              {"counter": "records_dropped_other", "severity": "error", "value": 0}]
        self.assertEqual(check.quality_problems({"data_quality": dq}),
                         ["records_dropped_cupti=7", "records_dropped_hooks=1", "some_future_counter=1"])


class SampleTest(unittest.TestCase):
    def test_pass_within_tolerance(self):
        checks, rows = check.check_sample("w", summary((0.76,)), truth("overlapped", 1, (0.75,)))
        self.assertEqual(failed(checks), [])
        self.assertEqual(len(rows), 1)
        self.assertAlmostEqual(rows[0]["diff_pp"], 1.0, places=6)

    def test_ratio_off_by_more_than_tolerance(self):
        checks, _ = check.check_sample("w", summary((0.78,)), truth("overlapped", 1, (0.75,)))
        self.assertEqual([c.name for c in failed(checks)], ["rank 0 overlap_ratio vs ground truth"])
        checks, _ = check.check_sample("w", summary((0.78,)), truth("overlapped", 1, (0.75,)), tol_pp=3.5)
        self.assertEqual(failed(checks), [])

    def test_tolerance_is_absolute_both_ways(self):
        checks, _ = check.check_sample("w", summary((0.7301,)), truth("overlapped", 1, (0.75,)))
        self.assertEqual(failed(checks), [])
        checks, _ = check.check_sample("w", summary((0.7299,)), truth("overlapped", 1, (0.75,)))
        self.assertEqual(len(failed(checks)), 1)

    def test_serial_must_be_near_zero(self):
        checks, _ = check.check_sample("w", summary((0.0,)), truth("serial", 1, (0.0,)))
        self.assertEqual(failed(checks), [])
        # Agrees with the ground truth but is not near 0: the mode expectation fails.
        checks, _ = check.check_sample("w", summary((0.05,)), truth("serial", 1, (0.05,)))
        self.assertEqual([c.name for c in failed(checks)], ["rank 0 serial expectation"])

    def test_overlapped_must_be_clearly_positive(self):
        checks, _ = check.check_sample("w", summary((0.01,)), truth("overlapped", 1, (0.01,)))
        self.assertEqual([c.name for c in failed(checks)], ["rank 0 overlapped expectation"])
        checks, _ = check.check_sample("w", summary((0.01,)), truth("chunked", 1, (0.01,)))
        self.assertEqual([c.name for c in failed(checks)], ["rank 0 chunked expectation"])

    def test_null_ratio_fails(self):
        checks, _ = check.check_sample("w", summary((None,)), truth("overlapped", 1, (0.75,)))
        names = [c.name for c in failed(checks)]
        self.assertIn("rank 0 overlap_ratio vs ground truth", names)
        self.assertIn("rank 0 overlapped expectation", names)

    def test_comm_ops_must_match(self):
        checks, _ = check.check_sample("w", summary((0.75,), comm_ops=99), truth("overlapped", 1, (0.75,)))
        self.assertEqual([c.name for c in failed(checks)], ["rank 0 comm_ops"])

    def test_two_ranks(self):
        checks, rows = check.check_sample("w", summary((0.30, 0.41)), truth("chunked", 2, (0.30, 0.40)))
        self.assertEqual(failed(checks), [])
        self.assertEqual([r["rank"] for r in rows], [0, 1])

    def test_two_ranks_one_store_missing(self):
        checks, _ = check.check_sample("w", summary((0.30,)), truth("chunked", 2, (0.30, 0.40)))
        names = [c.name for c in failed(checks)]
        self.assertEqual(names, ["ranks", "rank 1 present"])

    def test_ranks_matched_by_rank_not_order(self):
        s = summary((0.40, 0.30), ranks=[1, 0])
        checks, rows = check.check_sample("w", s, truth("chunked", 2, (0.30, 0.40)))
        self.assertEqual(failed(checks), [])

    def timed(self, ours, theirs, shared=False, warmup=3, iters=10, whole=(0.90, 0.95)):
        """A 1-rank run whose whole-run ratios differ (warm-up) and whose timed iterations give
        `ours` (overlapprof) and `theirs` (events)."""
        t = truth("overlapped", 1, (whole[1],))
        t["config"].update(warmup=warmup, shared_gpu=shared)
        t["ranks"][0]["timed"] = {"iterations": iters, "comm_ns": 1_000_000 * iters,
                                  "overlap_ns": int(1_000_000 * iters * theirs), "overlap_ratio": theirs}
        s = summary((whole[0],), ranks=[None])
        s["iterations"] = [{"rank": None, "step": k, "comm_ns": 1_000_000, "compute_ns": 9_000_000,
                            "overlap_ns": int(1_000_000 * (0.1 if k < warmup else ours))}
                           for k in range(warmup + iters)]
        return check.check_sample("w", s, t)

    def test_timed_iterations_compared_not_the_warm_up(self):
        # Whole run 4.5 pp apart (lazy loading in the first iteration), timed iterations 1.5 pp.
        checks, rows = self.timed(0.9501, 0.9655)
        self.assertEqual(failed(checks), [])
        self.assertEqual(rows[0]["window"], "timed iterations")
        self.assertAlmostEqual(rows[0]["overlap_ratio"], 0.9501, places=4)
        self.assertAlmostEqual(rows[0]["whole_run_ratio"], 0.90)
        checks, _ = self.timed(0.93, 0.9655)
        self.assertEqual([c.name for c in failed(checks)], ["rank 0 overlap_ratio vs ground truth"])

    def test_timed_iteration_count_must_match(self):
        t_checks, _ = self.timed(0.95, 0.95)
        s_checks, _ = self.timed(0.95, 0.95, iters=10, warmup=3)
        self.assertEqual(failed(t_checks + s_checks), [])
        t = truth("overlapped", 1, (0.95,))
        t["config"]["warmup"] = 3
        t["ranks"][0]["timed"] = {"iterations": 10, "comm_ns": 1, "overlap_ns": 1, "overlap_ratio": 0.95}
        s = summary((0.95,), ranks=[None])
        s["iterations"] = [{"rank": None, "step": k, "comm_ns": 100, "overlap_ns": 95} for k in range(12)]
        checks, _ = check.check_sample("w", s, t)
        self.assertEqual([c.name for c in failed(checks)], ["rank 0 timed iterations"])

    def test_shared_gpu_tolerance(self):
        checks, _ = self.timed(0.5661, 0.5939, shared=True)  # 2.78 pp: seen on one H100, 2 ranks
        self.assertEqual(failed(checks), [])
        checks, _ = self.timed(0.5661, 0.5939, shared=False)
        self.assertEqual([c.name for c in failed(checks)], ["rank 0 overlap_ratio vs ground truth"])
        checks, _ = self.timed(0.54, 0.5939, shared=True)
        self.assertEqual([c.name for c in failed(checks)], ["rank 0 overlap_ratio vs ground truth"])

    def test_data_quality_failures_reported(self):
        dq = [{"counter": "records_dropped_cupti", "severity": "error", "value": 5}]
        checks, _ = check.check_sample("w", summary((0.75,), dq=dq, errors=1), truth("overlapped", 1, (0.75,)))
        names = [c.name for c in failed(checks)]
        self.assertEqual(names, ["rank 0 data quality", "no error-level counter"])
        self.assertIn("records_dropped_cupti=5", failed(checks)[0].detail)


class DdpTest(unittest.TestCase):
    def ddp(self, world=2, calls=100):
        return {"rank": 0, "world_size": world, "allreduce_calls": calls, "step_ms_median": 30.0}

    def test_pass(self):
        checks, rows = check.check_ddp("d", summary((0.4, 0.5), comm_ops=103), self.ddp())
        self.assertEqual(failed(checks), [])
        self.assertEqual(rows[0]["overlap_ratio"], 0.4)

    def test_fewer_ops_than_hook_calls(self):
        checks, _ = check.check_ddp("d", summary((0.4, 0.5), comm_ops=99), self.ddp())
        self.assertEqual([c.name for c in failed(checks)], ["rank 0 comm_ops"])

    def test_one_rank_fallback(self):
        checks, _ = check.check_ddp("d", summary((0.4,), comm_ops=100), self.ddp(world=1))
        self.assertEqual(failed(checks), [])

    def test_missing_gpu_activity(self):
        dq = [{"counter": "comm_ops_without_gpu_activity", "severity": "warning", "value": 1}]
        checks, _ = check.check_ddp("d", summary((0.4,), comm_ops=100, dq=dq), self.ddp(world=1))
        self.assertEqual([c.name for c in failed(checks)], ["rank 0 data quality"])


class OverheadTest(unittest.TestCase):
    def test_median_of_medians(self):
        ov = check.overhead([10.0, 10.2, 9.8], [10.05, 10.1, 30.0])
        self.assertEqual(ov["base_median_ms"], 10.0)
        self.assertEqual(ov["traced_median_ms"], 10.1)
        self.assertAlmostEqual(ov["overhead_pct"], 1.0)

    def test_pooled_steps(self):
        # Seen on an H100 (2 DDP ranks sharing the GPU): run medians +1.03 %, pooled steps +0.31 %.
        b0 = [114.9, 110.4, 111.1, 112.2, 135.8, 143.2, 111.1, 110.3, 111.1, 112.0]
        b1 = [111.2, 110.4, 113.1, 165.4, 137.6, 115.8, 110.4, 112.2, 112.1, 111.9]
        t0 = [111.3, 111.5, 112.6, 114.9, 117.8, 112.9, 112.2, 146.8, 140.6, 140.0]
        t1 = [112.2, 112.2, 112.0, 113.2, 113.2, 112.0, 112.9, 111.9, 112.1, 111.4]
        import statistics
        runs = check.overhead([statistics.median(b0), statistics.median(b1)],
                              [statistics.median(t0), statistics.median(t1)])
        self.assertGreater(runs["overhead_pct"], 1.0)
        pooled = check.overhead([0, 0], [0, 0], b0 + b1, t0 + t1)
        self.assertTrue(pooled["pooled_steps"])
        self.assertAlmostEqual(pooled["overhead_pct"], (112.4 - 112.05) / 112.05 * 100, places=6)
        self.assertTrue(check.check_overhead("w", pooled, 1.0).ok)
        # A real slowdown of every step still fails.
        slow = check.overhead([0], [0], b0 + b1, [x * 1.02 for x in b0 + b1])
        self.assertFalse(check.check_overhead("w", slow, 1.0).ok)

    def test_limit(self):
        self.assertTrue(check.check_overhead("w", check.overhead([10.0], [10.09]), 1.0).ok)
        self.assertFalse(check.check_overhead("w", check.overhead([10.0], [10.11]), 1.0).ok)
        self.assertTrue(check.check_overhead("w", check.overhead([10.0], [9.9]), 1.0).ok)  # noise below 0

    def test_empty(self):
        ov = check.overhead([], [1.0])
        self.assertIsNone(ov["overhead_pct"])
        self.assertFalse(check.check_overhead("w", ov, 1.0).ok)


class MarkdownTest(unittest.TestCase):
    def test_render(self):
        checks, rows = check.check_sample("gemm_chunked_1rank", summary((0.76,)), truth("chunked", 1, (0.75,)))
        ddp_checks, ddp_rows = check.check_ddp("ddp_2rank", summary((0.4, 0.5), comm_ops=103),
                                               {"rank": 0, "world_size": 2, "allreduce_calls": 100})
        results = {"device": "NVIDIA H100", "started": "now", "overlapprof": "x", "rows": rows + ddp_rows,
                   "overhead": {"gemm_overlapped_1rank": check.overhead([10.0], [10.05])},
                   "checks": [c.as_dict() for c in checks + ddp_checks], "notes": ["a note"]}
        md = check.render_markdown(results)
        self.assertIn("| gemm_chunked_1rank | 0 | 0.7600 | 0.7500 | +1.00 |", md)
        self.assertIn("| ddp_2rank | 0 | 0.4000 | n/a | n/a |", md)
        self.assertIn("| gemm_overlapped_1rank | 1 + 1 | 10.000 | 10.050 | +0.50 % |", md)
        self.assertIn("Note: a note", md)
        self.assertNotIn("FAIL", md)


FAKE_PROF = """\
#!/usr/bin/env python3
# Fake overlapprof: `run -o DIR --no-analyze -- CMD...` runs CMD with FAKE_STORE=DIR; `analyze DIR
# --json F` turns the fake rank files the fake sample wrote into an overlapprof.summary/1.
import json, os, subprocess, sys, glob
a = sys.argv[1:]
if a[0] == "run":
    d = a[a.index("-o") + 1]
    os.makedirs(d, exist_ok=True)
    sys.exit(subprocess.call(a[a.index("--") + 1:], env=dict(os.environ, FAKE_STORE=d)))
d, out = a[1], a[a.index("--json") + 1]
ranks = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(d, "rank*.db")))]
json.dump({"schema": "overlapprof.summary/1", "ranks": ranks,
           "data_quality": {"errors": 0, "warnings": 0}}, open(out, "w"))
"""

FAKE_SAMPLE = """\
#!/usr/bin/env python3
# Fake gemm_allreduce: writes the ground truth and, when traced, one fake store per rank.
import json, os, sys
a = sys.argv[1:]
mode, js = a[a.index("--mode") + 1], a[a.index("--json") + 1]
n = int(a[a.index("--nranks") + 1]) if "--nranks" in a else 1
ratio = {"serial": 0.0, "overlapped": 0.9, "chunked": 0.7}[mode]
ranks = [{"rank": r, "all": {"comm_ops": 100, "comm_ns": 1000, "overlap_ns": int(1000 * ratio),
          "compute_ns": 5000, "overlap_ratio": ratio}, "step_ms_median": 10.0} for r in range(n)]
json.dump({"config": {"mode": mode, "world_size": n, "nccl_version": 22809}, "ranks": ranks}, open(js, "w"))
if os.environ.get("FAKE_STORE"):
    for r in range(n):
        json.dump({"rank": r, "comm_ns": 1000, "overlap_ns": int(1000 * ratio), "comm_ops": 100,
                   "overlap_ratio": ratio + 0.005, "data_quality": []},
                  open(os.path.join(os.environ["FAKE_STORE"], "rank%d.db" % r), "w"))
"""


class DriverTest(unittest.TestCase):
    """check.main end to end with a fake overlapprof and a fake sample (no GPU, no torch)."""

    def test_driver(self):
        with tempfile.TemporaryDirectory() as tmp:
            paths = {}
            for name, text in (("overlapprof", FAKE_PROF), ("gemm_allreduce", FAKE_SAMPLE)):
                p = os.path.join(tmp, name)
                with open(p, "w") as f:
                    f.write(text)
                os.chmod(p, os.stat(p).st_mode | stat.S_IXUSR)
                paths[name] = p
            out = os.path.join(tmp, "out")
            rc = check.main(["--overlapprof", paths["overlapprof"], "--sample", paths["gemm_allreduce"],
                             "--out", out, "--no-ddp", "--quick", "--reps", "2"])
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)
            self.assertEqual([c for c in res["checks"] if not c["ok"]], [])
            self.assertEqual(rc, 0)
            self.assertEqual(len(res["rows"]), 9)  # 3 modes x (1 + 2) ranks
            self.assertIn("gemm_overlapped_1rank", res["overhead"])
            self.assertEqual(sorted(os.listdir(os.path.join(out, "fixtures"))),
                             sorted(f"gemm_{m}_{n}rank" for m in ("serial", "overlapped", "chunked")
                                    for n in (1, 2)))
            self.assertTrue(os.path.exists(os.path.join(out, "fixtures", "gemm_serial_2rank", "rank0.db")))
            with open(os.path.join(out, "results.md")) as f:
                self.assertIn("gemm_chunked_2rank", f.read())


if __name__ == "__main__":
    unittest.main()
