#!/usr/bin/env python3
"""The interference analyzer (docs/interference.md) against traces with a known overlap tax
(tests/synth/synth_interference.py): the slowdown and the tax within 5% of what was injected, and
"not measurable" where the generator never runs the work alone.

Usage: test_interference.py PATH_TO_OVERLAPPROF   (ctest passes it)
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(HERE, "synth_interference.py")
CLI = None


def generate(tmp, name, *args):
    out = os.path.join(tmp, name)
    subprocess.run([sys.executable, GEN, out, *args], check=True, timeout=60)
    with open(out + ".truth.json") as f:
        truth = json.load(f)
    p = subprocess.run([CLI, "analyze", out, "--json", "-"], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError(f"analyze failed ({p.returncode}): {p.stderr}")
    term = subprocess.run([CLI, "analyze", out, "--color", "never"], capture_output=True, text=True, timeout=120)
    return truth, json.loads(p.stdout), term.stdout


def within(estimate, true, tolerance=0.05):
    return abs(estimate - true) <= tolerance * abs(true)


class Interference(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="overlapprof-interference-")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check_measured(self, name, *args):
        truth, s, term = generate(self.tmp.name, name, *args)
        sec = s["interference"]
        self.assertEqual(len(sec["ranks"]), len(truth["ranks"]))
        for tr, r in zip(truth["ranks"], sec["ranks"]):
            self.assertEqual(r["rank"], tr["rank"])
            self.assertTrue(r["measurable"], r)
            self.assertEqual(r["iterations"], truth["steps"])
            self.assertEqual(r["wall_ns"], tr["wall_ns"])
            self.assertEqual(r["hidden_comm_ns"], tr["hidden_comm_ns"])
            self.assertEqual(r["comm_ns"], tr["comm_ns"])
            self.assertTrue(within(r["compute_tax_ns"], tr["compute_tax_ns"]),
                            f"tax {r['compute_tax_ns']} vs true {tr['compute_tax_ns']}")
            self.assertEqual(r["measurable_share"], 1.0)
            self.assertEqual(r["net_gain_ns"], r["hidden_comm_ns"] - r["compute_tax_ns"])
            kernels = [k for k in sec["kernels"] if k["rank"] == tr["rank"]]
            compute = {(k["name"], k["position"]): k for k in kernels if k["kind"] == "compute"}
            self.assertEqual(sorted(compute), sorted(tuple(x) for x in truth["measurable_compute"]))
            for k in compute.values():
                self.assertTrue(within(k["slowdown"], truth["slowdown"]), k)
                self.assertLessEqual(k["slowdown_low"], truth["slowdown"], k)
                self.assertGreaterEqual(k["slowdown_high"], truth["slowdown"], k)
            comm = [k for k in kernels if k["kind"] == "comm"]
            self.assertEqual([[k["op"], k["bytes"]] for k in comm], truth["measurable_comm"])
            for k in comm:
                self.assertTrue(within(k["slowdown"], truth["comm_slowdown"]), k)
            # the iterations' taxes add up to the rank's
            its = [i for i in sec["iterations"] if i["rank"] == tr["rank"]]
            self.assertEqual(sum(i["compute_tax_ns"] or 0 for i in its), r["compute_tax_ns"])
            eff = (r["hidden_comm_ns"] - r["compute_tax_ns"] - r["comm_tax_ns"]) / (r["comm_ns"] - r["comm_tax_ns"])
            self.assertAlmostEqual(r["overlap_efficiency"], round(eff, 4), places=4)
            self.assertLess(r["overlap_efficiency"], r["hidden_share"])
        self.assertIn("overlap tax: overlapped compute", term)
        self.assertTrue(any(f["analyzer"] == "interference" and "NCCL_MAX_NCHANNELS" in f["message"]
                            for f in s["findings"]))

    def test_known_slowdown_is_estimated_within_5_percent(self):
        self.check_measured("alternate", "--pattern", "alternate")

    def test_other_slowdowns_seeds_and_ranks(self):
        self.check_measured("alt2", "--pattern", "alternate", "--slowdown", "0.35", "--comm-slowdown", "0.15",
                            "--seed", "7", "--ranks", "2", "--steps", "16")

    def test_work_never_run_alone_is_not_measurable(self):
        truth, s, term = generate(self.tmp.name, "always", "--pattern", "always")
        self.assertFalse(truth["measurable"])
        for r in s["interference"]["ranks"]:
            self.assertFalse(r["measurable"])
            self.assertIn("not measurable in this trace", r["why_not"])
            for key in ("compute_tax_ns", "comm_tax_ns", "net_gain_ns", "overlap_efficiency", "tax_share_of_step"):
                self.assertIsNone(r[key], key)
            self.assertGreater(r["overlapped_compute_ns"], 0)
            self.assertEqual(r["measured_compute_ns"], 0)
        self.assertEqual(s["interference"]["kernels"], [])
        self.assertNotIn("overlap tax:", term)
        self.assertFalse(any(f["analyzer"] == "interference" for f in s["findings"]))


if __name__ == "__main__":
    CLI = sys.argv.pop(1) if len(sys.argv) > 1 else os.environ.get("OVERLAPPROF", "build/overlapprof")
    unittest.main(verbosity=2)
