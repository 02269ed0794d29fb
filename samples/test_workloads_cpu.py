#!/usr/bin/env python3
"""CPU tests of the reference workloads' own logic (ctest `samples_workloads_cpu`), stdlib unittest.

Needs a Python with PyTorch: this interpreter, else $OVERLAPPROF_TORCH_PYTHON, else Debian's
/usr/bin/python3 (python3-torch, scripts/setup.sh). Without one every workload test skips with one line.
  - the by-hand launcher itself (no PyTorch): a rank whose peer has exited is killed after a grace
    period instead of waiting on the rendezvous, a signal is a failure, a lost port race is retried.
  - ddp_buckets.py for real: gloo, 2 ranks under torch.distributed.run (where torchrun itself works:
    Debian's 1.13 torchrun fails on Python 3.11, then the same environment torchrun gives each rank is
    set here), a few tiny steps: buckets per step from the comm hook (many with a small cap), no
    all-reduce inside no_sync, half the bytes with fp16 / bf16 compression (bf16: skipped with the
    reason where gloo cannot all-reduce bf16); one bucket with 1000 MB at world size 1, no launcher.
  - fsdp_prefetch.py, tp_overlap.py, pp_schedule.py: on CPU they must stop with exit code 3, one
    `SKIP <workload>: <reason>` line and {"skipped": reason} in --json (an API or the GPU is missing).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
TINY = ["--layers", "2", "--d-model", "128", "--heads", "2", "--seq", "8", "--batch", "2",
        "--iters", "2", "--warmup", "2", "--cpu"]
SKIP_EXIT = 3


def torch_python():
    cands = [os.environ.get("OVERLAPPROF_TORCH_PYTHON"), sys.executable, "/usr/bin/python3"]
    for c in cands:
        if c and os.access(c, os.X_OK):
            p = subprocess.run([c, "-c", "import torch, torch.distributed as d; print(torch.__version__, "
                                "d.is_available() and d.is_gloo_available())"], capture_output=True, text=True)
            if p.returncode == 0 and p.stdout.split()[-1] == "True":
                return c, p.stdout.split()[0]
    return None, None


PY, TORCH_VERSION = torch_python()
NO_TORCH = "no Python with PyTorch (gloo) found: install python3-torch (scripts/setup.sh)"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Launcher:
    """2 ranks: torch.distributed.run when it works with this interpreter, else its environment by hand."""
    torchrun_ok = None
    note = ""

    @classmethod
    def probe(cls):
        """torchrun's worker start-up (to_map of the redirects) is broken with torch 1.13 on Python 3.11:
        find that out without starting its agent (which can sit on a rendezvous port)."""
        p = subprocess.run([PY, "-c", "from torch.distributed.elastic.multiprocessing.api import Std, to_map\n"
                            "to_map(Std.from_str('0'), 2)"], capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            cls.torchrun_ok = False
            cls.note = "torch.distributed.run cannot start workers with this interpreter (to_map): ranks started by hand"
            print(f"note: {cls.note}", file=sys.stderr)

    @classmethod
    def run(cls, script, args, nproc=2, timeout=240):
        # GLOO_SOCKET_IFNAME=lo: both ranks are here; gloo need not resolve the host name.
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", CUDA_VISIBLE_DEVICES="",
                   GLOO_SOCKET_IFNAME="lo")
        cmd_tail = [os.path.join(HERE, script)] + args
        t0 = time.time()
        try:
            return cls._run(env, cmd_tail, nproc, timeout)
        finally:
            print(f"  ({script} {' '.join(args[-3:])}: {time.time() - t0:.1f} s)", file=sys.stderr)

    @classmethod
    def _run(cls, env, cmd_tail, nproc, timeout):
        if cls.torchrun_ok is None:
            cls.probe()
        if cls.torchrun_ok is not False:
            p = subprocess.run([PY, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
                               + cmd_tail, capture_output=True, text=True, env=env, timeout=timeout)
            if p.returncode == 0 or "SKIP " in p.stdout:
                cls.torchrun_ok = True
                return p.returncode if p.returncode == 0 else SKIP_EXIT, p.stdout + p.stderr
            if cls.torchrun_ok is None and "to_map" in p.stderr:
                cls.torchrun_ok = False
                cls.note = "torch.distributed.run fails with this interpreter (to_map): ranks started by hand"
                print(f"note: {cls.note}", file=sys.stderr)
            else:
                return p.returncode, p.stdout + p.stderr
        # By hand. Every rank is polled: a rank that dies (a port taken between free_port() and the
        # store's bind, an import error) would leave the others waiting on the rendezvous for gloo's
        # 30-minute default, and a correct run ends all its ranks within seconds of each other. So once
        # one rank has exited the others get GRACE_S, then are killed and the launch counts as failed.
        # A lost port race (EADDRINUSE) or a rank that had to be killed is retried (3 launches at most,
        # each noted on stderr): a hang that repeats fails the test with every rank's output.
        for attempt in range(1, 4):
            rc, out, retry_why = cls._run_by_hand(env, cmd_tail, nproc, timeout)
            if rc == 0 or retry_why is None or attempt == 3:
                return rc, out
            print(f"note: launch {attempt} of {' '.join(cmd_tail[-3:])}: {retry_why}: retrying", file=sys.stderr)

    GRACE_S = 30

    @classmethod
    def _run_by_hand(cls, env, cmd_tail, nproc, timeout, python=None):
        """Returns (exit code, every rank's output, why a retry may help or None)."""
        port = str(free_port())
        procs, logs = [], []
        for r in range(nproc):
            e = dict(env, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc),
                     GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            log = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: no rank blocks on a full pipe
            logs.append(log)
            procs.append(subprocess.Popen([python or PY] + cmd_tail, stdout=log, stderr=subprocess.STDOUT, text=True, env=e))
        deadline = time.monotonic() + timeout
        first_exit = None
        killed = []
        while any(p.poll() is None for p in procs):
            now = time.monotonic()
            if first_exit is None and any(p.returncode is not None for p in procs):
                first_exit = now
            if now > deadline or (first_exit is not None and now > first_exit + cls.GRACE_S):
                why = f"timed out after {timeout} s" if now > deadline else \
                    f"still running {cls.GRACE_S} s after another rank exited"
                for r, p in enumerate(procs):
                    if p.poll() is None:
                        p.kill()
                        killed.append(f"rank {r} {why}: killed")
                break
            time.sleep(0.1)
        rcs = [p.wait() for p in procs]
        outs = []
        for r, log in enumerate(logs):
            log.seek(0)
            outs.append(f"--- rank {r} (exit {rcs[r]}) ---\n" + log.read())
            log.close()
        out = "\n".join(outs + [f"[launcher] {k}" for k in killed])
        if killed:
            return 1, out, "; ".join(killed)
        if all(c == 0 for c in rcs):
            return 0, out, None
        if all(c == SKIP_EXIT for c in rcs):
            return SKIP_EXIT, out, None
        failed = next(c for c in rcs if c not in (0, SKIP_EXIT))
        rc = failed if failed > 0 else 1  # a signal (negative code) is a failure too
        return rc, out, ("port taken before the store bound it" if "address already in use" in out.lower()
                         else None)


class LauncherTest(unittest.TestCase):
    """The by-hand launcher never waits on a rank whose peer is gone (no PyTorch needed)."""

    def launch(self, body, timeout=60):
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write("import os, sys, time\nr = int(os.environ['RANK'])\n" + body)
        old = Launcher.GRACE_S
        Launcher.GRACE_S = 1
        try:
            t0 = time.monotonic()
            rc, out, retry = Launcher._run_by_hand(dict(os.environ), [f.name], 2, timeout, python=sys.executable)
            return rc, out, retry, time.monotonic() - t0
        finally:
            Launcher.GRACE_S = old
            os.unlink(f.name)

    def test_all_ranks_succeed(self):
        rc, out, retry, _ = self.launch("print('hello', r)\n")
        self.assertEqual((rc, retry), (0, None))
        self.assertIn("hello 0", out)
        self.assertIn("hello 1", out)

    def test_rank_left_waiting_is_killed_after_grace(self):
        rc, out, retry, secs = self.launch("if r == 1: time.sleep(600)\n")
        self.assertEqual(rc, 1)
        self.assertIn("rank 1 still running 1 s after another rank exited: killed", out)
        self.assertIsNotNone(retry)
        self.assertLess(secs, 30)

    def test_failure_by_signal_is_a_failure(self):
        rc, _, retry, _ = self.launch("if r == 0: os.kill(os.getpid(), 9)\n")
        self.assertEqual((rc, retry), (1, None))

    def test_port_race_is_retryable(self):
        rc, _, retry, _ = self.launch("if r == 0:\n    print('OSError: [Errno 98] Address already in use')\n"
                                      "    sys.exit(1)\n")
        self.assertEqual(rc, 1)
        self.assertEqual(retry, "port taken before the store bound it")

    def test_all_ranks_skip(self):
        rc, _, retry, _ = self.launch("print('SKIP x: y'); sys.exit(3)\n")
        self.assertEqual((rc, retry), (SKIP_EXIT, None))

    def test_timeout(self):
        rc, out, retry, _ = self.launch("time.sleep(600)\n", timeout=2)
        self.assertEqual(rc, 1)
        self.assertIn("timed out after 2 s", out)


@unittest.skipIf(PY is None, NO_TORCH)
class DdpBucketsCpuTest(unittest.TestCase):
    """ddp_buckets.py with gloo, 2 ranks, tiny model (1.6 MB of gradients)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ddp_cpu_")
        cls.runs = {}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_ddp(self, name, extra):
        if name not in self.runs:
            path = os.path.join(self.tmp, name + ".json")
            rc, out = Launcher.run("ddp_buckets.py", TINY + extra + ["--json", path])
            doc = None
            if os.path.exists(path):
                with open(path) as f:
                    doc = json.load(f)
            self.runs[name] = (rc, out, doc)
        rc, out, doc = self.runs[name]
        if rc == SKIP_EXIT and doc and doc.get("skipped"):
            return None, doc["skipped"]
        self.assertEqual(rc, 0, out[-3000:])
        self.assertIsNotNone(doc, out[-3000:])
        return doc, None

    def base(self):
        doc, _ = self.run_ddp("cap0.1", ["--bucket-cap-mb", "0.1"])
        return doc

    def test_small_buckets_many_per_step(self):
        d = self.base()
        o = d["observed"]
        self.assertEqual(d["world_size"], 2)
        self.assertIsInstance(o["buckets_per_step"], int, "the same bucket count every steady step")
        # 1.6 MB of gradients in 0.1 MB buckets: every block's larger weights go out alone.
        self.assertGreaterEqual(o["buckets_per_step"], 5)
        self.assertEqual(o["bytes_per_step"], o["grad_bytes"])
        self.assertEqual(o["allreduce_in_no_sync"], 0)
        self.assertTrue(d["expect"])

    def test_no_sync_accumulation(self):
        base = self.base()
        d, _ = self.run_ddp("accum3", ["--bucket-cap-mb", "0.1", "--accumulate", "3", "--gradient-as-bucket-view"])
        o, ob = d["observed"], base["observed"]
        self.assertEqual(o["allreduce_in_no_sync"], 0, "an all-reduce ran inside no_sync")
        self.assertEqual(o["buckets_per_step"], ob["buckets_per_step"], "accumulation changed the buckets per step")
        self.assertEqual(o["allreduce_calls"], ob["allreduce_calls"], "4 steps, same all-reduces as without no_sync")
        self.assertTrue(d["config"]["gradient_as_bucket_view"])

    def test_fp16_compression_halves_bytes(self):
        base = self.base()
        d, _ = self.run_ddp("fp16", ["--bucket-cap-mb", "0.1", "--fp16-compress"])
        self.assertEqual(d["observed"]["bytes_per_step"] * 2, base["observed"]["bytes_per_step"])
        self.assertEqual(d["observed"]["bytes_ratio_to_fp32"], 0.5)

    def test_bf16_compression_halves_bytes(self):
        base = self.base()
        d, reason = self.run_ddp("bf16", ["--bucket-cap-mb", "0.1", "--bf16-compress"])
        if d is None:
            self.skipTest(reason)
        self.assertEqual(d["observed"]["bytes_per_step"] * 2, base["observed"]["bytes_per_step"])

    def test_1000mb_one_bucket_world_size_1_without_launcher(self):
        """1000 MB: every gradient in one bucket; at world size 1, started without a launcher (one
        2-rank launch less: CI machines are small)."""
        path = os.path.join(self.tmp, "w1.json")
        env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_PORT=str(free_port()), CUDA_VISIBLE_DEVICES="")
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
            env.pop(k, None)
        p = subprocess.run([PY, os.path.join(HERE, "ddp_buckets.py")] + TINY + ["--bucket-cap-mb", "1000",
                           "--json", path], capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(path) as f:
            d = json.load(f)
        self.assertEqual(d["world_size"], 1)
        self.assertEqual(d["observed"]["buckets_per_step"], 1)
        self.assertEqual(d["observed"]["bytes_per_step"], d["observed"]["grad_bytes"])
        self.assertTrue(any("one bucket" in e for e in d["expect"]), d["expect"])
        self.assertIn("expect (overlapprof)", p.stdout)


@unittest.skipIf(PY is None, NO_TORCH)
class GpuOnlyScriptsTest(unittest.TestCase):
    """On CPU the FSDP, TP and PP workloads stop with exit 3 and one line saying why."""

    def check_skips(self, script, args=()):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "s.json")
            env = dict(os.environ, MASTER_PORT=str(free_port()), CUDA_VISIBLE_DEVICES="")
            p = subprocess.run([PY, os.path.join(HERE, script), *args, "--json", path], capture_output=True,
                               text=True, env=env, timeout=120)
            self.assertEqual(p.returncode, SKIP_EXIT, p.stdout + p.stderr)
            lines = [x for x in p.stdout.splitlines() if x.startswith("SKIP ")]
            self.assertEqual(len(lines), 1, p.stdout)
            self.assertNotIn("Traceback", p.stderr)
            with open(path) as f:
                doc = json.load(f)
            self.assertTrue(doc["skipped"])
            self.assertIn(doc["skipped"], lines[0])
            print(f"  {lines[0]}", file=sys.stderr)

    def test_fsdp(self):
        self.check_skips("fsdp_prefetch.py")

    def test_tp(self):
        self.check_skips("tp_overlap.py")

    def test_tp_async(self):
        self.check_skips("tp_overlap.py", ["--mode", "async"])

    def test_pp(self):
        self.check_skips("pp_schedule.py", ["--schedule", "interleaved"])


@unittest.skipIf(PY is None, NO_TORCH)
class RunShWiringTest(unittest.TestCase):
    """tests/gpu/run.sh --only-workloads reaches samples/check_expectations.py (a fake nvidia-smi and
    overlapprof; PyTorch sees no CUDA device, so the checker stops with exit 2 and its line)."""

    def test_only_workloads(self):
        with tempfile.TemporaryDirectory() as tmp:
            bin_dir, build = os.path.join(tmp, "bin"), os.path.join(tmp, "build")
            os.makedirs(bin_dir)
            os.makedirs(build)
            for path, text in ((os.path.join(bin_dir, "nvidia-smi"), "#!/bin/sh\necho 'GPU 0: Fake GPU (UUID: x)'\n"),
                               (os.path.join(build, "overlapprof"), "#!/bin/sh\nexit 0\n")):
                with open(path, "w") as f:
                    f.write(text)
                os.chmod(path, 0o755)
            os.symlink(PY, os.path.join(bin_dir, "python3"))
            env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""), CUDA_VISIBLE_DEVICES="")
            run_sh = os.path.join(os.path.dirname(HERE), "tests", "gpu", "run.sh")
            p = subprocess.run([run_sh, build, "--only-workloads", "--pairs", "ddp"], capture_output=True, text=True,
                               env=env, timeout=180)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn("check_expectations.py: no CUDA device visible to PyTorch", p.stderr)
            self.assertNotIn("gpu-check:", p.stdout)  # tests/gpu/check.py did not run


if __name__ == "__main__":
    if PY is None:
        print(f"samples_workloads_cpu: skipped: {NO_TORCH}")
        sys.exit(77)  # ctest SKIP_RETURN_CODE
    else:
        print(f"samples_workloads_cpu: {PY} (torch {TORCH_VERSION})", file=sys.stderr)
    unittest.main(verbosity=2)
