#!/usr/bin/env python3
"""End-to-end tests: the real overlapprof CLI on real traces and on bad input.

Usage: cli_test.py PATH_TO_OVERLAPPROF   (ctest passes it)
Every CLI call runs under a timeout: a hang is a failure.
"""
import gzip
import glob
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
GOLDEN = os.path.join(HERE, "..", "golden")
CLI = None
KINETO = os.path.join(DATA, "kineto")
A100_2 = os.path.join(KINETO, "a100_2rank_rank0.json.gz")
A100_16 = os.path.join(KINETO, "a100_16rank_rank0.json.gz")
NSYS = os.path.join(DATA, "nsys")


def run(*args, env=None, timeout=120):
    e = dict(os.environ)
    e.pop("NO_COLOR", None)
    if env:
        e.update(env)
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout, env=e)
    return p.returncode, p.stdout, p.stderr


class CliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="overlapprof-e2e-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def version(self):
        rc, out, _ = run("--version")
        self.assertEqual(rc, 0)
        return out.split()[1]  # "overlapprof VERSION (git REVISION)"

    def test_analyze_real_trace_prints_table_verdict_and_json(self):
        out_json = os.path.join(self.tmp, "s.json")
        rc, out, err = run("analyze", A100_2, "--json", out_json)
        self.assertEqual(rc, 0, err)
        self.assertEqual(err, "")
        self.assertIn("15.6% hidden", out)
        # The GPU idles 76% of each iteration: that is what the verdict names first.
        self.assertIn("verdict: GPU idle 76.2% of the step: the job is input- or CPU-bound", out)
        with open(out_json) as f:
            s = json.load(f)
        self.assertEqual(s["schema"], "overlapprof.summary/1")
        self.assertEqual(list(s.keys())[:3], ["schema", "ranks", "iterations"])
        r = s["ranks"][0]
        self.assertEqual(list(r.keys())[:7],
                         ["rank", "comm_ns", "compute_ns", "overlap_ns", "exposed_comm_ns", "overlap_ratio", "comm_ops"])
        self.assertEqual(r["rank"], 0)
        self.assertEqual(r["overlap_ratio"], 0.1561)
        self.assertEqual(r["comm_ns"], 46876493)
        self.assertEqual(r["comm_ops"], 21)
        it = s["iterations"][0]
        self.assertEqual(list(it.keys())[:5], ["rank", "index", "start_ns", "end_ns", "overlap_ratio"])
        self.assertEqual(len(s["iterations"]), 3)
        # Numbers in the terminal table are the JSON's numbers.
        self.assertIn("46.88 ms", out)

    def test_per_iteration_table(self):
        rc, out, err = run("analyze", A100_16, "--per-iteration")
        self.assertEqual(rc, 0, err)
        self.assertIn("per iteration", out)
        for step in range(550, 555):
            self.assertIn(str(step), out)

    def test_json_to_stdout_is_pure_json(self):
        rc, out, err = run("analyze", A100_2, "--json", "-")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["ranks"][0]["rank"], 0)

    def test_directory_of_traces_is_ordered_by_rank_unknown_last(self):
        d = os.path.join(self.tmp, "run")
        os.makedirs(os.path.join(d, "nested"))
        shutil.copy(os.path.join(KINETO, "mi250_1rank_rocm.json.gz"), os.path.join(d, "a.json.gz"))  # rank unknown
        shutil.copy(A100_2, os.path.join(d, "nested", "b.json.gz"))  # rank 0
        with open(os.path.join(d, "README.txt"), "w") as f:
            f.write("not picked up: not a trace extension")
        rc, out, err = run("analyze", d, "--json", "-")
        self.assertEqual(rc, 0, err)
        ranks = json.loads(out)["ranks"]
        self.assertEqual([r["rank"] for r in ranks], [0, None])
        self.assertIn("no distributedInfo", " ".join(ranks[1]["notices"]))
        self.assertIn("rank_unknown", [d["counter"] for d in ranks[1]["data_quality"]])

    def test_import_then_analyze_store_gives_identical_figures(self):
        db = os.path.join(self.tmp, "rank0.db")
        rc, out, err = run("import", A100_2, "-o", db)
        self.assertEqual(rc, 0, err)
        self.assertIn("21 communication ops", out)
        self.assertFalse(os.path.exists(db + ".partial"))
        # The store is a self-contained SQLite file anyone can query.
        c = sqlite3.connect(db)
        self.assertEqual(c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0], "1.3")
        self.assertEqual(c.execute("SELECT count(*) FROM gpu_activity WHERE category=1").fetchone()[0], 21)
        self.assertEqual(c.execute("PRAGMA journal_mode").fetchone()[0], "delete")
        c.close()
        rc1, j1, _ = run("analyze", A100_2, "--json", "-")
        rc2, j2, err = run("analyze", db, "--json", "-")
        self.assertEqual((rc1, rc2), (0, 0), err)
        a, b = json.loads(j1), json.loads(j2)
        for s in (a, b):
            for r in s["ranks"]:
                r.pop("source")
        self.assertEqual(a, b)
        # Importing again over the file needs --force.
        rc, _, err = run("import", A100_2, "-o", db)
        self.assertEqual(rc, 2)
        self.assertIn("--force", err)
        rc, _, err = run("import", A100_2, "-o", db, "--force")
        self.assertEqual(rc, 0, err)

    def test_jobs_gives_identical_results(self):
        d = os.path.join(self.tmp, "run")
        os.makedirs(d)
        for name in ("a100_2rank_rank0", "a100_16rank_rank0", "v100_1rank_no_nccl", "mi250_1rank_rocm"):
            shutil.copy(os.path.join(KINETO, name + ".json.gz"), d)
        outs = []
        # No --jobs: as many ranks at once as CPUs (parallel by default); the same output.
        for jobs in ([], ["--jobs", "1"], ["--jobs", "2"], ["--jobs", "3"], ["-j", "8"]):
            rc, out, err = run("analyze", d, *jobs, "--json", "-")
            self.assertEqual(rc, 0, err)
            outs.append(json.loads(out))
        for o in outs[1:]:
            self.assertEqual(outs[0], o)
        rc, _, err = run("analyze", d, "--jobs", "0")
        self.assertEqual(rc, 2)
        # A bad file among several stops the run with exit 2 and the same one line whatever the
        # job count: the first bad input in input order (here "b..." before "zz..."), even when a
        # later one fails first.
        shutil.copy(os.path.join(DATA, "bad", "truncated.json"), os.path.join(d, "zz.json"))
        errs = set()
        for jobs in ([], ["--jobs", "1"], ["--jobs", "2"], ["--jobs", "4"]):
            rc, out, err = run("analyze", d, *jobs)
            self.assertEqual(rc, 2)
            self.assertIn("zz.json", err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            errs.add(err)
        self.assertEqual(len(errs), 1, errs)
        shutil.copy(os.path.join(DATA, "bad", "truncated.json.gz"), os.path.join(d, "b_truncated.json.gz"))
        errs = set()
        for jobs in ([], ["--jobs", "1"], ["--jobs", "2"], ["--jobs", "4"]):
            rc, out, err = run("analyze", d, *jobs)
            self.assertEqual(rc, 2)
            self.assertIn("b_truncated.json.gz", err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            errs.add(err)
        self.assertEqual(len(errs), 1, errs)

    def test_jobs_on_stores_gives_identical_results(self):
        # A directory of stores: each rank is read and prepared (the overlap analyzer's per-rank
        # work) on its own thread, the other analyzers and the cross-rank pass run in input order:
        # the JSON and the terminal output are byte for byte those of one rank at a time.
        synth = os.path.join(HERE, "..", "synth", "synth.py")
        traces = os.path.join(self.tmp, "traces")
        subprocess.run([sys.executable, synth, traces, "--ranks", "6", "--iterations", "5", "--straggler", "3",
                        "--straggler-delay-us", "1500", "--quiet"], check=True)
        d = os.path.join(self.tmp, "stores")
        rc, _, err = run("import", traces, "-o", d)
        self.assertEqual(rc, 0, err)
        self.assertEqual(len([n for n in os.listdir(d) if n.endswith(".db")]), 6)
        outs = {}
        for jobs in ([], ["-j", "1"], ["-j", "2"], ["-j", "3"], ["--jobs", "8"]):
            rc, out, err = run("analyze", d, *jobs, "--json", "-")
            self.assertEqual((rc, err), (0, ""))
            rc, table, err = run("analyze", d, *jobs, "--per-iteration")
            self.assertEqual((rc, err), (0, ""))
            outs[" ".join(jobs)] = (out, table)
        self.assertEqual(len(json.loads(outs["-j 1"][0])["ranks"]), 6)
        self.assertGreater(json.loads(outs["-j 1"][0])["collectives_summary"]["matched"], 0)
        for k, v in outs.items():
            self.assertEqual(v, outs["-j 1"], f"analyze {k} differs from -j 1")
        # A bad store among them stops the run with exit 2 and the same one line whatever the job
        # count: the first bad input in input order, even when a later one fails first.
        # (Both are refused when read, not when the directory is listed.)
        shutil.copy(os.path.join(DATA, "bad", "corrupted.db"), os.path.join(d, "rank3_bad.db"))
        last = sorted(n for n in os.listdir(d) if n.startswith("rank"))[-1]
        with open(os.path.join(d, last), "r+b") as f:
            f.truncate(os.path.getsize(os.path.join(d, last)) // 2)
        errs = set()
        for jobs in ([], ["-j", "1"], ["-j", "2"], ["-j", "4"], ["-j", "8"]):
            rc, out, err = run("analyze", d, *jobs)
            self.assertEqual(rc, 2, err)
            self.assertIn("rank3_bad.db", err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            errs.add(err)
        self.assertEqual(len(errs), 1, errs)

    def test_import_several_into_directory(self):
        outdir = os.path.join(self.tmp, "stores")
        rc, out, err = run("import", A100_2, A100_16, "-o", outdir)
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(os.listdir(outdir)), ["a100_16rank_rank0.db", "a100_2rank_rank0.db"])
        rc, out, err = run("analyze", outdir, "--json", "-")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(json.loads(out)["ranks"]), 2)

    def test_rejected_inputs_match_golden(self):
        with open(os.path.join(GOLDEN, "rejected.json")) as f:
            golden = json.load(f)
        version = self.version()
        for name, want in golden.items():
            if name.startswith("_"):
                continue
            path = os.path.join(DATA, "bad", name)
            with self.subTest(name=name):
                rc, out, err = run("analyze", path, timeout=30)
                self.assertEqual(rc, want["exit"])
                self.assertEqual(out, "")
                expected = want["stderr"].replace("{path}", path).replace("{version}", version)
                self.assertEqual(err, expected + "\n")

    def test_missing_file_empty_dir_and_usage_errors_exit_2_with_one_line(self):
        empty_dir = os.path.join(self.tmp, "empty")
        os.makedirs(empty_dir)
        cases = [
            (["analyze", os.path.join(self.tmp, "nope.json")], "no such file or directory"),
            (["analyze", empty_dir], "directory holds no trace files"),
            (["analyze"], "TRACE is required"),
            (["analyze", A100_2, "--bogus"], "--bogus"),
            (["analyze", A100_2, "--ts-unit", "ms"], "--ts-unit must be us or ns"),
            (["frobnicate"], "frobnicate"),
            ([], "subcommand"),
        ]
        for args, needle in cases:
            with self.subTest(args=args):
                rc, out, err = run(*args)
                self.assertEqual(rc, 2, err)
                self.assertEqual(err.count("\n"), 1, err)
                self.assertTrue(err.startswith("overlapprof: error: "), err)
                self.assertIn(needle, err)

    def test_first_bad_file_fails_the_whole_run(self):
        rc, out, err = run("analyze", A100_2, os.path.join(DATA, "bad", "truncated.json"))
        self.assertEqual(rc, 2)
        self.assertEqual(out, "")
        self.assertIn("truncated.json", err)

    def test_error_level_data_quality_counter_fails_with_exit_4_after_printing(self):
        db = os.path.join(self.tmp, "r.db")
        self.assertEqual(run("import", A100_2, "-o", db)[0], 0)
        c = sqlite3.connect(db)
        c.execute("UPDATE stats SET value=12 WHERE name='records_dropped_cupti'")
        c.commit()
        c.close()
        rc, out, err = run("analyze", db, "--json", os.path.join(self.tmp, "s.json"))
        self.assertEqual(rc, 4)
        self.assertIn("records_dropped_cupti = 12", out)
        self.assertIn("15.6%", out)  # the figures are still shown
        self.assertIn("severity error", err)
        with open(os.path.join(self.tmp, "s.json")) as f:
            s = json.load(f)
        self.assertEqual(s["data_quality"]["errors"], 1)
        self.assertEqual(s["ranks"][0]["data_quality"][0]["counter"], "records_dropped_cupti")

    def test_color_only_when_asked_or_on_tty_and_never_with_no_color(self):
        rc, out, _ = run("analyze", A100_2)  # stdout is a pipe
        self.assertNotIn("\x1b[", out)
        rc, out, _ = run("analyze", A100_2, "--color", "always")
        self.assertIn("\x1b[", out)
        rc, out, _ = run("analyze", A100_2, env={"NO_COLOR": "1"})
        self.assertNotIn("\x1b[", out)

    def test_color_rejects_unknown_values(self):
        rc, out, err = run("analyze", A100_2, "--color", "sometimes")
        self.assertEqual(rc, 2, out + err)
        self.assertIn("--color: sometimes not in {auto,always,never}", err)
        self.assertEqual(out, "")

    def test_comm_timing_kernels_on_a_real_plugin_recording(self):
        # H100 stores with NCCL's profiler plugin on (tests/data/gpu): by default the plugin times each
        # of the 100 ops of a rank; --comm-timing kernels times them by their kernels, which are longer.
        grouped = os.path.join(DATA, "gpu", "h100_gemm_grouped_plugin")
        rc, out, err = run("analyze", grouped, "--json", "-")
        self.assertEqual(rc, 0, err)
        auto = json.loads(out)
        rc, text, err = run("analyze", grouped)
        self.assertEqual(rc, 0, err)
        # Both ranks alike: one line (wrapped at 100 columns).
        self.assertIn("ranks 0,1: communication timed by NCCL's profiler plugin, per operation (100 of 100 NCCL "
                      "profiler ops used)", " ".join(l.strip() for l in text.splitlines()))
        rc, out, err = run("analyze", grouped, "--comm-timing", "kernels", "--json", "-")
        self.assertEqual(rc, 0, err)
        kernels = json.loads(out)
        for a, k in zip(auto["ranks"], kernels["ranks"]):
            self.assertEqual(a["timing_source"], "nccl_profiler")
            self.assertEqual(k["timing_source"], "kernels")
            self.assertLess(a["comm_ns"], k["comm_ns"])
        rc, text, err = run("analyze", grouped, "--comm-timing", "kernels")
        self.assertEqual(rc, 0, err)
        self.assertIn("ranks 0,1: communication timed by its kernels (no NCCL profiler plugin operation used)", text)
        rc, out, err = run("analyze", grouped, "--comm-timing", "plugin")
        self.assertEqual(rc, 2, out + err)
        self.assertIn("--comm-timing: plugin not in {auto,kernels}", err)

    def test_help_shows_the_real_usage_and_ranges_in_words(self):
        usage = {"analyze": "analyze [OPTIONS] TRACE...", "import": "import [OPTIONS] INPUT... -o OUTPUT",
                 "run": "run [OPTIONS] -- CMD [ARGS...]", "compare": "compare [OPTIONS] BASE NEW",
                 "check": "check [OPTIONS] TRACE --baseline BASE",
                 "report": "report [OPTIONS] TRACE... --chrome-trace FILE | --json FILE | --html FILE"}
        for sub, want in usage.items():
            rc, out, err = run(sub, "--help")
            self.assertEqual(rc, 0, err)
            self.assertIn("Usage: overlapprof " + want + "\n", out)
            # Ranges in words, not CLI11's "INT:INT in [1 - 256]" / "FLOAT:NONNEGATIVE".
            self.assertNotRegex(out, r"INT:|FLOAT:|NONNEGATIVE|POSITIVE|\[\d+ - \d+\]", sub)
        self.assertIn("1 to 256", run("analyze", "--help")[1])
        self.assertIn("from 10 to 600000", run("run", "--help")[1])

    def test_analyze_of_a_json_summary_suggests_compare_and_check(self):
        summary = os.path.join(self.tmp, "base.json")
        self.assertEqual(run("analyze", A100_2, "--json", summary)[0], 0)
        rc, out, err = run("analyze", summary)
        self.assertEqual(rc, 2, out + err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("JSON summary", err)
        self.assertIn(f"overlapprof compare {summary} NEW", err)
        self.assertIn(f"overlapprof check TRACE --baseline {summary}", err)

    def test_table_shows_the_file_when_files_share_a_rank(self):
        # A100_2 and A100_16 are both rank 0 (of different runs): each row says its file.
        rc, out, err = run("analyze", A100_2, A100_16, "--per-iteration")
        self.assertIn(rc, (0, 4), err)
        lines = out.splitlines()
        header = next(i for i, l in enumerate(lines) if l.startswith(" rank       step"))
        self.assertTrue(lines[header].rstrip().endswith("file"), lines[header])
        rows = lines[header + 1:header + 3]
        self.assertEqual({next(p for p in (A100_2, A100_16) if p in r) for r in rows}, {A100_2, A100_16}, rows)
        iters = [l for l in lines if l.rstrip().endswith((A100_2, A100_16)) and "%" in l]
        self.assertGreater(len(iters), 2)
        # One file: no file column.
        rc, out, _ = run("analyze", A100_2)
        self.assertFalse(any(l.startswith(" rank ") and l.rstrip().endswith("file") for l in out.splitlines()))

    def test_terminal_report_matches_golden(self):
        # The terminal writer's golden file: every table and line, for a real trace and for a
        # synthetic multi-rank run with buckets, a straggler and findings.
        synth = os.path.join(HERE, "..", "synth", "synth.py")
        d = os.path.join(self.tmp, "ddp")
        subprocess.run([sys.executable, synth, d, "--ranks", "4", "--iterations", "4", "--straggler", "2",
                        "--straggler-delay-us", "2000", "--quiet", "--truth", d + ".truth.json"], check=True)
        for name, args, root in (("a100_2rank_rank0", [A100_2, "--per-iteration"], KINETO),
                                 ("synth_ddp_4rank", [d, "--per-iteration"], d)):
            rc, out, err = run("analyze", *args, env={"LC_ALL": "C.UTF-8"})  # block-character bars
            self.assertEqual(rc, 0, err)
            out = out.replace(root, "<dir>")
            path = os.path.join(GOLDEN, name + ".terminal.txt")
            if os.environ.get("UPDATE_GOLDEN"):
                with open(path, "w") as f:
                    f.write(out)
            with open(path) as f:
                self.assertEqual(out, f.read(), f"differs from {path} (UPDATE_GOLDEN=1 rewrites it)")

    def test_analyze_writes_every_report_in_the_one_pass(self):
        # The terminal summary, and the JSON, HTML and Chrome trace files that `report` writes,
        # byte for byte, from one analyze.
        a, b = os.path.join(self.tmp, "one"), os.path.join(self.tmp, "two")
        os.makedirs(a)
        os.makedirs(b)
        files = ("s.json", "r.html", "t.json.gz")
        rc, out, err = run("analyze", A100_2, "--json", os.path.join(a, files[0]), "--html", os.path.join(a, files[1]),
                           "--chrome-trace", os.path.join(a, files[2]))
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith("verdict: "), out)
        self.assertIn("wrote " + os.path.join(a, "r.html"), err)
        rc, _, err = run("report", A100_2, "--json", os.path.join(b, files[0]), "--html", os.path.join(b, files[1]),
                         "--chrome-trace", os.path.join(b, files[2]))
        self.assertEqual(rc, 0, err)
        for name in files:
            with open(os.path.join(a, name), "rb") as x, open(os.path.join(b, name), "rb") as y:
                self.assertEqual(x.read(), y.read(), name)

    def test_terminal_options(self):
        rc, full, err = run("analyze", A100_2, A100_16)
        self.assertEqual(rc, 0, err)
        rc, brief, err = run("analyze", A100_2, A100_16, "--brief")
        self.assertEqual(rc, 0, err)
        self.assertTrue(brief.startswith("verdict: "), brief)
        self.assertIn("\nrun: 2 ranks", brief)
        self.assertNotIn("by op type", brief)
        self.assertLess(len(brief.splitlines()), 12, brief)
        self.assertIn("findings:", full)
        rc, none, err = run("analyze", A100_2, A100_16, "--top", "0")
        self.assertNotIn("  warning rank", none)
        self.assertIn("more (--top N shows more", none)
        rc, _, err = run("analyze", A100_2, "--ranks", "0,x")
        self.assertEqual(rc, 2)
        self.assertIn("--ranks 0,x: not 'all' nor a list of ranks", err)
        # Bars: block characters in a UTF-8 locale, plain ones otherwise.
        rc, utf8, _ = run("analyze", A100_2, A100_16, env={"LC_ALL": "C.UTF-8"})
        rc, plain, _ = run("analyze", A100_2, A100_16, env={"LC_ALL": "C", "LANG": ""})
        self.assertIn("\u2588", utf8)
        self.assertNotIn("\u2588", plain)
        self.assertIn("  ###x............  ", plain)
        # One rank: no ranks table (the run's figures are the rank's), unless asked for.
        self.assertNotIn(" rank       step", run("analyze", A100_2)[1])
        self.assertIn(" rank       step", run("analyze", A100_2, "--ranks", "all")[1])
        for text in (full, brief, utf8):
            for line in text.splitlines():
                if A100_2 not in line and A100_16 not in line:  # rows naming files may be longer
                    self.assertLessEqual(len(line), 100, line)

    def test_directory_with_other_files(self):
        # A generator's manifest, notes and a nested summary beside the traces: the traces are
        # analyzed, the rest listed on stderr with the reason; a file that may be a trace and is
        # broken is still an error (exit 2) unless --exclude leaves it out.
        d = os.path.join(self.tmp, "gen")
        os.makedirs(os.path.join(d, "extra"))
        shutil.copy(A100_2, d)
        with open(os.path.join(d, "manifest.json"), "w") as f:
            json.dump({"ranks": 1, "generator": "synth"}, f)
        with open(os.path.join(d, "notes.md"), "w") as f:
            f.write("run notes\n")
        rc, _, _ = run("analyze", A100_2, "--json", os.path.join(d, "extra", "base.json"))
        self.assertEqual(rc, 0)
        rc, out, err = run("analyze", d, "--brief")
        self.assertEqual(rc, 0, err)
        self.assertIn("run: 1 rank", out)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn(f"{d}: skipped 3 file(s) that are not traces: ", err)
        self.assertIn('manifest.json (JSON without "traceEvents": not a trace)', err)
        self.assertIn("notes.md (not named like a trace", err)
        self.assertIn("extra/base.json (an overlapprof JSON summary)", err)
        with open(os.path.join(d, "rank1.json"), "w") as f:
            f.write('{"traceEvents": [')
        rc, out, err = run("analyze", d)
        self.assertEqual(rc, 2, out + err)
        self.assertIn("rank1.json: truncated JSON", err)
        rc, out, err = run("analyze", d, "--exclude", "rank1*", "--brief")
        self.assertEqual(rc, 0, err)
        self.assertIn("rank1.json (--exclude rank1*)", err)
        rc, out, err = run("analyze", d, "--exclude", "*.json.gz", "--exclude", "rank1*")
        self.assertEqual(rc, 2, out + err)
        self.assertIn("directory holds no trace files", err)

    def test_outputs_refused_unless_forced(self):
        d = os.path.join(self.tmp, "outs")
        os.makedirs(d)
        js, html = os.path.join(d, "s.json"), os.path.join(d, "r.html")
        self.assertEqual(run("analyze", A100_2, "--json", js)[0], 0)
        before = open(js, "rb").read()
        for cmd in (["analyze", A100_2, "--json", js], ["report", A100_2, "--json", js]):
            rc, out, err = run(*cmd)
            self.assertEqual(rc, 2, out + err)
            self.assertIn(f"--json {js}: the file exists: --force replaces it", err)
            self.assertEqual(out, "")  # refused before anything is read
        self.assertEqual(open(js, "rb").read(), before)
        rc, _, err = run("analyze", A100_2, "--json", js, "--force")
        self.assertEqual(rc, 0, err)
        # Two outputs, one file (also through another spelling of the path).
        rc, out, err = run("analyze", A100_2, "--json", html, "--html", os.path.join(d, ".", "r.html"))
        self.assertEqual(rc, 2, out + err)
        self.assertIn("--json and --html name the same file", err)
        self.assertFalse(os.path.exists(html))
        # A directory or a device is not a file to replace.
        rc, _, err = run("report", A100_2, "--html", d, "--force")
        self.assertEqual(rc, 2)
        self.assertIn("not a regular file: refused", err)
        # import: several ranks into one .db name.
        rc, out, err = run("import", A100_2, A100_16, "-o", os.path.join(d, "all.db"))
        self.assertEqual(rc, 2, out + err)
        self.assertIn("give a directory (-o DIR/)", err)
        self.assertFalse(os.path.exists(os.path.join(d, "all.db")))

    def test_unknown_options_are_named(self):
        for args, what in ((["--bogus"], "unknown option '--bogus' (before the command only --help and --version"),
                           (["--bogus", "analyze", A100_2], "unknown option '--bogus'"),
                           (["run", "--bogus", "--", "true"], "run: unknown option '--bogus'"),
                           (["run", "--bogus", "true"], "run: unknown option '--bogus'")):
            rc, out, err = run(*args)
            self.assertEqual(rc, 2, args)
            self.assertEqual(err.count("\n"), 1, err)
            self.assertIn(what, err)

    def test_legacy_torch_profiler_array_is_refused_naming_the_format(self):
        # torch 1.x's autograd profiler: a bare array, ProfilerStep#N without a category, no kernels.
        ev = []
        for i in range(3):
            ev += [{"name": f"ProfilerStep#{i}", "ph": "X", "ts": i * 1000, "dur": 1000, "tid": 1,
                    "pid": "CPU functions", "args": {}},
                   {"name": "aten::mm", "ph": "X", "ts": i * 1000 + 20, "dur": 300, "tid": 0,
                    "pid": "CUDA functions", "args": {}}]
        path = os.path.join(self.tmp, "legacy.json")
        with open(path, "w") as f:
            json.dump(ev, f)
        rc, out, err = run("analyze", path)
        self.assertEqual(rc, 2, out + err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("a legacy PyTorch profiler trace (torch 1.x autograd profiler", err)
        self.assertIn("record with torch.profiler (Kineto)", err)

    def test_csv_tables(self):
        import csv
        d = os.path.join(self.tmp, "csv")
        rc, js, err = run("analyze", A100_2, "--csv", d, "--json", "-")
        self.assertEqual(rc, 0, err)
        summary = json.loads(js)
        self.assertEqual(sorted(os.listdir(d)), ["findings.csv", "iterations.csv", "op_types.csv", "ranks.csv"])
        with open(os.path.join(d, "ranks.csv"), newline="") as f:
            ranks = list(csv.DictReader(f))
        self.assertEqual(len(ranks), 1)
        self.assertEqual(int(ranks[0]["comm_ns"]), summary["ranks"][0]["comm_ns"])
        self.assertEqual(float(ranks[0]["overlap_ratio (0-1)"]), summary["ranks"][0]["overlap_ratio"])
        with open(os.path.join(d, "iterations.csv"), newline="") as f:
            self.assertEqual(len(list(csv.DictReader(f))), len(summary["iterations"]))
        with open(os.path.join(d, "findings.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["message"] for r in rows], [x["message"] for x in summary["findings"]])
        with open(os.path.join(d, "op_types.csv"), newline="") as f:
            self.assertIn("time_ns", next(csv.reader(f)))
        # The tables exist now: refused before the pass, unless --force.
        rc, out, err = run("analyze", A100_2, "--csv", d)
        self.assertEqual(rc, 2, out + err)
        self.assertEqual(out, "")
        self.assertEqual(run("analyze", A100_2, "--csv", d, "--force")[0], 0)

    def test_progress_on_stderr_only_when_wanted(self):
        # Forced (as on a terminal after a second): a bar per finished file, erased at the end.
        rc, out, err = run("analyze", A100_2, A100_16, env={"OVERLAPPROF_PROGRESS": "1"})
        self.assertEqual(rc, 0)
        self.assertIn("analyzing [", err)
        self.assertIn("2/2 files", err)
        self.assertTrue(err.endswith("\x1b[2K"), repr(err[-40:]))  # erased (text mode reads \r as \n)
        self.assertNotIn("analyzing", out)
        # stderr is a pipe here: nothing, and never with OVERLAPPROF_PROGRESS=0.
        self.assertEqual(run("analyze", A100_2)[2], "")
        self.assertEqual(run("analyze", A100_2, env={"OVERLAPPROF_PROGRESS": "0"})[2], "")

    def test_directory_scan_skips_overlapprof_reports(self):
        d = os.path.join(self.tmp, "run")
        os.makedirs(d)
        shutil.copy(A100_2, d)
        for name in ("overlap.summary.json", "overlap.perfetto.json"):
            with open(os.path.join(d, name), "w") as f:
                f.write("{}")
        rc, js, err = run("analyze", d, "--json", "-")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(json.loads(js)["ranks"]), 1)

    def test_ns_timestamps_option(self):
        # A trace whose writer put integer ns in "ts"/"dur".
        path = os.path.join(self.tmp, "ns.json")
        ev = [
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1712195495505582988, "dur": 1000,
             "args": {"device": 0, "stream": 7}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 20,
             "ts": 1712195495505583488, "dur": 1000, "args": {"device": 0, "stream": 20}},
        ]
        with open(path, "w") as f:
            json.dump({"distributedInfo": {"rank": 1, "world_size": 2}, "traceEvents": ev}, f)
        rc, out, err = run("analyze", path, "--ts-unit", "ns", "--json", "-")
        self.assertEqual(rc, 0, err)
        r = json.loads(out)["ranks"][0]
        self.assertEqual((r["comm_ns"], r["overlap_ns"], r["overlap_ratio"]), (1000, 500, 0.5))
        self.assertEqual(r["start_ns"], 1712195495505582988)

    def test_plain_uncompressed_json_and_gzip_agree(self):
        plain = os.path.join(self.tmp, "t.json")
        with gzip.open(A100_2) as src, open(plain, "wb") as dst:
            dst.write(src.read())
        _, a, _ = run("analyze", plain, "--json", "-")
        _, b, _ = run("analyze", A100_2, "--json", "-")
        a, b = json.loads(a), json.loads(b)
        for s in (a, b):
            s["ranks"][0].pop("source")
        self.assertEqual(a, b)


    # Nsight Systems exports (tests/data/nsys, figures from its README): one rank per
    # (process, GPU), the same figures after `import`, and `compare` between two exports.
    def test_nsys_export_analyze_import_compare(self):
        before = os.path.join(NSYS, "mfu_2gpu_before.sqlite")
        after = os.path.join(NSYS, "mfu_2gpu_after.sqlite")
        rc, out, err = run("analyze", before, "--json", "-")
        self.assertEqual(rc, 0, err)
        ranks = json.loads(out)["ranks"]
        self.assertEqual([(r["source"], r["format"], r["comm_ns"], r["compute_ns"], r["overlap_ns"], r["kernels"])
                          for r in ranks],
                         [(before + "#pid144.gpu0", "nsys", 17172652, 253690832, 0, 1993),
                          (before + "#pid145.gpu1", "nsys", 8229100, 256095624, 0, 2017)])
        stores = os.path.join(self.tmp, "stores")
        rc, out, err = run("import", before, "-o", stores + "/")
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(os.listdir(stores)),
                         ["mfu_2gpu_before.pid144.gpu0.db", "mfu_2gpu_before.pid145.gpu1.db"])
        rc, out, err = run("analyze", stores, "--json", "-")
        self.assertEqual(rc, 0, err)
        self.assertEqual([(r["comm_ns"], r["compute_ns"], r["overlap_ns"], r["kernels"]) for r in json.loads(out)["ranks"]],
                         [(r["comm_ns"], r["compute_ns"], r["overlap_ns"], r["kernels"]) for r in ranks])
        md = os.path.join(self.tmp, "compare.md")
        rc, out, err = run("compare", before, after, "--markdown", md)
        self.assertEqual(rc, 0, err)
        self.assertIn("base: " + before + " (2 rank(s)", out)
        self.assertIn("new:  " + after + " (2 rank(s)", out)
        self.assertRegex(out, r"overlap_ratio \(%\) +0\.00 +0\.00 +\+0\.00 pp")
        # 33 and 31 identical all-reduces per rank, nothing that tells a step from a layer: no
        # reliable iterations on either side (docs/analyzers.md, "Iterations"), so no step time is
        # compared (before: 66 vs 34 detected windows and a +86% step time that did not exist).
        self.assertIn("base: " + before + " (2 rank(s), 0 iteration(s))", out)
        self.assertIn("new:  " + after + " (2 rank(s), 0 iteration(s))", out)
        self.assertNotIn("step_time", out)
        self.assertTrue(os.path.getsize(md) > 0)
        # Both exports in one directory: four ranks, one per (file, process, GPU).
        both = os.path.join(self.tmp, "both")
        os.mkdir(both)
        for f in (before, after):
            shutil.copy(f, both)
        rc, out, err = run("analyze", both, "--json", "-")
        self.assertEqual(rc, 0, err)
        self.assertEqual([os.path.basename(r["source"]) for r in json.loads(out)["ranks"]],
                         ["mfu_2gpu_after.sqlite#pid148.gpu0", "mfu_2gpu_after.sqlite#pid149.gpu1",
                          "mfu_2gpu_before.sqlite#pid144.gpu0", "mfu_2gpu_before.sqlite#pid145.gpu1"])


    # The ranks of Nsight Systems exports: from the environment of one nsys per rank (real H100
    # exports); numbered by GPU when asked (--rank-by-gpu), refused with one line when a GPU holds
    # two ranks (both DDP ranks of the one-nsys H100 export share the GPU) or the exports of two
    # runs repeat their GPUs.
    def test_nsys_ranks(self):
        rc, out, err = run("analyze", os.path.join(NSYS, "h100_ddp2_per_rank"), "--json", "-")
        self.assertEqual(rc, 0, err)
        self.assertEqual([(r["rank"], r["world_size"]) for r in json.loads(out)["ranks"]], [(0, 2), (1, 2)])
        before = os.path.join(NSYS, "mfu_2gpu_before.sqlite")
        rc, out, err = run("analyze", before, "--json", "-")
        self.assertEqual(rc, 0, err)
        self.assertEqual([r["rank"] for r in json.loads(out)["ranks"]], [None, None])
        for cmd in (["analyze", before, "--rank-by-gpu", "--json", "-"],
                    ["report", before, "--rank-by-gpu", "--json", "-"]):
            rc, out, err = run(*cmd)
            self.assertEqual(rc, 0, err)
            ranks = json.loads(out)["ranks"]
            self.assertEqual([(r["rank"], r["world_size"]) for r in ranks], [(0, 2), (1, 2)])
            self.assertIn("nsys_rank_from_gpu", [q["counter"] for q in ranks[0]["data_quality"]])
        stores = os.path.join(self.tmp, "ranked")
        rc, out, err = run("import", before, "--rank-by-gpu", "-o", stores + "/")
        self.assertEqual(rc, 0, err)
        rc, out, err = run("analyze", stores, "--json", "-")
        self.assertEqual(rc, 0, err)
        self.assertEqual([r["rank"] for r in json.loads(out)["ranks"]], [0, 1])
        after = os.path.join(NSYS, "mfu_2gpu_after.sqlite")
        for args, what in (([os.path.join(NSYS, "h100_ddp2.sqlite")], "GPU 0 holds two ranks"),
                           ([before, after], "GPU 0 holds two ranks"),
                           ([os.path.join(DATA, "kineto", "a100_2rank_rank0.json.gz")],
                            "no input is a rank of an Nsight Systems export")):
            rc, out, err = run("analyze", *args, "--rank-by-gpu")
            self.assertEqual(rc, 2, err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn(what, err)


    # A .nsys-rep: without nsys on PATH, one line with the command to run; with nsys (a
    # stand-in script here), exported into the cache and analyzed, the second time from the cache.
    def test_nsys_report_is_exported_or_explained(self):
        rep = os.path.join(self.tmp, "run.nsys-rep")
        with open(rep, "wb") as f:
            f.write(b"not really a report")
        env = {"PATH": "/usr/bin:/bin", "TMPDIR": self.tmp}
        rc, out, err = run("analyze", rep, env=env)
        self.assertEqual(rc, 2)
        self.assertEqual(err, "overlapprof: error: %s: an Nsight Systems report; nsys is not on PATH: export it first "
                              "with: nsys export --type sqlite --output %s.sqlite %s\n"
                         % (rep, os.path.join(self.tmp, "run"), rep))
        bindir = os.path.join(self.tmp, "bin")
        os.mkdir(bindir)
        fake = os.path.join(bindir, "nsys")
        log = os.path.join(self.tmp, "nsys.log")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\necho "$@" >> %s\nwhile [ "$1" != "--output" ]; do shift; done\ncp %s "$2"\n'
                    % (log, os.path.join(NSYS, "mfu_2gpu_before.sqlite")))
        os.chmod(fake, 0o755)
        env["PATH"] = bindir + ":/usr/bin:/bin"
        for _ in range(2):
            rc, out, err = run("analyze", rep, "--json", "-", env=env)
            self.assertEqual(rc, 0, err)
            self.assertEqual([r["comm_ns"] for r in json.loads(out)["ranks"]], [17172652, 8229100])
        with open(log) as f:
            self.assertEqual(len(f.readlines()), 1)  # the second run used the cached export
        self.assertEqual(len(glob.glob(os.path.join(self.tmp, "overlapprof-nsys-*", "run-*.sqlite"))), 1)
        # --cache-dir: the export goes there (created when missing), and is reused from there.
        cache = os.path.join(self.tmp, "cache", "nsys")
        for _ in range(2):
            rc, out, err = run("report", rep, "--cache-dir", cache, "--json", "-", env=env)
            self.assertEqual(rc, 0, err)
            self.assertEqual([r["comm_ns"] for r in json.loads(out)["ranks"]], [17172652, 8229100])
        self.assertEqual([os.path.basename(p)[:4] for p in glob.glob(os.path.join(cache, "*"))], ["run-"])
        with open(log) as f:
            self.assertEqual(len(f.readlines()), 2)  # one more export, into the cache directory


def rank_windows(summary, steady_only=False):
    """Per rank (in the summary's order): its iteration windows as (start_ns, end_ns), all or the
    steady ones (not warm-up)."""
    out = [[] for _ in summary["ranks"]]
    r = -1
    for it in summary["iterations"]:
        if it["index"] == 0:
            r += 1
        if not (steady_only and it["warmup"]):
            out[r].append((it["start_ns"], it["end_ns"]))
    return out


def marked_inputs():
    """Every real trace with ProfilerStep markers: tests/data, and shared/traces (the repository's
    shared/ or OVERLAPPROF_SELFCHECK_DIRS, colon-separated) when present."""
    inputs = sorted(glob.glob(os.path.join(KINETO, "*.json.gz")) + glob.glob(os.path.join(NSYS, "*.sqlite")))
    inputs += [os.path.join(NSYS, "h100_ddp2_per_rank")]
    inputs += sorted(p for p in glob.glob(os.path.join(DATA, "gpu", "*")) if os.path.isdir(p))
    extra = [d for d in os.environ.get("OVERLAPPROF_SELFCHECK_DIRS", "").split(":") if d]
    extra += [os.path.join(HERE, "..", "..", "shared", "traces"), "/work/shared/traces"]
    for d in extra:
        for sub in ("kineto", "nsys"):
            inputs += sorted(glob.glob(os.path.join(d, sub, "*.json.gz")) + glob.glob(os.path.join(d, sub, "*.json"))
                             + glob.glob(os.path.join(d, sub, "*.sqlite")))
    return inputs


class IterationSelfCheck(unittest.TestCase):
    """--iterations pattern on every real trace with markers: the detector gives the marked steps
    (every boundary within 5% of the step) or no iterations with its notice, never another count
    (docs/analyzers.md, "Iterations"). Compared: the steady windows of both (warm-up windows are
    in no steady figure; the start-up before the first marker is in the detector's first window or
    in none, where no detector can tell it from a step)."""

    def test_detector_agrees_with_the_markers_or_gives_none(self):
        checked = 0
        for path in marked_inputs():
            rc, out, err = run("analyze", path, "--json", "-", timeout=300)
            self.assertIn(rc, (0, 4), f"{path}: {err}")
            marked = json.loads(out)
            rc, out, err = run("analyze", path, "--json", "-", "--iterations", "pattern", timeout=300)
            self.assertIn(rc, (0, 4), f"{path}: {err}")
            detected = json.loads(out)
            for r, (m, d, mw, dw) in enumerate(zip(marked["ranks"], detected["ranks"], rank_windows(marked, True),
                                                   rank_windows(detected, True))):
                if m["iteration_source"] != "ProfilerStep" or m["iterations"] < 2:
                    continue
                checked += 1
                name = f"{os.path.basename(path)} rank {m['rank']} (input {r})"
                with self.subTest(trace=name):
                    self.assertIn(d["iteration_source"],
                                  ("comm pattern", "forward ranges", "optimizer kernels", "carried", "none"), name)
                    if d["iterations"] == 0:
                        self.assertTrue(any("no reliable iterations" in n for n in d["notices"]), (name, d["notices"]))
                        continue
                    self.assertEqual(len(dw), len(mw), (name, d["iterations"], m["iterations"]))
                    for (ms, me), (ds, de) in zip(mw, dw):
                        tol = 0.05 * (me - ms)
                        self.assertLessEqual(abs(ds - ms), tol, (name, ms, me, ds, de))
                        self.assertLessEqual(abs(de - me), tol, (name, ms, me, ds, de))
        self.assertGreaterEqual(checked, 10)

    def test_markers_mode_takes_no_detected_windows(self):
        rc, out, err = run("analyze", os.path.join(NSYS, "mfu_2gpu_after.sqlite"), "--json", "-", "--iterations",
                           "markers")
        self.assertEqual(rc, 0, err)
        for r in json.loads(out)["ranks"]:
            self.assertEqual((r["iteration_source"], r["iterations"]), ("none", 0))
        rc, _, err = run("analyze", A100_2, "--iterations", "steps")
        self.assertEqual(rc, 2)
        self.assertIn("--iterations", err)


def two_rank_trace(path, rank, steps=12, marker_period_steps=1, markers=True, clock_us=0.0, second_at=None):
    """One rank of a 2-rank job (PyTorch-profiler format): per 20 ms step a 10 ms GEMM, then one
    4 ms all-reduce (identical, no size: alone, no step can be told from a layer). markers: one
    ProfilerStep range per `marker_period_steps` steps. clock_us shifts this rank's clock.
    second_at: the first all-reduce 1 ms into the step instead, and a second one (1 ms) that many
    µs into the step: the longest pause of the sequence is then before the second."""
    ev = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
          {"name": "thread_name", "ph": "M", "pid": 0, "tid": 20, "args": {"name": "stream 20 "}}]
    corr, period = 1, 20000.0
    for i in range(steps):
        t = 1000.0 + clock_us + i * period
        if markers and i % marker_period_steps == 0:
            ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i // marker_period_steps}",
                       "pid": 3, "tid": 3, "ts": t, "dur": period * marker_period_steps})
        ar = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
        kernels = [(7, "ampere_bf16_s16816gemm", t + 1000, 10000), (20, ar, t + 12000, 4000)]
        if second_at is not None:
            kernels = [kernels[0], (20, ar, t + 1000, 4000), (20, ar, t + second_at, 1000)]
        for k, (stream, name, start, dur) in enumerate(kernels):
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 3, "tid": 3,
                       "ts": t + 100 + 10 * k, "dur": 5, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": start, "dur": dur,
                       "args": {"device": 0, "stream": stream, "correlation": corr}})
            corr += 1
    with open(path, "w") as f:
        json.dump({"distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": ev}, f)
    return path


class CrossRankWindows(unittest.TestCase):
    """The ranks of one job get the same windows (docs/analyzers.md, "Across ranks"): the rank with
    markers gives them to the one without, through the matched collectives; ranks whose windows
    disagree are counted (iteration_windows_disagree) and said."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="overlapprof-xrank-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def analyze(self, *paths):
        rc, out, err = run("analyze", *paths, "--json", "-")
        self.assertEqual(rc, 0, err)
        return json.loads(out)

    def test_windows_carried_from_the_rank_with_markers(self):
        r0 = two_rank_trace(os.path.join(self.tmp, "r0.json"), 0)
        r1 = two_rank_trace(os.path.join(self.tmp, "r1.json"), 1, markers=False, clock_us=5000.0)
        alone = self.analyze(r1)["ranks"][0]
        self.assertEqual((alone["iteration_source"], alone["iterations"]), ("none", 0))
        s = self.analyze(r1, r0)  # the rank without markers first: it is planned after the pass
        ranks = {r["rank"]: r for r in s["ranks"]}
        self.assertEqual(ranks[0]["iteration_source"], "ProfilerStep")
        self.assertEqual(ranks[1]["iteration_source"], "carried")
        self.assertEqual(ranks[1]["iterations"], ranks[0]["iterations"])
        self.assertTrue(any("carried from rank 0's ProfilerStep windows" in n for n in ranks[1]["notices"]),
                        ranks[1]["notices"])
        self.assertFalse(any(d["counter"] == "iteration_windows_disagree" for d in ranks[1]["data_quality"]))
        w = rank_windows(s)
        self.assertEqual(len(w[0]), 12)
        for (s0, e0), (s1, e1) in zip(w[0], w[1]):  # the same steps, 5 ms later on rank 1's clock
            self.assertLessEqual(abs((s1 - s0) - 5_000_000), 0.05 * (e0 - s0), (s0, e0, s1, e1))
            self.assertLessEqual(abs((e1 - e0) - 5_000_000), 0.05 * (e0 - s0), (s0, e0, s1, e1))
        self.assertEqual(s["step_breakdown"]["ranks"][1]["iterations"], s["step_breakdown"]["ranks"][0]["iterations"])

    def test_detected_windows_that_disagree_are_reported_and_replaced(self):
        """Rank 1 alone detects steps from the pauses, starting at its second all-reduce; rank 0's
        markers start them at the first: rank 1 takes rank 0's windows, the disagreement counted."""
        r0 = two_rank_trace(os.path.join(self.tmp, "r0.json"), 0, second_at=16000)
        r1 = two_rank_trace(os.path.join(self.tmp, "r1.json"), 1, markers=False, second_at=16000)
        alone = self.analyze(r1)["ranks"][0]
        self.assertEqual(alone["iteration_source"], "comm pattern")
        s = self.analyze(r0, r1)
        ranks = {r["rank"]: r for r in s["ranks"]}
        self.assertEqual((ranks[0]["iteration_source"], ranks[0]["iterations"]), ("ProfilerStep", 12))
        self.assertEqual((ranks[1]["iteration_source"], ranks[1]["iterations"]), ("carried", 12))
        counters = {d["counter"]: d for d in ranks[1]["data_quality"]}
        self.assertIn("iteration_windows_disagree", counters)
        self.assertEqual(counters["iteration_windows_disagree"]["severity"], "warning")
        self.assertGreaterEqual(counters["iteration_windows_disagree"]["value"], 10)
        self.assertTrue(any("disagree on where a step starts" in n for n in ranks[1]["notices"]), ranks[1]["notices"])
        w = rank_windows(s)
        for (s0, e0), (s1, e1) in zip(w[0], w[1]):
            self.assertLessEqual(abs(s1 - s0), 0.05 * (e0 - s0))

    def test_real_nsys_pair_gets_the_same_windows_on_both_ranks(self):
        """shared/traces/nsys: 2 ranks each, no markers, one identical send/recv repeated: no rank
        can tell a step apart, so both get none (before: 31 on one rank and 3 on the other)."""
        for name in ("mfu_2gpu_before.sqlite", "mfu_2gpu_after.sqlite"):
            s = self.analyze(os.path.join(NSYS, name))
            self.assertEqual(len(s["ranks"]), 2)
            self.assertEqual([(r["iteration_source"], r["iterations"]) for r in s["ranks"]], [("none", 0)] * 2, name)
            for r in s["ranks"]:
                self.assertFalse(any(d["counter"] == "iteration_windows_disagree" for d in r["data_quality"]))
                self.assertTrue(any("no reliable iterations" in n for n in r["notices"]), r["notices"])


class IdenticalCollectives(unittest.TestCase):
    """tests/synth/synth_generic.py: collectives that cannot be told apart (one generic kernel name,
    no sizes): steps or no iterations, never one window per layer or per collective."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="overlapprof-generic-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def synth(self, *args):
        out = os.path.join(self.tmp, "t%d" % len(os.listdir(self.tmp)))
        subprocess.run([sys.executable, os.path.join(HERE, "..", "synth", "synth_generic.py"), out, *args], check=True,
                       timeout=120)
        with open(out + ".truth.json") as f:
            return out, json.load(f)

    def analyze(self, path, *args):
        rc, out, err = run("analyze", path, "--json", "-", *args)
        self.assertEqual(rc, 0, err)
        return json.loads(out)

    def test_real_fsdp_rank_gets_its_steps_from_the_optimizer_clusters(self):
        """The real rocprofv3 FSDP rank (shared/traces/rocprof, when present): 50 steps, no markers,
        1,310 identical size-less RCCL kernels. Each step's optimizer is a gradient-norm kernel and,
        after one scalar kernel, the step's kernels: one cluster, so 49 windows between the 50
        clusters, 26 collectives each, the 12.5 s start-up in none (before: 0 iterations)."""
        path = next((p for p in (os.path.join(HERE, "..", "..", "shared", "traces", "rocprof"),
                                 "/work/shared/traces/rocprof")
                     if os.path.exists(os.path.join(p, "mi350_fsdp_rank0_pid908.json.gz"))), None)
        if path is None:
            self.skipTest("shared/traces/rocprof not present")
        s = self.analyze(os.path.join(path, "mi350_fsdp_rank0_pid908.json.gz"))
        r = s["ranks"][0]
        self.assertEqual((r["iteration_source"], r["iterations"]), ("optimizer kernels", 49))
        its = s["iterations"]
        self.assertTrue(all(it["comm_ops"] == 26 for it in its))
        self.assertGreater(its[0]["start_ns"] - r["start_ns"], 12_000_000_000)  # the start-up is in none
        steady = [it["wall_ns"] for it in its if not it["warmup"]]
        self.assertAlmostEqual(sum(steady) / len(steady) / 1e6, 48.6, delta=1.0)

    def test_fsdp_like_the_real_run(self):
        """12 s of start-up, 50 steps of ~48.6 ms, 26 identical size-less collectives each: before,
        1,310 windows (one per collective) and a steady state holding the start-up."""
        path, truth = self.synth("--scenario", "fsdp")
        s = self.analyze(path)
        r = s["ranks"][0]
        self.assertEqual(r["comm_ops"], 1310)
        self.assertEqual(r["iteration_source"], "optimizer kernels", r["notices"])
        self.assertEqual(r["iterations"], 49)  # the first step has no optimizer cluster before it
        self.assertLess(abs(r["iteration_spread"]["wall_ns"]["median"] - 48.6e6), 0.5e6)
        # The start-up (12 s) is in no window: the steady figures are the steps' (before: a
        # "step" of 1.87 ms, one collective's).
        b = s["step_breakdown"]["ranks"][0]
        self.assertEqual((b["basis"], b["iterations"]), ("steady iterations", 49))
        self.assertLess(abs(b["step_ns"] - 48.6e6), 0.5e6)
        path, _ = self.synth("--scenario", "fsdp", "--no-optimizer")
        r = self.analyze(path)["ranks"][0]
        self.assertEqual((r["iteration_source"], r["iterations"]), ("none", 0))
        notice = [n for n in r["notices"] if n.startswith("no reliable iterations")]
        self.assertEqual(len(notice), 1, r["notices"])
        self.assertIn("identical", notice[0])
        self.assertIn("--step-range", notice[0])

    def test_tp_and_ddp_get_no_per_layer_windows(self):
        for scenario in ("tp", "ddp"):
            for extra in ([], ["--no-optimizer"]):
                with self.subTest(scenario=scenario, optimizer=not extra):
                    path, truth = self.synth("--scenario", scenario, "--steps", "20", *extra)
                    r = self.analyze(path)["ranks"][0]
                    self.assertIn(r["iterations"], (0, 19, 20), (r["iteration_source"], r["notices"]))
        # DDP's identical buckets: the forward before a step's first bucket is clearly the longest pause.
        path, truth = self.synth("--scenario", "ddp", "--steps", "20", "--no-optimizer")
        r = self.analyze(path)["ranks"][0]
        self.assertEqual((r["iteration_source"], r["iterations"]), ("comm pattern", 20), r["notices"])

    def test_per_iteration_table_is_bounded_on_the_terminal_complete_in_json(self):
        path, _ = self.synth("--scenario", "fsdp")
        rc, out, err = run("analyze", path, "--per-iteration", "--color", "never")
        self.assertEqual(rc, 0, err)
        table = out.split("per iteration (")[1].split("\n\n")[0].splitlines()[2:]
        self.assertEqual(len(table), 41, table)  # the first 20, one line for the 9 left out, the last 20
        self.assertEqual(table[20].split(), ["0", "...", "9", "iterations", "left", "out", "(all", "of", "them", "in",
                                             "--json)"])
        self.assertEqual([r.split()[1] for r in (table[19], table[21])], ["19", "29"])
        self.assertEqual(len(self.analyze(path)["iterations"]), 49)

    def test_detector_matches_markers_on_the_synthetic_steps(self):
        path, truth = self.synth("--scenario", "fsdp", "--steps", "10", "--markers")
        marked = self.analyze(path)
        self.assertEqual(marked["ranks"][0]["iteration_source"], "ProfilerStep")
        detected = self.analyze(path, "--iterations", "pattern")
        d = detected["ranks"][0]
        self.assertEqual((d["iteration_source"], d["iterations"]), ("optimizer kernels", 9))
        mw, dw = rank_windows(marked)[0], rank_windows(detected)[0]
        for (ms, me), (ds, de) in zip(mw[1:], dw):
            self.assertLessEqual(abs(ds - ms), 0.05 * (me - ms))


if __name__ == "__main__":
    CLI = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
