#!/usr/bin/env python3
"""Tests of the synthetic trace generator (tests/synth/synth.py) and of overlapprof against its truth.

For small cases of every scenario: the truth's internal invariants (wait + transfer = own kernel
time exactly, exposed = comm - overlap, per-iteration figures add up to the whole, clock offsets
applied exactly to what the files say, ...), then `overlapprof analyze DIR --json` must reproduce,
exactly, every rank's compute_ns, comm_ns, overlap_ns, exposed_comm_ns, its iteration count and
per-iteration figures (with ProfilerStep), and the per-op-type table.

The analyzer sections (buckets, FSDP/TP, cross-rank) are compared too and their disagreements
printed; SYNTH_STRICT=1 makes those failures.

Usage: test_synth.py PATH_TO_OVERLAPPROF   (ctest passes it)
"""
import gzip
import hashlib
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from decimal import Decimal

HERE = os.path.dirname(os.path.abspath(__file__))
SYNTH = os.path.join(HERE, "synth.py")
CLI = None
# Analyzer sections must agree with the truth; SYNTH_STRICT=0 only notes disagreements (while
# investigating one).
STRICT = os.environ.get("SYNTH_STRICT", "1") == "1"
NOTES = []  # disagreements of the analyzer sections, printed at the end


def note(msg):
    NOTES.append(msg)


class Case:
    """One generated case: traces in DIR, truth beside DIR (so `analyze DIR` sees only traces)."""

    def __init__(self, tmp, name, args, truth_in_dir=False):
        self.name = name
        self.dir = os.path.join(tmp, name)
        self.truth_path = os.path.join(self.dir, "truth.json") if truth_in_dir else self.dir + ".truth.json"
        cmd = [sys.executable, SYNTH, self.dir, "--quiet", *args, "--truth", self.truth_path]
        subprocess.run(cmd, check=True, timeout=120)
        with open(self.truth_path) as f:
            self.truth = json.load(f)
        self.summary = None

    def trace_files(self):
        return sorted(os.path.join(self.dir, f) for f in os.listdir(self.dir) if f.startswith("rank"))

    def analyze(self, inputs=None):
        out = self.dir + ".summary.json"
        p = subprocess.run([CLI, "analyze", *(inputs or [self.dir]), "--json", out], capture_output=True, text=True,
                           timeout=120)
        if p.returncode != 0:
            raise AssertionError(f"overlapprof analyze failed ({p.returncode}): {p.stderr}")
        with open(out) as f:
            self.summary = json.load(f)
        return self.summary


def load_trace(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        # Decimal keeps ts/dur exact (a double cannot hold 1e16 ns with ns resolution).
        return json.load(f, parse_float=Decimal)


def dec_ns(x):
    v = Decimal(x) * 1000
    assert v == v.to_integral_value(), x
    return int(v)


class SynthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="overlapprof-synth-")
        t = cls.tmp
        cls.cases = {
            "ddp": Case(t, "ddp", ["--scenario", "ddp", "--ranks", "4", "--iterations", "4", "--seed", "3"]),
            "ddp_multi": Case(t, "ddp_multi", ["--scenario", "ddp", "--ranks", "8", "--iterations", "4",
                                               "--hosts", "2", "--clock-offset-us", "1500", "--straggler", "5",
                                               "--straggler-delay-us", "3000", "--gz"]),
            "ddp_bare": Case(t, "ddp_bare", ["--scenario", "ddp", "--ranks", "4", "--iterations", "5", "--no-steps",
                                             "--no-seq", "--no-phase-annotations", "--seed", "7"]),
            "fsdp_on": Case(t, "fsdp_on", ["--scenario", "fsdp", "--ranks", "4", "--iterations", "3", "--layers", "12",
                                           "--model-mb", "500", "--prefetch", "on"]),
            "fsdp_off": Case(t, "fsdp_off", ["--scenario", "fsdp", "--ranks", "4", "--iterations", "3", "--layers",
                                             "12", "--model-mb", "500", "--prefetch", "off", "--hosts", "2",
                                             "--clock-offset-us", "-700"]),
            "tp_on": Case(t, "tp_on", ["--scenario", "tp", "--ranks", "4", "--tp-size", "2", "--iterations", "3",
                                       "--layers", "8", "--tp-overlap", "on", "--straggler", "2"]),
            "tp_off": Case(t, "tp_off", ["--scenario", "tp", "--ranks", "4", "--iterations", "3", "--layers", "8",
                                         "--tp-overlap", "off", "--noise", "0"]),
            "fsdp_bare": Case(t, "fsdp_bare", ["--scenario", "fsdp", "--ranks", "2", "--iterations", "4", "--layers",
                                               "8", "--model-mb", "300", "--no-steps"]),
            "tp_bare": Case(t, "tp_bare", ["--scenario", "tp", "--ranks", "2", "--iterations", "4", "--layers", "6",
                                           "--no-steps"]),
            # Communication that is not an NCCL kernel (docs/classification.md).
            "tp_symm_mem": Case(t, "tp_symm_mem", ["--scenario", "tp", "--ranks", "2", "--iterations", "3",
                                                   "--layers", "6", "--tp-overlap", "on", "--tp-comm", "symm_mem"]),
            "tp_p2p_copy": Case(t, "tp_p2p_copy", ["--scenario", "tp", "--ranks", "2", "--iterations", "3",
                                                   "--layers", "6", "--tp-overlap", "on", "--tp-comm", "p2p_copy"]),
            "in_dir": Case(t, "in_dir", ["--scenario", "ddp", "--ranks", "2", "--iterations", "3", "--layers", "8"],
                           truth_in_dir=True),
        }

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        if NOTES:
            print("\nanalyzer sections that disagree with the synthetic truth (not failures unless SYNTH_STRICT=1):",
                  file=sys.stderr)
            for n in NOTES:
                print("  " + n, file=sys.stderr)

    # -- the truth on its own -----------------------------------------------------------------
    def test_truth_invariants(self):
        for name, c in self.cases.items():
            t = c.truth
            with self.subTest(case=name):
                self.assertEqual(t["schema"], "overlapprof.synth.truth/1")
                for r in t["ranks"]:
                    self.assertEqual(r["exposed_comm_ns"], r["comm_ns"] - r["overlap_ns"])
                    self.assertLessEqual(r["overlap_ns"], min(r["compute_ns"], r["comm_ns"]))
                    self.assertEqual(r["wall_ns"], r["end_ns"] - r["start_ns"])
                    self.assertLessEqual(r["busy_ns"], r["wall_ns"])
                    gpu = r["compute_ns"] + r["comm_ns"] - r["overlap_ns"]  # |compute ∪ comm|
                    self.assertLessEqual(max(gpu, r["memory_ns"]), r["busy_ns"])
                    self.assertLessEqual(r["busy_ns"], gpu + r["memory_ns"])
                    its = r["iteration_figures"]
                    self.assertEqual(len(its), r["iterations"])
                    self.assertEqual(len(r["warmup"]), r["iterations"])
                    self.assertEqual(its[0]["start_ns"], r["start_ns"])
                    self.assertEqual(its[-1]["end_ns"], r["end_ns"])
                    for a, b in zip(its, its[1:]):
                        self.assertEqual(a["end_ns"], b["start_ns"])
                    for k in ("compute_ns", "comm_ns", "overlap_ns", "exposed_comm_ns", "memory_ns", "busy_ns",
                              "wall_ns"):
                        self.assertEqual(sum(w[k] for w in its), r[k], (name, r["rank"], k))
                    for w in its:
                        self.assertEqual(w["exposed_comm_ns"], w["comm_ns"] - w["overlap_ns"])
                        self.assertEqual(w["wall_ns"], w["end_ns"] - w["start_ns"])
                    ops = r["op_types"]
                    self.assertEqual(sum(o["count"] for o in ops.values()), r["comm_ops"])
                    self.assertEqual(r["comm_ops"], r["comm_kernels"] + r["p2p_copies"])
                    self.assertGreaterEqual(sum(o["time_ns"] for o in ops.values()), r["comm_ns"])
                    for o in ops.values():
                        self.assertLessEqual(o["exposed_ns"], o["time_ns"])
                    self.assertEqual(r["warmup"][0], t["options"]["warmup"])
                    self.assertFalse(any(r["warmup"][1:]))
                # Collectives: wait + transfer = own kernel time, exactly.
                wait = {r["rank"]: 0 for r in t["ranks"]}
                xfer = dict(wait)
                for col in t["collectives"]:
                    starts = {int(k): v for k, v in col["start_ns"].items()}
                    last = max(starts.values())
                    self.assertEqual(col["skew_ns"], last - min(starts.values()))
                    self.assertEqual(starts[col["last_rank"]], last)
                    for k, s in col["start_ns"].items():
                        e = col["end_ns"][k]
                        self.assertEqual(col["wait_ns"][k] + col["transfer_ns"][k], e - s)
                        self.assertEqual(col["wait_ns"][k], last - s)
                        self.assertGreaterEqual(col["transfer_ns"][k], 0)
                        wait[int(k)] += col["wait_ns"][k]
                        xfer[int(k)] += col["transfer_ns"][k]
                    # Every rank ends within 2 us of the others (same transfer, jitter 0-2 us).
                    ends = col["end_ns"].values()
                    self.assertLessEqual(max(ends) - min(ends), 2000)
                for r in t["ranks"]:
                    self.assertEqual(r["collective_wait_ns"], wait[r["rank"]])
                    self.assertEqual(r["collective_transfer_ns"], xfer[r["rank"]])
                self.assertEqual(len(t["collectives"]), t["collectives_count"])
                self.assertEqual(sum(g["collectives"] for g in t["process_groups"] if g["ranks"]),
                                 t["collectives_count"])
                # Stragglers, recomputed.
                thr = t["stragglers"]["threshold_ns"]
                last_arr = {r["rank"]: 0 for r in t["ranks"]}
                lost = dict(last_arr)
                for col in t["collectives"]:
                    if col["skew_ns"] > thr:
                        last_arr[col["last_rank"]] += 1
                        lost[col["last_rank"]] += sum(w for k, w in col["wait_ns"].items()
                                                      if int(k) != col["last_rank"])
                for s in t["stragglers"]["ranks"]:
                    self.assertEqual(s["last_arrivals"], last_arr[s["rank"]])
                    self.assertEqual(s["lost_ns"], lost[s["rank"]])

    def test_straggler_is_last(self):
        t = self.cases["ddp_multi"].truth
        s = {x["rank"]: x for x in t["stragglers"]["ranks"]}
        counted = [c for c in t["collectives"] if c["skew_ns"] > t["stragglers"]["threshold_ns"]]
        self.assertGreater(len(counted), 0)
        # Last at most of the collectives with a skew over the threshold (where the NCCL stream is
        # backlogged, the queue hides the lateness and the skew is the 0-2 us jitter).
        self.assertGreaterEqual(4 * s[5]["last_arrivals"], 3 * len(counted))
        for r, x in s.items():
            if r != 5:
                self.assertLess(x["last_arrivals"], s[5]["last_arrivals"])
                self.assertLess(x["lost_ns"], s[5]["lost_ns"])
        # The others wait; the straggler hardly does.
        w = {r["rank"]: r["collective_wait_ns"] for r in t["ranks"]}
        self.assertLess(w[5] * 10, min(v for r, v in w.items() if r != 5))

    def test_buckets(self):
        t = self.cases["ddp"].truth
        tails = t["bucket_tails"]
        by = {}
        for b in t["buckets"]:
            by.setdefault((b["rank"], b["iteration"]), []).append(b)
            self.assertEqual(b["overlap_ns"] + b["exposed_ns"], b["duration_ns"])
            self.assertGreaterEqual(b["queue_ns"], 4000)  # at least the launch latency
            self.assertGreater(b["launch_offset_ns"], 0)
            self.assertTrue(0 < b["launch_fraction"] <= 1.0)
        for x in tails:
            bl = by[(x["rank"], x["iteration"])]
            self.assertEqual(len(bl), x["buckets"])
            self.assertEqual(x["tail_ns"], max(0, x["last_bucket_end_ns"] - x["last_backward_compute_end_ns"]))
            self.assertLessEqual(x["tail_comm_ns"], x["tail_ns"])
            if x["warmup"]:
                self.assertEqual(len(bl), 1)  # DDP's first iteration: one bucket
            else:
                self.assertGreaterEqual(len(bl), 20)
            self.assertEqual([b["index"] for b in bl], list(range(len(bl))))
            self.assertEqual(sum(b["bytes"] for b in bl), sum(t["layer_bytes"]))

    def test_fsdp_prefetch(self):
        on, off = self.cases["fsdp_on"].truth, self.cases["fsdp_off"].truth

        def exposed(t, phase):
            return sum(a["exposed_ns"] for a in t["fsdp_allgathers"] if a["phase"] == phase and not a["warmup"])

        for ph in ("forward", "backward"):
            self.assertLess(exposed(on, ph) * 2, exposed(off, ph), ph)
        self.assertFalse(any(a["prefetched"] for a in off["fsdp_allgathers"]))
        pre = [a for a in on["fsdp_allgathers"] if a["prefetched"]]
        self.assertGreater(len(pre), 0)
        # Without prefetch, a forward all-gather is exposed (the compute stream waits for it) except
        # for what the previous layer's compute still hides.
        fwd_off = [a for a in off["fsdp_allgathers"] if a["phase"] == "forward"]
        self.assertGreater(sum(a["exposed_ns"] for a in fwd_off) * 2, sum(a["duration_ns"] for a in fwd_off))

    def test_tp_overlap(self):
        off, on = self.cases["tp_off"].truth, self.cases["tp_on"].truth
        for row in off["tp_ops"]:  # serialized on the compute stream: all exposed
            self.assertEqual(row["exposed_ns"], row["duration_ns"])
            self.assertEqual(row["stream"], 7)
        ex = sum(r["exposed_ns"] for r in on["tp_ops"])
        du = sum(r["duration_ns"] for r in on["tp_ops"])
        self.assertLess(ex * 2, du)
        self.assertTrue(all(r["stream"] == 28 for r in on["tp_ops"]))
        # Two TP groups of two ranks: process groups "1" and "2".
        self.assertEqual({c["process_group"] for c in on["collectives"]}, {"1", "2"})
        for c in on["collectives"]:
            self.assertEqual(len(c["ranks"]), 2)

    def test_files_say_what_the_truth_says(self):
        """Clock offsets applied exactly: every NCCL kernel's ts/dur in the files (parsed exactly) is
        its true start/end plus the rank's offset; the ranks of a host share one offset."""
        for name in ("ddp_multi", "fsdp_off", "tp_on", "ddp"):
            c = self.cases[name]
            t = c.truth
            hosts = {}
            for r, h in t["host_of_rank"].items():
                hosts.setdefault(h, set()).add(t["clock_offsets_ns"][r])
            for h, offs in hosts.items():
                self.assertEqual(len(offs), 1, name)
                o = next(iter(offs))
                O = t["options"]["clock_offset_us"] * 1000
                self.assertLessEqual(abs(o - h * O), 5000 if h else 0)
            want = {}
            for col in t["collectives"]:
                for r, s in col["start_ns"].items():
                    want[(int(r), col["process_group"], col["seq"])] = (s, col["end_ns"][r])
            seen = 0
            for path in c.trace_files():
                doc = load_trace(path)
                rank = doc["distributedInfo"]["rank"]
                base = int(doc["baseTimeNanoseconds"])
                off = t["clock_offsets_ns"][str(rank)]
                self.assertEqual(base, t["base_time_ns"])
                self.assertEqual(doc["hostname"], f"synth-host{t['host_of_rank'][str(rank)]}")
                nccl = 0
                for ev in doc["traceEvents"]:
                    a = ev.get("args", {})
                    if ev.get("cat") == "kernel" and "Collective name" in a:
                        nccl += 1
                        s, e = want[(rank, a["Process Group Name"], a["Seq"])]
                        self.assertEqual(base + dec_ns(ev["ts"]), s + off)
                        self.assertEqual(dec_ns(ev["dur"]), e - s)
                        seen += 1
                rt = next(x for x in t["ranks"] if x["rank"] == rank)
                self.assertEqual(nccl, rt["comm_kernels"])
            self.assertEqual(seen, sum(len(col["start_ns"]) for col in t["collectives"]))

    def test_deterministic(self):
        d = os.path.join(self.tmp, "det")
        digests = []
        for k in range(2):
            out = f"{d}{k}"
            subprocess.run([sys.executable, SYNTH, out, "--quiet", "--scenario", "fsdp", "--ranks", "2",
                            "--iterations", "2", "--layers", "4", "--seed", "11", "--truth", out + ".truth.json"],
                           check=True)
            h = hashlib.sha256()
            for f in sorted(os.listdir(out)) + [None]:
                with open(os.path.join(out, f) if f else out + ".truth.json", "rb") as fh:
                    h.update(fh.read())
            digests.append(h.hexdigest())
        self.assertEqual(digests[0], digests[1])

    # -- overlapprof against the truth --------------------------------------------------------
    def check_engine(self, c, steps=True, inputs=None):
        s = c.analyze(inputs)
        t = c.truth
        self.assertEqual(len(s["ranks"]), len(t["ranks"]))
        for tr, sr in zip(t["ranks"], s["ranks"]):
            self.assertEqual(sr["rank"], tr["rank"])
            for k in ("compute_ns", "comm_ns", "overlap_ns", "exposed_comm_ns", "memory_ns", "busy_ns", "start_ns",
                      "end_ns", "kernels", "comm_kernels", "memcpys", "memsets", "comm_ops"):
                self.assertEqual(sr[k], tr[k], f"{c.name} rank {tr['rank']} {k}")
            if steps:
                self.assertEqual(sr["iteration_source"], "ProfilerStep")
                self.assertEqual(sr["iterations"], tr["iterations"], f"{c.name} rank {tr['rank']} iterations")
                its = [w for w in s["iterations"] if w["rank"] == tr["rank"]]
                for w, tw in zip(its, tr["iteration_figures"]):
                    for k in ("start_ns", "end_ns", "step", "compute_ns", "comm_ns", "overlap_ns", "exposed_comm_ns",
                              "memory_ns", "busy_ns"):
                        self.assertEqual(w[k], tw[k], f"{c.name} rank {tr['rank']} iteration {tw['index']} {k}")
                # The step-time split of each iteration, from the truth's figures.
                splits = [x for x in s["step_breakdown"]["iterations"] if x["rank"] == tr["rank"]]
                self.assertEqual(len(splits), len(tr["iteration_figures"]))
                for x, tw in zip(splits, tr["iteration_figures"]):
                    where = f"{c.name} rank {tr['rank']} iteration {tw['index']} step_breakdown"
                    self.assertEqual(x["wall_ns"], tw["end_ns"] - tw["start_ns"], where)
                    self.assertEqual(x["compute_only_ns"], tw["compute_ns"] - tw["overlap_ns"], where)
                    self.assertEqual(x["comm_hidden_ns"], tw["overlap_ns"], where)
                    self.assertEqual(x["comm_exposed_ns"] + x["comm_waiting_ns"], tw["exposed_comm_ns"], where)
                    self.assertEqual(x["idle_ns"], x["wall_ns"] - tw["busy_ns"], where)
            self.check_step_identity(c, s)
            # Op types: count, bytes (nccl-tests size), kernel time, exposed time.
            rows = {o["op"]: o for o in s["op_types"] if o["rank"] == tr["rank"]}
            self.assertEqual(set(rows), set(tr["op_types"]))
            for op, o in tr["op_types"].items():
                for k in ("count", "bytes", "time_ns", "exposed_ns"):
                    self.assertEqual(rows[op][k], o[k], f"{c.name} rank {tr['rank']} op_types {op} {k}")
        return s

    PARTS = ("compute_only_ns", "comm_hidden_ns", "comm_exposed_ns", "comm_waiting_ns", "memory_only_ns", "idle_ns")

    def check_step_identity(self, c, s):
        """step_breakdown: the parts add up to the wall time exactly, none negative, for every iteration, rank
        (its steady iterations summed) and the run (the ranks summed)."""
        b = s["step_breakdown"]
        rows = b["iterations"] + b["ranks"] + [b["run"]]
        for x in rows:
            self.assertEqual(sum(x[k] for k in self.PARTS), x["wall_ns"], f"{c.name}: {x}")
            self.assertTrue(all(x[k] >= 0 for k in self.PARTS), f"{c.name}: {x}")
        for i, r in enumerate(b["ranks"]):
            steady = [x for x in b["iterations"] if x["rank"] == r["rank"] and not x["warmup"]]
            if r["basis"] == "steady iterations":
                self.assertEqual(r["iterations"], len(steady))
                for k in self.PARTS + ("wall_ns",):
                    self.assertEqual(r[k], sum(x[k] for x in steady), f"{c.name} rank {r['rank']} {k}")
            else:
                self.assertEqual(r["wall_ns"], s["ranks"][i]["wall_ns"])
            self.assertEqual(r["verdict"], s["ranks"][i]["verdict"])
        for k in self.PARTS + ("wall_ns",):
            self.assertEqual(b["run"][k], sum(r[k] for r in b["ranks"]), f"{c.name} run {k}")

    def test_engine_ddp(self):
        c = self.cases["ddp"]
        s = self.check_engine(c)
        for tr in c.truth["ranks"]:
            flags = [w["warmup"] for w in s["iterations"] if w["rank"] == tr["rank"]]
            self.assertEqual(flags, tr["warmup"], "DDP's iteration 0 (one bucket, 3x compute) is warm-up")
        self.compare_buckets(c)
        self.compare_cross_rank(c)

    def test_engine_multi_host_straggler(self):
        c = self.cases["ddp_multi"]
        self.check_engine(c)
        self.compare_buckets(c)
        self.compare_cross_rank(c)
        # What a user reads: the straggler named first, and the clock offset of the second host.
        s = c.summary
        self.assertEqual(s["stragglers"][0]["rank"], 5)
        msgs = [f["message"] for f in s["findings"] if f["analyzer"] == "cross_rank"]
        self.assertTrue(any(m.startswith("rank 5 arrived last") for m in msgs), msgs)
        applied = [d for d in s["clock_offsets"] if d["applied"]]
        self.assertTrue(applied and all(abs(d["offset_ns"] - 1500000) < 5000 for d in applied), s["clock_offsets"])
        # The step split: the others' exposed communication is partly waiting, for rank 5; rank 5 hardly waits.
        b = s["step_breakdown"]
        for r in b["ranks"]:
            if r["rank"] == 5:
                self.assertLess(r["comm_waiting_ns"] * 10, max(1, sum(x["comm_waiting_ns"] for x in b["ranks"])))
            else:
                self.assertGreater(r["comm_waiting_ns"], 0, r)
                self.assertEqual(r["waited_for"][0]["rank"], 5, r)
        self.assertEqual(b["run"]["waited_for"][0]["rank"], 5)

    def test_engine_bare(self):
        """No ProfilerStep, no Seq, no phase annotations: whole-trace figures exact; the iterations
        detected from the comm pattern should be the truth's steady ones (the warm-up's single bucket
        does not repeat: it is start-up, in no window; docs/analyzers.md "Iterations")."""
        c = self.cases["ddp_bare"]
        s = self.check_engine(c, steps=False)
        for tr, sr in zip(c.truth["ranks"], s["ranks"]):
            self.assertEqual(sr["iteration_source"], "comm pattern")
            self.assertEqual(sr["iterations"], tr["iterations"] - sum(tr["warmup"]), f"rank {tr['rank']}")
        self.compare_cross_rank(c)

    def test_engine_bare_sharded(self):
        """FSDP and TP without ProfilerStep: whole-trace figures exact. The iteration count detected
        from the comm pattern is not asserted: per-layer gaps inside backward are as long as the gap
        between iterations there, a documented limit (docs/analyzers.md: use --step-range)."""
        for name in ("fsdp_bare", "tp_bare"):
            with self.subTest(case=name):
                c = self.cases[name]
                s = self.check_engine(c, steps=False)
                # The host's `## forward ##` ranges give the steps (before: 61 per-layer windows for
                # TP): step k from forward k to forward k+1 (the last as long as the median step).
                for tr, sr in zip(c.truth["ranks"], s["ranks"]):
                    self.assertEqual(sr["iteration_source"], "forward ranges", sr["notices"])
                    self.assertEqual(sr["iterations"], tr["iterations"])
                    wins = [it for it in s["iterations"] if it["rank"] == tr["rank"]]
                    for it, t in zip(wins, tr["iteration_figures"]):
                        self.assertLessEqual(abs(it["start_ns"] - t["start_ns"]), 0.05 * t["wall_ns"], (it, t))

    def test_engine_fsdp(self):
        for name in ("fsdp_on", "fsdp_off"):
            with self.subTest(case=name):
                c = self.cases[name]
                self.check_engine(c)
                self.compare_fsdp(c)
                self.compare_cross_rank(c)
                # Without prefetch the forward all-gathers stall, and a finding says what to set.
                stall = [f for f in c.summary["findings"]
                         if f["analyzer"] == "sharded" and "parameter all-gathers in forward are exposed" in f["message"]]
                self.assertEqual(bool(stall), name == "fsdp_off", [f["message"] for f in c.summary["findings"]])

    def test_engine_tp(self):
        for name in ("tp_on", "tp_off"):
            with self.subTest(case=name):
                c = self.cases[name]
                self.check_engine(c)
                if name == "tp_off":
                    self.compare_tp(c)
                else:
                    # Overlapped TP runs its collectives on their own stream: not serialized with
                    # compute, so not in `tp` (which lists the serialized ones).
                    self.assertEqual(c.summary["tp"], [])
                self.compare_cross_rank(c)

    def test_engine_symmetric_memory_tp(self):
        """TP collectives as symmetric-memory kernels without NCCL args: communication through the
        host op that launched them (External id of symm_mem::*), figures exact, sizes unknown."""
        c = self.cases["tp_symm_mem"]
        s = self.check_engine(c)
        for tr, sr in zip(c.truth["ranks"], s["ranks"]):
            self.assertGreater(tr["comm_ns"], 0)
            self.assertEqual(sr["comm_rules"], {"host_op": tr["comm_ops"]})
            # (dependencies_inferred: the what-if model's inferred edges, an info counter, not a problem)
            self.assertEqual([q for q in sr["data_quality"] if q["counter"] != "dependencies_inferred"], [])

    def test_engine_peer_copy_tp(self):
        """TP collectives as peer-to-peer memcpys: communication (op p2p_copy, with bytes), not memory."""
        c = self.cases["tp_p2p_copy"]
        s = self.check_engine(c)
        for tr, sr in zip(c.truth["ranks"], s["ranks"]):
            self.assertGreater(tr["p2p_copies"], 0)
            self.assertEqual(sr["comm_kernels"], 0)
            self.assertEqual(sr["comm_rules"], {"peer_copy": tr["p2p_copies"]})
            self.assertEqual(set(tr["op_types"]), {"p2p_copy"})

    def test_engine_truth_in_dir(self):
        """With the truth written into the trace directory (--truth DIR/truth.json), the rank files are given one by one:
        `overlapprof analyze DIR` would take truth.json for a trace."""
        c = self.cases["in_dir"]
        self.assertTrue(os.path.exists(os.path.join(c.dir, "truth.json")))
        self.check_engine(c, inputs=c.trace_files())

    # -- analyzer sections: compared, disagreements noted (failures with SYNTH_STRICT=1) ---------
    def soft(self, cond, msg):
        if cond:
            return
        if STRICT:
            self.fail(msg)
        note(msg)

    def compare_buckets(self, c):
        s, t = c.summary, c.truth
        rows = {(b["rank"], b["iteration"], b["index"]): b for b in s.get("buckets", [])}
        for b in t["buckets"]:
            e = rows.get((b["rank"], b["iteration"], b["index"]))
            if e is None:
                self.soft(False, f"{c.name}: bucket rank {b['rank']} it {b['iteration']} #{b['index']} missing")
                continue
            for k in ("bytes", "launch_offset_ns", "queue_ns", "start_ns", "duration_ns", "exposed_ns"):
                self.soft(e[k] == b[k], f"{c.name}: bucket rank {b['rank']} it {b['iteration']} #{b['index']} {k}: "
                                        f"overlapprof {e[k]}, truth {b[k]}")
        stalls = {(x["rank"], x["iteration"]): x for x in s.get("bucket_stalls", [])}
        for x in t["bucket_tails"]:
            e = stalls.get((x["rank"], x["iteration"]))
            self.soft(e is not None and e["tail_ns"] == x["tail_ns"] and e["buckets"] == x["buckets"],
                      f"{c.name}: tail rank {x['rank']} it {x['iteration']}: overlapprof "
                      f"{e and (e['buckets'], e['tail_ns'])}, truth {(x['buckets'], x['tail_ns'])}")

    def compare_fsdp(self, c):
        s, t = c.summary, c.truth
        got = sorted((a["rank"], a["start_ns"], a["phase"], a["duration_ns"], a["exposed_ns"])
                     for a in s.get("fsdp_allgathers", []))
        want = sorted((a["rank"], a["start_ns"], a["phase"], a["duration_ns"], a["exposed_ns"])
                      for a in t["fsdp_allgathers"])
        self.soft(got == want, f"{c.name}: fsdp_allgathers differ ({len(got)} rows against {len(want)})")

    def compare_tp(self, c):
        s, t = c.summary, c.truth
        got = {(x["rank"], x["op"]): (x["count"], x["time_ns"], x["exposed_ns"]) for x in s.get("tp", [])}
        want = {(x["rank"], x["op"]): (x["count"], x["time_ns"], x["exposed_ns"]) for x in t["tp"]}
        self.soft(got == want, f"{c.name}: tp section: overlapprof lists {sorted(got)[:4]}..., truth "
                               f"{sorted(want)[:4]}... (overlapprof counts TP collectives only on compute streams)")

    def compare_cross_rank(self, c):
        s, t = c.summary, c.truth
        if "collectives" not in s:
            self.soft(False, f"{c.name}: no cross-rank sections in the summary")
            return
        offsets = {int(k): v for k, v in t["clock_offsets_ns"].items()}
        one_clock = len(set(offsets.values())) == 1
        per = {x["rank"]: x for x in s.get("cross_rank", [])}
        for r in t["ranks"]:
            x = per.get(r["rank"])
            ok = x is not None and (not one_clock or (x["wait_ns"] == r["collective_wait_ns"]
                                                      and x["transfer_ns"] == r["collective_transfer_ns"]))
            self.soft(ok, f"{c.name}: cross_rank rank {r['rank']}: overlapprof wait/transfer "
                          f"{x and (x['wait_ns'], x['transfer_ns'])}, truth "
                          f"{(r['collective_wait_ns'], r['collective_transfer_ns'])}")
        strag = {x["rank"]: x for x in s.get("stragglers", [])}
        for x in t["stragglers"]["ranks"]:
            e = strag.get(x["rank"])
            # With several clocks, overlapprof's estimated offsets (exact to about a microsecond) can
            # reorder near-simultaneous arrivals: compared exactly on one clock only.
            self.soft(e is not None and (not one_clock or (e["last_arrivals"] == x["last_arrivals"]
                                                           and e["others_wait_ns"] == x["lost_ns"])),
                      f"{c.name}: stragglers rank {x['rank']}: overlapprof "
                      f"{e and (e['last_arrivals'], e['others_wait_ns'])}, truth {(x['last_arrivals'], x['lost_ns'])}")
        if not one_clock:
            for d in s.get("clock_offsets", []):
                want = offsets[d["ranks"][0]] - offsets[min(offsets)]
                self.soft(d["reference"] or (d["applied"] and abs(d["offset_ns"] - want) <= 2000),
                          f"{c.name}: clock domain {d['domain']}: overlapprof {d['offset_ns']} "
                          f"(applied {d['applied']}), truth {want}")


class CommScenarioTest(unittest.TestCase):
    """All-to-all (MoE) and pipeline-parallel (1F1B) scenarios (synth_comm.py): exact figures."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="synth-comm-")
        specs = {
            "moe": ["--scenario", "moe"],
            "moe_minimal": ["--scenario", "moe", "--host-ops", "minimal"],
            "moe_2hosts": ["--scenario", "moe", "--hosts", "2", "--clock-offset-us", "1500"],
            "moe_2hosts_minimal": ["--scenario", "moe", "--hosts", "2", "--clock-offset-us", "1500",
                                   "--host-ops", "minimal"],
            "pp": ["--scenario", "pp"],
        }
        cls.cases = {}
        for name, args in specs.items():
            c = Case(cls.tmp, name, args)
            c.analyze()
            cls.cases[name] = c

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_moe(self, c, one_clock):
        s, t = c.summary, c.truth
        cs = s["collectives_summary"]
        # 5 all-to-alls (SendRecv kernels named from their host op) and 3 all-reduces, all matched.
        self.assertEqual(cs["matched"], t["matched"])
        self.assertEqual(cs["unmatched"], 0)
        self.assertEqual(cs["p2p_skipped"], 0)
        self.assertEqual(cs["matched_by"][t["matched_by"]], t["matched"], cs["matched_by"])
        for r in range(t["ranks_n"]):
            ops = {x["op"]: x for x in s["op_types"] if x["rank"] == r}
            self.assertEqual(ops["alltoall"]["count"], t["alltoalls_per_rank"])
            self.assertEqual(ops["allreduce"]["count"], t["allreduces_per_rank"])
            want_bytes = None if t["alltoall_bytes"] is None else t["alltoall_bytes"] * t["alltoalls_per_rank"]
            self.assertEqual(ops["alltoall"]["bytes"], want_bytes)
        # Stragglers: rank 5 last at 4 of the 5 all-to-alls, rank 2 at the other; the others lost
        # over 26 ms in the first one.
        self.assertGreater(t["first_alltoall_others_wait_ns"], 26_000_000)
        strag = {x["rank"]: x for x in s["stragglers"]}
        self.assertEqual(s["stragglers"][0]["rank"], 5)
        for x in t["stragglers"]:
            e = strag[x["rank"]]
            self.assertEqual(e["last_arrivals"], x["last_arrivals"], x)
            self.assertEqual(e["collectives_counted"], x["collectives_counted"], x)
            if one_clock:
                self.assertEqual(e["others_wait_ns"], x["others_wait_ns"], x)
            else:  # the estimated offset is exact to about a microsecond per collective
                self.assertLessEqual(abs(e["others_wait_ns"] - x["others_wait_ns"]), 5 * 7 * 3000, x)
        self.assertEqual(sum(1 for x in s["stragglers"] if x["last_arrivals"] > 0), len(t["stragglers"]))
        per = {x["rank"]: x for x in s["cross_rank"]}
        for x in t["cross_rank"]:
            e = per[x["rank"]]
            self.assertEqual(e["collectives"], x["collectives"])
            if one_clock:
                self.assertEqual((e["wait_ns"], e["transfer_ns"]), (x["wait_ns"], x["transfer_ns"]), x["rank"])
            else:
                self.assertLessEqual(abs(e["wait_ns"] - x["wait_ns"]), 8 * 3000, x["rank"])
        offsets = {int(k): v for k, v in t["clock_offsets_ns"].items()}
        if not one_clock:
            # Aligned from the 8 shared collectives (the 3 all-reduces alone are too few).
            doms = [d for d in s["clock_offsets"] if not d["reference"]]
            self.assertEqual(len(doms), 1)
            d = doms[0]
            self.assertTrue(d["applied"], d)
            self.assertEqual(d["samples"], t["matched"])
            self.assertLessEqual(abs(d["offset_ns"] - (offsets[d["ranks"][0]] - offsets[0])), 2000, d)
        self.assertNotIn("point_to_point", s)

    def test_moe(self):
        self.check_moe(self.cases["moe"], True)

    def test_moe_named_by_the_annotation_around_the_launch(self):
        self.check_moe(self.cases["moe_minimal"], True)

    def test_moe_clocks_aligned_with_the_alltoalls_counted(self):
        self.check_moe(self.cases["moe_2hosts"], False)
        self.check_moe(self.cases["moe_2hosts_minimal"], False)

    def test_pp(self):
        c = self.cases["pp"]
        s, t = c.summary, c.truth
        p = s["point_to_point"]
        self.assertEqual(p["pairs"], t["pairs"])
        self.assertEqual((p["unpaired_sends"], p["unpaired_recvs"]), (0, 0))
        self.assertEqual(p["notices"], [])
        self.assertEqual(p["recv_wait_ns"], t["recv_wait_ns"])
        self.assertEqual(p["ranks"], t["ranks"])
        self.assertEqual(p["iterations"], t["iterations_rows"])
        # The slow stage is the one everyone waits on.
        self.assertEqual(t["bottleneck_rank"], t["slow_stage"])
        self.assertEqual(p["bottleneck_rank"], t["slow_stage"])
        waits = [f for f in s["findings"] if "pipeline stage the others wait on" in f["message"]]
        self.assertEqual([f["rank"] for f in waits], [t["slow_stage"]])
        cs = s["collectives_summary"]
        self.assertEqual(cs["p2p_skipped"], 2 * t["pairs"])
        self.assertEqual(cs["matched"], 0)
        # The terminal's line.
        out = subprocess.run([CLI, "analyze", c.dir], capture_output=True, text=True, timeout=120).stdout
        # The line, with its continuation lines (wrapped at 100 columns, indented) joined.
        text = re.sub(r"\n +", " ", out)
        line = [x for x in text.splitlines() if x.startswith("point-to-point:")]
        self.assertEqual(len(line), 1, out)
        self.assertIn(f"{t['pairs']} send/recv pairs", line[0])
        self.assertIn(f"the stage everyone waits on: rank {t['slow_stage']}", line[0])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_synth.py PATH_TO_OVERLAPPROF")
    CLI = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
