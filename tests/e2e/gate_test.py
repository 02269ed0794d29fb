#!/usr/bin/env python3
"""End-to-end tests of the CI gate: `overlapprof compare` and `overlapprof check` on pairs of
traces with a known regression (must fail), a known improvement (must pass), pure noise (must
not fail) and a change too noisy to call (inconclusive), plus a committed JSON summary as the
baseline, data loss, and bad input.

The traces are generated here (PyTorch-profiler format, as tests/data/kineto): per iteration a
10 ms GEMM on stream 7 and a 4 ms NCCL all-reduce on stream 20 that overlaps it by a chosen
amount, so each iteration's overlap ratio is known exactly.

Usage: gate_test.py PATH_TO_OVERLAPPROF   (ctest passes it)
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

CLI = None


def run(*args, timeout=120):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def trace(path, overlaps_ms, period_us=20000.0, gemm_us=10000, world_size=1, rank=0, allreduces=1, markers=True):
    """One rank; iteration i's all-reduce overlaps the GEMM by overlaps_ms[i] (0..4 ms). A step
    takes period_us (the step time), the GEMM gemm_us; `allreduces` all-reduces per step (the
    extra ones after the GEMM, exposed). markers=False: no ProfilerStep ranges."""
    ev = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
          {"name": "thread_name", "ph": "M", "pid": 0, "tid": 20, "args": {"name": "stream 20 "}}]
    corr = 1
    for i, ov in enumerate(overlaps_ms):
        t = 1000.0 + i * period_us  # µs
        if markers:
            ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 3, "tid": 3,
                       "ts": t, "dur": period_us})
        kernels = [(7, "ampere_bf16_s16816gemm", t + 1000, gemm_us),
                   (20, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 1000 + gemm_us - ov * 1000, 4000)]
        kernels += [(20, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 5000 + gemm_us + 1000 * k, 500)
                    for k in range(allreduces - 1)]
        for k, (stream, name, start, dur) in enumerate(kernels):
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 3, "tid": 3,
                       "ts": t + 100 + 10 * k, "dur": 5, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": round(start, 3),
                       "dur": dur, "args": {"device": 0, "stream": stream, "correlation": corr}})
            corr += 1
    with open(path, "w") as f:
        json.dump({"distributedInfo": {"rank": rank, "world_size": world_size}, "traceEvents": ev}, f)
    return path


def noisy(center_ms, n, seed, spread=0.1):
    r = random.Random(seed)
    return [min(4.0, max(0.0, center_ms + r.uniform(-spread, spread))) for _ in range(n)]


class GateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="overlapprof-gate-")
        d = cls.tmp
        cls.base = trace(os.path.join(d, "base.json"), noisy(3.0, 12, seed=1))         # ~75% hidden
        cls.noise = trace(os.path.join(d, "noise.json"), noisy(3.0, 12, seed=2))       # same, other seed
        cls.worse = trace(os.path.join(d, "worse.json"), noisy(2.0, 12, seed=3))       # ~50% hidden
        cls.better = trace(os.path.join(d, "better.json"), noisy(3.8, 12, seed=4))     # ~95% hidden
        cls.short = trace(os.path.join(d, "short.json"), [2.0, 2.0, 2.0])               # 3 iterations only
        # Bimodal iterations: the mean moves by 5 pp but the distributions overlap: too noisy.
        cls.wide_base = trace(os.path.join(d, "wide_base.json"), [0.8, 3.2] * 3)       # 20% / 80%
        # 5% / 65%: 0.6 ms more exposed per step, above the 0.5 ms floor, yet not significant.
        cls.wide_new = trace(os.path.join(d, "wide_new.json"), [0.2, 2.6] * 3)
        cls.summary = os.path.join(d, "baseline.summary.json")
        rc, _, err = run("analyze", cls.base, "--json", cls.summary)
        assert rc == 0, err

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check(self, new, *extra, baseline=None):
        return run("check", new, "--baseline", baseline or self.summary, *extra)

    def test_known_regression_fails(self):
        rc, out, err = self.check(self.worse)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("overlapprof: check failed: overlap_ratio regressed from 74.91 to 49.69 %", err)
        self.assertIn("Mann-Whitney p = ", err)
        self.assertEqual(err.count("\n"), 2, err)  # overlap ratio and exposed communication, one line each

    def test_color_on_compare_and_check(self):
        rc, out, err = self.check(self.worse, "--color", "always")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("\x1b[1;31mregressed\x1b[0m", out)
        rc, out, _ = run("compare", self.summary, self.better, "--color", "always")
        self.assertIn("\x1b[32mimproved\x1b[0m", out)
        for extra in (["--color", "never"], []):  # never, and auto on a pipe
            rc, out, _ = self.check(self.worse, *extra)
            self.assertNotIn("\x1b", out)
        rc, out, err = self.check(self.worse, "--color", "bright")
        self.assertEqual(rc, 2, out + err)

    def test_trace_options_as_analyze_takes_them(self):
        # The options that say how traces are read, on compare and check as on analyze.
        for cmd in (["compare", self.base, self.noise], ["check", self.noise, "--baseline", self.base]):
            rc, out, err = run(*cmd, "-j", "1", "--comm-timing", "kernels", "--iterations", "markers",
                               "--cache-dir", self.tmp)
            self.assertIn(rc, (0, 3), out + err)
            self.assertIn("overlap_ratio", out)
        # --iterations pattern ignores the markers: without them the base has none to compare.
        rc, out, err = run("compare", self.base, self.noise, "--iterations", "bogus")
        self.assertEqual(rc, 2, out + err)

    def test_outputs_are_not_overwritten_without_force(self):
        md = os.path.join(self.tmp, "once.md")
        with open(md, "w") as f:
            f.write("kept\n")
        rc, out, err = self.check(self.noise, "--markdown", md)
        self.assertEqual(rc, 2, out + err)
        self.assertIn(f"--markdown {md}: the file exists: --force replaces it", err)
        with open(md) as f:
            self.assertEqual(f.read(), "kept\n")
        rc, out, err = self.check(self.noise, "--markdown", md, "--force")
        self.assertIn(rc, (0, 3), out + err)
        with open(md) as f:
            self.assertIn("overlapprof check", f.read())
        same = os.path.join(self.tmp, "same.out")
        rc, out, err = self.check(self.noise, "--markdown", same, "--junit", same)
        self.assertEqual(rc, 2, out + err)
        self.assertIn("--markdown and --junit name the same file", err)

    def test_json_output(self):
        rc, out, err = self.check(self.worse, "--json", "-")
        self.assertEqual(rc, 1, out + err)
        doc = json.loads(out)  # only the JSON on stdout
        self.assertEqual(doc["schema"], "overlapprof.comparison/1")
        self.assertEqual((doc["command"], doc["gate"]), ("check", "regressed"))
        m = {x["name"]: x for x in doc["metrics"]}
        self.assertEqual(m["overlap_ratio"]["verdict"], "regressed")
        self.assertAlmostEqual(m["overlap_ratio"]["base"], 74.91, places=2)
        self.assertEqual(doc["new"]["source"], self.worse)
        path = os.path.join(self.tmp, "cmp.json")
        rc, out, err = run("compare", self.summary, self.better, "--json", path)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("metric", out)  # the table too
        with open(path) as f:
            self.assertEqual(json.load(f)["command"], "compare")

    def test_known_improvement_passes(self):
        rc, out, err = self.check(self.better)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("check passed (improved)", err)

    def test_noise_does_not_fail(self):
        rc, out, err = self.check(self.noise)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("check passed (unchanged)", err)

    def test_too_noisy_is_inconclusive(self):
        rc, out, err = self.check(self.wide_new, baseline=self.wide_base)
        self.assertEqual(rc, 3, out + err)
        self.assertIn("not significant", err)

    def test_too_few_iterations_compares_aggregates_and_says_so(self):
        rc, out, err = self.check(self.short)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("no statistical test possible (12 vs 3 iterations", out)

    def test_no_iterations_on_either_side_is_inconclusive(self):
        """Without iterations the per-rank figures are whole-trace totals: a trace holding one step
        more is no regression (inconclusive, exit 3; before: regressed, exit 1), the real pair of
        shared/traces/nsys neither."""
        d = self.tmp
        eleven = trace(os.path.join(d, "nomark11.json"), [3.0] * 11, markers=False)
        twelve = trace(os.path.join(d, "nomark12.json"), [3.0] * 12, markers=False)
        rc, out, err = self.check(twelve, "--max-exposed-comm-increase", "5", baseline=eleven)
        self.assertEqual(rc, 3, out + err)
        self.assertIn("exposed_comm_per_iter: inconclusive: +9.09 %", out)
        self.assertIn("neither run has steady iterations (0 vs 0)", out)
        self.assertNotIn("regressed", out + err)
        nsys = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "nsys")
        rc, out, err = self.check(os.path.join(nsys, "mfu_2gpu_after.sqlite"),
                                  baseline=os.path.join(nsys, "mfu_2gpu_before.sqlite"))
        self.assertEqual(rc, 3, out + err)
        self.assertIn("check inconclusive: exposed_comm_per_iter", err)
        self.assertNotIn("regressed", out + err)
        # Marked iterations against none: per iteration against per trace, inconclusive too.
        unmarked = trace(os.path.join(d, "nomark_base.json"), [3.0] * 12, markers=False)
        rc, out, err = self.check(unmarked)
        self.assertEqual(rc, 3, out + err)
        self.assertIn("the new run has no steady iterations (12 vs 0)", out)

    def test_thresholds_from_flags_and_policy(self):
        rc, _, err = self.check(self.worse, "--max-overlap-drop", "30", "--max-exposed-comm-increase", "500")
        self.assertEqual(rc, 0, err)
        policy = os.path.join(self.tmp, "policy.json")
        with open(policy, "w") as f:
            json.dump({"max_overlap_drop_pp": 30, "max_exposed_comm_increase_pct": 500}, f)
        self.assertEqual(self.check(self.worse, "--policy", policy)[0], 0)
        # A flag overrides the file.
        self.assertEqual(self.check(self.worse, "--policy", policy, "--max-overlap-drop", "2")[0], 1)
        with open(policy, "w") as f:
            json.dump({"max_overlap_drop": 30}, f)  # a typo must not silently gate nothing
        rc, _, err = self.check(self.worse, "--policy", policy)
        self.assertEqual(rc, 2)
        self.assertIn("unknown or invalid key 'max_overlap_drop'", err)

    def test_markdown_and_junit(self):
        md, xml = os.path.join(self.tmp, "s.md"), os.path.join(self.tmp, "j.xml")
        rc, _, _ = self.check(self.worse, "--markdown", md, "--junit", xml)
        self.assertEqual(rc, 1)
        text = open(md).read()
        self.assertIn("overlapprof check: regressed", text)
        self.assertIn("| overlap_ratio (%) | 74.91 | 49.69 | -25.22 pp |", text)
        import xml.etree.ElementTree as ET
        suite = ET.parse(xml).getroot()
        self.assertEqual((suite.get("tests"), suite.get("failures")), ("4", "2"))
        names = [c.get("name") for c in suite.findall("testcase")]
        self.assertEqual(names, ["step_time", "overlap_ratio", "exposed_comm_per_iter", "data_quality"])
        self.assertTrue(open(xml).read().endswith("</testsuite>\n"))
        # compare's Markdown names compare, not check.
        rc, _, _ = run("compare", self.summary, self.worse, "--markdown", md, "--force")  # md exists
        self.assertEqual(rc, 0)
        head = open(md).read().splitlines()[0]
        self.assertIn("overlapprof compare: regressed", head)
        self.assertNotIn("check", head)

    def test_compare_prints_every_metric_and_exits_0(self):
        rc, out, err = run("compare", self.summary, self.worse)
        self.assertEqual(rc, 0, err)
        for metric in ("overlap_ratio", "exposed_comm_per_iter", "comm_per_iter", "compute_per_iter"):
            self.assertIn(metric, out)
        # Per op type (informational): the all-reduces hide ~1 ms less per iteration.
        [row] = [l for l in out.splitlines() if l.startswith("exposed_allreduce_per_iter (ms)")]
        base_ms, new_ms = float(row.split()[2]), float(row.split()[3])
        self.assertAlmostEqual(new_ms - base_ms, 1.0, delta=0.25)
        self.assertTrue(row.split()[-3:] == ["-", "no", "regressed"], row)
        # The numbers are the JSON summary's: the baseline's overlap ratio as analyze computed it.
        s = json.load(open(self.summary))
        r = s["ranks"][0]
        self.assertIn(f"{100 * r['overlap_ns'] / r['comm_ns']:.2f}", out)

    def test_slower_step_with_better_overlap_fails(self):
        # More compute per step (10 -> 16 ms GEMM, 20 -> 26 ms steps) hides more
        # of the all-reduce, so the overlap ratio improves, but the step is 30% slower.
        slower = trace(os.path.join(self.tmp, "slower.json"), noisy(3.8, 12, seed=5), period_us=26000.0,
                       gemm_us=16000)
        rc, out, err = self.check(slower)
        self.assertEqual(rc, 1, out + err)
        # Means over the steady windows (the last one ends with its last kernel).
        self.assertRegex(err, r"check failed: step_time regressed from 19\.\d\d to 25\.\d\d ms: \+30\.\d+ %")
        self.assertRegex(out, r"overlap_ratio \(%\) .* improved")
        self.assertNotIn("check failed: overlap_ratio", err)
        # The reverse direction passes (faster step, the overlap drop below the floor is not it).
        rc, out, err = run("check", self.summary, "--baseline", slower)
        self.assertNotIn("step_time regressed", err)

    def test_change_of_a_tenth_of_a_ms_passes(self):
        # 0.1 ms less hidden per step: +2.5 pp overlap drop and +10% exposed, both over their
        # thresholds and significant, but 0.1 ms per 20 ms step is below the 0.5 ms floor.
        tenth = trace(os.path.join(self.tmp, "tenth.json"), [x - 0.1 for x in noisy(3.0, 12, seed=1)])
        rc, out, err = self.check(tenth)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("below the minimum effect of 0.500 ms", out)
        # 0.3 ms: over 1% of the step, under the 0.5 ms default; fails with the floor at 0.05 ms.
        third = trace(os.path.join(self.tmp, "third.json"), [x - 0.3 for x in noisy(3.0, 12, seed=1)])
        self.assertEqual(self.check(third)[0], 0)
        rc, out, err = self.check(third, "--min-effect-ms", "0.05")
        self.assertEqual(rc, 1, out + err)
        # --min-effect-ms 0 switches the floor off, 1% of the step included: 0.1 ms now fails.
        rc, out, err = self.check(tenth, "--min-effect-ms", "0")
        self.assertEqual(rc, 1, out + err)
        self.assertNotIn("below the minimum effect", out)
        # A step 0.1 ms longer passes too.
        longer = trace(os.path.join(self.tmp, "longer.json"), noisy(3.0, 12, seed=1), period_us=20100.0)
        rc, out, err = self.check(longer)
        self.assertEqual(rc, 0, out + err)

    def test_runs_that_are_not_comparable_exit_2(self):
        other_world = trace(os.path.join(self.tmp, "ws2.json"), noisy(3.0, 12, seed=2), world_size=2)
        rc, out, err = self.check(other_world)
        self.assertEqual(rc, 2, out + err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("not comparable: world size 1 vs 2", err)
        rc, out, err = self.check(other_world, "--allow-different-runs")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("note: the runs differ: world size 1 vs 2", out)
        # One rank against another rank is said as such.
        rank1 = trace(os.path.join(self.tmp, "rank1.json"), noisy(3.0, 12, seed=2), world_size=2, rank=1)
        rank0 = trace(os.path.join(self.tmp, "rank0.json"), noisy(3.0, 12, seed=2), world_size=2, rank=0)
        rc, out, err = run("compare", rank0, rank1)
        self.assertEqual(rc, 2, out + err)
        self.assertIn("compares rank 0 of the base with rank 1 of the new run", err)
        # Another op mix: two all-reduces per step instead of one.
        mix = trace(os.path.join(self.tmp, "mix.json"), noisy(3.0, 12, seed=2), allreduces=2)
        rc, out, err = self.check(mix)
        self.assertEqual(rc, 2, out + err)
        self.assertIn("allreduce ops per iteration 1.0 vs 2.0", err)

    def test_step_range_that_matches_nothing_exits_2(self):
        rc, out, err = run("check", self.worse, "--baseline", self.base, "--step-range", "ProfilerStepp")
        self.assertEqual(rc, 2, out + err)
        self.assertIn("--step-range 'ProfilerStepp' matches no host range", err)

    def test_per_op_rows_do_not_exceed_the_total(self):
        rc, out, _ = run("compare", self.summary, self.worse)
        rows = {l.split()[0]: l.split() for l in out.splitlines() if l.endswith(("unchanged", "regressed", "improved"))}
        for col in (2, 3):
            self.assertLessEqual(float(rows["exposed_allreduce_per_iter"][col]),
                                 float(rows["exposed_comm_per_iter"][col]) + 1e-9)

    def test_data_loss_fails_with_4(self):
        s = json.load(open(self.summary))
        s["ranks"][0]["data_quality"] = [{"counter": "records_dropped_cupti", "severity": "error", "value": 7,
                                          "description": "x"}]
        lossy = os.path.join(self.tmp, "lossy.summary.json")
        json.dump(s, open(lossy, "w"))
        rc, _, err = self.check(lossy)
        self.assertEqual(rc, 4, err)
        self.assertIn("records_dropped_cupti = 7", err)
        self.assertEqual(self.check(lossy, "--max-data-loss", "10")[0], 0)

    def test_a_relabelled_error_counter_still_fails_with_4(self):
        # Severities come from overlapprof's own table, never from the summary being checked.
        s = json.load(open(self.summary))
        s["ranks"][0]["data_quality"] = [{"counter": "records_dropped_cupti", "severity": "warning", "value": 7,
                                          "description": "x"},
                                         {"counter": "records_dropped_hookz", "severity": "info", "value": 2}]
        relabelled = os.path.join(self.tmp, "relabelled.summary.json")
        json.dump(s, open(relabelled, "w"))
        rc, _, err = self.check(relabelled)
        self.assertEqual(rc, 4, err)
        self.assertIn("records_dropped_cupti = 7", err)
        self.assertIn("records_dropped_hookz = 2 (a counter this overlapprof does not know", err)

    def test_a_large_baseline_is_read_in_bounded_memory(self):
        # 12 M numbers under a key the gate does not read (24 MB): read in one pass that keeps
        # only what the gate uses, within an address-space limit a parsed document far exceeds
        # (bench/gate_baseline_bench.py measures 100 MB: docs/performance.md).
        import resource
        s = json.load(open(self.summary))
        big = os.path.join(self.tmp, "big.summary.json")
        with open(big, "w") as f:
            text = json.dumps(s)
            f.write(text[:-1] + ', "padding": [')
            f.write(",".join(["0"] * 1_000_000) + ",")
            for _ in range(11):
                f.write(",".join(["0"] * 1_000_000) + ",")
            f.write("0]}")
        limit = 400 << 20

        def cap():
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        p = subprocess.run([CLI, "compare", big, self.summary], capture_output=True, text=True, timeout=120,
                           preexec_fn=cap)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("overlap_ratio", p.stdout)

    def test_bad_input(self):
        rc, _, err = self.check(os.path.join(self.tmp, "missing.json"))
        self.assertEqual(rc, 2)
        self.assertEqual(err.count("\n"), 1, err)
        other = os.path.join(self.tmp, "other.summary.json")
        json.dump({"schema": "overlapprof.summary/2", "ranks": []}, open(other, "w"))
        rc, _, err = self.check(self.base, baseline=other)
        self.assertEqual(rc, 2)
        self.assertIn("newer than this overlapprof reads", err)


if __name__ == "__main__":
    CLI = os.path.abspath(sys.argv[1])
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[2:])
