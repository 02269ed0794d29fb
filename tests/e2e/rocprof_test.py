#!/usr/bin/env python3
"""End-to-end tests of rocprofv3 JSON input (docs/rocprof.md): the real overlapprof CLI on a real
MI350 rank file (the full one from the shared traces when present, else skipped; the committed cut
always) and on bad rocprofv3 files.

Usage: rocprof_test.py PATH_TO_OVERLAPPROF   (ctest passes it)
"""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(HERE, "..", "data", "rocprof")
CUT = os.path.join(DATA, "mi350_fsdp_rank0_3steps.json.gz")
FULL_NAME = os.path.join("traces", "rocprof", "mi350_fsdp_rank0_pid908.json.gz")
CLI = None


def full_trace():
    """The full rank file from the shared traces (../shared beside the checkout, or above a worktree)."""
    for base in (os.path.join(ROOT, "..", "shared"), os.path.join(ROOT, "..", "..", "shared"),
                 os.path.join(ROOT, "shared")):
        p = os.path.join(base, FULL_NAME)
        if os.path.isfile(p):
            return p
    return None


def run(*args, timeout=120):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


class RocprofCliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="overlapprof-rocprof-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def summary(self, *paths):
        rc, out, err = run("analyze", *paths, "--json", "-")
        self.assertEqual(rc, 0, err)
        self.assertEqual(err, "")
        return json.loads(out)

    def counters(self, rank):
        return {c["counter"]: c["value"] for c in rank["data_quality"]}

    def test_full_real_rank_file_matches_the_independent_figures(self):
        path = full_trace()
        if path is None:
            self.skipTest(f"{FULL_NAME} not in the shared traces")
        s = self.summary(path)
        self.assertEqual(len(s["ranks"]), 1)
        r = s["ranks"][0]
        self.assertEqual(r["format"], "rocprof")
        self.assertEqual(r["rank"], 0)  # from the file name
        self.assertEqual(self.counters(r).get("rocprof_rank_from_file_name"), 1)
        # The provenance README's independent figures: communication 4.159 s, overlap 4.71%.
        self.assertAlmostEqual(r["comm_ns"] / 1e9, 4.159, delta=0.0005)
        self.assertAlmostEqual(r["overlap_ratio"] * 100, 4.71, delta=0.005)
        self.assertEqual(r["comm_kernels"], 1310)
        self.assertEqual(r["memcpys"] + r["memsets"], 6366)  # ROCm's blit kernels
        self.assertAlmostEqual(r["memory_ns"] / 1e6, 23.1, delta=0.05)
        self.assertEqual(r["device"], "AMD Instinct MI350X")

    def test_committed_cut_and_a_directory_of_rank_files(self):
        s = self.summary(CUT)
        r = s["ranks"][0]
        self.assertEqual((r["rank"], r["comm_ns"], r["compute_ns"], r["overlap_ns"]), (0, 85241943, 15021126, 11923969))
        # A directory of rank files, as a run writes them: ranks from their names, in rank order.
        d = os.path.join(self.tmp, "run")
        os.mkdir(d)
        for rank in (1, 0):
            shutil.copy(CUT, os.path.join(d, f"mi350_rank{rank}.json.gz"))
        s = self.summary(d)
        self.assertEqual([x["rank"] for x in s["ranks"]], [0, 1])
        self.assertEqual({x["format"] for x in s["ranks"]}, {"rocprof"})
        self.assertEqual([x["comm_ns"] for x in s["ranks"]], [85241943, 85241943])

    def test_import_to_a_store_keeps_the_figures(self):
        out = os.path.join(self.tmp, "rank0.db")
        rc, _, err = run("import", CUT, "-o", out)
        self.assertEqual(rc, 0, err)
        a = self.summary(CUT)["ranks"][0]
        b = self.summary(out)["ranks"][0]
        for k in ("rank", "comm_ns", "compute_ns", "overlap_ns", "memory_ns", "kernels", "memcpys", "memsets"):
            self.assertEqual(a[k], b[k], k)

    def test_bad_rocprof_files_exit_2_with_one_line(self):
        with gzip.open(CUT, "rb") as f:
            text = f.read()
        with open(CUT, "rb") as f:
            gz = f.read()
        cases = {
            "truncated.json.gz": (gz[: len(gz) // 2], "truncated gzip data"),
            "truncated.json": (text[: len(text) // 2], "truncated JSON"),
            "garbage_after_head.json": (b'{"rocprofiler-sdk-tool": [{"metadata": {"pid": 1,, }}]}', "invalid JSON"),
            "garbage.json": (b"\x00\x01garbage\xff" * 10, "not a trace"),
        }
        for name in ("small_no_kernels.json", "small_wrong_types.json"):
            with open(os.path.join(DATA, name), "rb") as f:
                cases[name] = (f.read(), "rocprofv3")
        for name, (content, start) in cases.items():
            with self.subTest(name):
                p = os.path.join(self.tmp, name)
                with open(p, "wb") as f:
                    f.write(content)
                rc, out, err = run("analyze", p)
                self.assertEqual(rc, 2, err)
                self.assertEqual(out, "")
                self.assertEqual(err.count("\n"), 1, err)
                self.assertTrue(err.startswith(f"overlapprof: error: {p}: "), err)
                self.assertIn(start, err)


if __name__ == "__main__":
    CLI = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
