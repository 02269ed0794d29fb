#!/usr/bin/env python3
"""End-to-end tests of `overlapprof report --chrome-trace`: the file is checked against the
Trace Event Format's rules as Perfetto UI and chrome://tracing apply them (required fields per
phase, slices nesting on each track, every flow start resolved by one flow end bound to a slice),
against the JSON summary written in the same run (one GPU slice per activity, one counter point
per iteration), and against a golden file for a small generated trace with a badly nested record.
The size budget: a generated 8-rank run (bench/gen_kineto, small) over its budget keeps the
slowest, median and first steady iteration of each rank, says what it left out, and its
.json.gz opens in headless Chromium (DecompressionStream + JSON.parse).

Usage: chrome_trace_test.py PATH_TO_OVERLAPPROF   (ctest passes it)
"""
import collections
import decimal
import gzip
import json
import os
import re
import shutil
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
        moved = [e for e in by_ph["X"] if 1_500_000_000 <= e["tid"] < 1_999_999_900]
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
        comm = [e for e in self.doc["traceEvents"] if e["ph"] == "X" and e.get("args", {}).get("category") == "comm"]
        self.assertEqual(len(comm), sum(r["comm_kernels"] for r in self.summary["ranks"]))
        with_op = [e for e in comm if "op" in e["args"]]
        self.assertGreater(len(with_op), 0)
        # What is known is there; what is not is left out (no -1, no "unknown").
        full = [e for e in with_op if all(k in e["args"] for k in ("communicator", "comm_rank", "comm_nranks"))]
        self.assertGreater(len(full), 0)
        for e in with_op:
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
                # Viewers name the track "NAME KEY"; one key per counter, so it is named once.
                [key] = e["args"]
                counters[(e["pid"], e["name"] + " " + key)].append(e)
        base = self.doc["otherData"]["base_time_ns"]
        self.assertGreater(len(self.summary["iterations"]), 0)
        for r in self.summary["ranks"]:
            pid = pid_of[r["source"]]
            self.assertEqual(len(counters[(pid, "overlap %")]), r["iterations"], r["source"])
            self.assertEqual(len(counters[(pid, "exposed comm ms")]), r["iterations"], r["source"])
            # Each point sits at its iteration's start, with the summary's value.
            at = {e["ts"]: e for e in counters[(pid, "exposed comm ms")]}
            ov = {e["ts"]: e for e in counters[(pid, "overlap %")]}
            its = [it for it in self.summary["iterations"]
                   if it["rank"] == r["rank"] and (r["wall_ns"] == 0 or r["start_ns"] <= it["start_ns"] < r["end_ns"])]
            self.assertEqual(len(its), r["iterations"])
            for it in its:
                ts = decimal.Decimal(it["start_ns"] - base) / 1000
                self.assertEqual(at[ts]["args"]["ms"],
                                 (decimal.Decimal(it["exposed_comm_ns"]) / 1000000).quantize(decimal.Decimal("0.001")))
                if it["overlap_ratio"] is not None:
                    self.assertAlmostEqual(float(ov[ts]["args"]["%"]), 100 * it["overlap_ratio"], delta=0.006)

    def test_exposed_communication_track(self):
        # Whole ranks (the small default budget keeps these whole): the exposed slices add up to
        # the summary's exposed communication.
        names = {e["pid"]: e["args"]["name"] for e in self.doc["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"}
        pid_of = {n.split("(", 1)[1][:-1]: pid for pid, n in names.items()}
        for r in self.summary["ranks"]:
            pid = pid_of[r["source"]]
            tracks = [e for e in self.doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"
                      and e["pid"] == pid and e["args"]["name"] == "exposed communication"]
            self.assertEqual(len(tracks), 1)
            total = sum(e["dur"] for e in self.doc["traceEvents"]
                        if e["ph"] == "X" and e["pid"] == pid and e["cat"] == "exposed")
            self.assertAlmostEqual(float(total) * 1000, r["exposed_comm_ns"], delta=1, msg=r["source"])

    def test_annotation_ranges_carried_over(self):
        ranges = [e for e in self.doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "annotation"]
        names = {e["name"] for e in ranges}
        self.assertTrue({"## forward ##", "## backward ##"} & names or any(n.startswith("nccl:") for n in names), names)

    def test_no_sentinels_in_args(self):
        for e in self.doc["traceEvents"]:
            for k, v in e.get("args", {}).items():
                self.assertNotIn(v, (-1, "unknown", None), (k, e))


class EveryBundledTrace(unittest.TestCase):
    def test_no_negative_timestamps(self):
        nsys = os.path.join(HERE, "..", "data", "nsys")
        files = sorted(os.path.join(DATA, n) for n in os.listdir(DATA) if n.endswith(".json.gz"))
        files += sorted(os.path.join(nsys, n) for n in os.listdir(nsys) if n.endswith(".sqlite"))
        self.assertGreaterEqual(len(files), 8)
        with tempfile.TemporaryDirectory() as d:
            for i, f in enumerate(files):
                out = os.path.join(d, f"{i}.json")
                rc, _, err = run("report", f, "--chrome-trace", out)
                self.assertIn(rc, (0, 4), err)
                doc = load(out)
                ts = [e["ts"] for e in doc["traceEvents"] if "ts" in e]
                self.assertTrue(ts, f)
                self.assertGreaterEqual(min(ts), 0, f)


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
        ev.append({"ph": "X", "cat": "user_annotation", "name": "## forward ##", "pid": 9, "tid": 9,
                   "ts": base + 1, "dur": 25})
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
            ar = [e for e in doc["traceEvents"] if e["ph"] == "X" and e.get("args", {}).get("op") == "allreduce"]
            self.assertEqual(len(ar), 2)
            self.assertEqual(ar[0]["args"]["bytes"], 4194304)
            self.assertEqual(ar[0]["dur"], decimal.Decimal("400.001"))
            # The input's annotation ranges are carried over; the first one is the earliest event
            # of any kind (before the first launch and the first kernel), so it is at 0.
            fwd = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "annotation"]
            self.assertEqual([(e["name"], e["ts"]) for e in fwd], [("## forward ##", 0), ("## forward ##", 1000)])
            self.assertEqual(doc["otherData"]["base_time_ns"], 1001000)
            self.assertEqual(min(e["ts"] for e in doc["traceEvents"] if "ts" in e), 0)
            exposed = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "exposed"]
            self.assertTrue(exposed)
            golden = os.path.join(GOLDEN, "chrome_small.trace.json")
            with open(out) as f:
                got = f.read()
            if os.environ.get("UPDATE_GOLDEN"):
                with open(golden, "w") as f:
                    f.write(got)
            with open(golden) as f:
                self.assertEqual(got, f.read(), "differs from tests/golden/chrome_small.trace.json "
                                 "(UPDATE_GOLDEN=1 rewrites it after a deliberate change)")


def find_gen_kineto():
    """bench/gen_kineto of the same build (OVERLAPPROF_GEN_KINETO overrides)."""
    env = os.environ.get("OVERLAPPROF_GEN_KINETO")
    if env:
        return env
    path = os.path.join(os.path.dirname(CLI), "bench", "gen_kineto")
    return path if os.path.exists(path) else None


def find_browser():
    for name in ("chromium", "chromium-browser", "chromium-headless-shell", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


# A page that reads the file named after '#' (file:// needs --allow-file-access-from-files),
# gunzips it with DecompressionStream, parses it and puts what it found into the DOM.
GZ_PAGE = """<!doctype html><html><body><script>
const x = new XMLHttpRequest(); x.open('GET', location.hash.slice(1)); x.responseType = 'arraybuffer';
x.onload = async () => {
  try {
    const s = new Blob([x.response]).stream().pipeThrough(new DecompressionStream('gzip'));
    const d = JSON.parse(await new Response(s).text());
    const ph = {};
    for (const e of d.traceEvents) ph[e.ph] = (ph[e.ph] || 0) + 1;
    document.body.textContent = 'RESULT ' + JSON.stringify({events: d.traceEvents.length, ph, otherData: d.otherData});
  } catch (e) { document.body.textContent = 'RESULT ' + JSON.stringify({error: String(e)}); }
};
x.onerror = () => { document.body.textContent = 'RESULT {"error":"load"}'; };
x.send();
</script></body></html>"""


def open_in_chromium(browser, workdir, path):
    page = os.path.join(workdir, "gz.html")
    with open(page, "w") as f:
        f.write(GZ_PAGE)
    p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
                        "--allow-file-access-from-files", "--virtual-time-budget=10000",
                        f"--user-data-dir={os.path.join(workdir, 'profile')}", "--dump-dom",
                        f"file://{page}#file://{os.path.abspath(path)}"], capture_output=True, text=True, timeout=120)
    m = re.search(r"RESULT (\{.*?\})</body>", p.stdout, re.S)
    if not m:
        raise AssertionError(f"chromium gave no result (exit {p.returncode}): {p.stdout[-500:]} {p.stderr[-1000:]}")
    return json.loads(m.group(1))


class Budget(unittest.TestCase):
    """A generated 8-rank run over a (small) budget: whole iterations, said what is left out."""
    RANKS = 8
    # The three default iterations per rank fit with some room: the annotation ranges and the
    # exposed-communication slices count against the budget too.
    BUDGET_MB = 1.1

    @classmethod
    def setUpClass(cls):
        gen = find_gen_kineto()
        if gen is None:
            raise unittest.SkipTest("bench/gen_kineto is not built (OVERLAPPROF_BUILD_BENCH=OFF)")
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.traces = os.path.join(d, "traces")
        subprocess.run([gen, "--ranks", str(cls.RANKS), "--gpu-events-per-rank", "3000", "--layers", "1", "--out", cls.traces,
                        "--manifest", os.path.join(d, "manifest.json")], check=True, capture_output=True, timeout=120)
        cls.out = os.path.join(d, "trace.json.gz")
        cls.summary_path = os.path.join(d, "summary.json")
        rc, _, cls.err = run("report", cls.traces, "--chrome-trace", cls.out, "--json", cls.summary_path,
                             "--trace-budget", str(cls.BUDGET_MB))
        assert rc == 0, cls.err
        with gzip.open(cls.out, "rb") as f:
            cls.raw = f.read()
        cls.doc = json.loads(cls.raw, parse_float=decimal.Decimal)
        with open(cls.summary_path) as f:
            cls.summary = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_fits_the_budget_and_keeps_the_rules(self):
        self.assertLessEqual(len(self.raw), self.BUDGET_MB * 1e6)
        check_format(self, self.doc)

    def test_whole_default_iterations_per_rank(self):
        base = self.doc["otherData"]["base_time_ns"]
        gpu = collections.defaultdict(list)
        for e in self.doc["traceEvents"]:
            if e["ph"] == "X" and e["cat"] in ("kernel", "memcpy", "memset"):
                start = int(e["ts"] * 1000) + base
                gpu[e["pid"]].append((start, start + int(e["dur"] * 1000)))
        self.assertEqual(len(gpu), self.RANKS)
        kept_total = 0
        for r in self.summary["ranks"]:
            its = [it for it in self.summary["iterations"] if it["rank"] == r["rank"]]
            steady = [it for it in its if not it["warmup"]] or its
            by_dur = sorted(steady, key=lambda it: it["end_ns"] - it["start_ns"])
            want = {by_dur[-1]["index"], by_dur[(len(by_dur) - 1) // 2]["index"], steady[0]["index"]}
            # Iterations with GPU work in the trace: exactly the chosen ones, each complete (every
            # activity starting inside it is there, as many as the summary counts).
            inside = collections.Counter()
            for s, t in gpu[r["rank"] + 1]:  # rank R is pid R+1
                for it in its:
                    if it["start_ns"] <= s < it["end_ns"]:
                        inside[it["index"]] += 1
            self.assertEqual(set(inside), want, r["rank"])
            for it in its:
                if it["index"] in want:
                    self.assertEqual(inside[it["index"]], it["kernels"] + it["memcpys"] + it["memsets"], (r["rank"], it["index"]))
            kept_total += len(want)
        od = self.doc["otherData"]
        self.assertEqual(od["iterations"], len(self.summary["iterations"]))
        self.assertEqual(od["iterations_left_out"], len(self.summary["iterations"]) - kept_total)
        self.assertGreater(od["events_left_out"], 0)
        self.assertIn("left out", od["left_out"])
        # ... and on the terminal: how many iterations and events.
        self.assertIn(f"kept {kept_total} of {od['iterations']} iterations", self.err)
        self.assertIn(f"left out {od['events_left_out']} of {od['events']} events", self.err)

    def test_iteration_counters_for_all_iterations(self):
        counters = [e for e in self.doc["traceEvents"] if e["ph"] == "C" and e["name"] == "overlap" and list(e["args"]) == ["%"]]
        self.assertEqual(len(counters), len(self.summary["iterations"]))

    def test_gzip_opens_in_chromium(self):
        browser = find_browser()
        if browser is None:
            self.fail("chromium not found; run scripts/setup.sh (it installs chromium)")
        got = open_in_chromium(browser, self.tmp.name, self.out)
        self.assertNotIn("error", got)
        self.assertEqual(got["events"], len(self.doc["traceEvents"]))
        self.assertEqual(got["ph"]["X"], sum(1 for e in self.doc["traceEvents"] if e["ph"] == "X"))
        self.assertEqual(got["otherData"]["events_left_out"], self.doc["otherData"]["events_left_out"])

    def test_default_budget_keeps_a_small_run_whole(self):
        out = os.path.join(self.tmp.name, "whole.json")
        rc, _, err = run("report", self.traces, "--chrome-trace", out)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("left out", err)
        doc = load(out)
        self.assertEqual(doc["otherData"]["events_left_out"], 0)
        gpu = sum(1 for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] in ("kernel", "memcpy", "memset"))
        self.assertEqual(gpu, sum(r["kernels"] + r["memcpys"] + r["memsets"] for r in self.summary["ranks"]))

    def test_chosen_iterations(self):
        out = os.path.join(self.tmp.name, "chosen.json")
        rc, _, err = run("report", self.traces, "--chrome-trace", out, "--trace-iterations", "2,4")
        self.assertEqual(rc, 0, err)
        doc = load(out)
        check_format(self, doc)
        self.assertEqual(doc["otherData"]["iterations_left_out"], len(self.summary["iterations"]) - 2 * self.RANKS)
        rc, _, err = run("report", self.traces, "--chrome-trace", out, "--trace-iterations", "2-", "--force")
        self.assertEqual(rc, 2)
        self.assertIn("--trace-iterations", err)


class NoIterations(unittest.TestCase):
    def test_cut_to_the_budget_and_said(self):
        ev = []
        for i in range(2000):  # no ProfilerStep, no communication: no iterations
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9,
                       "ts": 10 * i, "dur": 2, "args": {"correlation": i + 1}})
            ev.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10 * i + 3, "dur": 5,
                       "args": {"device": 0, "stream": 7, "correlation": i + 1}})
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "r.json")
            with open(src, "w") as f:
                json.dump({"traceEvents": ev}, f)
            out = os.path.join(d, "t.json")
            rc, _, err = run("report", src, "--chrome-trace", out, "--trace-budget", "0.1")
            self.assertEqual(rc, 0, err)
            self.assertLessEqual(os.path.getsize(out), 100_000)
            doc = load(out)
            check_format(self, doc)
            self.assertIn("without iterations", err)
            kernels = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "kernel"]
            self.assertGreater(len(kernels), 50)
            self.assertLess(len(kernels), 2000)
            # The start of the trace: the first host call is at 0, its kernel 3 µs later.
            self.assertEqual(min(e["ts"] for e in doc["traceEvents"] if "ts" in e), 0)
            self.assertEqual(min(e["ts"] for e in kernels), 3)
            self.assertEqual(doc["otherData"]["events_left_out"], 4000 - 2 * len(kernels))



class PidsAndRows(unittest.TestCase):
    """Rank R is pid R+1 named "rank R" (Perfetto treats pid 0 as the idle process); the records
    of no stream (stream id -1, 4294967295 unsigned) are on a row named "synchronization"."""

    def test_pid_is_rank_plus_one_and_sync_rows_named(self):
        tmp = tempfile.mkdtemp(prefix="overlapprof-ct-sync-")
        try:
            ev = [{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10, "dur": 100,
                   "args": {"device": 0, "stream": 7}},
                  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 20, "ts": 50,
                   "dur": 100, "args": {"device": 0, "stream": 20}},
                  {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": 4294967295, "ts": 160,
                   "dur": 5, "args": {"device": 0, "stream": -1}}]
            src = os.path.join(tmp, "sync.json")
            with open(src, "w") as f:
                json.dump({"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": ev}, f)
            out = os.path.join(tmp, "t.json")
            p = subprocess.run([CLI, "report", src, "--chrome-trace", out], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out) as f:
                doc = json.load(f)
            meta = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
            self.assertEqual({e["pid"] for e in doc["traceEvents"] if "pid" in e}, {1})
            self.assertIn("rank 0", [e["args"]["name"] for e in meta if e["name"] == "process_name"])
            rows = [e["args"]["name"] for e in meta if e["name"] == "thread_name"]
            self.assertIn("GPU 0 synchronization", rows)
            self.assertFalse([r for r in rows if "4294967295" in r], rows)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


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
