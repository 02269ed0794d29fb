#!/usr/bin/env python3
"""End-to-end tests of `overlapprof report --html`: the page is opened in headless Chromium and
checked as a browser runs it.

- No JavaScript error: no console message at all in Chromium's log (the page logs nothing when
  it works), the page's own error box stays empty, and it marks itself data-status="ok".
- The numbers are the JSON summary's: every element carrying data-k (a path into the summary
  written by the same run, e.g. "ranks.0.overlap_ratio") has data-v equal to the summary's value
  there, and shows it formatted by the rule its data-f names (checked here independently, with
  JavaScript's rounding). The per-rank overlap ratio, exposed communication and bound cells exist
  for every rank, and every analyzer section and data-quality counter of the summary is shown.
- Self-contained: no src/href/url() that could load anything; nothing but the page itself.
- The embedded timeline is the summary's: lane lengths add up to compute_ns/comm_ns/memory_ns/
  overlap_ns where exact; a lane with too many intervals is down-sampled within its limit and the
  page says so; with more than 64 ranks only 64 timelines are drawn, and the page says so.
- Strings from the data (file paths, kernel names) are text, never markup.
- The cross-rank view (a multi-rank run from tests/synth/synth.py with a straggler): one wait/transfer
  bar per rank with the summary's numbers, one scatter dot per listed collective, the straggler line
  naming the slow rank, the clock domains; absent (and no error) without a non-empty cross_rank.
- The harness itself: an injected error is caught.
- The page's code (reports/html/, embedded at build time by cmake/EmbedAssets.cmake): every script
  parses on its own (`node --check`, as is and inside the strict-mode function the page runs it in;
  skipped with a message when node is not installed); no asset contains what would end its inline
  element early; every asset is used by page.html; the page the binary writes is exactly page.html
  assembled from these files (so a stale build is caught too).

Needs Chromium (scripts/setup.sh installs it); fails when it is missing.

Usage: html_test.py PATH_TO_OVERLAPPROF   (ctest passes it)
"""
import decimal
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

CLI = None
BROWSER = None
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "kineto")
SYNTH = os.path.join(HERE, "..", "synth", "synth.py")
PAGE_DIR = os.path.join(HERE, "..", "..", "reports", "html")
CORE_KEYS = {"schema", "ranks", "iterations", "verdict", "data_quality", "tool"}

# Chromium 156 (Debian 12): --headless is the new headless mode; --dump-dom prints the DOM after
# the page has run (--virtual-time-budget lets its scripts finish first); console messages go to
# stderr as `[...:INFO:CONSOLE:LINE] "MESSAGE", source: URL (LINE)` with --enable-logging=stderr.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
                  "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000"]


def find_browser():
    for name in ("chromium", "chromium-browser", "chromium-headless-shell", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run(*args, timeout=300):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def render(path, workdir):
    """(dumped DOM, console messages) of the page at `path` as headless Chromium runs it."""
    profile = tempfile.mkdtemp(prefix="profile-", dir=workdir)
    p = subprocess.run([BROWSER, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                        "file://" + os.path.abspath(path)], capture_output=True, text=True, timeout=120)
    shutil.rmtree(profile, ignore_errors=True)
    if p.returncode != 0 or "<html" not in p.stdout:
        raise AssertionError(f"chromium failed (exit {p.returncode}): {p.stderr[-2000:]}")
    console = [line for line in p.stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]
    return p.stdout, console


class Dom(html.parser.HTMLParser):
    """Elements with data-k (their attributes and text), and a few others the tests look for."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.cells = []      # dicts: k, v, f, text
        self.open = []       # [tag, depth, record]
        self.ids = {}        # id -> (tag, attrs, text list)
        self.tags = []       # (tag, attrs) of every element
        self.body_status = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "body":
            self.body_status = a.get("data-status")
        for o in self.open:
            if o[0] == tag:
                o[1] += 1
        rec = None
        if "data-k" in a:
            rec = {"k": a["data-k"], "v": a.get("data-v"), "f": a.get("data-f"), "text": []}
            self.cells.append(rec)
        if "id" in a:
            rec2 = {"tag": tag, "attrs": a, "text": []}
            self.ids[a["id"]] = rec2
            self.open.append([tag, 1, rec2])
        if rec is not None:
            self.open.append([tag, 1, rec])

    def handle_endtag(self, tag):
        for o in self.open:
            if o[0] == tag:
                o[1] -= 1
        self.open = [o for o in self.open if o[1] > 0]

    def handle_data(self, data):
        for o in self.open:
            o[2]["text"].append(data)


def parse_dom(text):
    d = Dom()
    d.feed(text)
    for c in d.cells:
        c["text"] = "".join(c["text"])
    for r in d.ids.values():
        r["text"] = "".join(r["text"])
    return d


def resolve(doc, path):
    o = doc
    for part in path.split("."):
        if isinstance(o, list):
            o = len(o) if part == "length" else o[int(part)]
        elif isinstance(o, dict):
            o = o[part]
        else:
            raise KeyError(path)
    return o


decimal.getcontext().prec = 60


def to_fixed(x, digits):
    """JavaScript's Number.prototype.toFixed: the exact binary value rounded half up."""
    d = decimal.Decimal(abs(x)).quantize(decimal.Decimal(1).scaleb(-digits), rounding=decimal.ROUND_HALF_UP)
    return ("-" if x < 0 else "") + f"{d:.{digits}f}"


def check_text(tc, cell, value):
    """The text the page shows for `value` under format data-f (the page's rules, restated)."""
    kind, text, where = cell["f"], cell["text"], cell["k"]
    if value is None:
        tc.assertEqual(text, "n/a", where)
        return
    if kind == "pct":
        tc.assertEqual(text, to_fixed(float(value) * 100, 2) + "%", where)
    elif kind == "dur":
        n = float(value)
        if abs(n) < 1e3:
            tc.assertTrue(text.endswith(" ns"), where)
            tc.assertEqual(float(text[:-3]), n, where)
        elif abs(n) < 1e6:
            tc.assertEqual(text, to_fixed(n / 1e3, 2) + " \u00b5s", where)
        elif abs(n) < 1e9:
            tc.assertEqual(text, to_fixed(n / 1e6, 2) + " ms", where)
        else:
            tc.assertEqual(text, to_fixed(n / 1e9, 3) + " s", where)
    elif kind == "int":
        tc.assertEqual(text, f"{int(value):,}", where)
        tc.assertEqual(int(value), value, where)
    elif kind == "num":
        tc.assertEqual(float(text), value, where)
    elif kind == "bool":
        tc.assertEqual(text, "yes" if value else "no", where)
    elif kind == "json":
        tc.assertEqual(json.loads(text), value, where)
    elif kind == "str":
        tc.assertIsInstance(value, str, where)
        tc.assertEqual(text, value, where)
    else:
        tc.fail(f"{where}: unknown format {kind!r}")


def embedded(page, element_id):
    m = re.search(r'<script type="application/json" id="%s">(.*?)</script>' % element_id, page, re.S)
    assert m, element_id
    return json.loads(m.group(1))


def section_dom(dom_text, section_id):
    """The parsed subtree of <section id=section_id> (sections are not nested), or None."""
    m = re.search(r'<section id="%s"[^>]*>.*?</section>' % re.escape(section_id), dom_text, re.S)
    return (parse_dom(m.group(0)), m.group(0)) if m else (None, None)


def with_summary(page, summary):
    """The page with another summary embedded (as the report writes it: '<' escaped)."""
    text = json.dumps(summary, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")
    return re.sub(r'(<script type="application/json" id="summary">).*?(</script>)',
                  lambda m: m.group(1) + text + m.group(2), page, count=1, flags=re.S)


def decode_lane(lane):
    d, t, out = lane["d"], 0, []
    for i in range(0, len(d), 2):
        t += d[i]
        s = t
        t += d[i + 1]
        out.append((s, t))
    return out


class Report:
    """One `overlapprof report --html --json` run and its page as Chromium rendered it."""

    def __init__(self, workdir, name, inputs, expect_rc=0):
        out = os.path.join(workdir, "reports")
        os.makedirs(out, exist_ok=True)
        self.html_path = os.path.join(out, name + ".html")
        self.json_path = os.path.join(out, name + ".summary.json")
        rc, _, err = run("report", *inputs, "--html", self.html_path, "--json", self.json_path)
        assert rc == expect_rc, f"report {name}: exit {rc}: {err}"
        assert not os.path.exists(self.html_path + ".partial")
        with open(self.json_path) as f:
            self.summary = json.load(f)
        with open(self.html_path, encoding="utf-8") as f:
            self.page = f.read()
        self.timeline = embedded(self.page, "timeline")
        self.dom_text, self.console = render(self.html_path, workdir)
        self.dom = parse_dom(self.dom_text)


class Checks:
    """The checks every page must pass (mixed into the test cases below)."""

    def check_page(self, rep):
        s = rep.summary
        # Ran without error.
        self.assertEqual(rep.console, [], "console messages (JavaScript errors)")
        self.assertEqual(rep.dom.body_status, "ok")
        self.assertTrue(rep.dom.ids["js-errors"]["attrs"].get("hidden") is not None, rep.dom.ids["js-errors"]["text"])
        # The embedded summary is the JSON summary, exactly.
        self.assertEqual(embedded(rep.page, "summary"), s)
        # Every marked number is the summary's, shown by its format's rule.
        self.assertGreater(len(rep.dom.cells), 0)
        keys = set()
        for c in rep.dom.cells:
            keys.add(c["k"])
            value = resolve(s, c["k"])
            self.assertEqual(json.loads(c["v"]), value, c["k"])
            check_text(self, c, value)
        for k in ("verdict", "ranks.length", "tool.version", "data_quality.errors", "data_quality.warnings"):
            self.assertIn(k, keys)
        for i, r in enumerate(s["ranks"]):
            for k in ("overlap_ratio", "exposed_comm_ns", "achievable_ratio"):
                self.assertIn(f"ranks.{i}.{k}", keys)
            for j in range(len(r["data_quality"])):
                for k in ("counter", "severity", "value", "description"):
                    self.assertIn(f"ranks.{i}.data_quality.{j}.{k}", keys)
            for j in range(len(r["notices"])):
                self.assertIn(f"ranks.{i}.notices.{j}", keys)
        # Analyzer sections, known or not: a table when non-empty, a section in any case.
        for key, v in s.items():
            if key in CORE_KEYS:
                continue
            self.assertIn("section-" + key, rep.dom.ids, key)
            if isinstance(v, list) and v:
                self.assertTrue(any(k.startswith(f"{key}.0") for k in keys), key)
            elif isinstance(v, dict) and v:
                self.assertTrue(any(k.startswith(f"{key}.") for k in keys), key)
        self.check_step_breakdown(rep, keys)
        # The cross-rank view: exactly when there is a non-empty cross_rank.
        self.assertEqual("cross-rank-view" in rep.dom.ids, bool(s.get("cross_rank")))
        # Iterations: the first rank with any has its table.
        if s["iterations"]:
            self.assertTrue(any(k.startswith("iterations.") and k.endswith(".overlap_ratio") for k in keys))
        # Offline: nothing that loads a resource, in the file or in the DOM the script built.
        for text in (rep.page, rep.dom_text):
            self.assertIsNone(re.search(r"<(link|iframe|img|object|embed)\b", text, re.I))
            self.assertIsNone(re.search(r"\b(src|href|srcset|action)\s*=", text, re.I))
            self.assertIsNone(re.search(r"url\s*\(|@import", text, re.I))
        code = re.sub(r'<script type="application/json" id="\w+">.*?</script>', "", rep.page, flags=re.S)
        self.assertIsNone(re.search(r"https?:|//[a-z0-9.-]+\.[a-z]{2,}/", code, re.I), "a URL in the page's code")
        # The timeline blob: one entry per shown rank, within limits; exact lanes add up to the summary.
        tl = rep.timeline
        shown = min(len(s["ranks"]), 64)
        self.assertEqual(tl["ranks_shown"], shown)
        self.assertEqual(len(tl["ranks"]), shown)
        self.assertEqual(len(tl["iteration_windows"]), len(s["iterations"]))
        canvases = [a for t, a in rep.dom.tags if t == "canvas" and "data-rank-index" in a]
        self.assertEqual(len(canvases), shown)
        base = int(tl["base_ns"])
        for w, it in zip(tl["iteration_windows"], s["iterations"]):
            self.assertEqual((w[1] + base, w[2] + base), (it["start_ns"], it["end_ns"]))
            self.assertEqual(s["ranks"][w[0]]["rank"], it["rank"])
        down = False
        for e in tl["ranks"]:
            r = s["ranks"][e["index"]]
            self.assertEqual(e["source"], r["source"])
            for lane, key in (("compute", "compute_ns"), ("comm", "comm_ns"), ("memory", "memory_ns"),
                              ("overlap", "overlap_ns")):
                L = e["lanes"][lane]
                iv = decode_lane(L)
                self.assertLessEqual(len(iv), tl["lane_limit"])
                total = sum(b - a for a, b in iv)
                if L["gap_ns"] == 0:
                    self.assertEqual(len(iv), L["n"])
                    self.assertEqual(total, r[key], f"rank {e['index']} {lane}")
                else:  # merged intervals keep their exact busy time
                    down = True
                    self.assertGreater(L["n"], tl["lane_limit"])
                    self.assertEqual(len(L["b"]), len(iv))
                    self.assertTrue(all(0 < busy <= b - a for busy, (a, b) in zip(L["b"], iv)))
                    self.assertEqual(sum(L["b"]), r[key], f"rank {e['index']} {lane}")
                if iv:
                    self.assertGreaterEqual(iv[0][0] + base, r["start_ns"])
                    self.assertLessEqual(iv[-1][1] + base, r["end_ns"])
        self.assertEqual("timeline-note" in rep.dom.ids, down)
        if down:
            self.assertIn("timeline down-sampled", rep.dom.ids["timeline-note"]["text"])
        self.assertEqual("timeline-ranks-note" in rep.dom.ids, len(s["ranks"]) > 64)


    STEP_PARTS = ("compute_only", "comm_hidden", "comm_exposed", "comm_waiting", "memory_only", "idle")

    def check_step_breakdown(self, rep, keys):
        """Where the step time goes: the first section of the page, the verdict, and per rank (and the run
        with several ranks) the step time, every part's fraction (marked cells, checked above against the
        summary) and one stacked bar whose segments are the parts in order, each its share of the bar."""
        s = rep.summary
        b = s["step_breakdown"]
        first = re.search(r'<section id="([^"]+)"', rep.dom_text)
        self.assertEqual(first.group(1), "section-step_breakdown")
        self.assertEqual(rep.dom.ids["step-verdict"]["text"], s["verdict"])
        self.assertIn("step-verdict", rep.dom.ids)
        self.assertEqual(rep.dom.ids["step-verdict"]["attrs"].get("data-k"), "verdict")
        rows = [(f"step_breakdown.ranks.{i}", r) for i, r in enumerate(b["ranks"])]
        if len(b["ranks"]) > 1:
            rows.append(("step_breakdown.run", b["run"]))
        dom, text = section_dom(rep.dom_text, "section-step_breakdown")
        bars = {a["data-path"]: [] for t, a in dom.tags if t == "svg" and "data-path" in a}
        self.assertEqual(set(bars), {p for p, _ in rows})
        cur = None
        for t, a in dom.tags:
            if t == "svg":
                cur = a.get("data-path")
            elif t == "rect" and cur:
                bars[cur].append((a["data-part"], float(a["x"]), float(a["width"])))
        for path, r in rows:
            for k in ("iterations", "step_ns") + tuple(f"fractions.{p}" for p in self.STEP_PARTS):
                self.assertIn(f"{path}.{k}", keys)
            self.assertEqual(sum(r[p + "_ns"] for p in self.STEP_PARTS), r["wall_ns"], path)
            want = [(p, r[p + "_ns"] / r["wall_ns"] * 600) for p in self.STEP_PARTS if r["wall_ns"] > 0 and r[p + "_ns"] > 0]
            got = bars[path]
            self.assertEqual([g[0] for g in got], [w[0] for w in want], path)
            x = 0.0
            for (part, gx, gw), (_, ww) in zip(got, want):
                self.assertAlmostEqual(gx, x, delta=0.01, msg=f"{path} {part}")
                self.assertAlmostEqual(gw, ww, delta=0.01, msg=f"{path} {part}")
                x += gw
            if want:
                self.assertAlmostEqual(x, 600, delta=0.05, msg=path)


# ------------------------------------------------------------------ the page's code
# page.html's directives (cmake/EmbedAssets.cmake): "{{# ...}}" lines are dropped, an "{{include FILE}}"
# line becomes FILE's text, and the program writes its data at "{{data NAME}}".
INCLUDE_RE = re.compile(r"^\{\{include ([^}\n]+)\}\}\n", re.M)
STRICT_OPEN, STRICT_CLOSE = "(function () {\n'use strict';\n", "})();\n"


def read_asset(name):
    with open(os.path.join(PAGE_DIR, name), encoding="utf-8", newline="") as f:
        return f.read()


def page_parts():
    """page.html assembled as the build does, cut at its data slots: ([part, ...], [slot, ...])."""
    page = re.sub(r"^\{\{#[^\n]*\}\}\n", "", read_asset("page.html"), flags=re.M)
    page = INCLUDE_RE.sub(lambda m: read_asset(m.group(1)), page)
    pieces = re.split(r"\{\{data (\w+)\}\}", page)
    return pieces[0::2], pieces[1::2]


class PageSources(unittest.TestCase):
    """reports/html/: the files the page is built from."""

    def assets(self, ext):
        names = sorted(n for n in os.listdir(PAGE_DIR) if n.endswith(ext))
        self.assertTrue(names, ext)
        return names

    def test_scripts_parse_on_their_own(self):
        node = shutil.which("node") or shutil.which("nodejs")
        if node is None:
            self.skipTest("node not found: the page's scripts are not checked on their own (Chromium still runs the page)")
        with tempfile.TemporaryDirectory(prefix="overlapprof-js-") as tmp:
            for name in self.assets(".js"):
                # As a file of its own, then as the page runs it: inside one strict-mode function
                # (line numbers of that copy are 2 more than the file's).
                strict = os.path.join(tmp, name)
                with open(strict, "w", encoding="utf-8") as f:
                    f.write(STRICT_OPEN + read_asset(name) + STRICT_CLOSE)
                for path in (os.path.join(PAGE_DIR, name), strict):
                    with self.subTest(path):
                        p = subprocess.run([node, "--check", path], capture_output=True, text=True, timeout=60)
                        self.assertEqual(p.returncode, 0, f"node --check {path}:\n{p.stderr}")

    def test_assets_cannot_break_the_inline_page(self):
        for ext, bad in ((".js", ("</script", "<!--", "<script")), (".css", ("</style", "<!--"))):
            for name in self.assets(ext):
                text = read_asset(name).lower()
                for b in bad:
                    self.assertNotIn(b, text, f"reports/html/{name} contains {b!r}: it would break the inline page")
                self.assertTrue(text.endswith("\n"), name)

    def test_page_uses_every_asset_once(self):
        included = INCLUDE_RE.findall(read_asset("page.html"))
        self.assertEqual(sorted(included), sorted(set(included)), "an asset included twice")
        self.assertEqual(sorted(included), sorted(self.assets(".css") + self.assets(".js")))
        parts, slots = page_parts()
        self.assertEqual(slots, ["summary", "timeline"])
        for part in parts:
            self.assertNotIn("{{", part)


class RealTraces(unittest.TestCase, Checks):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="overlapprof-html-")
        f = lambda n: os.path.join(DATA, n)  # noqa: E731
        cls.mixed = Report(cls.tmp.name, "mixed", [f("a100_2rank_rank0.json.gz"), f("a100_16rank_rank0.json.gz"),
                                                    f("v100_1rank_no_nccl.json.gz"), f("a100_no_distributed_info.json.gz"),
                                                    f("cpu_only_ops.json.gz"), f("mi250_1rank_rocm.json.gz")])
        cls.two = Report(cls.tmp.name, "two", [f("a100_2rank_rank0.json.gz")])
        cls.sixteen = Report(cls.tmp.name, "sixteen", [f("a100_16rank_rank0.json.gz")])
        cls.no_comm = Report(cls.tmp.name, "no_comm", [f("v100_1rank_no_nccl.json.gz")])
        cls.no_rank = Report(cls.tmp.name, "no_rank", [f("a100_no_distributed_info.json.gz")])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_mixed_inputs(self):
        self.check_page(self.mixed)
        self.assertEqual(len(self.mixed.summary["ranks"]), 6)

    def test_two_rank_trace(self):
        self.check_page(self.two)
        cells = {c["k"]: c for c in self.two.dom.cells}
        self.assertEqual(cells["ranks.0.overlap_ratio"]["text"], "15.61%")  # tests/data/kineto/README.md
        self.assertEqual(cells["ranks.0.achievable_ratio"]["text"], "100.00%")
        self.assertEqual(cells["ranks.0.exposed_comm_ns"]["text"], "39.56 ms")

    def test_sixteen_rank_trace(self):
        self.check_page(self.sixteen)
        self.assertEqual({c["k"]: c["text"] for c in self.sixteen.dom.cells}["ranks.0.overlap_ratio"], "1.36%")

    def test_no_communication(self):
        self.check_page(self.no_comm)
        r = self.no_comm.summary["ranks"][0]
        self.assertIsNone(r["overlap_ratio"])
        self.assertEqual({c["k"]: c["text"] for c in self.no_comm.dom.cells}["ranks.0.overlap_ratio"], "n/a")

    def test_unknown_rank(self):
        self.check_page(self.no_rank)
        self.assertIsNone(self.no_rank.summary["ranks"][0]["rank"])

    def test_page_is_the_files(self):
        """The binary writes page.html assembled from reports/html/ byte for byte, the data at its slots."""
        (head, mid, tail), _ = page_parts()
        page = self.two.page
        self.assertTrue(page.startswith(head), "the page before the summary differs from reports/html/ (stale build?)")
        self.assertTrue(page.endswith(tail), "the page after the timeline differs from reports/html/ (stale build?)")
        self.assertEqual(page.count(mid), 1)

    def test_size_is_small(self):
        for rep in (self.mixed, self.two, self.sixteen):
            self.assertLess(os.path.getsize(rep.html_path), 2_000_000)


# ------------------------------------------------------------------ synthetic traces
def write_trace(path, rank=0, world=1, steps=3, gemms=1, extra_kernels=0, kernel_name="ampere_bf16_s16816gemm",
                distributed=True):
    """A PyTorch-profiler trace: per step `gemms` 10 ms GEMMs on stream 7 and a 4 ms all-reduce on
    stream 20 overlapping the last by 2 ms; then `extra_kernels` 2 µs kernels 1 to 7 µs apart on stream 7
    (no launches: many small intervals for the timeline)."""
    ev = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
          {"name": "thread_name", "ph": "M", "pid": 0, "tid": 20, "args": {"name": "stream 20 "}}]
    corr, step_us = 1, 10000.0 * gemms + 10000.0
    for i in range(steps):
        t = 1000.0 + i * step_us
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 3, "tid": 3,
                   "ts": t, "dur": step_us})
        launches = [(7, kernel_name, t + 1000 + g * 10000, 10000) for g in range(gemms)]
        launches.append((20, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 1000 + gemms * 10000 - 2000, 4000))
        for k, (stream, name, start, dur) in enumerate(launches):
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 3, "tid": 3,
                       "ts": t + 100 + 10 * k, "dur": 5, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": start,
                       "dur": dur, "args": {"device": 0, "stream": stream, "correlation": corr}})
            corr += 1
    t = 1000.0 + steps * step_us + 1000
    for k in range(extra_kernels):
        ev.append({"ph": "X", "cat": "kernel", "name": "elementwise_kernel", "pid": 0, "tid": 7,
                   "ts": t, "dur": 2, "args": {"device": 0, "stream": 7}})
        t += 2 + 1 + k % 7  # gaps of 1..7 µs
    doc = {"traceEvents": ev}
    if distributed:
        doc["distributedInfo"] = {"rank": rank, "world_size": world, "backend": "nccl"}
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


class SyntheticTraces(unittest.TestCase, Checks):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="overlapprof-html-")
        cls.dir = cls.tmp.name

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_many_intervals_are_down_sampled_and_said(self):
        path = write_trace(os.path.join(self.dir, "big.json"), extra_kernels=100_000)
        rep = Report(self.dir, "big", [path])
        self.check_page(rep)
        lane = rep.timeline["ranks"][0]["lanes"]["compute"]
        self.assertGreater(lane["n"], 100_000)
        self.assertGreater(lane["gap_ns"], 0)
        self.assertLessEqual(len(lane["d"]) // 2, 20_000)
        self.assertGreater(len(lane["d"]) // 2, 10_000)  # the shortest gaps close first: most of the budget is used
        note = rep.dom.ids["timeline-note"]["text"]
        self.assertRegex(note, r"timeline down-sampled: [\d,]+ intervals merged into [\d,]+")
        self.assertIn(f"{lane['n']:,} intervals", note)
        self.assertLess(os.path.getsize(rep.html_path), 1_000_000)

    def test_more_than_64_ranks(self):
        d = os.path.join(self.dir, "ranks70")
        os.mkdir(d)
        for r in range(70):
            write_trace(os.path.join(d, f"rank{r:02d}.json"), rank=r, world=70, steps=2)
        rep = Report(self.dir, "ranks70", [d])
        self.check_page(rep)
        self.assertEqual(len(rep.summary["ranks"]), 70)
        self.assertEqual(rep.timeline["ranks_total"], 70)
        self.assertIn("first 64 of 70 ranks", rep.dom.ids["timeline-ranks-note"]["text"])

    def test_markup_in_data_is_text(self):
        d = os.path.join(self.dir, "<script>alert(1)<")
        os.mkdir(d)
        path = write_trace(os.path.join(d, "script><i id=pwn>x<!--.json"),
                           kernel_name='gemm</script><i id="pwn2">x</i>', distributed=False)
        rep = Report(self.dir, "evil", [path])
        self.check_page(rep)
        self.assertNotIn("pwn", rep.dom.ids)
        self.assertNotIn("pwn2", rep.dom.ids)
        self.assertEqual(sum(t == "script" for t, _ in rep.dom.tags), 4)  # the page's own
        self.assertEqual({c["k"]: c["text"] for c in rep.dom.cells}["ranks.0.source"], path)

    def test_single_iteration_and_empty_trace(self):
        one = write_trace(os.path.join(self.dir, "one.json"), steps=1)
        empty = os.path.join(self.dir, "empty.json")
        with open(empty, "w") as f:
            json.dump({"traceEvents": []}, f)
        for name, inputs in (("one", [one]), ("empty", [empty]), ("one_and_empty", [one, empty])):
            with self.subTest(name):
                self.check_page(Report(self.dir, name, inputs))

    def test_cross_rank_view(self):
        d = os.path.join(self.dir, "xr")
        p = subprocess.run([sys.executable, SYNTH, d, "--ranks", "4", "--iterations", "4", "--straggler", "2",
                            "--straggler-delay-us", "2000", "--quiet", "--truth", d + ".truth.json"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        rep = Report(self.dir, "xr", [d])
        self.check_page(rep)
        s = rep.summary
        xr, colls, cs = s["cross_rank"], s["collectives"], s["collectives_summary"]
        self.assertEqual(len(xr), 4)
        self.assertIn("cross-rank-view", rep.dom.ids)
        sec, text = section_dom(rep.dom_text, "cross-rank-view")
        cells = {c["k"]: c for c in sec.cells}
        # One bar per rank, its numbers the summary's.
        rows = [a for t, a in sec.tags if t == "tr" and a.get("class") == "xr-row"]
        bars = [a for t, a in sec.tags if t == "svg" and a.get("class") == "xr-bar"]
        self.assertEqual(len(rows), len(xr))
        self.assertEqual(len(bars), len(xr))
        for i, r in enumerate(xr):
            for k in ("rank", "wait_ns", "transfer_ns", "exposed_wait_ns", "exposed_comm_ns", "collectives"):
                c = cells[f"cross_rank.{i}.{k}"]
                self.assertEqual(json.loads(c["v"]), r[k], c["k"])
                check_text(self, c, r[k])
        self.assertGreater(xr[0]["wait_ns"], 0)  # rank 0 waits for the straggler
        # The scatter: one dot per listed collective, its tooltip the collective's.
        self.assertEqual(len(colls), cs["listed"])
        dots = re.findall(r'<circle class="xr-pt"[^>]*data-collective="(\d+)"[^>]*><title>([^<]*)</title>', text)
        self.assertEqual(sorted(int(i) for i, _ in dots), list(range(len(colls))))
        for i, tip in dots:
            c = colls[int(i)]
            self.assertTrue(tip.startswith(f"{c['op']}, {c['bytes']:,} bytes: skew "), tip)
            self.assertIn(f"last rank {c['last_rank']},", tip)
        legend = sec.ids["xr-skew-legend"]["text"]
        for r in {c["last_rank"] for c in colls}:
            self.assertIn(f"rank {r}", legend)
        self.assertEqual("xr-skew-note" in sec.ids, cs["listed"] < cs["matched"])
        # The straggler line names rank 2 first.
        self.assertEqual(s["stragglers"][0]["rank"], 2)
        self.assertEqual(cells["stragglers.0.rank"]["text"], "2")
        self.assertTrue(sec.ids["xr-stragglers"]["text"].startswith("rank 2 arrived last in "),
                        sec.ids["xr-stragglers"]["text"])
        # Clock domains, applied ones highlighted.
        self.assertIn("xr-clocks", sec.ids)
        for i, o in enumerate(s["clock_offsets"]):
            self.assertEqual(json.loads(cells[f"clock_offsets.{i}.applied"]["v"]), o["applied"])
        highlighted = [a for t, a in sec.tags if t == "tr" and a.get("class") == "xr-applied"]
        self.assertEqual(len(highlighted), sum(o["applied"] for o in s["clock_offsets"]))

        # Variants of the same page: more matched than listed (the note); cross_rank empty or absent (no view).
        variants = []
        v = json.loads(json.dumps(s))
        v["collectives_summary"]["matched"] = cs["listed"] + 7
        variants.append(("more_matched", v))
        v = json.loads(json.dumps(s))
        v["cross_rank"] = []
        variants.append(("empty", v))
        v = json.loads(json.dumps(s))
        del v["cross_rank"]
        variants.append(("absent", v))
        for name, summary in variants:
            with self.subTest(name):
                path = os.path.join(self.dir, f"xr_{name}.html")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(with_summary(rep.page, summary))
                dom_text, console = render(path, self.dir)
                dom = parse_dom(dom_text)
                self.assertEqual(console, [])
                self.assertEqual(dom.body_status, "ok")
                for c in dom.cells:
                    value = resolve(summary, c["k"])
                    self.assertEqual(json.loads(c["v"]), value, c["k"])
                    check_text(self, c, value)
                self.assertEqual("cross-rank-view" in dom.ids, name == "more_matched")
                if name == "more_matched":
                    note = dom.ids["xr-skew-note"]["text"]
                    self.assertIn(f"showing the {cs['listed']:,} with the largest skew of {cs['listed'] + 7:,}", note)
                elif name == "empty":
                    self.assertIn("section-cross_rank", dom.ids)  # the generic table says "none"

    def test_single_rank_has_no_cross_rank_view(self):
        rep = Report(self.dir, "single", [write_trace(os.path.join(self.dir, "single.json"), steps=2)])
        self.check_page(rep)
        self.assertFalse(rep.summary.get("cross_rank"))
        self.assertNotIn("cross-rank-view", rep.dom.ids)

    def test_harness_catches_an_error(self):
        """The checks above would see a broken page: an injected exception is reported."""
        path = write_trace(os.path.join(self.dir, "small.json"))
        rep = Report(self.dir, "small", [path])
        broken = os.path.join(self.dir, "broken.html")
        with open(broken, "w", encoding="utf-8") as f:
            f.write(rep.page.replace('<script type="application/json" id="timeline">{',
                                     '<script type="application/json" id="timeline">{{', 1))
        dom_text, console = render(broken, self.dir)
        self.assertTrue(any("Uncaught SyntaxError" in line for line in console), console)
        self.assertNotEqual(parse_dom(dom_text).body_status, "ok")


if __name__ == "__main__":
    CLI = os.path.abspath(sys.argv[1])
    BROWSER = find_browser()
    if BROWSER is None:
        print("html_test: FAIL: chromium not found; run scripts/setup.sh (it installs chromium)", file=sys.stderr)
        sys.exit(1)
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[2:])
