#!/usr/bin/env python3
"""The injector under ThreadSanitizer (ctest `tsan_injector` in a build configured with
-DOVERLAPPROF_TSAN=ON; scripts/test.sh builds and runs it in build-tsan/).

The injector, the NCCL and CUPTI doubles and the test driver are built with -fsanitize=thread.
The driver carries the TSan runtime; the injector is preloaded into it directly (as
`overlapprof run` would set it up, without the CLI, which is not instrumented). Each scenario
exercises the injector's threads: hooks on several application threads, the writer thread,
CUPTI's buffer callbacks and external correlation ids, NVTX, a full ring, fork, SIGTERM and
the exit flush. Any ThreadSanitizer report fails the test (TSan's exit code 66, and its
report text on stderr), as does a rank file that is not finished.

Usage: tsan_test.py INJECTOR NCCL_DRIVER FAKE_CUPTI_LIB INJECTOR_UNIT_TESTS
"""
import glob
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

INJECTOR = DRIVER = FAKE_CUPTI = UNIT = None
TSAN_OPTIONS = "halt_on_error=0 exitcode=66 second_deadlock_stack=1 report_signal_unsafe=1"


def env(out, **kw):
    e = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
              "OVERLAPPROF_OUTPUT_DIR", "LD_PRELOAD", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"):
        e.pop(k, None)
    e.update(LD_PRELOAD=INJECTOR, CUDA_INJECTION64_PATH=INJECTOR, NVTX_INJECTION64_PATH=INJECTOR,
             OVERLAPPROF_OUTPUT_DIR=out, OVERLAPPROF_FLUSH_MS="50", TSAN_OPTIONS=TSAN_OPTIONS)
    e.update({k: str(v) for k, v in kw.items()})
    return e


class TsanTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def assertClean(self, rc, err, expected_rc=0):
        self.assertNotIn("ThreadSanitizer", err, err[-6000:])
        self.assertEqual(rc, expected_rc, err[-3000:])

    def stores(self):
        return sorted(glob.glob(os.path.join(self.out, "*.db")))

    def assertFinished(self, min_ops):
        files = self.stores()
        self.assertTrue(files, "no rank file")
        for f in files:
            db = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
            state = db.execute("SELECT value FROM meta WHERE key='recording_state'").fetchone()
            ops = db.execute("SELECT coalesce(sum(count), 0) FROM comm_op_chunk").fetchone()[0]
            db.close()
            self.assertEqual(state[0] if state else None, "finished", f)
            self.assertGreaterEqual(ops, min_ops, f)

    def drive(self, *args, timeout=240, **kw):
        p = subprocess.run([DRIVER, *args], env=env(self.out, **kw), capture_output=True, text=True,
                           timeout=timeout)
        return p.returncode, p.stderr

    def test_ops_groups_split(self):
        rc, err = self.drive("ops", RANK=0, WORLD_SIZE=4)
        self.assertClean(rc, err)
        self.assertFinished(14)

    def test_nccl_profiler_plugin_events_from_several_threads(self):
        # NCCL's profiler plugin (injector/nccl_plugin.cc) loaded by the NCCL double: op events on
        # the calling threads, channel events from another thread, before and after the op's own.
        for order in ("late", "early"):
            rc, err = self.drive("plugin", "4", RANK=0, WORLD_SIZE=4, FAKE_NCCL_PROFILER=1, NCCL_PROFILER_PLUGIN=INJECTOR,
                                 FAKE_NCCL_PROFILER_ORDER=order)
            self.assertClean(rc, err)
            self.assertIn("ncclProfiler_v6", err)
            for f in self.stores():
                db = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
                n = db.execute("SELECT count(*) FROM nccl_profiler_op").fetchone()[0]
                db.close()
                self.assertEqual(n, 17 + 4 * 50, f)
                os.unlink(f)

    def test_threads_racing_the_writer(self):
        rc, err = self.drive("threads", "6", "3000")
        self.assertClean(rc, err)
        self.assertFinished(6 * 3000)

    def test_full_ring(self):
        rc, err = self.drive("threads", "4", "5000", OVERLAPPROF_RING_RECORDS=64)
        self.assertClean(rc, err)
        self.assertFinished(1)

    def test_cupti_callbacks_and_external_ids(self):
        rc, err = self.drive("cupti", FAKE_CUPTI, RANK=0, WORLD_SIZE=2, OVERLAPPROF_CUPTI_LIB=FAKE_CUPTI)
        self.assertClean(rc, err)
        self.assertFinished(1)

    def test_cupti_published_while_other_threads_call_nccl(self):
        rc, err = self.drive("cupti_race", FAKE_CUPTI, RANK=0, WORLD_SIZE=2, OVERLAPPROF_CUPTI_LIB=FAKE_CUPTI)
        self.assertClean(rc, err)
        self.assertFinished(4000)

    def test_nvtx_initall(self):
        for mode in ("nvtx", "initall"):
            rc, err = self.drive(mode)
            self.assertClean(rc, err)

    def test_fork(self):
        rc, err = self.drive("fork", RANK=0, WORLD_SIZE=4)
        self.assertClean(rc, err)
        self.assertEqual(len(self.stores()), 1)

    def test_sigterm_final_flush_in_the_handler(self):
        p = subprocess.Popen([DRIVER, "loop", "100000", "1000", "1"],
                             env=env(self.out, RANK=0, WORLD_SIZE=1, OVERLAPPROF_FLUSH_MS=60000),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        p.stdout.readline()  # pid
        done = 0
        while done < 100:
            line = p.stdout.readline()
            if not line:
                break
            done = int(line.split()[1])
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)
        self.assertNotIn("ThreadSanitizer", err, err[-6000:])
        self.assertEqual(p.returncode, -signal.SIGTERM, err[-3000:])
        self.assertFinished(done)

    def test_sighup_and_sigusr1_final_flush_in_the_handler(self):
        # Signals left at the default: the file is finished in the handler, then the job dies
        # of the signal.
        for sig in (signal.SIGHUP, signal.SIGUSR1):
            for f in self.stores():
                os.unlink(f)
            p = subprocess.Popen([DRIVER, "loop", "100000", "1000", "1"],
                                 env=env(self.out, RANK=0, WORLD_SIZE=1, OVERLAPPROF_FLUSH_MS=60000),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            p.stdout.readline()  # pid
            done = 0
            while done < 100:
                line = p.stdout.readline()
                if not line:
                    break
                done = int(line.split()[1])
            p.send_signal(sig)
            _, err = p.communicate(timeout=120)
            self.assertNotIn("ThreadSanitizer", err, err[-6000:])
            self.assertEqual(p.returncode, -sig, err[-3000:])
            self.assertFinished(done)

    def test_store_that_cannot_be_created_with_cupti(self):
        # The writer's failed mode: hooks push, CUPTI delivers, the writer counts and drops;
        # CUDA initializes after the failure (the store_failed hand-shake).
        rc, err = self.drive("fulldisk_early", "4096", "5000", FAKE_CUPTI, OVERLAPPROF_CUPTI_LIB=FAKE_CUPTI,
                             FAKE_CUPTI_HONOUR_DISABLE=1)
        self.assertClean(rc, err)
        self.assertIn("records lost", err)

    def test_forked_child_counts_its_ops(self):
        rc, err = self.drive("fork", RANK=0, WORLD_SIZE=4)
        self.assertClean(rc, err)
        [f] = self.stores()
        db = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
        n = db.execute("SELECT value FROM stats WHERE name='nccl_ops_in_forked_children'").fetchone()
        db.close()
        self.assertEqual(n[0] if n else None, 5)

    # ---- a hostile host process ---------------------------------------------------

    def test_descriptors_closed_and_reused_by_the_program(self):
        victim = os.path.join(self.out, "victim.bin")
        # The program closing a descriptor the writer thread is using is the attack itself
        # (TSan reports the program's close() against our fstat()): suppressed for the
        # program's frame only; every race of ours is still reported.
        supp = os.path.join(self.out, "closefds.supp")
        with open(supp, "w") as f:
            f.write("race:CloseFds\n")
        rc, err = self.drive("closefds", victim, RANK=0, WORLD_SIZE=1,
                             TSAN_OPTIONS=TSAN_OPTIONS + f" suppressions={supp}")
        self.assertClean(rc, err)
        self.assertEqual(os.path.getsize(victim), 0)
        self.assertIn("recorder_descriptor_lost", err)

    def test_fork_while_another_thread_activates(self):
        # A child forked before the other thread claimed the activation records on its own
        # (it starts its writer thread): TSan refuses new threads after a multi-threaded
        # fork unless told otherwise.
        for _ in range(5):
            rc, err = self.drive("forkrace", RANK=0, WORLD_SIZE=2, TSAN_OPTIONS=TSAN_OPTIONS + " die_after_fork=0")
            self.assertClean(rc, err)

    def test_signal_flags_kept(self):
        rc, err = self.drive("sigflags", RANK=0, WORLD_SIZE=1)
        self.assertClean(rc, err)
        self.assertFinished(2)


class TsanUnitTest(unittest.TestCase):
    def test_ring_and_batching(self):
        p = subprocess.run([UNIT], env=dict(os.environ, TSAN_OPTIONS=TSAN_OPTIONS), capture_output=True,
                           text=True, timeout=300)
        self.assertNotIn("ThreadSanitizer", p.stderr, p.stderr[-6000:])
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])


if __name__ == "__main__":
    INJECTOR, DRIVER, FAKE_CUPTI, UNIT = (os.path.abspath(a) for a in sys.argv[1:5])
    del sys.argv[1:5]
    unittest.main(verbosity=2)
