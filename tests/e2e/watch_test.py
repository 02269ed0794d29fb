#!/usr/bin/env python3
"""End-to-end tests of `overlapprof run --watch-textfile / --watch-listen` (docs/watch.md).

A job of the NCCL and CUPTI test doubles (tests/injector/nccl_driver.cc, mode cupti_steps: each
step a 6 ms GEMM and a 4 ms all-reduce kernel, 2 ms of it hidden) runs for a few seconds under the
real `overlapprof run` with the real injector; the metrics are scraped while it runs and compared
with `overlapprof analyze --json` of the same rank files for the same steps.

Usage: watch_test.py OVERLAPPROF NCCL_DRIVER FAKE_CUPTI_LIB (ctest passes them)
"""
import http.client
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

CLI = DRIVER = FAKE_CUPTI = None
PROMTOOL = shutil.which("promtool")


def clean_env(**kw):
    e = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OVERLAPPROF_OUTPUT_DIR", "LD_PRELOAD", "CUDA_INJECTION64_PATH",
              "NVTX_INJECTION64_PATH", "NCCL_PROFILER_PLUGIN"):
        e.pop(k, None)
    e["OVERLAPPROF_CUPTI_LIB"] = FAKE_CUPTI
    e.update({k: str(v) for k, v in kw.items()})
    return e


def parse_metrics(text):
    """{(name, frozenset(labels.items())): value} of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)', line)
        assert m, f"not an exposition line: {line!r}"
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(3))
    return out


def per_rank(metrics, name):
    return {dict(labels)["rank"]: v for (n, labels), v in metrics.items() if n == name}


def get(port, path, method="GET", headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def promtool_check(test, text):
    if not PROMTOOL:
        test.skipTest("promtool not installed (Debian: apt-get install prometheus; scripts/setup.sh installs it)")
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    test.assertEqual(p.returncode, 0, p.stdout + p.stderr)


class WatchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="overlapprof-watch-")
        self.out = os.path.join(self.tmp, "out")
        self.prom = os.path.join(self.tmp, "overlap.prom")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start_job(self, steps, sleep_ms, extra=()):
        job = (f"RANK=0 WORLD_SIZE=2 {DRIVER} cupti_steps {FAKE_CUPTI} {steps} {sleep_ms} & "
               f"RANK=1 WORLD_SIZE=2 {DRIVER} cupti_steps {FAKE_CUPTI} {steps} {sleep_ms} & wait")
        p = subprocess.Popen([CLI, "run", "-o", self.out, "--flush-ms", "100", "--watch-interval", "0.3", *extra,
                              "--", "sh", "-c", job], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=clean_env())
        self.addCleanup(lambda: p.poll() is None and p.kill())
        return p

    def port_of(self, p):
        deadline = time.time() + 30
        said = ""
        while time.time() < deadline:
            line = p.stderr.readline()
            said += line
            m = re.search(r"watch: serving http://127\.0\.0\.1:(\d+)/metrics", line)
            if m:
                return int(m.group(1))
            if not line and p.poll() is not None:
                break
        if p.returncode == 2 and "built without an HTTP server" in said:
            self.skipTest("this overlapprof was built without libmicrohttpd (libmicrohttpd-dev; scripts/setup.sh installs it)")
        self.fail("run did not say where it serves the metrics: " + said)

    def analyzed_iterations(self):
        p = subprocess.run([CLI, "analyze", self.out, "--json", "-"], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        its = {}
        for it in json.loads(p.stdout)["iterations"]:
            its.setdefault(str(it["rank"]), []).append(it)
        return its

    def assertFiguresEqualAnalysis(self, metrics, its, whole):
        steps = per_rank(metrics, "overlapprof_steps_total")
        self.assertEqual(sorted(steps), ["0", "1"], metrics)
        for rank, k in steps.items():
            k = int(k)
            self.assertGreater(k, 0)
            if whole:
                self.assertEqual(k, len(its[rank]))
            first = its[rank][:k]
            for metric, key in (("overlapprof_step_seconds_total", "wall_ns"),
                                ("overlapprof_compute_seconds_total", "compute_ns"),
                                ("overlapprof_comm_seconds_total", "comm_ns"),
                                ("overlapprof_comm_hidden_seconds_total", "overlap_ns"),
                                ("overlapprof_comm_exposed_seconds_total", "exposed_comm_ns")):
                live = round(per_rank(metrics, metric)[rank] * 1e9)
                self.assertEqual(live, sum(i[key] for i in first), f"{metric} rank {rank} over {k} steps")

    def test_scrape_during_the_job_equals_analyze_of_the_same_steps(self):
        p = self.start_job(200, 15, ["--watch-textfile", self.prom, "--watch-listen", "127.0.0.1:0"])
        port = self.port_of(p)
        scraped = None
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            status, body = get(port, "/metrics")
            self.assertEqual(status, 200)
            m = parse_metrics(body)
            steps = per_rank(m, "overlapprof_steps_total")
            if len(steps) == 2 and min(steps.values()) >= 20:
                scraped = (body, m)
                break
            time.sleep(0.2)
        self.assertIsNotNone(scraped, "no scrape with steps of both ranks while the job ran")
        self.assertIsNone(p.poll(), "the job had ended: the scrape was not during the job")
        self.assertEqual(get(port, "/healthz"), (200, "ok\n"))
        with open(self.prom) as f:
            during_textfile = f.read()
        self.assertIn("overlapprof_steps_total{", during_textfile)
        _, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)
        its = self.analyzed_iterations()
        # The live figures of the steps counted so far are the analysis' figures of those steps.
        self.assertFiguresEqualAnalysis(scraped[1], its, whole=False)
        # The figures are the doubles': 2 ms of each step's 4 ms all-reduce hidden.
        self.assertEqual(per_rank(scraped[1], "overlapprof_comm_hidden_ratio"), {"0": 0.5, "1": 0.5})
        ops = {dict(l)["op"] for (n, l), _ in scraped[1].items() if n == "overlapprof_comm_ops_total"}
        self.assertEqual(ops, {"allreduce"})
        # The textfile after the run: every step, as the analysis of the settled files.
        with open(self.prom) as f:
            final = parse_metrics(f.read())
        self.assertFiguresEqualAnalysis(final, its, whole=True)
        self.assertEqual(per_rank(final, "overlapprof_data_quality_errors"), {"0": 0, "1": 0})
        self.assertEqual(final[("overlapprof_watch_analysis_failures_total", frozenset())], 0, err)
        self.assertEqual([x for x in os.listdir(self.tmp) if x.endswith(".partial")], [])
        promtool_check(self, scraped[0])
        promtool_check(self, during_textfile)

    def test_only_get_of_metrics_and_healthz_is_served(self):
        p = self.start_job(200, 15, ["--watch-listen", "127.0.0.1:0", "--watch-textfile", self.prom])
        port = self.port_of(p)
        for method in ("POST", "PUT", "DELETE", "HEAD", "OPTIONS"):
            status, _ = get(port, "/metrics", method=method)
            self.assertEqual(status, 405, method)
        for path in ("/", "/metrics/x", "/../etc/passwd", "/healthz2", "/api/v1/query"):
            status, body = get(port, path)
            self.assertEqual(status, 404, path)
            self.assertNotIn("overlapprof_", body)
        # Headers beyond the connection's memory bound are refused, not served.
        try:
            status, body = get(port, "/metrics", headers={"X-Big": "a" * 65536})
            self.assertNotEqual(status, 200)
        except (ConnectionError, http.client.HTTPException, socket.timeout):
            pass
        # Idle connections holding slots do not stop a scrape (bounded, and dropped after a timeout).
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(8)]
        try:
            status, _ = get(port, "/metrics")
            self.assertEqual(status, 200)
        finally:
            for s in idle:
                s.close()
        # More connections than the endpoint takes, held open: the analysis keeps its pace.
        def analyses():
            with open(self.prom) as f:
                return parse_metrics(f.read())[("overlapprof_watch_analyses_total", frozenset())]
        flood = []
        for _ in range(24):
            try:
                flood.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError:
                break
        try:
            before = analyses()
            time.sleep(1.0)  # about 3 intervals of 0.3 s
            self.assertGreaterEqual(analyses() - before, 2)
        finally:
            for s in flood:
                s.close()
        deadline = time.time() + 10
        while True:  # the slots free up once the server sees them closed
            try:
                status, _ = get(port, "/metrics")
                break
            except (ConnectionError, http.client.HTTPException, socket.timeout):
                self.assertLess(time.time(), deadline, "the endpoint did not serve again after the flood")
                time.sleep(0.1)
        self.assertEqual(status, 200)
        self.assertIsNone(p.poll(), "the job ended before the requests were made")
        _, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)

    def test_a_reader_of_the_live_file_when_the_rank_finishes_loses_nothing(self):
        # What the watcher does (read the rank files while they are written), made deterministic:
        # one read connection stays open from the first commit until the rank has committed
        # "finished" and is leaving WAL mode, which needs every other connection gone.
        p = subprocess.Popen([CLI, "run", "-o", self.out, "--no-analyze", "--flush-ms", "50", "--", DRIVER,
                              "cupti_steps", FAKE_CUPTI, "10", "20"], stderr=subprocess.PIPE, text=True,
                             env=clean_env(RANK=0, WORLD_SIZE=1))
        self.addCleanup(lambda: p.poll() is None and p.kill())
        deadline = time.time() + 60
        reader = None
        while time.time() < deadline:
            files = [f for f in os.listdir(self.out) if f.endswith(".db")] if os.path.isdir(self.out) else []
            if files:
                try:
                    reader = sqlite3.connect(f"file:{os.path.join(self.out, files[0])}?mode=ro", uri=True)
                    reader.execute("SELECT count(*) FROM meta").fetchall()
                    break
                except sqlite3.Error:
                    reader.close()
                    reader = None
            time.sleep(0.005)
        self.assertIsNotNone(reader, "no rank file appeared")
        state = None
        while time.time() < deadline and state != "finished":
            r = reader.execute("SELECT value FROM meta WHERE key='recording_state'").fetchall()
            state = r[0][0] if r else None
            time.sleep(0.005)
        self.assertEqual(state, "finished")
        time.sleep(0.2)  # the rank is leaving WAL mode now, and this connection is still open
        reader.close()
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertNotIn("failed", err)
        path = os.path.join(self.out, [f for f in os.listdir(self.out) if f.endswith(".db")][0])
        s = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.addCleanup(s.close)
        self.assertEqual(s.execute("SELECT value FROM meta WHERE key='recording_state'").fetchall(), [("finished",)])
        self.assertEqual(s.execute("SELECT name, value FROM stats WHERE value <> 0").fetchall(), [])
        self.assertEqual(s.execute("SELECT count(*) FROM comm_op").fetchall(), [(10,)])

    def test_bad_watch_options_are_exit_2_before_the_job_starts(self):
        marker = os.path.join(self.tmp, "ran")
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        self.addCleanup(busy.close)
        cases = [["--watch-listen", "nonsense"], ["--watch-listen", "127.0.0.1:99999"],
                 ["--watch-listen", "localhost:9464"], ["--watch-listen", "127.0.0.1:"],
                 ["--watch-listen", f"127.0.0.1:{busy.getsockname()[1]}"],
                 ["--watch-textfile", os.path.join(self.tmp, "no", "such", "dir", "x.prom")],
                 ["--watch-textfile", self.prom, "--watch-interval", "0"]]
        for extra in cases:
            r = subprocess.run([CLI, "run", "-o", self.out, *extra, "--", "touch", marker], capture_output=True,
                               text=True, timeout=60, env=clean_env())
            self.assertEqual(r.returncode, 2, (extra, r.stderr))
            self.assertFalse(os.path.exists(marker), f"{extra}: the job ran")
            self.assertTrue(r.stderr.strip(), extra)
            self.assertNotIn("Traceback", r.stderr)


if __name__ == "__main__":
    CLI, DRIVER, FAKE_CUPTI = sys.argv[1:4]
    del sys.argv[1:4]
    unittest.main(verbosity=2)
