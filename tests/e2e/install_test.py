#!/usr/bin/env python3
"""End-to-end tests: an installed overlapprof works from any directory (docs/install.md).

`cmake --install BUILD --prefix TMP` once, then the installed TMP/bin/overlapprof is run from
another directory: `analyze` on a bundled trace prints what the build tree's binary prints, and
`run` finds the injector in TMP/lib/overlapprof/ (also through a symbolic link to the binary, as
from ~/.local/bin), records the NCCL test double and analyzes it. A copy of the binary with no
injector near it refuses `run` naming where it looked, and records with `--injector PATH` or
OVERLAPPROF_INJECTOR.

Usage: install_test.py CMAKE BUILD_DIR OVERLAPPROF DATA_DIR [NCCL_DRIVER]
(ctest passes them; without NCCL_DRIVER, a build without the injector, `run` is not tested).
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

CMAKE = BUILD = CLI = DATA = DRIVER = None
TIMEOUT = 300
TRACE = "kineto/a100_2rank_rank0.json.gz"


def clean_env(**kw):
    e = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
              "OVERLAPPROF_OUTPUT_DIR", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "NCCL_PROFILER_PLUGIN",
              "OVERLAPPROF_INJECTOR"):
        e.pop(k, None)
    # A sanitizer runtime preloaded for a sanitizer build's run (docs/testing.md) is kept.
    san = [x for x in e.get("LD_PRELOAD", "").replace(" ", ":").split(":")
           if re.match(r"lib(asan|tsan|ubsan|lsan|hwasan)\.so|libclang_rt\..*san", os.path.basename(x))]
    e.pop("LD_PRELOAD", None)
    if san:
        e["LD_PRELOAD"] = ":".join(san)
    e.update({"RANK": "0", "WORLD_SIZE": "1"})
    e.update({k: str(v) for k, v in kw.items()})
    return e


class InstalledTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="overlapprof-install-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        p = subprocess.run([CMAKE, "--install", BUILD, "--prefix", cls.prefix], capture_output=True, text=True,
                           timeout=TIMEOUT)
        if p.returncode != 0:
            raise AssertionError(f"cmake --install failed ({p.returncode}): {p.stdout}{p.stderr}")
        cls.bin = os.path.join(cls.prefix, "bin", "overlapprof")
        cls.elsewhere = os.path.join(cls.tmp, "elsewhere")  # a working directory far from both trees
        os.mkdir(cls.elsewhere)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def sh(self, argv, cwd=None, env=None):
        p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd or self.elsewhere,
                           env=env or clean_env())
        return p.returncode, p.stdout, p.stderr

    def test_layout(self):
        self.assertTrue(os.access(self.bin, os.X_OK), self.bin)
        if DRIVER:
            self.assertTrue(os.path.isfile(os.path.join(self.prefix, "lib", "overlapprof", "liboverlapprof_inject.so")))
        # Nothing the tests, samples or benchmarks build is installed.
        bins = sorted(os.listdir(os.path.join(self.prefix, "bin")))
        self.assertEqual(bins, ["overlapprof"])
        for f in ("share/man/man1/overlapprof.1", "share/bash-completion/completions/overlapprof",
                  "share/zsh/vendor-completions/_overlapprof"):
            self.assertTrue(os.path.isfile(os.path.join(self.prefix, f)), f)

    def test_installed_version(self):
        rc, out, err = self.sh([self.bin, "--version"])
        self.assertEqual(rc, 0, err)
        rc0, out0, _ = self.sh([CLI, "-V"])
        self.assertEqual(out, out0)
        self.assertRegex(out, r"^overlapprof \d+\.\d+\.\d+ \(git ")

    def test_analyze_from_another_directory_prints_what_the_build_prints(self):
        trace = os.path.join(DATA, TRACE)
        rc, out, err = self.sh([self.bin, "analyze", trace])
        self.assertEqual(rc, 0, err)
        rc0, out0, _ = self.sh([CLI, "analyze", trace])
        self.assertEqual(rc0, 0)
        self.assertEqual(out, out0)
        self.assertIn("rank", out)

    def record(self, binary, *opts, env=None, name):
        out = os.path.join(self.tmp, name)
        rc, stdout, err = self.sh([binary, "run", "-o", out, *opts, "--", DRIVER, "loop", "5", "0", "1"], env=env)
        return rc, stdout, err, out

    def assertRecorded(self, rc, stdout, err, out):
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(glob.glob(os.path.join(out, "*.db"))), 1, err)
        self.assertTrue(os.path.isfile(os.path.join(out, "overlap.summary.json")), err)
        self.assertIn("rank", stdout)

    def test_run_finds_the_installed_injector(self):
        if not DRIVER:
            self.skipTest("built without the injector (no CUDA toolkit headers)")
        self.assertRecorded(*self.record(self.bin, name="installed"))

    def test_run_through_a_symbolic_link_to_the_installed_binary(self):
        if not DRIVER:
            self.skipTest("built without the injector (no CUDA toolkit headers)")
        links = os.path.join(self.tmp, "dot-local-bin")
        os.makedirs(links, exist_ok=True)
        link = os.path.join(links, "overlapprof")
        if not os.path.lexists(link):
            os.symlink(self.bin, link)
        self.assertRecorded(*self.record(link, name="via-link"))

    def test_lone_binary_refuses_run_then_takes_injector_from_flag_or_environment(self):
        if not DRIVER:
            self.skipTest("built without the injector (no CUDA toolkit headers)")
        lone = os.path.join(self.tmp, "lone", "bin")
        os.makedirs(lone, exist_ok=True)
        shutil.copy2(self.bin, lone)
        lone_bin = os.path.join(lone, "overlapprof")
        rc, _, err, out = self.record(lone_bin, name="lone-out")
        self.assertEqual(rc, 2, err)
        self.assertIn("the injector (liboverlapprof_inject.so) was not found (looked in ", err)
        self.assertIn(os.path.join(self.tmp, "lone", "lib", "overlapprof", "liboverlapprof_inject.so"), err)
        self.assertIn("--injector PATH or OVERLAPPROF_INJECTOR", err)
        self.assertFalse(os.path.exists(out))
        injector = os.path.join(self.prefix, "lib", "overlapprof", "liboverlapprof_inject.so")
        self.assertRecorded(*self.record(lone_bin, "--injector", injector, name="flag"))
        self.assertRecorded(*self.record(lone_bin, env=clean_env(OVERLAPPROF_INJECTOR=injector), name="env"))
        # A relative --injector is the file from run's working directory, made absolute for the job.
        rel = os.path.relpath(injector, self.elsewhere)
        self.assertRecorded(*self.record(lone_bin, "--injector", rel, name="relative"))
        # The flag wins over the environment; one named that does not exist is an error, no fallback.
        missing = os.path.join(self.tmp, "nowhere", "liboverlapprof_inject.so")
        rc, _, err, out = self.record(self.bin, "--injector", missing, env=clean_env(OVERLAPPROF_INJECTOR=injector),
                                      name="missing-flag")
        self.assertEqual(rc, 2, err)
        self.assertIn(f"the injector --injector names does not exist: {missing}", err)
        rc, _, err, out = self.record(self.bin, env=clean_env(OVERLAPPROF_INJECTOR=missing), name="missing-env")
        self.assertEqual(rc, 2, err)
        self.assertIn(f"the injector OVERLAPPROF_INJECTOR names does not exist: {missing}", err)
        rc, _, err, out = self.record(self.bin, "--injector", self.tmp, name="dir-flag")
        self.assertEqual(rc, 2, err)
        self.assertIn("--injector names a directory, not the injector", err)


if __name__ == "__main__":
    args = sys.argv[1:]
    CMAKE, BUILD, CLI, DATA = args[0], *(os.path.abspath(a) for a in args[1:4])
    DRIVER = os.path.abspath(args[4]) if len(args) > 4 and args[4] else None
    unittest.main(argv=[sys.argv[0], "-v"])
