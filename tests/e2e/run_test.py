#!/usr/bin/env python3
"""End-to-end tests: `overlapprof run` owns its job tree (docs/run.md).

Each test reproduces one attack on the launcher with the real CLI, the real injector and the
NCCL test double (tests/injector/nccl_driver.cc), plus plain shell jobs: signals to run with
ranks under `sh -c`, a grandchild left behind holding a rank file, SIGCHLD ignored by run's
parent, a used or shared output directory, 0-byte and half-created rank files, an install path
with a space, a read-only or non-UTF-8 output directory.

Usage: run_test.py OVERLAPPROF NCCL_DRIVER (ctest passes them). Every wait is bounded.
"""
import glob
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

CLI = DRIVER = None
TIMEOUT = 120  # per process: a hang is a failure


def env_with(**kw):
    e = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
              "OVERLAPPROF_OUTPUT_DIR", "LD_PRELOAD", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH",
              "OVERLAPPROF_INJECTOR"):
        e.pop(k, None)
    # A sanitizer runtime preloaded for a sanitizer build's run (docs/testing.md) is kept: the
    # instrumented injector cannot load without it first.
    san = [x for x in os.environ.get("LD_PRELOAD", "").replace(" ", ":").split(":")
           if re.match(r"lib(asan|tsan|ubsan|lsan|hwasan)\.so|libclang_rt\..*san", os.path.basename(x))]
    if san:
        e["LD_PRELOAD"] = ":".join(san)
    e.update({"RANK": "0", "WORLD_SIZE": "1"})
    e.update({k: str(v) for k, v in kw.items()})
    if san and "LD_PRELOAD" in kw:
        e["LD_PRELOAD"] = ":".join(san + [str(kw["LD_PRELOAD"])])
    return e


def run(args, env=None, timeout=TIMEOUT, **kw):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout, env=env or env_with(), **kw)
    return p.returncode, p.stdout, p.stderr


def alive(pid):
    """True while pid runs (a zombie left to an init that does not reap counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_until(cond, timeout=60, what="condition"):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def pid_of(path):
    return int(os.path.basename(path).split("_pid")[1].split("_")[0])


def store(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        state = db.execute("SELECT value FROM meta WHERE key='recording_state'").fetchone()[0]
        ops = db.execute("SELECT count(*) FROM comm_op").fetchone()[0]
        chunks = db.execute("SELECT coalesce(sum(count), 0) FROM comm_op_chunk").fetchone()[0]
        ok = db.execute("PRAGMA integrity_check").fetchone()[0]
        return state, ops, chunks, ok
    finally:
        db.close()


class RunOwnsJobTreeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="overlapprof-run-")
        self.out = os.path.join(self.tmp, "out")
        self.pids = []  # processes a test leaves behind on purpose: killed whatever happens

    def tearDown(self):
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)

    def dbs(self, d=None):
        return sorted(glob.glob(os.path.join(d or self.out, "*.db")))

    # ---- signals reach the whole job ---------------------------------------------------------

    def test_sigterm_to_run_stops_ranks_under_sh_c(self):
        # Two ranks under `sh -c`; only a signal can flush them (--flush-ms 60000). Before, the
        # signal reached sh alone: the ranks ran on and their files were settled while written.
        job = f"'{DRIVER}' loop 100000 1000 1 & '{DRIVER}' loop 100000 1000 1 & wait"
        p = subprocess.Popen([CLI, "run", "-o", self.out, "--no-analyze", "--flush-ms", "60000", "--", "sh", "-c", job],
                             env=env_with(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            pids = set()
            deadline = time.monotonic() + 60
            while len(pids) < 2:
                self.assertLess(time.monotonic(), deadline, "ranks did not start")
                line = p.stdout.readline()
                self.assertTrue(line, "job ended early")
                if line.startswith("pid "):
                    pids.add(int(line.split()[1]))
            wait_until(lambda: len(self.dbs()) == 2, what="both rank files")
            self.pids += list(pids)
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=TIMEOUT)
        finally:
            if p.poll() is None:
                p.kill()
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        # `run` returns once the ranks' files are settled; a rank may still be leaving then (it
        # re-raises the signal after its flush): gone within seconds, where a rank the signal
        # missed would run its loop for 100 s more.
        for pid in pids:
            wait_until(lambda: not alive(pid), timeout=10, what=f"rank {pid} to stop after SIGTERM to run")
        files = self.dbs()
        self.assertEqual(sorted(pid_of(f) for f in files), sorted(pids))
        for f in files:
            state, ops, chunks, ok = store(f)
            self.assertEqual((state, ok), ("finished", "ok"), f)  # flushed by the forwarded signal
            self.assertEqual(ops, chunks, f)

    def test_ctrl_c_on_the_terminal_reaches_the_job_once(self):
        # run in the foreground of a pseudo-terminal: the job's group gets the terminal, so a
        # Ctrl-C reaches each of its processes once (the terminal's), and run is not ended by it.
        import fcntl, pty, select, termios
        stop = os.path.join(self.tmp, "stop")
        # pgid and tpgid from /proc/$$/stat (fields 5 and 8) with shell builtins only.
        job = (f"trap 'n=$((n+1)); echo int $n' INT; read -r l < /proc/$$/stat; l=${{l##*) }}; set -- $l; "
               f"echo pgid $3 tpgid $6 pid $$; echo ready; while [ ! -e '{stop}' ]; do sleep 0.02; done; echo total $n; exit 5")
        master, slave = pty.openpty()

        def controlling_tty():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        p = subprocess.Popen([CLI, "run", "-o", self.out, "--", "sh", "-c", job], stdin=slave, stdout=slave,
                             stderr=slave, start_new_session=True, preexec_fn=controlling_tty, env=env_with())
        os.close(slave)
        seen = b""

        def read_until(what, timeout=60):
            nonlocal seen
            deadline = time.monotonic() + timeout
            while what not in seen:
                self.assertLess(time.monotonic(), deadline, f"no {what!r} in {seen!r}")
                if select.select([master], [], [], 0.1)[0]:
                    try:
                        chunk = os.read(master, 4096)
                    except OSError:  # EIO: every writer has gone
                        chunk = b""
                    if not chunk:
                        self.assertIn(what, seen)
                        return
                    seen += chunk
        try:
            read_until(b"ready")
            m = re.search(rb"pgid (\d+) tpgid (\d+) pid (\d+)", seen)
            self.assertTrue(m, seen)
            self.assertEqual(m.group(1), m.group(3))  # the job's own group ...
            self.assertEqual(m.group(1), m.group(2))  # ... is the terminal's foreground
            os.write(master, b"\x03")
            read_until(b"int 1")
            open(stop, "w").close()
            read_until(b"the command exited with 5")
            self.assertEqual(p.wait(timeout=TIMEOUT), 5, seen)
        finally:
            if p.poll() is None:
                p.kill()
            os.close(master)
        self.assertIn(b"total 1", seen)
        self.assertNotIn(b"int 2", seen)

    def test_ctrl_z_on_the_terminal_stops_job_and_run_and_fg_resumes_both(self):
        # Ctrl-Z stops the job's group (the terminal's foreground); run sees it stopped and stops
        # itself, so the shell above sees a stopped job; SIGCONT to run (what `fg` sends) gives
        # the terminal back to the job and continues it; the exit code still comes through.
        import fcntl, pty, select, termios
        stop = os.path.join(self.tmp, "stop")
        ticks = os.path.join(self.tmp, "ticks")
        job = (f"echo pid $$; echo ready; i=0; while [ ! -e '{stop}' ]; do i=$((i+1)); echo $i > '{ticks}'; "
               f"sleep 0.02; done; exit 5")
        master, slave = pty.openpty()

        def controlling_tty():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        p = subprocess.Popen([CLI, "run", "-o", self.out, "--no-analyze", "--", "sh", "-c", job], stdin=slave,
                             stdout=slave, stderr=slave, start_new_session=True, preexec_fn=controlling_tty,
                             env=env_with())
        os.close(slave)
        seen = b""

        def pump(timeout=0.1):
            nonlocal seen
            if select.select([master], [], [], timeout)[0]:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    pass

        def state(pid):
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0]

        def count():
            try:
                with open(ticks) as f:
                    return int(f.read().strip() or 0)
            except (FileNotFoundError, ValueError):
                return 0
        try:
            deadline = time.monotonic() + 60
            while b"ready" not in seen:
                self.assertLess(time.monotonic(), deadline, seen)
                pump()
            job_pid = int(re.search(rb"pid (\d+)", seen).group(1))
            wait_until(lambda: count() > 2, what="the job's first ticks")
            os.write(master, b"\x1a")
            wait_until(lambda: state(job_pid) == "T", what="the job stopped")
            wait_until(lambda: state(p.pid) == "T", what="run stopped")
            stopped_at = count()
            time.sleep(0.3)
            self.assertLessEqual(count(), stopped_at + 1)  # one tick may have been in flight
            self.assertIsNone(p.poll())
            os.kill(p.pid, signal.SIGCONT)
            wait_until(lambda: count() > stopped_at + 3, what="the job running again")
            self.assertNotEqual(state(p.pid), "T")
            open(stop, "w").close()
            self.assertEqual(p.wait(timeout=TIMEOUT), 5)
        finally:
            if p.poll() is None:
                p.kill()
            os.close(master)

    # ---- a grandchild left behind ------------------------------------------------------------

    def _leave_grandchild(self, n, sleep_us, extra=()):
        # sh starts a rank in its own session (out of the job's process group), waits until it
        # created its rank file, and exits 3 while it still records.
        job = (f"setsid '{DRIVER}' loop {n} {sleep_us} 1000000 >/dev/null 2>&1 & "
               f"while ! ls \"$OVERLAPPROF_OUTPUT_DIR\"/*.db >/dev/null 2>&1; do sleep 0.02; done; exit 3")
        return run(["run", "-o", self.out, *extra, "--", "sh", "-c", job])

    def test_grandchild_holding_a_rank_file_is_waited_for(self):
        rc, out, err = self._leave_grandchild(60, 20000)  # ~1.2 s of recording after sh exits
        self.assertEqual(rc, 3, err)
        self.assertIn("still write rank files", err)
        [f] = self.dbs()
        wait_until(lambda: not alive(pid_of(f)), timeout=10, what="the grandchild to exit after its file was settled")
        state, ops, chunks, ok = store(f)
        self.assertEqual((state, ok, ops, chunks), ("finished", "ok", 60, 60))  # settled after it ended
        self.assertEqual(glob.glob(f + "-wal"), [])
        self.assertIn("data quality", out)  # analyzed, once complete
        self.assertNotIn("corrupt", out + err)

    def test_grandchild_outliving_the_wait_is_named_and_its_file_left_alone(self):
        rc, out, err = self._leave_grandchild(1000000, 1000, extra=["--wait-s", "1"])
        [f] = self.dbs()
        pid = pid_of(f)
        self.pids.append(pid)
        self.assertEqual(rc, 3, err)
        self.assertTrue(alive(pid))
        self.assertIn(f"still written by pid {pid}", err)
        self.assertIn("not analyzed", err)
        self.assertNotIn("no problems recorded", out)
        self.assertEqual(glob.glob(os.path.join(self.out, "overlap.summary.json")), [])
        os.kill(pid, signal.SIGTERM)  # it flushes and leaves: the file is whole and analyzable
        wait_until(lambda: not alive(pid), what="the grandchild to exit")
        rc, out, err = run(["run", "-o", self.out + "2", "--", "true"])  # unrelated: the lock of out is gone
        self.assertEqual(rc, 0, err)
        db = sqlite3.connect(f)
        self.assertEqual(db.execute("PRAGMA integrity_check").fetchone()[0], "ok")
        self.assertEqual(db.execute("SELECT value FROM meta WHERE key='recording_state'").fetchone()[0], "finished")
        db.close()

    # ---- workers that outlive their launcher ---------------------------------------------------

    def test_worker_started_after_its_launcher_exited_is_recorded(self):
        # The launcher exits before its worker loads NCCL: in the background, in its own session
        # (setsid), or double-forked. run is their subreaper and waits for them (--wait-s), so
        # the worker's file is created in the directory, settled and analyzed. Before, run found
        # no file, removed the directory, and the worker could not create its file.
        jobs = {
            "background": f"(sleep .3; exec '{DRIVER}' loop 5 0 1 >/dev/null) & exit 0",
            "setsid": f"setsid sh -c \"sleep .3; exec '{DRIVER}' loop 5 0 1 >/dev/null\" & exit 0",
            "double_fork": f"sh -c \"(sleep .3; exec '{DRIVER}' loop 5 0 1 >/dev/null) &\" ; exit 4",
        }
        for name, job in jobs.items():
            with self.subTest(name):
                d = os.path.join(self.tmp, name)
                rc, out, err = run(["run", "-o", d, "--", "sh", "-c", job])
                self.assertEqual(rc, 4 if name == "double_fork" else 0, err)
                self.assertNotIn("nothing was recorded", err)
                self.assertNotIn("cannot create", err)
                [f] = self.dbs(d)
                state, ops, chunks, ok = store(f)
                self.assertEqual((state, ops, chunks, ok), ("finished", 5, 5, "ok"))
                self.assertIn("data quality", out)  # analyzed
                self.assertTrue(os.path.exists(os.path.join(d, "overlap.summary.json")))

    def test_process_outliving_the_wait_is_named_and_left_running(self):
        # A process the command left behind that records nothing and outlives --wait-s: named,
        # left running, and the output directory it might still write into is kept.
        pidfile = os.path.join(self.tmp, "pid")
        job = f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' >/dev/null 2>&1 & '{DRIVER}' loop 3 0 1 >/dev/null"
        t0 = time.monotonic()
        rc, out, err = run(["run", "-o", self.out, "--wait-s", "1", "--", "sh", "-c", job])
        self.assertLess(time.monotonic() - t0, 30)
        wait_until(lambda: os.path.exists(pidfile) and open(pidfile).read().strip(), what="the pid file")
        pid = int(open(pidfile).read())
        self.pids.append(pid)
        self.assertEqual(rc, 0, err)
        self.assertTrue(alive(pid))
        self.assertRegex(err, rf"still run after 1 s \(--wait-s\): {pid} \(sleep\); left running")
        self.assertEqual(len(self.dbs()), 1)
        self.assertIn("data quality", out)  # the finished files are analyzed

    def test_signal_to_run_reaches_processes_left_behind_while_it_waits(self):
        # A process that left the job's group (setsid) and outlived the command: while run waits
        # for it, a SIGTERM sent to run reaches it too, and run then returns the command's code.
        got = os.path.join(self.tmp, "got")
        ready = os.path.join(self.tmp, "ready")
        inner = f"trap 'echo term > {got}; exit 0' TERM; : > {ready}; while :; do sleep 0.05; done"
        p = subprocess.Popen([CLI, "run", "-o", self.out, "--", "sh", "-c",
                              f"setsid sh -c \"{inner}\" >/dev/null 2>&1 & exit 5"],
                             env=env_with(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: os.path.exists(ready), what="the process left behind")
            time.sleep(0.3)
            self.assertIsNone(p.poll())  # run waits for it
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=TIMEOUT)
        finally:
            if p.poll() is None:
                p.kill()
        self.assertEqual(p.returncode, 5, err)
        wait_until(lambda: os.path.exists(got), timeout=10, what="the TERM forwarded to it")

    # ---- files that never finished --------------------------------------------------------------

    def test_run_and_job_killed_together_then_analyze_reports_the_unfinished_file(self):
        # kill -9 of run and its job at once: nobody marks the file. `analyze` must not say "no
        # problems recorded" for a file still marked `recording`: it is recording_incomplete,
        # with what it may miss.
        p = subprocess.Popen([CLI, "run", "-o", self.out, "--no-analyze", "--flush-ms", "100", "--",
                              DRIVER, "loop", "1000000", "2000", "1"],
                             env=env_with(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            job = int(p.stdout.readline().split()[1])
            self.pids.append(job)

            def committed():
                fs = self.dbs()
                if not fs:
                    return False
                try:
                    db = sqlite3.connect(f"file:{fs[0]}?mode=ro", uri=True)
                    try:
                        return db.execute("SELECT coalesce(sum(count), 0) FROM comm_op_chunk").fetchone()[0] > 0
                    finally:
                        db.close()
                except sqlite3.Error:
                    return False
            wait_until(committed, what="a first commit")
            os.killpg(p.pid, signal.SIGKILL)  # run and the job (its own group) together
            os.kill(job, signal.SIGKILL)
            p.communicate(timeout=TIMEOUT)
        finally:
            if p.poll() is None:
                p.kill()
        wait_until(lambda: not alive(job), what="the job to die")
        rc, out, err = run(["analyze", self.out])
        self.assertIn(rc, (0, 4), err)
        self.assertNotIn("no problems recorded", out)
        self.assertIn("recording_incomplete", out)
        self.assertIn("ended without its final flush", out)

    def test_exit_without_final_flush_is_bounded_by_when_run_saw_it_end(self):
        # A rank that leaves with _exit() (no final flush): run marks its file incomplete and
        # records when it saw the process gone; the report says the file ended without its
        # final flush and what it may miss.
        fake = os.path.join(os.path.dirname(DRIVER), "fake", "libnccl.so.2")
        code = ("import ctypes, os, time\n"
                f"ctypes.CDLL({fake!r}, mode=ctypes.RTLD_GLOBAL)\n"
                "g = ctypes.CDLL(None)\n"
                "class Id(ctypes.Structure):\n"
                "    _fields_ = [('internal', ctypes.c_char * 128)]\n"
                "comm = ctypes.c_void_p()\n"
                "assert g.ncclCommInitRank(ctypes.byref(comm), 1, Id(), 0) == 0\n"
                "buf = ctypes.create_string_buffer(1 << 12)\n"
                "for i in range(50):\n"
                "    assert g.ncclAllReduce(buf, buf, ctypes.c_size_t(i + 1), 7, 0, comm, ctypes.c_void_p(0x5100)) == 0\n"
                "    time.sleep(0.01)\n"
                "time.sleep(0.5)\n"
                "for i in range(20):\n"
                "    g.ncclAllReduce(buf, buf, ctypes.c_size_t(1), 7, 0, comm, ctypes.c_void_p(0x5100))\n"
                "os._exit(6)\n")
        before = time.time_ns()
        rc, out, err = run(["run", "-o", self.out, "--flush-ms", "200", "--", sys.executable, "-c", code])
        after = time.time_ns()
        self.assertEqual(rc, 6, err)
        [f] = self.dbs()
        db = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
        try:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        finally:
            db.close()
        self.assertEqual(meta["recording_state"], "incomplete")
        self.assertTrue(before < int(meta["process_gone_ns"]) < after, meta)
        self.assertIn("did not finish recording", err)
        self.assertIn("ended without its final flush", out)
        self.assertIn("recording_incomplete", out)
        self.assertNotIn("no problems recorded", out)

    # ---- a recording that failed is kept and counted ----------------------------------------------

    def _template_store(self):
        """A finished rank file of one op, as the injector leaves it."""
        d = os.path.join(self.tmp, "template")
        rc, _, err = run(["run", "-o", d, "--no-analyze", "--", DRIVER, "loop", "1", "0", "1"])
        self.assertEqual(rc, 0, err)
        [f] = self.dbs(d)
        return f

    def test_failed_recordings_are_kept_and_make_the_analysis_exit_4(self):
        # Every file that shows a recording failed is kept (never removed as "a launcher that
        # recorded nothing") and counted as an error-level loss: disk full after the schema (no
        # recording_state, no record), a write failure noted with no record lost counted, a
        # 0-byte file, a file that is not SQLite, one killed before its first commit.
        tmpl = self._template_store()

        def stripped(path, state):
            shutil.copy(tmpl, path)
            db = sqlite3.connect(path)
            for t in ("comm_op_chunk", "comm_op", "activity_chunk", "host_call_chunk", "trace_range_chunk",
                      "trace_range", "nccl_profiler_op"):
                db.execute(f"DELETE FROM {t}")
            db.execute("UPDATE stats SET value = 0")
            db.execute("DELETE FROM meta WHERE key IN ('communicators', 'recording_state')")
            if state:
                db.execute("INSERT INTO meta VALUES('recording_state', ?)", (state,))
            db.commit()
            db.close()
        half = ("import sqlite3, sys\n"
                "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                "c.execute('PRAGMA journal_mode=WAL'); c.execute('BEGIN')\n"
                "c.execute('CREATE TABLE meta(key TEXT PRIMARY KEY, value)')\n")
        cases = {
            "no_state": lambda p: stripped(p, None),
            "write_failed": lambda p: stripped(p, "write_failed"),
            "zero_bytes": lambda p: open(p, "w").close(),
            "not_sqlite": lambda p: open(p, "w").write("not a database\n" * 100),
            "no_first_commit": lambda p: subprocess.run([sys.executable, "-c", half + "import os; os._exit(0)\n", p],
                                                        check=True),
        }
        for name, make in cases.items():
            with self.subTest(name):
                d = os.path.join(self.tmp, name)
                os.makedirs(d)
                src = os.path.join(self.tmp, f"rank3_host_pid1_restart0.db")
                for x in glob.glob(src + "*"):
                    os.unlink(x)
                make(src)
                # The job puts the file in place, as its rank would have left it.
                job = f"for x in '{src}'*; do mv \"$x\" \"$OVERLAPPROF_OUTPUT_DIR/\"; done; exit 0"
                rc, out, err = run(["run", "-o", d, "--", "sh", "-c", job])
                self.assertEqual(rc, 0, err)
                self.assertNotIn("removed", err)
                self.assertNotIn("no problems recorded", out)
                self.assertIn("recording_" + ("incomplete" if name == "write_failed" else "failed"), out)
                kept = glob.glob(os.path.join(d, "rank3_*"))
                self.assertTrue(any(k.endswith(".db") for k in kept), kept)
                if name in ("zero_bytes", "not_sqlite", "no_first_commit"):
                    self.assertIn("its recording is lost", err)
                    self.assertTrue(os.path.exists(os.path.join(d, "rank3_host_pid1_restart0.db.unrecorded")), kept)
                rc, out, err = run(["analyze", d])
                self.assertEqual(rc, 4, out + err)
                self.assertIn("records_lost_write_failed" if name == "write_failed" else "its recording failed (", out)

    def test_finished_store_recording_nothing_is_still_removed(self):
        # The launcher case, and only it: a finished store without a record.
        tmpl = self._template_store()
        src = os.path.join(self.tmp, "rank0_host_pid1_restart0.db")
        shutil.copy(tmpl, src)
        db = sqlite3.connect(src)
        for t in ("comm_op_chunk", "comm_op"):
            db.execute(f"DELETE FROM {t}")
        db.execute("UPDATE stats SET value = 0")
        db.execute("DELETE FROM meta WHERE key = 'communicators'")
        db.commit()
        db.close()
        rc, _, err = run(["run", "-o", self.out, "--", "sh", "-c",
                          f"mv '{src}' \"$OVERLAPPROF_OUTPUT_DIR/\"; '{DRIVER}' loop 2 0 1 >/dev/null"])
        self.assertEqual(rc, 0, err)
        self.assertIn("recorded nothing", err)
        self.assertEqual([os.path.basename(f).split("_")[0] for f in self.dbs()], ["rank0"])
        self.assertEqual(len(self.dbs()), 1)

    # ---- a reader that closes stdout -------------------------------------------------------------

    def test_closed_stdout_keeps_the_commands_exit_code(self):
        # `run ... | head -c1`: the analysis' output meets a closed pipe; run's exit code stays
        # the command's (not 141 from SIGPIPE).
        for want in (0, 3):
            with self.subTest(want):
                r, w = os.pipe()
                os.close(r)
                try:
                    p = subprocess.run([CLI, "run", "-o", os.path.join(self.tmp, f"p{want}"), "--", "sh", "-c",
                                        f"'{DRIVER}' loop 5 0 1 >/dev/null; exit {want}"],
                                       stdout=w, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT, env=env_with())
                finally:
                    os.close(w)
                self.assertEqual(p.returncode, want, p.stderr)
        # stderr and stdout both to a reader that went away before the job even started: run's
        # first line must not kill it (SIGPIPE) before it starts the job. The job gets SIGPIPE
        # as run was given it (default here), not run's ignored one.
        started = os.path.join(self.tmp, "started")
        r, w = os.pipe()
        os.close(r)
        try:
            p = subprocess.run([CLI, "run", "-o", os.path.join(self.tmp, "p2"), "--", "sh", "-c",
                                f"grep SigIgn /proc/$$/status > '{started}'; '{DRIVER}' loop 5 0 1 >/dev/null; exit 7"],
                               stdout=w, stderr=w, timeout=TIMEOUT, env=env_with())
        finally:
            os.close(w)
        self.assertEqual(p.returncode, 7)
        ignored = int(open(started).read().split()[1], 16)
        self.assertEqual(ignored & (1 << (signal.SIGPIPE - 1)), 0)
        self.assertEqual(len(self.dbs(os.path.join(self.tmp, "p2"))), 1)
        # Through a shell pipeline, as a user types it.
        sh = subprocess.run(["bash", "-o", "pipefail", "-c",
                             f"'{CLI}' run -o '{self.tmp}/p9' -- sh -c \"'{DRIVER}' loop 5 0 1 >/dev/null; exit 9\" "
                             f"2>/dev/null | head -c1 >/dev/null"], timeout=TIMEOUT, env=env_with())
        self.assertEqual(sh.returncode, 9)

    # ---- -o naming a symbolic link ------------------------------------------------------------

    def test_output_dir_that_is_a_symbolic_link_is_refused_unless_force(self):
        # As root, `-o link` with link -> /etc wrote the rank files and reports into /etc.
        target = os.path.join(self.tmp, "etc")
        os.makedirs(target)
        link = os.path.join(self.tmp, "link")
        os.symlink(target, link)
        dangling = os.path.join(self.tmp, "dangling")
        os.symlink(os.path.join(self.tmp, "nowhere"), dangling)
        marker = os.path.join(self.tmp, "started")
        for o in (link, link + "/", dangling):
            with self.subTest(o):
                rc, _, err = run(["run", "-o", o, "--", "sh", "-c", f"touch '{marker}'; '{DRIVER}' loop 2 0 1"])
                self.assertEqual(rc, 2, err)
                self.assertIn("is a symbolic link", err)
                self.assertEqual(err.count("overlapprof: error"), 1, err)
                self.assertFalse(os.path.exists(marker))
                self.assertEqual(os.listdir(target), [])
                self.assertFalse(os.path.exists(os.path.join(self.tmp, "nowhere")))
        rc, out, err = run(["run", "-o", link, "--force", "--", DRIVER, "loop", "2", "0", "1"])
        self.assertEqual(rc, 0, err)
        self.assertIn(f"recording into {os.path.realpath(target)}", err)
        self.assertEqual(len(self.dbs(target)), 1)
        self.assertTrue(os.path.islink(link))
        # A link above DIR is followed, and run says where the files go.
        rc, out, err = run(["run", "-o", os.path.join(link, "sub"), "--", DRIVER, "loop", "2", "0", "1"])
        self.assertEqual(rc, 0, err)
        self.assertIn(f"resolves to {os.path.realpath(target)}/sub through a symbolic link", err)
        self.assertEqual(len(self.dbs(os.path.join(target, "sub"))), 1)

    # ---- SIGCHLD ignored by run's parent -----------------------------------------------------

    def test_sigchld_ignored_by_the_parent_keeps_the_exit_code(self):
        code = ("import os, signal, sys\n"
                "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
                "os.execv(sys.argv[1], sys.argv[1:])\n")
        for job, want in (("exit 7", 7), (f"'{DRIVER}' loop 3 0 1; exit 9", 9), ("kill -TERM $$", 143)):
            d = os.path.join(self.tmp, f"d{want}")
            p = subprocess.run([sys.executable, "-c", code, CLI, "run", "-o", d, "--", "sh", "-c", job],
                               capture_output=True, text=True, timeout=TIMEOUT, env=env_with())
            self.assertEqual(p.returncode, want, p.stderr)
            self.assertIn(f"the command exited with {want}", p.stderr)

    # ---- one output directory per job --------------------------------------------------------

    def test_output_dir_with_an_earlier_trace_is_refused_unless_force(self):
        for rel in ("sub/deeper/rank0.db", "old.json", "x/trace.json.gz", "overlap.summary.json"):
            d = os.path.join(self.tmp, "used", rel.replace("/", "_"))
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            open(os.path.join(d, rel), "w").close()
            marker = os.path.join(self.tmp, "started")
            rc, out, err = run(["run", "-o", d, "--", "touch", marker])
            self.assertEqual(rc, 2, err)
            self.assertEqual(err.count("overlapprof: error"), 1, err)
            self.assertIn("already holds a trace", err)
            self.assertIn(rel, err)
            self.assertFalse(os.path.exists(marker))  # the job never started
            rc, out, err = run(["run", "-o", d, "--force", "--", "touch", marker])
            self.assertEqual(rc, 0, err)
            self.assertTrue(os.path.exists(marker))
            os.unlink(marker)

    def test_two_concurrent_runs_into_one_directory(self):
        stop = os.path.join(self.tmp, "stop")
        a = subprocess.Popen([CLI, "run", "-o", self.out, "--", "sh", "-c",
                              f"while [ ! -e '{stop}' ]; do sleep 0.02; done"],
                             env=env_with(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            lock = os.path.join(self.out, ".overlapprof.lock")

            def locked_by_a():
                try:
                    with open(lock) as f:
                        return f.read().strip() == str(a.pid)
                except FileNotFoundError:
                    return False
            wait_until(locked_by_a, what="run A's lock")
            marker = os.path.join(self.tmp, "b-started")
            rc, _, err = run(["run", "-o", self.out, "--", "touch", marker])
            self.assertEqual(rc, 2, err)
            self.assertIn(f"another overlapprof run (pid {a.pid}) is recording into", err)
            self.assertFalse(os.path.exists(marker))
            open(stop, "w").close()
            _, err_a = a.communicate(timeout=TIMEOUT)
            self.assertEqual(a.returncode, 0, err_a)
        finally:
            if a.poll() is None:
                a.kill()
        rc, _, err = run(["run", "-o", self.out, "--", "true"])  # released
        self.assertEqual(rc, 0, err)

    def test_default_directory_is_unique_within_a_second(self):
        cwd = os.path.join(self.tmp, "cwd")
        os.makedirs(cwd)
        # Every name of the next seconds is taken already: the runs must pick fresh ones.
        now = time.time()
        for s in range(-1, 30):
            os.makedirs(os.path.join(cwd, time.strftime("overlapprof-%Y%m%d-%H%M%S", time.localtime(now + s))),
                        exist_ok=True)
        taken = set(os.listdir(cwd))
        procs = [subprocess.Popen([CLI, "run", "--no-analyze", "--", DRIVER, "loop", "3", "0", "1"], cwd=cwd,
                                  env=env_with(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        for p in procs:
            _, err = p.communicate(timeout=TIMEOUT)
            self.assertEqual(p.returncode, 0, err)
        new = sorted(set(os.listdir(cwd)) - taken)
        self.assertEqual(len(new), 2, new)
        for d in new:
            self.assertRegex(d, r"^overlapprof-\d{8}-\d{6}-\d+$")
            self.assertEqual(len(self.dbs(os.path.join(cwd, d))), 1, d)
        for d in taken:
            self.assertEqual(os.listdir(os.path.join(cwd, d)), [], d)

    # ---- rank files that hold nothing --------------------------------------------------------

    def test_zero_byte_rank_file_is_kept_and_counted_as_lost(self):
        job = (f": > \"$OVERLAPPROF_OUTPUT_DIR/rank1_host_pid$$_restart0.db\"; "
               f"'{DRIVER}' loop 5 0 1 >/dev/null")
        rc, out, err = run(["run", "-o", self.out, "--", "sh", "-c", job])
        self.assertEqual(rc, 0, err)
        self.assertIn("rank1_host_pid", err)
        self.assertIn("died or ran out of disk while creating it (0 bytes): its recording is lost", err)
        # Kept (set aside, out of the scan) and stood in for, so the rest is analyzed and the
        # loss is an error in every analysis of the directory.
        self.assertEqual(sorted(os.path.basename(f)[:5] for f in self.dbs()), ["rank0", "rank1"])
        [kept] = glob.glob(os.path.join(self.out, "*.db.unrecorded"))
        self.assertEqual(os.path.getsize(kept), 0)
        self.assertIn("data quality", out)
        self.assertIn("recording_failed", out)
        self.assertNotIn("empty file", err)
        rc, out, err = run(["analyze", self.out])  # the directory stays analyzable
        self.assertEqual(rc, 4, err)
        self.assertIn("recording_failed", out)

    def test_file_killed_before_its_first_commit_says_so(self):
        # What the injector leaves when killed between opening the store and its first commit
        # (schema and meta are one transaction): a WAL database with nothing committed.
        half = ("import os, sqlite3, sys\n"
                "c = sqlite3.connect(os.path.join(os.environ['OVERLAPPROF_OUTPUT_DIR'], "
                "f'rank0_host_pid{os.getpid()}_restart0.db'), isolation_level=None)\n"
                "c.execute('PRAGMA journal_mode=WAL'); c.execute('BEGIN')\n"
                "c.execute('CREATE TABLE meta(key TEXT PRIMARY KEY, value)')\n"
                "c.execute(\"INSERT INTO meta VALUES('recording_state', 'recording')\")\n"
                "os.kill(os.getpid(), 9)\n")
        rc, out, err = run(["run", "-o", self.out, "--", sys.executable, "-c", half])
        self.assertEqual(rc, 128 + 9, err)
        self.assertIn("killed or ran out of disk before its first commit (no schema): its recording is lost", err)
        self.assertIn("died or failed before its first commit", err)
        self.assertNotIn("no problems recorded", out + err)
        self.assertNotIn("nothing was recorded: no process of the job loaded NCCL", err)
        [f] = self.dbs()  # the placeholder, with the loss
        self.assertEqual(len(glob.glob(f + ".unrecorded")), 1)
        self.assertIn("recording_failed", out)

    # ---- paths -------------------------------------------------------------------------------

    def test_install_path_with_a_space(self):
        inst = os.path.join(self.tmp, "my install", "lib")
        os.makedirs(inst)
        real = os.path.join(os.path.dirname(CLI), "injector", "liboverlapprof_inject.so")
        inj = os.path.join(inst, "liboverlapprof_inject.so")
        shutil.copy(real, inj)
        tmpdir = os.path.join(self.tmp, "t")
        os.makedirs(tmpdir)
        rc, out, err = run(["run", "-o", self.out, "--", DRIVER, "loop", "5", "0", "1"],
                           env=env_with(OVERLAPPROF_INJECTOR=inj, TMPDIR=tmpdir))
        self.assertEqual(rc, 0, err)
        self.assertNotIn("cannot be preloaded", err)
        [f] = self.dbs()
        self.assertEqual(store(f)[:2], ("finished", 5))
        self.assertEqual(os.listdir(tmpdir), [])  # the link made for LD_PRELOAD is gone

    def test_read_only_output_dir_says_so(self):
        ro = os.path.join(self.tmp, "ro")
        os.makedirs(ro)
        os.chmod(ro, 0o555)
        os.chmod(self.tmp, 0o755)
        marker = os.path.join(self.tmp, "started")
        drop = None
        if os.geteuid() == 0:  # root writes anywhere: run as nobody
            def drop():
                os.setgid(65534)
                os.setuid(65534)
        rc, _, err = run(["run", "-o", ro, "--", "sh", "-c", f"echo > '{marker}'"], preexec_fn=drop)
        self.assertEqual(rc, 2, err)
        self.assertEqual(err.count("\n"), err.count("no CUDA driver") + 1, err)
        self.assertIn(f"cannot write into {ro}: Permission denied (a read-only directory or file system)", err)
        self.assertFalse(os.path.exists(marker))
        rc, _, err = run(["run", "-o", os.path.join(ro, "sub"), "--", "true"], preexec_fn=drop)
        self.assertEqual(rc, 2, err)
        self.assertIn("cannot create", err)
        self.assertIn("Permission denied", err)

    def test_non_utf8_output_dir_keeps_the_jobs_exit_code(self):
        d = os.fsencode(self.tmp) + b"/bad\xff\xfename"
        for job, want in ((f"'{DRIVER}' loop 5 0 1 >/dev/null", 0), (f"'{DRIVER}' loop 5 0 1 >/dev/null; exit 3", 3)):
            p = subprocess.run([os.fsencode(CLI), b"run", b"-o", d + str(want).encode(), b"--", b"sh", b"-c",
                                job.encode()], capture_output=True, timeout=TIMEOUT, env=env_with())
            self.assertEqual(p.returncode, want, p.stderr)
            self.assertNotIn(b"internal error", p.stderr)
            self.assertTrue(os.path.exists(d + str(want).encode() + b"/overlap.summary.json"))

    def test_terminal_escapes_in_the_output_dir_are_printed_escaped(self):
        d = os.path.join(self.tmp, "red\x1b[31mdir")
        rc, out, err = run(["run", "-o", d, "--", "sh", "-c", f"'{DRIVER}' loop 5 0 1 >/dev/null"])
        self.assertEqual(rc, 0, err)
        self.assertNotIn("\x1b", out + err)  # no raw ESC byte reaches the terminal
        self.assertIn("red\\x1b[31mdir", err)  # the path is shown, escaped


if __name__ == "__main__":
    CLI, DRIVER = (os.path.abspath(a) for a in sys.argv[1:3])
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:])
