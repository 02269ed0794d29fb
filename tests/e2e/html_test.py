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
import html
import html.parser
import json
import math
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
            rec = {"k": a["data-k"], "v": a.get("data-v"), "f": a.get("data-f"), "base": a.get("data-base"), "text": []}
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
html_unescape = html.unescape


def to_fixed(x, digits):
    """JavaScript's Number.prototype.toFixed: the exact binary value rounded half up."""
    d = decimal.Decimal(abs(x)).quantize(decimal.Decimal(1).scaleb(-digits), rounding=decimal.ROUND_HALF_UP)
    return ("-" if x < 0 else "") + f"{d:.{digits}f}"


def dur_text(n):
    """The page's fmtDur."""
    if abs(n) < 1e3:
        return f"{n} ns"
    if abs(n) < 1e6:
        return to_fixed(n / 1e3, 2) + " \u00b5s"
    if abs(n) < 1e9:
        return to_fixed(n / 1e6, 2) + " ms"
    return to_fixed(n / 1e9, 3) + " s"


def nested_text(v):
    """The page's fmtNested: lists joined by ", ", objects as "key value; ..."."""
    if v is None:
        return "n/a"
    if isinstance(v, list):
        return ", ".join(nested_text(x) for x in v) if v else "none"
    if isinstance(v, dict):
        return "; ".join(k.replace("_", " ") + " " + nested_text(x) for k, x in v.items()) if v else "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


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
    elif kind == "id":  # identifiers (rank, step, seq): digits without separators
        tc.assertEqual(text, str(int(value)), where)
    elif kind == "at":  # a point in time: its offset from the run's first GPU activity
        d = int(value) - int(cell["base"])
        tc.assertEqual(text[0], "+" if d >= 0 else "\u2212", where)
        tc.assertEqual(text[1:], dur_text(abs(d)), where)
    elif kind == "list":  # a nested value as words: never JSON
        tc.assertEqual(text, nested_text(value), where)
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


# A script run after the page's own (appended to a copy of the page): measures the layout and
# drives the timeline as a user would, then writes what it saw as JSON into <body data-probe>.
PROBE = r"""
(function () {
  var out = {};
  try {
    var wrap = document.querySelector('#rank-table').parentNode;
    out.winW = window.innerWidth;
    out.wrapRight = wrap.getBoundingClientRect().right;
    out.scroll = [wrap.scrollWidth, wrap.clientWidth];
    out.keyRight = Math.max.apply(null, Array.prototype.map.call(document.querySelectorAll('#rank-table th.key'),
        function (t) { return t.getBoundingClientRect().right; }));
    out.rowH = Array.prototype.map.call(document.querySelectorAll('#rank-table tbody tr'),
        function (r) { return r.getBoundingClientRect().height; });
    out.headH = document.querySelector('#rank-table thead tr').getBoundingClientRect().height;
    out.pageOverflow = document.documentElement.scrollWidth > window.innerWidth;
    var g = document.querySelector('svg.tl-svg[data-rank-index]');
    var T = JSON.parse(document.getElementById('timeline').textContent);
    var idx = Number(g.getAttribute('data-rank-index')), e = T.ranks.filter(function (r) { return r.index === idx; })[0];
    var rect = g.getBoundingClientRect(), full = Math.max(Number(T.end) || 0, 1000);
    var d = e.ops.d, tip = document.getElementById('tl-tip');
    if (d.length) {
      var x = rect.left + (d[0] + d[1] / 2) / full * rect.width, y = rect.top + 28;
      out.op = { index: idx, d: d.slice(0, 6), name: e.ops.names[d[5]] };
      g.dispatchEvent(new MouseEvent('mousemove', { clientX: x, clientY: y, bubbles: true }));
      out.tip = tip.hidden ? null : tip.textContent;
      g.dispatchEvent(new MouseEvent('mousemove', { clientX: x, clientY: rect.top + 8, bubbles: true }));
      out.tipOverCompute = tip.hidden ? null : tip.textContent;
    }
    var win = document.getElementById('tl-window'), before = win.textContent;
    if (document.activeElement && document.activeElement.blur) document.activeElement.blur();
    var wheel = function () {
      g.dispatchEvent(new WheelEvent('wheel', { deltaY: -120, clientX: rect.left + rect.width / 2, clientY: rect.top + 10,
                                                bubbles: true, cancelable: true }));
    };
    wheel();
    out.wheelUnfocused = win.textContent !== before;
    document.getElementById('tl-box').focus();
    wheel();
    out.wheelFocused = win.textContent !== before;
  } catch (err) { out.error = String(err && err.stack || err); }
  document.body.setAttribute('data-probe', JSON.stringify(out));
})();
"""


def probe(page_path, workdir, width):
    """What PROBE saw on the page at `page_path` rendered `width` px wide."""
    with open(page_path, encoding="utf-8") as f:
        page = f.read()
    path = os.path.join(workdir, f"probe-{width}-" + os.path.basename(page_path))
    with open(path, "w", encoding="utf-8") as f:
        f.write(page.replace("</body>", "<script>" + PROBE + "</script>\n</body>", 1))
    profile = tempfile.mkdtemp(prefix="profile-", dir=workdir)
    p = subprocess.run([BROWSER, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},1000",
                        "--dump-dom", "file://" + os.path.abspath(path)], capture_output=True, text=True, timeout=120)
    shutil.rmtree(profile, ignore_errors=True)
    m = re.search(r'<body[^>]*data-probe="([^"]*)"', p.stdout)
    assert m, p.stderr[-2000:]
    got = json.loads(html.unescape(m.group(1)))
    assert "error" not in got, got["error"]
    return got


def bytes_text(n):
    """The page's fmtBytes."""
    if n < 0:
        return "bytes n/a"
    for unit, k, digits in (("GiB", 1 << 30, 2), ("MiB", 1 << 20, 1), ("KiB", 1 << 10, 1)):
        if n >= k:
            return to_fixed(n / k, digits) + " " + unit
    return f"{n} B"


class Report:
    """One `overlapprof report --html --json` run and its page as Chromium rendered it."""

    def __init__(self, workdir, name, inputs, expect_rc=0):
        out = os.path.join(workdir, "reports")
        os.makedirs(out, exist_ok=True)
        self.html_path = os.path.join(out, name + ".html")
        self.json_path = os.path.join(out, name + ".summary.json")
        rc, _, err = run("report", *inputs, "--html", self.html_path, "--json", self.json_path)
        assert rc == expect_rc, f"report {name}: exit {rc}: {err}"
        self.stderr = err
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
        self.check_headline(rep)
        self.check_tables(rep)
        self.check_findings(rep.dom_text, s)
        self.check_legend_colours(rep)
        self.check_charts(rep.dom_text, s)
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
        drawings = [a for t, a in rep.dom.tags if t == "svg" and "data-rank-index" in a and "tl-svg" in a.get("class", "")]
        self.assertEqual(len(drawings), shown)
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


    # ---- the page's reading aids
    def check_headline(self, rep):
        """The headline strip: hidden share, exposed per step (and its share), bound, computed from the summary's
        step_breakdown run row (the only rank's row without one) exactly as documented; step time and GPU idle
        as the summary's cells; the verdict under it."""
        s = rep.summary
        b = s.get("step_breakdown")
        sec, text = section_dom(rep.dom_text, "headline")
        self.assertIsNotNone(sec)
        self.assertIn("step-verdict", sec.ids)
        if not isinstance(b, dict):
            return
        if isinstance(b.get("run"), dict):
            path, r = "step_breakdown.run", b["run"]
        else:
            self.assertEqual(len(b["ranks"]), 1)
            path, r = "step_breakdown.ranks.0", b["ranks"][0]
        hid = r["comm_hidden_ns"]
        exp = r["comm_exposed_ns"] + r["comm_waiting_ns"]
        comm, wall = hid + exp, r["wall_ns"]
        want = {"hidden": hid / comm if comm else None,
                "exposed_step": math.floor(exp / wall * r["step_ns"] + 0.5) if wall and r["step_ns"] is not None else None,
                "exposed_share": exp / wall if wall else None,
                "bound": min(1, (r["compute_only_ns"] + hid) / comm) if comm else None}
        got = {m.group(2): (m.group(3), m.group(4)) for m in
               re.finditer(r'<(\w+) class="[^"]*" data-h="(\w+)" data-hv="([^"]*)">([^<]*)<', text)}
        self.assertEqual(set(got), set(want))
        for name, w in want.items():
            hv, shown = got[name]
            if w is None:
                self.assertEqual((hv, shown), ("null", "n/a"), name)
                continue
            self.assertAlmostEqual(float(hv), w, delta=1e-9 * max(1, abs(w)), msg=name)
            if name == "exposed_step":
                self.assertEqual(shown, dur_text(w), name)
            else:
                self.assertEqual(shown, to_fixed(float(hv) * 100, 2) + "%", name)
        keys = {c["k"] for c in sec.cells}
        for k in ("step_ns", "fractions.idle", "iterations"):
            self.assertIn(f"{path}.{k}", keys)
        self.assertIn("verdict", keys)

    def check_tables(self, rep):
        """Every table cell: no raw JSON, no epoch time (offsets instead); headers are words (no snake_case);
        step numbers without separators; a list of more than 12 rows is collapsed with its count; a table of
        contents names every section; data quality is second when it holds a warning or an error."""
        text = rep.dom_text
        for tag, inner in re.findall(r"<t([hd])\b[^>]*>(.*?)</t\1>", text, re.S):
            t = html_unescape(re.sub(r"<[^>]+>", "", inner))
            self.assertIsNone(re.match(r"\s*[\[{]", t), f"raw JSON in a cell: {t[:80]!r}")
            self.assertNotIn('":', t, f"raw JSON in a cell: {t[:80]!r}")
            self.assertIsNone(re.search(r"\d{16,}", t.replace(",", "")), f"an epoch time in a cell: {t[:80]!r}")
            if tag == "h":
                self.assertNotIn("_", t, f"an identifier as a header: {t!r}")
        for c in rep.dom.cells:
            if c["k"].endswith(".step") or c["k"].endswith(".rank"):
                self.assertIn(c["f"], ("id", "str"), c["k"])
                self.assertNotIn(",", c["text"], c["k"])
        for attrs, body in re.findall(r"<table([^>]*)>(.*?)</table>", text, re.S):
            tb = re.search(r"<tbody>(.*)</tbody>", body, re.S)
            n = len(re.findall(r"<tr\b", tb.group(1))) if tb else 0
            m = re.search(r'data-collapsed="(\d+)"', attrs)
            if n > 12 and "<thead" in body:  # a list of rows (key/value tables are not collapsed)
                self.assertTrue(m, f"a table of {n} rows is not collapsed: {attrs}")
                self.assertEqual(int(m.group(1)), n)
                self.assertEqual(len(re.findall(r'<tr\b[^>]*\bclass="[^"]*\bmore\b', tb.group(1))), n - 12)
            else:
                self.assertIsNone(m, attrs)
        order = re.findall(r'<section id="([^"]+)"', text)
        if len(order) >= 3:
            self.assertIn("toc", rep.dom.ids)
            self.assertEqual(re.findall(r'data-target="([^"]+)"', text), order)
        dq = rep.summary["data_quality"]
        if dq["errors"] + dq["warnings"]:
            self.assertEqual(order[1], "data-quality")
        else:
            self.assertEqual(order[-1], "data-quality")

    def check_findings(self, text, s):
        """Findings identical but for the rank are one row with their rank list; none is said."""
        sec, stext = section_dom(text, "section-findings")
        self.assertIsNotNone(sec)
        groups = {}
        for f in s.get("findings") or []:
            g = groups.setdefault((f["analyzer"], f["severity"], f["message"]), set())
            g.update(f.get("ranks") or ([f["rank"]] if f.get("rank") is not None else []))
        if not groups:
            self.assertIn("No findings", sec.ids["findings-none"]["text"])
            return
        self.assertNotIn("findings-none", sec.ids)
        rows = re.findall(r'<tr class="finding" data-merged="\d+">(.*?)</tr>', stext, re.S)
        self.assertEqual(len(rows), len(groups))
        seen = set()
        for row in rows:
            i = int(re.search(r'data-k="findings\.(\d+)\.message"', row).group(1))
            f = s["findings"][i]
            key = (f["analyzer"], f["severity"], f["message"])
            self.assertNotIn(key, seen)
            seen.add(key)
            ranks = re.search(r'data-ranks="([^"]*)"', row).group(1)
            self.assertEqual(ranks, ",".join(str(r) for r in sorted(groups[key])))

    TL_LEGEND_CLASSES = {"compute", "comm-exposed", "comm-hidden", "memory", "iteration"}

    def check_legend_colours(self, rep):
        """Each legend swatch of the timelines has the colour of the drawn shapes of its class, read from the
        drawn SVG; the classes' colours differ."""
        sec, text = section_dom(rep.dom_text, "timelines")
        legend = dict(re.findall(r'<span data-class="([\w-]+)"><i style="background:([^";]+)"', text))
        self.assertEqual(set(legend), self.TL_LEGEND_CLASSES)
        self.assertEqual(len(set(legend.values())), len(legend), legend)
        drawn = {}
        for cls, fill in re.findall(r'<rect\b[^>]*\bdata-class="([\w-]+)"[^>]*\bfill="([^"]+)"', text):
            drawn.setdefault(cls, set()).add(fill)
        for cls, fills in drawn.items():
            self.assertEqual(fills, {legend[cls]}, cls)
        s = rep.summary
        for r in s["ranks"][:64]:
            if r["compute_ns"] > 0:
                self.assertIn("compute", drawn)
            if r["comm_ns"] > r["overlap_ns"]:
                self.assertIn("comm-exposed", drawn)
            if r["overlap_ns"] > 0:
                self.assertIn("comm-hidden", drawn)

    def check_charts(self, text, s):
        """Per-iteration charts: y ticks round and of one unit, the top tick the first at or above the largest
        steady value (warm-up left out of the scale); x ticks step numbers; every warm-up point marked; rank
        colours none of exposed red, hidden green, compute blue."""
        sec, stext = section_dom(text, "per-iteration")
        if not s["iterations"]:
            return
        its = s["iterations"]
        charted = []
        for i, r in enumerate(s["ranks"]):
            if any(it["rank"] == r["rank"] for it in its) and len(charted) < 64:
                charted.append(r["rank"])
        mine = [it for it in its if it["rank"] in charted]
        charts = re.findall(r'<svg class="chart"[^>]*>(.*?)</svg>', stext, re.S)
        self.assertEqual(len(charts), 2)
        units = {"%": 0.01, " ns": 1, " \u00b5s": 1e3, " ms": 1e6, " s": 1e9}
        for chart, key in zip(charts, ("overlap_ratio", "exposed_comm_ns")):
            ticks = re.findall(r'<text[^>]*class="ytick"[^>]*>([^<]*)</text>', chart)
            self.assertGreaterEqual(len(ticks), 2)
            unit = re.sub(r"^[\d.]+", "", ticks[0])
            self.assertIn(unit, units)
            vals = [float(t[: len(t) - len(unit)]) for t in ticks]
            self.assertTrue(all(t.endswith(unit) for t in ticks), ticks)
            step = vals[1] - vals[0]
            self.assertTrue(all(abs((b - a) - step) < 1e-9 * max(1, step) for a, b in zip(vals, vals[1:])), ticks)
            mant = step / 10 ** math.floor(math.log10(step))
            self.assertTrue(any(abs(mant - m) < 1e-6 for m in (1, 2, 2.5, 5)), ticks)
            steady = [it[key] for it in mine if not it["warmup"] and it[key] is not None]
            if key == "exposed_comm_ns" and steady and max(steady) > 0:
                top = vals[-1] * units[unit]
                self.assertGreaterEqual(top * (1 + 1e-9), max(steady), ticks)
                self.assertLess((vals[-2]) * units[unit], max(steady), ticks)
            warm = [it for it in mine if it["warmup"] and it[key] is not None]
            self.assertEqual(len(re.findall(r'class="pt warmup"', chart)), len(warm))
            xt = [int(x) for x in re.findall(r'<text[^>]*class="xtick"[^>]*>([^<]*)</text>', chart)]
            if all(isinstance(it["step"], int) for it in mine):
                self.assertIn("step number", chart)
                self.assertTrue(set(xt) <= set(range(min(it["step"] for it in mine), max(it["step"] for it in mine) + 1)), xt)
            for stroke in re.findall(r'<polyline[^>]*stroke="([^"]+)"', chart):
                self.assertNotIn(stroke.lower(), ("#d9453b", "#17a88b", "#3b6fd8"))

    STEP_PARTS = ("compute_only", "comm_hidden", "comm_exposed", "comm_waiting", "memory_only", "idle")

    def check_step_breakdown(self, rep, keys):
        """Where the step time goes: the first section of the page, the verdict, and per rank (and the run
        with several ranks) the step time, every part's fraction (marked cells, checked above against the
        summary) and one stacked bar whose segments are the parts in order, each its share of the bar."""
        s = rep.summary
        b = s["step_breakdown"]
        order = [x for x in re.findall(r'<section id="([^"]+)"', rep.dom_text) if x != "data-quality"]
        self.assertEqual(order[:2], ["headline", "section-step_breakdown"])
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

    def test_layout_and_timeline_interaction(self):
        """At 1400 px the rank table fits (no column cut off, the key columns first), its rows are one line high;
        at 800 px the page itself does not scroll sideways. Hovering a communication slice names its op (op,
        bytes, sequence number, duration, exposed part); hovering compute shows nothing; the wheel zooms only once
        the timeline has focus."""
        for rep in (self.mixed, self.sixteen, self.two):
            with self.subTest(rep.html_path):
                got = probe(rep.html_path, self.tmp.name, 1400)
                self.assertEqual(got["winW"], 1400)
                self.assertLessEqual(got["scroll"][0], got["scroll"][1], "the rank table overflows at 1400 px")
                self.assertLessEqual(got["keyRight"], got["wrapRight"])
                self.assertFalse(got["pageOverflow"])
                self.assertLessEqual(max(got["rowH"]), 30, got["rowH"])
                self.assertLessEqual(max(got["rowH"]) - min(got["rowH"]), 1, got["rowH"])
                self.assertLessEqual(got["headH"], 30)
                self.assertFalse(got["wheelUnfocused"], "the wheel zoomed without focus")
                self.assertTrue(got["wheelFocused"], "the wheel did not zoom with focus")
                if rep is self.two:
                    self.check_tip(got)
                    self.assertIn("seq n/a", got["tip"])  # kineto traces carry no sequence numbers
        narrow = probe(self.sixteen.html_path, self.tmp.name, 800)
        self.assertFalse(narrow["pageOverflow"], "the page scrolls sideways at 800 px")

    def check_tip(self, got):
        """The hover text of the first communication op, as PROBE saw it."""
        op = got["op"]
        _, dur, exposed, nbytes, seq, _ = op["d"]
        want = (f"{op['name']} \u00b7 {bytes_text(nbytes)} \u00b7 seq {seq if seq >= 0 else 'n/a'} \u00b7 "
                f"{dur_text(dur)}, exposed {dur_text(exposed)}")
        self.assertTrue(got["tip"].startswith(want), (got["tip"], want))
        if dur > 0:
            self.assertTrue(got["tip"].endswith(f" ({to_fixed(exposed / dur * 100, 2)}%)"), got["tip"])
        self.assertIsNone(got["tipOverCompute"])

    def test_report_prints_each_file(self):
        for rep in (self.two, self.mixed):
            self.assertIn(f"overlapprof: wrote {rep.json_path} (JSON summary)", rep.stderr)
            self.assertIn(f"overlapprof: wrote {rep.html_path} (HTML report", rep.stderr)
        trace = os.path.join(self.tmp.name, "two.trace.json")
        rc, out, err = run("report", os.path.join(DATA, "a100_2rank_rank0.json.gz"), "--chrome-trace", trace, "--json", "-")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["schema"], "overlapprof.summary/1")  # stdout stays the summary alone
        self.assertEqual(re.findall(r"overlapprof: wrote (\S+)", err), [trace])

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
        got = probe(rep.html_path, self.dir, 1400)  # ops with bytes and sequence numbers: hover names them
        self.assertGreaterEqual(got["op"]["d"][4], 0)
        RealTraces.check_tip(self, got)
        self.assertIn(f"seq {got['op']['d'][4]} ", got["tip"])
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

    def test_findings_merged_none_said_warmup_off_scale(self):
        """Variants of one page's summary: findings identical but for the rank become one row with the rank list;
        no findings (empty or absent) is said; a warm-up iteration far above the others stays out of the y-scale
        and is drawn at its top, marked."""
        d = os.path.join(self.dir, "two_ranks")
        os.mkdir(d)
        for r in range(2):
            write_trace(os.path.join(d, f"rank{r}.json"), rank=r, world=2, steps=4)
        rep = Report(self.dir, "variants", [d])
        self.check_page(rep)
        s = rep.summary
        same = "the same advice on every rank"
        merged = json.loads(json.dumps(s))
        merged["findings"] = [{"analyzer": "x", "rank": r, "ranks": [r], "severity": "warning", "message": same}
                              for r in (3, 0, 1, 2, 5)]
        merged["findings"].append({"analyzer": "x", "rank": 1, "ranks": [1], "severity": "error", "message": "other"})
        empty = json.loads(json.dumps(s))
        empty["findings"] = []
        absent = json.loads(json.dumps(s))
        absent.pop("findings", None)
        warm = json.loads(json.dumps(s))
        for it in warm["iterations"]:  # the first iteration of each rank a warm-up, far above the others
            it["warmup"] = it["index"] == 0
        w = [it for it in warm["iterations"] if it["warmup"]]
        self.assertTrue(w)
        steady = max(it["exposed_comm_ns"] for it in warm["iterations"] if not it["warmup"])
        for it in w:
            it["exposed_comm_ns"] = steady * 100
        for name, summary in (("merged", merged), ("empty", empty), ("absent", absent), ("warm", warm)):
            with self.subTest(name):
                path = os.path.join(self.dir, f"variant_{name}.html")
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
                self.check_findings(dom_text, summary)
                self.check_charts(dom_text, summary)
                if name == "merged":
                    rows = re.findall(r'<tr class="finding" data-merged="(\d+)">(.*?)</tr>', dom_text, re.S)
                    self.assertEqual([int(n) for n, _ in rows], [1, 5])  # the error first
                    self.assertIn('data-ranks="0,1,2,3,5"', rows[1][1])
                    self.assertIn(">0\u20133, 5<", rows[1][1])
                elif name in ("empty", "absent"):
                    self.assertIn("No findings", dom.ids["findings-none"]["text"])
                else:
                    sec, text = section_dom(dom_text, "per-iteration")
                    self.assertEqual(len(re.findall(r'<path class="pt warmup"', text)), len(w))

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
