#!/usr/bin/env python3
"""End-to-end test of the Debian package (docs/install.md): `cpack -G DEB` builds
overlapprof_<version>_<arch>.deb from the build folder with its runtime dependencies declared; the
package is unpacked without root into a fresh folder (`dpkg -x`), and the overlapprof in it runs
`--version`, `analyze` on a bundled trace and `run` on the NCCL test double, finding the packaged
injector in usr/lib/overlapprof/.

Usage: package_test.py CPACK BUILD_DIR DATA_DIR VERSION [NCCL_DRIVER]
Exit 77 (ctest: skipped) when cpack, dpkg-deb or dpkg is missing (not a Debian-like system).
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

CPACK = BUILD = DATA = VERSION = DRIVER = None
TIMEOUT = 300


def clean_env(**kw):
    e = {k: v for k, v in os.environ.items()
         if k not in ("OVERLAPPROF_INJECTOR", "OVERLAPPROF_OUTPUT_DIR", "LD_PRELOAD", "CUDA_INJECTION64_PATH",
                      "NVTX_INJECTION64_PATH", "NCCL_PROFILER_PLUGIN")}
    e.update({"RANK": "0", "WORLD_SIZE": "1"})
    e.update(kw)
    return e


def sh(argv, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, **kw)
    return p.returncode, p.stdout, p.stderr


class DebianPackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="overlapprof-deb-")
        rc, out, err = sh([CPACK, "--config", os.path.join(BUILD, "CPackConfig.cmake"), "-G", "DEB",
                           "-B", os.path.join(cls.tmp, "pkg")])
        if rc != 0:
            raise AssertionError(f"cpack failed ({rc}): {out}{err}")
        arch = sh(["dpkg", "--print-architecture"])[1].strip()
        cls.deb = os.path.join(cls.tmp, "pkg", f"overlapprof_{VERSION}_{arch}.deb")
        cls.root = os.path.join(cls.tmp, "root")
        if os.path.isfile(cls.deb):
            rc, out, err = sh(["dpkg", "-x", cls.deb, cls.root])
            if rc != 0:
                raise AssertionError(f"dpkg -x failed ({rc}): {err}")
        cls.bin = os.path.join(cls.root, "usr", "bin", "overlapprof")
        cls.elsewhere = os.path.join(cls.tmp, "elsewhere")
        os.mkdir(cls.elsewhere)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_package_name_and_fields(self):
        self.assertTrue(os.path.isfile(self.deb), os.listdir(os.path.join(self.tmp, "pkg")))
        rc, fields, err = sh(["dpkg-deb", "-f", self.deb])
        self.assertEqual(rc, 0, err)
        self.assertRegex(fields, r"(?m)^Package: overlapprof$")
        self.assertRegex(fields, rf"(?m)^Version: {re.escape(VERSION)}$")
        depends = re.search(r"(?m)^Depends: (.*)$", fields)
        self.assertTrue(depends, fields)
        names = {d.strip().split()[0] for d in depends.group(1).split(",")}
        # The shared libraries the program links; CUDA/CUPTI/NCCL never (the job's own, at run time).
        for lib in ("libc6", "libsqlite3-0", "libfmt9", "libdeflate0", "zlib1g", "libstdc++6"):
            self.assertIn(lib, names, fields)
        self.assertFalse([n for n in names if re.search("cuda|cupti|nccl", n)], fields)

    def test_contents(self):
        rc, listing, err = sh(["dpkg-deb", "-c", self.deb])
        self.assertEqual(rc, 0, err)
        files = sorted(line.split()[-1] for line in listing.splitlines() if not line.endswith("/"))
        self.assertIn("./usr/bin/overlapprof", files)
        if DRIVER:
            self.assertIn("./usr/lib/overlapprof/liboverlapprof_inject.so", files)
        # The man page and the completions generated from the help (docs/install.md).
        for f in ("./usr/share/man/man1/overlapprof.1", "./usr/share/bash-completion/completions/overlapprof",
                  "./usr/share/zsh/vendor-completions/_overlapprof"):
            self.assertIn(f, files)

    def test_unpacked_overlapprof_runs_version_and_analyze(self):
        rc, out, err = sh([self.bin, "--version"], cwd=self.elsewhere, env=clean_env())
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith(f"overlapprof {VERSION}"), out)
        trace = os.path.join(DATA, "kineto", "a100_2rank_rank0.json.gz")
        rc, out, err = sh([self.bin, "analyze", trace], cwd=self.elsewhere, env=clean_env())
        self.assertEqual(rc, 0, err)
        self.assertIn("rank", out)

    def test_unpacked_run_records_with_the_packaged_injector(self):
        if not DRIVER:
            self.skipTest("built without the injector (no CUDA toolkit headers)")
        out_dir = os.path.join(self.tmp, "rec")
        rc, out, err = sh([self.bin, "run", "-o", out_dir, "--", DRIVER, "loop", "5", "0", "1"], cwd=self.elsewhere,
                          env=clean_env())
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(glob.glob(os.path.join(out_dir, "*.db"))), 1, err)
        self.assertIn("rank", out)


if __name__ == "__main__":
    missing = [t for t in ("dpkg", "dpkg-deb") if not shutil.which(t)]
    if missing or not os.path.exists(sys.argv[1]):
        print(f"skipped: {', '.join(missing) or sys.argv[1]} not found (the Debian package needs a Debian-like system)")
        sys.exit(77)
    CPACK, BUILD, DATA = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    VERSION = sys.argv[4]
    DRIVER = os.path.abspath(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] else None
    unittest.main(argv=[sys.argv[0], "-v"])
