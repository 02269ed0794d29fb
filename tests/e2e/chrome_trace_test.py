#!/usr/bin/env python3
"""End-to-end tests of `overlapprof report --chrome-trace`: the file is checked against the
Trace Event Format's rules as Perfetto UI and chrome://tracing apply them (required fields per
phase, slices nesting on each track, every flow start resolved by one flow end bound to a slice),
against the JSON summary written in the same run (one GPU slice per activity, one counter point
per iteration), and against a golden file for a small generated trace with a badly nested record.

Usage: chrome_trace_test.py PATH_TO_OVERLAPPROF   (ctest passes it)
"""
import collections
import decimal
import json
import os
import subprocess
import sys
import tempfile
import unittest

CLI = None
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "kineto")
GOLDEN = os.path.join(HERE, "..", "golden")


def run(*args, timeout=300):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def load(path):
    # Decimals: timestamps are µs with 3 decimals, compared exactly.
    with open(path) as f:
        return json.load(f, parse_float=decimal.Decimal)


def check_format(tc, doc):
    """The format's rules; returns the events grouped by phase."""
    tc.assertIsInstance(doc["traceEvents"], list)
    by_ph = collections.defaultdict(list)
    for e in doc["traceEvents"]:
        tc.assertIn("ph", e)
        by_ph[e["ph"]].append(e)
    tc.assertLessEqual(set(by_ph), {"M", "X", "s", "f", "C"})
    for e in by_ph["X"]:
        for k in ("name", "pid", "tid", "ts", "dur", "cat"):
            tc.assertIn(k, e, e)
        tc.assertGreaterEqual(e["dur"], 0, e)
        tc.assertIsInstance(e["name"], str)
    for e in by_ph["M"]:
        tc.assertIn(e["name"], {"process_name", "process_sort_index", "thread_name", "thread_sort_index"})
        tc.assertIn("args", e)
    for e in by_ph["C"]:
        tc.assertIn("ts", e)
        tc.assertTrue(e["args"] and all(isinstance(v, (int, decimal.Decimal)) for v in e["args"].values()), e)
    # Nesting per track: sorted by (start, -duration), each slice lies inside the innermost open
    # one or after it.
    tracks = collections.defaultdict(list)
    for e in by_ph["X"]:
        tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for key, slices in tracks.items():
        slices.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for s, t in slices:
            while stack and stack[-1] <= s:
                stack.pop()
            tc.assertTrue(not stack or t <= stack[-1], f"track {key}: slice [{s}, {t}] overlaps an open slice ending {stack[-1] if stack else None}")
            stack.append(t)
    # Flows: one start and one end per id; the end is bound ("bp":"e") to a slice on its track
    # that starts at its timestamp, the start lies inside a slice on its track.
    starts = {e["id"]: e for e in by_ph["s"]}
    ends = {e["id"]: e for e in by_ph["f"]}
    tc.assertEqual(len(starts), len(by_ph["s"]), "duplicate flow start ids")
    tc.assertEqual(len(ends), len(by_ph["f"]), "duplicate flow end ids")
    tc.assertEqual(set(starts), set(ends), "unresolved flows")
    slice_at = collections.defaultdict(set)
    for e in by_ph["X"]:
        slice_at[(e["pid"], e["tid"])].add(e["ts"])
    for fid, e in ends.items():
        tc.assertEqual(e.get("bp"), "e")
        s = starts[fid]
        tc.assertTrue(s["ts"] in slice_at[(s["pid"], s["tid"])], f"flow {fid} starts outside a slice")
        tc.assertTrue(e["ts"] in slice_at[(e["pid"], e["tid"])], f"flow {fid} ends on no slice")
        tc.assertGreaterEqual(e["ts"], s["ts"], f"flow {fid} goes back in time")
    return by_ph


class RealTraces(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.files = [os.path.join(DATA, n) for n in ("a100_2rank_rank0.json.gz", "a100_16rank_rank0.json.gz",
                                                     "a100_no_distributed_info.json.gz")]
        cls.out = os.path.join(cls.tmp.name, "trace.json")
        cls.summary_path = os.path.join(cls.tmp.name, "summary.json")
        rc, out, err = run("report", *cls.files, "--chrome-trace", cls.out, "--json", cls.summary_path)
        assert rc == 0, err
        cls.doc = load(cls.out)
        with open(cls.summary_path) as f:
            cls.summary = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_format_rules(self):
        by_ph = check_format(self, self.doc)
        self.assertGreater(len(by_ph["s"]), 1000)  # launches of the real traces are linked
        # Real CUPTI records do overlap on a stream now and then; those few go to overflow tracks.
        moved = [e for e in by_ph["X"] if 1_500_000_000 <= e["tid"] < 1_999_999_999]
        self.assertEqual(self.doc["overlapprof"]["overflow_slices"], len(moved))
        self.assertLess(len(moved), 10)

    def test_a_process_per_rank_and_a_named_thread_per_stream(self):
        names = {e["pid"]: e["args"]["name"] for e in self.doc["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"}
        self.assertEqual(len(names), len(self.summary["ranks"]))
        # Two inputs claim rank 0 (different runs): neither takes pid 0, both say which file.
        self.assertEqual(sorted(n for n in names.values() if n.startswith("rank 0 (")),
                         sorted(f"rank 0 ({p})" for p in self.files[:2]))
        self.assertEqual([n for n in names.values() if n.startswith("rank ? (")], [f"rank ? ({self.files[2]})"])
        streams = collections.Counter(e["pid"] for e in self.doc["traceEvents"]
                                      if e["ph"] == "M" and e["name"] == "thread_name"
                                      and e["args"]["name"].startswith("GPU "))
        pid_of = {n.split("(", 1)[1][:-1]: pid for pid, n in names.items()}
        for r in self.summary["ranks"]:
            self.assertEqual(streams[pid_of[r["source"]]], r["streams"], r["source"])

    def test_one_slice_per_gpu_activity(self):
        per_pid = collections.Counter(e["pid"] for e in self.doc["traceEvents"]
                                      if e["ph"] == "X" and e["cat"] in ("kernel", "memcpy", "memset"))
        expected = sorted(n for n in (r["kernels"] + r["memcpys"] + r["memsets"] for r in self.summary["ranks"]) if n)
        self.assertEqual(sorted(per_pid.values()), expected)

    def test_communication_slices_carry_their_op(self):
        comm = [e for e in self.doc["traceEvents"] if e["ph"] == "X" and e["args"].get("category") == "comm"]
        self.assertEqual(len(comm), sum(r["comm_kernels"] for r in self.summary["ranks"]))
        with_op = [e for e in comm if "op" in e["args"]]
        self.assertGreater(len(with_op), 0)
        for e in with_op:
            for k in ("op", "communicator", "seq", "comm_rank", "comm_nranks"):
                self.assertIn(k, e["args"])
            if "bytes" in e["args"] and e["dur"] > 0:
                algbw = decimal.Decimal(e["args"]["bytes"]) / (e["dur"] * 1000)  # bytes/ns = GB/s
                self.assertAlmostEqual(float(e["args"]["algbw_GBps"]), float(algbw), delta=0.001)
        self.assertIn("allreduce", {e["args"]["op"] for e in with_op})

    def test_counters_per_iteration(self):
        pid_of = {e["args"]["name"]: e["pid"] for e in self.doc["traceEvents"]
                  if e["ph"] == "M" and e["name"] == "process_name"}
        pid_of = {n.split("(", 1)[1][:-1]: pid for n, pid in pid_of.items()}
        counters = collections.defaultdict(list)
        for e in self.doc["traceEvents"]:
            if e["ph"] == "C":
                counters[(e["pid"], e["name"])].append(e)
        base = self.doc["otherData"]["base_time_ns"]
        self.assertGreater(len(self.summary["iterations"]), 0)
        for r in self.summary["ranks"]:
            pid = pid_of[r["source"]]
            self.assertEqual(len(counters[(pid, "overlap %")]), r["iterations"], r["source"])
            self.assertEqual(len(counters[(pid, "exposed comm (ms)")]), r["iterations"], r["source"])
            # Each point sits at its iteration's start, with the summary's value.
            at = {e["ts"]: e for e in counters[(pid, "exposed comm (ms)")]}
            ov = {e["ts"]: e for e in counters[(pid, "overlap %")]}
            its = [it for it in self.summary["iterations"]
                   if it["rank"] == r["rank"] and (r["wall_ns"] == 0 or r["start_ns"] <= it["start_ns"] < r["end_ns"])]
            self.assertEqual(len(its), r["iterations"])
            for it in its:
                ts = decimal.Decimal(it["start_ns"] - base) / 1000
                self.assertEqual(at[ts]["args"]["exposed comm (ms)"],
                                 (decimal.Decimal(it["exposed_comm_ns"]) / 1000000).quantize(decimal.Decimal("0.001")))
                if it["overlap_ratio"] is not None:
                    self.assertAlmostEqual(float(ov[ts]["args"]["overlap %"]), 100 * it["overlap_ratio"], delta=0.006)


def small_trace(path):
    """Rank 3: a kernel on stream 7 that partly overlaps the previous one (clock skew between
    records), a kernel nested in another, an all-reduce on stream 20, two ProfilerSteps."""
    ev = []
    corr = 1

    def kernel(stream, name, ts, dur, launch, extra=None):
        nonlocal corr
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9,
                   "ts": launch, "dur": 4, "args": {"correlation": corr}})
        args = {"device": 0, "stream": stream, "correlation": corr}
        args.update(extra or {})
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                   "args": args})
        corr += 1

    for step, base in ((0, 1000), (1, 2000)):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 9, "tid": 9,
                   "ts": base, "dur": 1000})
        kernel(7, "gemm_a", base + 100.5, 300, base + 10)
        kernel(7, "gemm_b", base + 350.25, 200, base + 20)  # starts inside gemm_a, ends after it
        kernel(20, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", base + 300, 400.001, base + 30,
               {"Collective name": "allreduce", "In msg nelems": 1048576, "Out msg nelems": 1048576,
                "dtype": "Float", "Process Group Name": "0", "Process Group Ranks": "[0, 1, 2, 3]",
                "Group size": 4})
    with open(path, "w") as f:
        json.dump({"distributedInfo": {"rank": 3, "world_size": 4}, "traceEvents": ev}, f)


class Small(unittest.TestCase):
    def test_golden_and_overflow(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "rank3.json")
            small_trace(src)
            out = os.path.join(d, "trace.json")
            rc, _, err = run("report", src, "--chrome-trace", out)
            self.assertEqual(rc, 0, err)
            doc = load(out)
            check_format(self, doc)
            # gemm_b partly overlaps gemm_a: both steps move it to an overflow track.
            self.assertEqual(doc["overlapprof"]["overflow_slices"], 2)
            moved = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "gemm_b"]
            self.assertTrue(all(e["tid"] >= 1_500_000_000 for e in moved))
            lanes = [e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
            self.assertIn("stream 7 (overlapping records 1)", lanes)
            # The all-reduce: 1048576 floats in 400.001 µs; exact ns timestamps.
            ar = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["args"].get("op") == "allreduce"]
            self.assertEqual(len(ar), 2)
            self.assertEqual(ar[0]["args"]["bytes"], 4194304)
            self.assertEqual(ar[0]["dur"], decimal.Decimal("400.001"))
            golden = os.path.join(GOLDEN, "chrome_small.trace.json")
            with open(out) as f:
                got = f.read()
            if os.environ.get("UPDATE_GOLDEN"):
                with open(golden, "w") as f:
                    f.write(got)
            with open(golden) as f:
                self.assertEqual(got, f.read(), "differs from tests/golden/chrome_small.trace.json "
                                 "(UPDATE_GOLDEN=1 rewrites it after a deliberate change)")


class Errors(unittest.TestCase):
    def test_no_output_named(self):
        rc, _, err = run("report", os.path.join(DATA, "a100_2rank_rank0.json.gz"))
        self.assertEqual(rc, 2)
        self.assertIn("--chrome-trace", err)

    def test_missing_input_writes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.json")
            rc, _, err = run("report", os.path.join(d, "nope.json"), "--chrome-trace", out)
            self.assertEqual(rc, 2)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertEqual(os.listdir(d), [])

    def test_unwritable_output(self):
        rc, _, err = run("report", os.path.join(DATA, "a100_2rank_rank0.json.gz"), "--chrome-trace",
                         "/nonexistent-dir/t.json")
        self.assertEqual(rc, 2)
        self.assertIn("/nonexistent-dir/t.json", err)


if __name__ == "__main__":
    CLI = os.path.abspath(sys.argv[1])
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[2:])
