#!/usr/bin/env python3
"""Hostile input to the readers and the gate, through the real CLI.

Each test reproduces an attack and asserts the documented outcome: the exit code, one line on
stderr, and that nothing was waited on, written through, or read as zero.

usage: hostile_input_test.py PATH/TO/overlapprof
"""
import gzip
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
SMALL = os.path.join(DATA, "kineto", "cpu_only_ops.json.gz")   # one rank, 1 MB inflated
A100_2 = os.path.join(DATA, "kineto", "a100_2rank_rank0.json.gz")
NSYS_2GPU = os.path.join(DATA, "nsys", "mfu_2gpu_before.sqlite")
CLI = None


def run(*args, env=None, timeout=60):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([CLI, *args], capture_output=True, timeout=timeout, env=e)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


class HostileInputTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="overlapprof-hostile-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def summary(self, trace=A100_2, name="base.summary.json"):
        out = self.path(name)
        rc, _, err = run("analyze", trace, "--json", out, "--force")  # the same name again: replaced
        self.assertEqual(rc, 0, err)
        return out

    # --- gzip bombs -------------------------------------------------------------------------
    def test_gzip_bomb_is_refused_with_one_line(self):
        # 40 members of 8 MiB of spaces (320 MiB inflated, ~320 KiB compressed); the limit is
        # lowered to 64 MiB by the environment so that the test stays small.
        member = zlib.compressobj(9, zlib.DEFLATED, 31)
        one = member.compress(b" " * (8 << 20)) + member.flush()
        bomb = self.path("bomb.json.gz")
        with open(bomb, "wb") as f:
            f.write(gzip.compress(b'{"traceEvents": [') + one * 40 + gzip.compress(b"]}"))
        rc, out, err = run("analyze", bomb, env={"OVERLAPPROF_MAX_INFLATED_BYTES": str(64 << 20)})
        self.assertEqual(rc, 2, err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("bomb.json.gz: gzip data inflates to more than 64 MiB, the limit set by "
                      "OVERLAPPROF_MAX_INFLATED_BYTES", err)
        # Without a limit the bomb streams: the whitespace between events is never held,
        # so the 320 MiB cost their compressed size and a bounded window, not their inflated size.
        e = dict(os.environ)
        e.pop("OVERLAPPROF_MAX_INFLATED_BYTES", None)
        e["OVERLAPPROF_MAX_INFLATE_RATIO"] = "0"  # and no ratio limit (the next test has it)
        # A wrapper whose only child is the CLI: its RUSAGE_CHILDREN is the CLI's peak RSS.
        wrap = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
                "sys.stderr.buffer.write(r.stderr); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
        p = subprocess.run([sys.executable, "-c", wrap, CLI, "analyze", bomb], capture_output=True, env=e, timeout=120)
        self.assertNotIn(b"inflates to more than", p.stderr)
        self.assertLess(int(p.stdout), 200 << 10, "peak RSS (KiB) of a streamed 320 MiB bomb")
        # Under the limit, the same kind of input is read (and then refused as no trace): the
        # limit, not the ratio, decides.
        small = self.path("small.json.gz")
        with open(small, "wb") as f:
            f.write(gzip.compress(b'{"traceEvents": [' + b" " * (1 << 20) + b"]}"))
        rc, _, err = run("analyze", small, env={"OVERLAPPROF_MAX_INFLATED_BYTES": str(64 << 20)})
        self.assertNotIn("inflates to more than", err)

    # --- FIFOs, sockets, devices, directory entries -------------------------------------------
    def test_gzip_bomb_is_refused_by_its_ratio_by_default(self):
        # 40 members of 8 MiB of spaces: 320 MiB inflated from ~320 KiB (about 1000:1). With no
        # setting, past 256 MiB inflated the ratio (over 200:1) refuses it, in bounded memory.
        member = zlib.compressobj(9, zlib.DEFLATED, 31)
        one = member.compress(b" " * (8 << 20)) + member.flush()
        bomb = self.path("bomb.json.gz")
        with open(bomb, "wb") as f:
            f.write(gzip.compress(b'{"traceEvents": [') + one * 40 + gzip.compress(b"]}"))
        e = {k: v for k, v in os.environ.items() if not k.startswith("OVERLAPPROF_MAX_INFLATE")}
        for cmd in (["analyze", bomb], ["import", bomb, "-o", self.path("bomb.db")]):
            p = subprocess.run([CLI, *cmd], capture_output=True, text=True, env=e, timeout=120)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
            self.assertIn("bomb.json.gz: gzip data inflates to 200 or more times its compressed size", p.stderr)
        # A repetitive file under the floor is no bomb: 8 MiB of spaces at 1000:1 is read.
        small = self.path("small.json.gz")
        with open(small, "wb") as f:
            f.write(gzip.compress(b'{"traceEvents": [') + one + gzip.compress(b"]}"))
        p = subprocess.run([CLI, "analyze", small], capture_output=True, text=True, env=e, timeout=60)
        self.assertNotIn("compressed size", p.stderr)

    def test_fifo_and_device_inputs_are_refused_at_once(self):
        fifo = self.path("t.json")
        os.mkfifo(fifo)
        rc, _, err = run("analyze", fifo, timeout=20)  # a blocking open would hang until killed
        self.assertEqual(rc, 2, err)
        self.assertIn("t.json: a FIFO, not a regular file: refused", err)
        rc, _, err = run("analyze", "/dev/zero", timeout=20)
        self.assertEqual(rc, 2, err)
        self.assertIn("a character device, not a regular file", err)
        rc, _, err = run("check", fifo, "--baseline", self.summary(), timeout=20)
        self.assertEqual(rc, 2, err)
        # The gate's policy file too: opened without blocking, a FIFO refused at once.
        rc, _, err = run("check", self.summary(name="new.summary.json"), "--baseline", self.summary(),
                         "--policy", fifo, timeout=20)
        self.assertEqual(rc, 2, err)
        self.assertIn("cannot read the policy file: a FIFO, not a regular file: refused", err)

    def test_directory_entries_that_cannot_be_read_are_reported(self):
        d = self.path("traces")
        os.makedirs(os.path.join(d, "sub"))
        shutil.copy(SMALL, d)
        os.mkfifo(os.path.join(d, "sub", "rank1.json"))
        rc, _, err = run("analyze", d, timeout=20)
        self.assertEqual(rc, 2, err)
        self.assertIn("sub/rank1.json: a FIFO, not a regular file: refused", err)
        os.remove(os.path.join(d, "sub", "rank1.json"))
        os.symlink(self.path("gone.json"), os.path.join(d, "rank2.json"))
        rc, _, err = run("analyze", d, timeout=20)
        self.assertEqual(rc, 2, err)
        self.assertIn("rank2.json: a broken symbolic link", err)
        os.remove(os.path.join(d, "rank2.json"))
        rc, _, err = run("analyze", d)
        self.assertEqual(rc, 0, err)

    # --- invalid UTF-8 --------------------------------------------------------------------------
    def test_invalid_utf8_never_exits_5(self):
        bad = os.path.join(self.tmp.encode(), b"rank\xff\xfe.json.gz")
        shutil.copy(A100_2, bad)
        out = self.path("s.json")
        p = subprocess.run([CLI, "analyze", bad, "--json", out], capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        s = json.load(open(out, encoding="utf-8"))  # valid UTF-8, strict
        self.assertTrue(s["ranks"][0]["source"].endswith("rank\ufffd\ufffd.json.gz"), s["ranks"][0]["source"])
        p = subprocess.run([CLI, "check", bad, "--baseline", out, "--markdown", self.path("c.md"),
                            "--junit", self.path("j.xml")], capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        open(self.path("c.md"), encoding="utf-8").read()
        import xml.etree.ElementTree as ET
        ET.parse(self.path("j.xml"))
        # Raw bytes in a kernel name inside the trace: read, replaced, counted.
        doc = gzip.decompress(open(A100_2, "rb").read())
        i = doc.index(b'"name": "') + len(b'"name": "')
        raw = self.path("raw.json")
        open(raw, "wb").write(doc[:i] + b"\xc3\x28" + doc[i:])
        rc, stdout, err = run("analyze", raw, "--json", "-")
        self.assertEqual(rc, 0, err)
        dq = {c["counter"]: c["value"] for c in json.loads(stdout)["ranks"][0]["data_quality"]}
        self.assertEqual(dq.get("invalid_utf8_replaced"), 1, dq)

    # --- outputs ------------------------------------------------------------------------------
    def test_partial_file_is_not_written_through_a_link(self):
        victim = self.path("victim")
        open(victim, "w").write("precious")
        out = self.path("s.json")
        os.symlink(victim, out + ".partial")
        rc, _, err = run("analyze", SMALL, "--json", out)
        self.assertEqual(rc, 0, err)
        self.assertEqual(open(victim).read(), "precious")
        self.assertEqual(json.load(open(out))["schema"], "overlapprof.summary/1")
        self.assertFalse(os.path.lexists(out + ".partial"))

    def test_markdown_escapes_paths(self):
        base = self.summary()
        odd = self.path("run|x](javascript:e) <b>`.summary.json")
        shutil.copy(base, odd)
        md = self.path("s.md")
        rc, _, err = run("check", odd, "--baseline", base, "--markdown", md)
        self.assertEqual(rc, 0, err)
        text = open(md).read()
        self.assertIn("run\\|x\\]\\(javascript:e\\) \\<b\\>\\`.summary.json", text)
        self.assertNotIn("<b>", text)

    def test_kineto_json_grammar_numbers_and_escapes(self):
        # "ts": 0005 is no number (the event is counted malformed); \uzzzz is not JSON (exit 2, one
        # line); an escaped lone surrogate is stored as U+FFFD, never as invalid UTF-8.
        def trace(name, ts="1"):
            p = self.path("k.json")
            with open(p, "w") as f:
                f.write('{"distributedInfo": {"rank": 0}, "traceEvents": [{"ph": "X", "cat": "kernel", "name": "%s", '
                        '"pid": 0, "tid": 7, "ts": %s, "dur": 1, "args": {"stream": 7}}, {"ph": "X", "cat": "kernel", '
                        '"name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 1, "args": {"stream": 7}}]}' % (name, ts))
            return p
        out = self.path("s.json")
        rc, _, err = run("analyze", trace("a", "0005"), "--json", out)
        self.assertEqual(rc, 0, err)
        counters = {c["counter"]: c["value"] for c in json.load(open(out))["ranks"][0]["data_quality"]}
        self.assertEqual(counters.get("events_malformed"), 1)
        rc, _, err = run("analyze", trace("a\\uzzzz"))
        self.assertEqual(rc, 2, err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("k.json: not JSON: a string holds an invalid escape", err)
        db = self.path("k.db")
        rc, _, err = run("import", trace("lone\\ud800x"), "-o", db)
        self.assertEqual(rc, 0, err)
        con = sqlite3.connect(db)
        con.text_factory = bytes
        names = [r[0] for r in con.execute("SELECT name FROM names")] if con.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'names'").fetchone() else []
        con.close()
        blob = open(db, "rb").read()
        self.assertIn("lone\ufffdx".encode(), blob)
        self.assertNotIn(b"lone\xed\xa0\x80x", blob)
        for n in names:
            n.decode("utf-8")

    # --- terminal escapes in what the CLI prints ---------------------------------------------
    def assert_no_control(self, text, where):
        bad = [c for c in text if (ord(c) < 0x20 and c not in "\n") or 0x7f <= ord(c) <= 0x9f]
        self.assertEqual(bad, [], f"{where}: {text!r}")

    def run_bytes(self, *args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        p = subprocess.run([CLI, *args], capture_output=True, timeout=60, env=e)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def test_terminal_escapes_in_paths_names_and_errors_are_escaped(self):
        # ESC (CSI, OSC 52 to the clipboard), BEL, U+009B (CSI as a C1 control) and a raw 0x9B byte.
        red = self.path("rank\x1b[31mred\x1b]52;c;eA==\x07\u009b\udc9b.json.gz")
        shutil.copy(SMALL, red)
        rc, out, err = self.run_bytes("analyze", red, "--per-iteration", "--ranks", "all")  # each rank's file named
        self.assertEqual(rc, 0, err)
        self.assert_no_control(out, "analyze stdout")
        self.assert_no_control(err, "analyze stderr")
        self.assertIn("rank\\x1b[31mred\\x1b]52;c;eA==\\x07\\u009b\\x9b.json.gz", out)
        # A kernel name that looks like communication is named in a notice.
        events = [{"ph": "X", "cat": "kernel", "name": "evil\x1b[2J\x1b[Hmoe_alltoall_kernel\u009b" + str(i), "pid": 0,
                   "tid": 7, "ts": 10 + 10 * i, "dur": 5, "args": {"stream": 7, "device": 0}} for i in range(2)]
        kt = self.path("k.json")
        with open(kt, "w") as f:
            json.dump({"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": events}, f)
        rc, out, err = self.run_bytes("analyze", kt)
        self.assertIn("evil\\x1b[2J\\x1b[Hmoe_alltoall_kernel\\u009b", out + err)
        self.assert_no_control(out, "analyze stdout")
        self.assert_no_control(err, "analyze stderr")
        # The error line names the path, escaped; so do compare's table and check's lines.
        rc, out, err = self.run_bytes("analyze", self.path("missing\x1b[31m.json"))
        self.assertEqual(rc, 2)
        self.assertIn("missing\\x1b[31m.json", err)
        self.assert_no_control(err, "error line")
        base = self.summary()
        s = json.load(open(base))
        s["ranks"][0]["data_quality"] = [{"counter": "x\x1b[31m", "severity": "info", "value": 1}]
        odd = self.write("odd\x1b[1m.summary.json", s)
        rc, out, err = self.run_bytes("check", odd, "--baseline", base)
        self.assertEqual(rc, 4, err)
        self.assertIn("x\\x1b[31m = 1", err)
        self.assertIn("odd\\x1b[1m.summary.json", out)
        self.assert_no_control(out, "check stdout")
        self.assert_no_control(err, "check stderr")

    # --- malformed baselines and lost data ----------------------------------------------------
    def write(self, name, s):
        p = self.path(name)
        with open(p, "w") as f:
            json.dump(s, f)
        return p

    def test_malformed_baseline_exits_2_not_zero(self):
        base = self.summary()
        good = json.load(open(base))
        mutations = {
            "string": lambda s: s["ranks"][0].__setitem__("comm_ns", str(s["ranks"][0]["comm_ns"])),
            "null": lambda s: s["ranks"][0].__setitem__("overlap_ns", None),
            "empty ranks": lambda s: s.__setitem__("ranks", []),
            "missing": lambda s: s["iterations"][0].pop("wall_ns"),
            "negative": lambda s: s["ranks"][0].__setitem__("exposed_comm_ns", -1),
            "overflow": lambda s: (s["ranks"][0].__setitem__("comm_ns", 2**63 - 1),
                                   s["ranks"].append(dict(s["ranks"][0]))),
        }
        for what, mutate in mutations.items():
            s = json.loads(json.dumps(good))
            mutate(s)
            bad = self.write("bad.summary.json", s)
            rc, out, err = run("check", base, "--baseline", bad)
            self.assertEqual(rc, 2, f"{what}: {out}{err}")
            self.assertIn("malformed summary", err, what)
            self.assertEqual(err.count("\n"), 1, err)
        # NaN is not JSON: refused; a duplicate key keeps its first value, with a warning.
        text = open(base).read().replace('"comm_ns": ', '"comm_ns": NaN, "x": ', 1)
        open(self.path("nan.summary.json"), "w").write(text)
        rc, _, err = run("check", base, "--baseline", self.path("nan.summary.json"))
        self.assertEqual(rc, 2, err)
        self.assertIn("invalid JSON", err)
        text = open(base).read().replace('"comm_ns": ', '"comm_ns": 1, "comm_ns": ', 1)
        open(self.path("dup.summary.json"), "w").write(text)
        rc, out, err = run("compare", base, self.path("dup.summary.json"))
        self.assertIn('key "comm_ns" given twice in one object: the first value is used', err)
        self.assertEqual(rc, 0, err)
        self.assertIn("comm_per_iter", out)

    def test_negative_counter_cannot_cancel_lost_data(self):
        base = self.summary()
        s = json.load(open(base))
        s["ranks"][0]["data_quality"] += [
            {"counter": "records_dropped_cupti", "severity": "error", "value": 7, "description": "x"},
            {"counter": "records_dropped_hooks", "severity": "error", "value": -7, "description": "x"}]
        s["data_quality"]["errors"] = 2
        rc, _, err = run("check", self.write("lossy.summary.json", s), "--baseline", base)
        self.assertEqual(rc, 2, err)
        self.assertIn("value is negative", err)
        # Counters removed from the ranks while the run says they were set: refused, not passed.
        s = json.load(open(base))
        s["data_quality"]["errors"] = 1
        rc, _, err = run("check", self.write("hidden.summary.json", s), "--baseline", base)
        self.assertEqual(rc, 2, err)

    def test_check_exits_4_whenever_analyze_does(self):
        # A store whose recording lost CUPTI records, of another world size than the baseline:
        # analyze exits 4; check must too (lost data decides before comparability, exit 2).
        store = self.path("lossy.db")
        rc, _, err = run("import", A100_2, "-o", store)
        self.assertEqual(rc, 0, err)
        db = sqlite3.connect(store)
        db.execute("INSERT OR REPLACE INTO stats(name, severity, value, description) "
                   "VALUES('records_dropped_cupti', 'error', 3, 'x')")
        db.commit()
        db.close()
        rc, _, err = run("analyze", store)
        self.assertEqual(rc, 4, err)
        base = json.load(open(self.summary()))
        base["ranks"][0]["world_size"] = 8
        other = self.write("other.summary.json", base)
        rc, out, err = run("check", store, "--baseline", other)
        self.assertEqual(rc, 4, out + err)
        self.assertIn("records_dropped_cupti = 3", err)
        self.assertIn("not comparable, shown because the new run lost data: the runs are not comparable: world size",
                      out)


    def test_store_whose_two_versions_disagree_is_exit_2_naming_both(self):
        store = self.path("versions.db")
        rc, _, err = run("import", A100_2, "-o", store)
        self.assertEqual(rc, 0, err)
        db = sqlite3.connect(store)
        db.execute("UPDATE meta SET value = '2.0' WHERE key = 'schema_version'")
        db.commit()
        db.close()
        rc, out, err = run("analyze", store)
        self.assertEqual(rc, 2, out + err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("user_version 1003", err)
        self.assertIn("'2.0'", err)

    # --- Nsight Systems exports: the direct page reader says what SQL says, or exit 2 ------

    def nsys_copy(self, name="export.sqlite"):
        out = self.path(name)
        shutil.copy(NSYS_2GPU, out)
        return out

    def analyze_both_ways(self, export):
        """analyze through the direct page reader and through SQL: (rc, summary or stderr) each."""
        results = []
        for sql in ("0", "1"):
            out = self.path(f"sql{sql}.summary.json")
            rc, _, err = run("analyze", export, "--json", out, env={"OVERLAPPROF_NSYS_SQL": sql})
            if rc in (0, 4):
                with open(out) as f:
                    results.append((rc, json.load(f)))
            else:
                results.append((rc, err.strip()))
        return results

    def test_nsys_kernel_times_declared_real_read_as_sql_reads_them(self):
        # SQLite reads a REAL column as REAL even where the file holds integers: the direct
        # reader must leave such a table to SQL rather than read kernels that SQL skips.
        export = self.nsys_copy()
        db = sqlite3.connect(export)
        (ddl,) = db.execute("SELECT sql FROM sqlite_schema WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'").fetchone()
        ddl = ddl.replace("CUPTI_ACTIVITY_KIND_KERNEL", "k_real", 1)
        ddl, n = re.subn(r"(\n\s*(?:start|end)\s+)INTEGER", r"\1REAL   ", ddl)
        self.assertEqual(n, 2, ddl[:200])
        db.executescript(ddl + "; INSERT INTO k_real SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL;"
                         "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; ALTER TABLE k_real RENAME TO CUPTI_ACTIVITY_KIND_KERNEL;")
        db.commit()
        db.close()
        direct, sql = self.analyze_both_ways(export)
        self.assertEqual(direct, sql)

    def test_nsys_damaged_record_is_exit_2_not_a_phantom_rank(self):
        # A kernel record whose header claims one byte less than its serial types: SQL calls the
        # file malformed; the direct reader must too (not read the columns past it as NULL).
        export = self.nsys_copy()
        db = sqlite3.connect(export)
        (root,) = db.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'").fetchone()
        (page_size,) = db.execute("PRAGMA page_size").fetchone()
        db.close()
        data = bytearray(open(export, "rb").read())
        page = root
        while data[(page - 1) * page_size] == 0x05:  # down the leftmost path to a leaf
            at = (page - 1) * page_size
            cell = int.from_bytes(data[at + 12:at + 14], "big")
            page = int.from_bytes(data[at + cell:at + cell + 4], "big")
        at = (page - 1) * page_size
        self.assertEqual(data[at], 0x0D)
        cell = at + int.from_bytes(data[at + 8:at + 10], "big")
        while data[cell] & 0x80:  # the payload size
            cell += 1
        cell += 1
        while data[cell] & 0x80:  # the rowid
            cell += 1
        cell += 1
        self.assertLess(data[cell], 0x80)
        data[cell] -= 1  # the record header's size
        with open(export, "wb") as f:
            f.write(bytes(data))
        direct, sql = self.analyze_both_ways(export)
        self.assertEqual(sql[0], 2, "SQL reads the damaged export")
        self.assertEqual(direct[0], 2, "the direct reader reads the damaged export: ranks " +
                         ", ".join(r["source"] for r in direct[1]["ranks"]) if direct[0] in (0, 4) else direct)
        self.assertIn("corrupted SQLite file", direct[1])
        self.assertEqual(len(direct[1].splitlines()), 1, direct[1])

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    CLI = os.path.abspath(sys.argv.pop(1))
    import warnings
    warnings.simplefilter("ignore", ResourceWarning)
    unittest.main(verbosity=2)
