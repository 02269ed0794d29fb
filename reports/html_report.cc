// The self-contained HTML report (docs/html-report.md). The C++ side writes two JSON blobs into
// the page: the JSON summary itself and the per-rank timeline unions (down-sampled to a bounded
// size); the page's script renders everything from them, so the page computes no figure of its
// own. The page's markup, style and script are the raw strings at the end of this file.
#include "reports/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <exception>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "analyzers/overlap.h"
#include "reports/report.h"

namespace overlapprof {
namespace {

extern const char kPageHead[];  // up to the opening tag of the summary blob
extern const char kPageMid[];   // between the summary blob and the timeline blob
extern const char kPageTail[];  // the rest: the script that renders the page

// JSON text that is safe inside a <script> element: '<' occurs only inside JSON strings, and
// written as \u003c it can neither end the element ("</script>") nor open a comment ("<!--").
std::string ScriptSafe(std::string json) {
  std::string out;
  out.reserve(json.size() + 64);
  for (char c : json) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

// Invalid UTF-8 (kernel names, paths) is replaced rather than thrown on.
std::string Dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string Quote(std::string_view s) { return ScriptSafe(Dump(nlohmann::ordered_json(std::string(s)))); }

// One lane: {"n": exact intervals, "gap_ns": gaps closed (0 = exact), "d": [gap, length, ...],
// "b": [busy, ...] (down-sampled lanes only)}; each gap from the previous interval's end (the
// first from `base`), so the numbers are short.
void WriteLane(std::ostream& out, std::string_view name, size_t exact, const DownSampled& ds, int64_t base) {
  fmt::memory_buffer buf;
  fmt::format_to(std::back_inserter(buf), "\"{}\":{{\"n\":{},\"gap_ns\":{},\"d\":[", name, exact, ds.gap_ns);
  int64_t prev = base;
  for (size_t i = 0; i < ds.intervals.size(); ++i) {
    const Interval& iv = ds.intervals[i];
    fmt::format_to(std::back_inserter(buf), "{}{},{}", i ? "," : "", iv.start - prev, iv.end - iv.start);
    prev = iv.end;
  }
  buf.push_back(']');
  if (ds.gap_ns > 0) {  // merged: the exact busy ns inside each interval
    fmt::format_to(std::back_inserter(buf), ",\"b\":[");
    for (size_t i = 0; i < ds.busy.size(); ++i) fmt::format_to(std::back_inserter(buf), "{}{}", i ? "," : "", ds.busy[i]);
    buf.push_back(']');
  }
  buf.push_back('}');
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
}

// What the page draws of one rank: its four lanes, down-sampled when the rank is taken in
// (bounded: HtmlLaneLimit intervals per lane).
struct RankTimeline {
  size_t input_index = 0;
  int64_t rank = kUnknown;
  std::string source;
  bool any = false;
  static constexpr size_t kLanes = 4;
  size_t exact[kLanes] = {};
  DownSampled lanes[kLanes];
};
constexpr const char* kLaneNames[RankTimeline::kLanes] = {"compute", "comm", "memory", "overlap"};

// Orders ranks as the summary will be (rank ascending, unknown last, then input order).
bool ShownBefore(int64_t rank_a, size_t input_a, int64_t rank_b, size_t input_b) {
  if ((rank_a == kUnknown) != (rank_b == kUnknown)) return rank_b == kUnknown;
  if (rank_a != rank_b) return rank_a < rank_b;
  return input_a < input_b;
}

class HtmlReport : public ReportWriter {
 public:
  std::string_view name() const override { return "html"; }
  std::string_view description() const override {
    return "self-contained HTML report (opens offline in a browser; docs/html-report.md)";
  }

  Status Begin(size_t inputs, const ReportOptions&) override {
    shown_ = std::min(inputs, kHtmlMaxTimelineRanks);
    limit_ = HtmlLaneLimit(shown_);
    return OkStatus();
  }

  // Keeps the timelines of the ranks that will be the first kHtmlMaxTimelineRanks in summary
  // order: when one more arrives, the one that sorts last is dropped.
  Status ConsumeRank(const RankTrace& trace, const RankDerived& derived, size_t rank_index,
                     const Summary& summary) override {
    if (shown_ == 0) return OkStatus();
    const RankResult& r = summary.ranks[rank_index];
    if (timelines_.size() == shown_) {
      auto last = std::max_element(timelines_.begin(), timelines_.end(), [](const RankTimeline& a, const RankTimeline& b) {
        return ShownBefore(a.rank, a.input_index, b.rank, b.input_index);
      });
      if (!ShownBefore(r.rank, r.input_index, last->rank, last->input_index)) return OkStatus();
      timelines_.erase(last);
    }
    RankTimeline tl;
    tl.input_index = r.input_index;
    tl.rank = r.rank;
    tl.source = r.source_path;
    tl.any = derived.sets.any_activity;
    const IntervalSet* sets[RankTimeline::kLanes] = {&derived.sets.compute, &derived.sets.comm, &derived.sets.memory,
                                                     &derived.sets.overlap};
    for (size_t l = 0; l < RankTimeline::kLanes; ++l) {
      tl.exact[l] = sets[l]->intervals().size();
      tl.lanes[l] = DownSampleIntervals(sets[l]->intervals(), limit_);
    }
    timelines_.push_back(std::move(tl));
    return OkStatus();
  }

  Status Write(const Summary& summary, const ReportOptions&, std::ostream& out) override {
    try {
      return WriteHtml(summary, out);
    } catch (const std::exception& e) {  // nlohmann or allocation: nothing may escape as an exception
      return MakeError(StatusCode::kInternal, "html report: {}", e.what());
    }
  }

 private:
  Status WriteHtml(const Summary& summary, std::ostream& out);

  size_t shown_ = 0, limit_ = 0;
  std::vector<RankTimeline> timelines_;
};

Status HtmlReport::WriteHtml(const Summary& summary, std::ostream& out) {
  // The time origin: the earliest activity or iteration of any rank (as the Chrome trace's).
  int64_t base = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  for (const RankResult& r : summary.ranks)
    if (r.whole.end_ns > r.whole.start_ns || r.whole.start_ns > 0) {
      base = std::min(base, r.whole.start_ns);
      last = std::max(last, r.whole.end_ns);
    }
  for (const IterationResult& it : summary.iterations) {
    base = std::min(base, it.figures.start_ns);
    last = std::max(last, it.figures.end_ns);
  }
  if (base == std::numeric_limits<int64_t>::max()) base = last = 0;

  out << kPageHead << ScriptSafe(Dump(SummaryToJson(summary))) << kPageMid;

  const size_t shown = std::min(summary.ranks.size(), kHtmlMaxTimelineRanks);
  const size_t limit = HtmlLaneLimit(shown);
  out << "{\"base_ns\":\"" << base << "\",\"end\":" << (last - base) << ",\"ranks_total\":" << summary.ranks.size()
      << ",\"ranks_shown\":" << shown << ",\"max_ranks\":" << kHtmlMaxTimelineRanks << ",\"lane_limit\":" << limit
      << ",\n\"iteration_windows\":[";
  {
    fmt::memory_buffer buf;
    for (size_t j = 0; j < summary.iterations.size(); ++j) {
      const IterationResult& it = summary.iterations[j];
      fmt::format_to(std::back_inserter(buf), "{}[{},{},{}]", j ? "," : "", it.rank_index, it.figures.start_ns - base,
                     it.figures.end_ns - base);
    }
    out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  }
  out << "],\n\"ranks\":[";

  // The kept timelines, in input order (as the page always listed them), each with its index in
  // the sorted summary.
  std::vector<size_t> index_of_input(summary.ranks.size(), kNoIndex);
  for (size_t i = 0; i < summary.ranks.size(); ++i)
    if (summary.ranks[i].input_index < index_of_input.size()) index_of_input[summary.ranks[i].input_index] = i;
  std::sort(timelines_.begin(), timelines_.end(),
            [](const RankTimeline& a, const RankTimeline& b) { return a.input_index < b.input_index; });
  bool first = true;
  for (const RankTimeline& tl : timelines_) {
    const size_t index = tl.input_index < index_of_input.size() ? index_of_input[tl.input_index] : kNoIndex;
    if (index == kNoIndex || index >= shown) continue;
    out << (first ? "\n" : ",\n") << "{\"index\":" << index << ",\"rank\":";
    first = false;
    if (tl.rank == kUnknown)
      out << "null";
    else
      out << tl.rank;
    out << ",\"source\":" << Quote(tl.source) << ",\"any\":" << (tl.any ? "true" : "false") << ",\"lanes\":{";
    for (size_t l = 0; l < RankTimeline::kLanes; ++l) {
      if (l) out << ',';
      WriteLane(out, kLaneNames[l], tl.exact[l], tl.lanes[l], base);
    }
    out << "}}";
    if (!out) return MakeError(StatusCode::kIo, "write failed");
  }
  out << "\n]}" << kPageTail;
  if (!out) return MakeError(StatusCode::kIo, "write failed");
  return OkStatus();
}

}  // namespace

size_t HtmlLaneLimit(size_t ranks_shown) {
  const size_t share = kHtmlTimelineBudget / (4 * std::max<size_t>(ranks_shown, 1));
  return std::clamp(share, kHtmlMinLaneIntervals, kHtmlMaxLaneIntervals);
}

DownSampled DownSampleIntervals(const std::vector<Interval>& in, size_t limit) {
  DownSampled ds;
  if (in.size() <= limit || limit == 0) {
    ds.intervals = in;
    return ds;
  }
  // Close the k = n - limit shortest gaps (and any as short as the k-th: ties close together).
  const size_t n = in.size(), k = n - limit;
  std::vector<int64_t> gaps(n - 1);
  for (size_t i = 0; i + 1 < n; ++i) gaps[i] = in[i + 1].start - in[i].end;
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(k - 1), gaps.end());
  const int64_t gap = gaps[k - 1] + 1;
  ds.gap_ns = gap;
  ds.intervals.reserve(limit);
  ds.busy.reserve(limit);
  for (const Interval& iv : in) {
    if (!ds.intervals.empty() && iv.start - ds.intervals.back().end < gap) {
      ds.intervals.back().end = std::max(ds.intervals.back().end, iv.end);
      ds.busy.back() += iv.end - iv.start;
    } else {
      ds.intervals.push_back(iv);
      ds.busy.push_back(iv.end - iv.start);
    }
  }
  return ds;
}

std::unique_ptr<ReportWriter> MakeHtmlReport() { return std::make_unique<HtmlReport>(); }

namespace {

// ---------------------------------------------------------------------------------------------
// The page. Everything is inline: no URL is loaded, so it works offline and from file://.
// Strings from the data are only ever inserted as text (textContent), never as markup.
const char kPageHead[] = R"OPHTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="overlapprof">
<title>overlapprof report</title>
<style>
:root { --fg:#1d2330; --muted:#5d6675; --line:#d9dde4; --bg:#ffffff; --panel:#f6f7f9;
        --compute:#3b6fd8; --comm:#d9453b; --hidden:#17a88b; --memory:#4caf50; --shade:rgba(255,193,7,0.38); }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); background: var(--bg); }
header { padding: 14px 24px; background: #232a36; color: #fff; }
header h1 { margin: 0; font-size: 20px; font-weight: 600; }
header .sub { color: #b9c2d0; font-size: 13px; }
main { padding: 8px 24px 40px; max-width: 1600px; }
section { margin: 22px 0; }
h2 { font-size: 17px; margin: 0 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 14px 0 6px; }
.muted { color: var(--muted); }
.note { background: #fff7e0; border: 1px solid #f0d48a; padding: 6px 10px; border-radius: 4px; margin: 6px 0; }
.errors { background: #fde8e8; border: 1px solid #e99; padding: 6px 10px; border-radius: 4px; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.kv dt { color: var(--muted); }
dl.kv dd { margin: 0; }
.verdict { font-size: 15px; font-weight: 600; }
.tablewrap { overflow-x: auto; max-width: 100%; }
table.data { border-collapse: collapse; font-size: 13px; }
table.data th, table.data td { border: 1px solid var(--line); padding: 3px 7px; text-align: left; vertical-align: top; }
table.data th { background: var(--panel); font-weight: 600; white-space: nowrap; position: sticky; top: 0; }
table.data td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
table.data td.wide { min-width: 24em; }
table.data td.nw { white-space: nowrap; }
table.data td.json { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; max-width: 520px; word-break: break-all; }
table.data tr.click { cursor: pointer; }
table.data tr.click:hover td { background: #eef3ff; }
table.data tr.sel td { background: #e3ecff; }
.sev-error { color: #b3261e; font-weight: 600; }
.sev-warning { color: #9a6700; font-weight: 600; }
.controls { display: flex; flex-wrap: wrap; gap: 8px 14px; align-items: center; margin: 6px 0 10px; }
.controls select, .controls button { font: inherit; padding: 2px 6px; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; color: var(--muted); margin: 4px 0; }
.legend i { display: inline-block; width: 14px; height: 10px; margin-right: 4px; vertical-align: -1px; border-radius: 2px; }
.tl-row { display: flex; align-items: stretch; border-bottom: 1px solid #eceef2; }
.tl-label { flex: none; width: 170px; padding: 2px 8px 2px 0; font-size: 12px; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; }
.tl-label b { display: block; font-size: 13px; }
.tl-canvas { flex: 1 1 auto; min-width: 0; height: 46px; display: block; cursor: grab; }
.tl-axis { height: 24px; cursor: default; }
svg.chart { width: 100%; max-width: 1100px; height: auto; display: block; background: var(--panel); border-radius: 4px; }
svg.chart text { font-size: 11px; fill: var(--muted); }
svg.chart .pt { cursor: pointer; }
ul.notices { margin: 4px 0; padding-left: 20px; }
.xr-barcell { min-width: 320px; width: 40%; }
svg.xr-bar { width: 100%; height: 18px; display: block; }
svg.chart .xr-pt { cursor: default; }
table.data tr.xr-applied td { background: #fff3cd; }
ul.xr-stragglers { margin: 4px 0; padding-left: 20px; }
ul.xr-stragglers li span.num { font-variant-numeric: tabular-nums; }
</style>
<script>
// Errors anywhere on the page are listed at its top (and make data-status "error").
window.__opErrors = [];
window.__opShowError = function (msg) {
  window.__opErrors.push(String(msg));
  var box = document.getElementById('js-errors');
  if (box) {
    box.hidden = false;
    var li = document.createElement('li');
    li.textContent = String(msg);
    box.querySelector('ul').appendChild(li);
  }
  if (document.body) document.body.setAttribute('data-status', 'error');
};
window.addEventListener('error', function (e) { window.__opShowError('uncaught: ' + (e && e.message)); });
window.addEventListener('unhandledrejection', function (e) { window.__opShowError('unhandled rejection: ' + (e && e.reason)); });
</script>
</head>
<body data-status="loading">
<header><h1>overlapprof report</h1><div class="sub" id="header-sub">communication/computation overlap of a multi-GPU run</div></header>
<main id="main">
<div id="js-errors" class="errors" hidden><b>The page hit an error while rendering; what follows may be incomplete.</b><ul></ul></div>
<noscript><p class="note">This report is drawn by JavaScript in the page itself (nothing is loaded from the network); enable JavaScript to see it.</p></noscript>
</main>
<script type="application/json" id="summary">)OPHTML";

const char kPageMid[] = R"OPHTML(</script>
<script type="application/json" id="timeline">)OPHTML";

const char kPageTail[] = R"OPHTML(</script>
<script>
(function () {
'use strict';
var CAP = 500;          // rows of a generic table
var CAP_DQ = 2000;      // rows of the data-quality table and the per-rank table
var MAX_CHART_RANKS = 64;
var MAX_POINTS = 4000;  // chart dots drawn (lines are always drawn)

function showError(where, e) {
  var msg = where + ': ' + (e && e.stack ? e.stack : String(e));
  try { console.error('overlapprof report: ' + msg); } catch (x) { /* no console */ }
  window.__opShowError(msg);
}
function guarded(where, fn) {
  return function () {
    try { return fn.apply(this, arguments); } catch (e) { showError(where, e); }
  };
}

// ---- JSON with exact integers: absolute times in ns exceed 2^53, so integers that a double
// cannot hold exactly become BigInt (shown and compared digit for digit).
function parseJSON(text) {
  var i = 0;
  var ws = /[ \t\n\r]*/y;
  var numRe = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
  var strRe = /"[^"\\]*(?:\\.[^"\\]*)*"/y;
  function fail() { throw new SyntaxError('bad JSON at offset ' + i); }
  function skip() { ws.lastIndex = i; ws.exec(text); i = ws.lastIndex; }
  function str() {
    strRe.lastIndex = i;
    var m = strRe.exec(text);
    if (!m) fail();
    i = strRe.lastIndex;
    return JSON.parse(m[0]);
  }
  function expect(c) { skip(); if (text[i] !== c) fail(); i++; }
  function value() {
    skip();
    var c = text[i];
    if (c === '{') {
      i++;
      var o = {};
      skip();
      if (text[i] === '}') { i++; return o; }
      for (;;) {
        skip();
        var k = str();
        expect(':');
        var v = value();
        if (k === '__proto__') Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
        else o[k] = v;
        skip();
        if (text[i] === ',') { i++; continue; }
        expect('}');
        return o;
      }
    }
    if (c === '[') {
      i++;
      var a = [];
      skip();
      if (text[i] === ']') { i++; return a; }
      for (;;) {
        a.push(value());
        skip();
        if (text[i] === ',') { i++; continue; }
        expect(']');
        return a;
      }
    }
    if (c === '"') return str();
    if (text.startsWith('true', i)) { i += 4; return true; }
    if (text.startsWith('false', i)) { i += 5; return false; }
    if (text.startsWith('null', i)) { i += 4; return null; }
    numRe.lastIndex = i;
    var m = numRe.exec(text);
    if (!m) fail();
    i = numRe.lastIndex;
    var t = m[0];
    if (/^-?\d+$/.test(t)) {
      var n = Number(t);
      return Number.isSafeInteger(n) ? n : BigInt(t);
    }
    return Number(t);
  }
  var result = value();
  skip();
  if (i !== text.length) fail();
  return result;
}

// JSON text of a value (BigInt as its digits).
function stringify(v) {
  if (typeof v === 'bigint') return v.toString();
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map(stringify).join(',') + ']';
  return '{' + Object.keys(v).map(function (k) { return JSON.stringify(k) + ':' + stringify(v[k]); }).join(',') + '}';
}

// ---- How values are shown (docs/html-report.md; tests/e2e/html_test.py checks the same rules).
function group(s) { return s.replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
function fmtPct(v) { return (Number(v) * 100).toFixed(2) + '%'; }
function fmtDur(v) {
  var n = Number(v), a = Math.abs(n);
  if (a < 1e3) return String(v) + ' ns';
  if (a < 1e6) return (n / 1e3).toFixed(2) + ' \u00b5s';
  if (a < 1e9) return (n / 1e6).toFixed(2) + ' ms';
  return (n / 1e9).toFixed(3) + ' s';
}
function fmt(kind, v) {
  if (v === null) return 'n/a';
  switch (kind) {
    case 'pct': return fmtPct(v);
    case 'dur': return fmtDur(v);
    case 'int': return group(String(v));
    case 'num': return String(v);
    case 'bool': return v ? 'yes' : 'no';
    case 'json': return stringify(v);
    default: return String(v);
  }
}
function kindFor(col, v) {
  if (v !== null && typeof v === 'object') return 'json';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number' || typeof v === 'bigint') {
    if (/_ns$/.test(col)) return 'dur';
    if (/(ratio|fraction)$/.test(col)) return 'pct';
    return typeof v === 'bigint' || Number.isInteger(v) ? 'int' : 'num';
  }
  return 'str';
}
function isPlainObject(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }
function getPath(root, path) {
  var o = root;
  for (var p = 0; p < path.length; p++) {
    var k = path[p];
    if (o === null || typeof o !== 'object') return undefined;
    if (Array.isArray(o) && k === 'length') { o = o.length; continue; }
    if (!Object.prototype.hasOwnProperty.call(o, k)) return undefined;
    o = o[k];
  }
  return o;
}

function el(tag, attrs) {
  var e = document.createElement(tag);
  if (attrs) for (var k in attrs) {
    if (k === 'class') e.className = attrs[k];
    else if (k === 'text') e.textContent = attrs[k];
    else e.setAttribute(k, attrs[k]);
  }
  for (var c = 2; c < arguments.length; c++) {
    var kid = arguments[c];
    if (kid === null || kid === undefined) continue;
    e.append(kid);  // strings become text nodes
  }
  return e;
}
// An element showing the summary's value at `path`, marked for checking: data-k (the path),
// data-v (the value as JSON), data-f (how it is formatted).
function cell(tag, path, kind) {
  var v = getPath(S, path);
  var e = document.createElement(tag);
  if (v === undefined) { e.textContent = '\u2014'; return e; }
  var k = kind || kindFor(String(path[path.length - 1]), v);
  var keysPlain = path.every(function (p) { return String(p).indexOf('.') < 0; });
  if (keysPlain) {
    e.setAttribute('data-k', path.join('.'));
    e.setAttribute('data-v', stringify(v));
    e.setAttribute('data-f', k);
  }
  e.textContent = fmt(k, v);
  if (typeof v === 'number' || typeof v === 'bigint') e.classList.add('num');
  if (k === 'json') e.classList.add('json');
  if (k === 'str' && typeof v === 'string' && v.length <= 40) e.classList.add('nw');
  return e;
}
function basename(p) { var s = String(p || ''); var i = s.lastIndexOf('/'); return i >= 0 ? s.slice(i + 1) : s; }
function rankColor(i) { return 'hsl(' + Math.round((i * 137.508) % 360) + ',65%,42%)'; }

var MAIN = document.getElementById('main');
function section(id, title, intro) {
  var s = el('section', { id: id }, el('h2', { text: title }));
  if (intro) s.append(el('p', { class: 'muted', text: intro }));
  MAIN.append(s);
  return s;
}
function tableWrap(t) { return el('div', { class: 'tablewrap' }, t); }

var S = parseJSON(document.getElementById('summary').textContent);
var T = JSON.parse(document.getElementById('timeline').textContent);
var RANKS = Array.isArray(S.ranks) ? S.ranks : [];
var ITERS = Array.isArray(S.iterations) ? S.iterations : [];
var WINDOWS = Array.isArray(T.iteration_windows) ? T.iteration_windows : [];

// Labels: "rank 3", or with the file name when the rank is unknown or claimed twice.
var rankCount = {};
RANKS.forEach(function (r) { var k = String(r.rank); rankCount[k] = (rankCount[k] || 0) + 1; });
function rankLabel(i) {
  var r = RANKS[i];
  if (!r) return 'rank ?';
  var base = 'rank ' + (r.rank === null ? '?' : String(r.rank));
  return r.rank === null || rankCount[String(r.rank)] > 1 ? base + ' (' + basename(r.source) + ')' : base;
}
// Iterations of each rank (by index into ranks[]), from the timeline blob's windows.
var itersOf = RANKS.map(function () { return []; });
WINDOWS.forEach(function (w, j) { if (itersOf[w[0]]) itersOf[w[0]].push(j); });

var state = { iterRank: -1 };
var timeline = null;  // set by renderTimelines: { zoom(a, b), reset() }

// ---------------------------------------------------------------- run summary
function renderRun() {
  var s = section('run', 'Run');
  var dl = el('dl', { class: 'kv' });
  function row(label, node) { dl.append(el('dt', { text: label }), node); }
  var v = cell('dd', ['verdict'], 'str');
  v.classList.add('verdict');
  row('verdict', v);
  row('ranks', cell('dd', ['ranks', 'length'], 'int'));
  row('iterations (all ranks)', cell('dd', ['iterations', 'length'], 'int'));
  row('data-quality errors', cell('dd', ['data_quality', 'errors'], 'int'));
  row('data-quality warnings', cell('dd', ['data_quality', 'warnings'], 'int'));
  row('tool', el('dd', null, cell('span', ['tool', 'name'], 'str'), ' ', cell('span', ['tool', 'version'], 'str')));
  row('schema', cell('dd', ['schema'], 'str'));
  s.append(dl);
  s.append(el('div', { id: 'run-notes' }));
  var sub = document.getElementById('header-sub');
  if (sub) sub.textContent = RANKS.length + (RANKS.length === 1 ? ' rank' : ' ranks') + ', ' + ITERS.length +
      ' iterations; overlapprof ' + String(getPath(S, ['tool', 'version']) || '?');
}

// ---------------------------------------------------------------- per-rank table
var RANK_COLS = [
  ['rank', 'rank', 'int'], ['source', 'source', 'str'], ['device', 'device', 'str'], ['world size', 'world_size', 'int'],
  ['iterations', 'iterations', 'int'], ['wall', 'wall_ns', 'dur'], ['busy', 'busy_ns', 'dur'],
  ['compute', 'compute_ns', 'dur'], ['comm', 'comm_ns', 'dur'], ['overlap', 'overlap_ns', 'dur'],
  ['exposed comm', 'exposed_comm_ns', 'dur'], ['overlap ratio', 'overlap_ratio', 'pct'],
  ['bound (achievable)', 'achievable_ratio', 'pct'], ['median iteration ratio', 'iteration_spread.overlap_ratio.median', 'pct'],
  ['verdict', 'verdict', 'str']];
function renderRanks() {
  var s = section('ranks', 'Ranks',
      'Overlap ratio = the share of communication time that compute hides; bound = min(1, compute / comm), what perfect ' +
      'scheduling could reach. Click a row to pick its iterations below.');
  if (!RANKS.length) { s.append(el('p', { class: 'muted', text: 'No ranks.' })); return; }
  var t = el('table', { class: 'data', id: 'rank-table' });
  var hr = el('tr');
  RANK_COLS.forEach(function (c) { hr.append(el('th', { text: c[0] })); });
  t.append(el('thead', null, hr));
  var tb = el('tbody');
  RANKS.slice(0, CAP_DQ).forEach(function (r, i) {
    var tr = el('tr', { class: 'click', 'data-rank-index': String(i) });
    RANK_COLS.forEach(function (c) {
      var td = cell('td', ['ranks', i].concat(c[1].split('.')), c[2]);
      if (c[1] === 'overlap_ratio' && r.overlap_ratio === null && r.overlap_ratio_reason) td.title = String(r.overlap_ratio_reason);
      if (c[1] === 'verdict') td.classList.add('wide');
      tr.append(td);
    });
    tr.addEventListener('click', guarded('rank row', function () { selectIterRank(i, true); }));
    tb.append(tr);
  });
  t.append(tb);
  s.append(tableWrap(t));
  if (RANKS.length > CAP_DQ) s.append(el('p', { class: 'note', text: 'first ' + CAP_DQ + ' of ' + RANKS.length + ' ranks shown' }));
}

// ---------------------------------------------------------------- per-iteration charts
function svg(tag, attrs) {
  var e = document.createElementNS(SVGNS, tag);
  if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}
var SVGNS = (function () { var d = document.createElement('div'); d.innerHTML = '<svg></svg>'; return d.firstChild.namespaceURI; })();

function chart(title, valueOf, fixedMax, fmtAxis, rankIdx) {
  var W = 900, H = 190, L = 64, R = 14, TOP = 12, B = 26;
  var maxIdx = 0, maxV = fixedMax || 0;
  rankIdx.forEach(function (ri) {
    itersOf[ri].forEach(function (j) {
      maxIdx = Math.max(maxIdx, Number(ITERS[j].index));
      var v = valueOf(j);
      if (v !== null && v !== undefined && !fixedMax) maxV = Math.max(maxV, Number(v));
    });
  });
  if (!(maxV > 0)) maxV = 1;
  var X = function (idx) { return L + (maxIdx > 0 ? (idx / maxIdx) * (W - L - R) : (W - L - R) / 2); };
  var Y = function (v) { return TOP + (1 - Number(v) / maxV) * (H - TOP - B); };
  var g = svg('svg', { class: 'chart', viewBox: '0 0 ' + W + ' ' + H, role: 'img' });
  g.append(svg('title')); g.lastChild.textContent = title;
  for (var k = 0; k <= 4; k++) {
    var yv = maxV * k / 4, y = Y(yv);
    g.append(svg('line', { x1: L, x2: W - R, y1: y, y2: y, stroke: '#dde1e8' }));
    var tx = svg('text', { x: L - 6, y: y + 4, 'text-anchor': 'end' });
    tx.textContent = fmtAxis(yv);
    g.append(tx);
  }
  var xt = Math.max(1, Math.ceil((maxIdx + 1) / 12));
  for (var xi = 0; xi <= maxIdx; xi += xt) {
    var t2 = svg('text', { x: X(xi), y: H - 10, 'text-anchor': 'middle' });
    t2.textContent = String(xi);
    g.append(t2);
  }
  var total = 0;
  rankIdx.forEach(function (ri) { total += itersOf[ri].length; });
  rankIdx.forEach(function (ri) {
    var color = rankColor(ri), pts = [];
    var flush = function () {
      if (pts.length > 1) g.append(svg('polyline', { points: pts.join(' '), fill: 'none', stroke: color, 'stroke-width': 1.5 }));
      pts = [];
    };
    itersOf[ri].forEach(function (j) {
      var v = valueOf(j);
      if (v === null || v === undefined) { flush(); return; }
      var x = X(Number(ITERS[j].index)), y = Y(v);
      pts.push(x.toFixed(1) + ',' + y.toFixed(1));
      if (total <= MAX_POINTS) {
        var c = svg('circle', { class: 'pt', cx: x.toFixed(1), cy: y.toFixed(1), r: 3.5,
                                fill: ITERS[j].warmup ? '#fff' : color, stroke: color });
        var tt = svg('title');
        tt.textContent = rankLabel(ri) + ', iteration ' + ITERS[j].index + (ITERS[j].warmup ? ' (warm-up)' : '') + ': ' +
            fmtAxis(v) + ' (click to zoom the timelines)';
        c.append(tt);
        c.addEventListener('click', guarded('chart point', function () { selectIterRank(ri, false); zoomToIteration(j); }));
        g.append(c);
      }
    });
    flush();
  });
  return el('figure', { style: 'margin:8px 0 14px' }, el('figcaption', { class: 'muted', text: title + ', by iteration index' }), g);
}

function renderCharts() {
  var s = section('per-iteration', 'Per iteration',
      'Each line is a rank; hollow dots are warm-up iterations. Click a dot to zoom the timelines to that iteration.');
  var withIters = [];
  RANKS.forEach(function (r, i) { if (itersOf[i].length) withIters.push(i); });
  if (!withIters.length) {
    s.append(el('p', { class: 'muted', text: 'No iterations were found (no ProfilerStep markers, no --step-range, no repeating ' +
        'communication pattern), so there is nothing to chart per iteration.' }));
    return;
  }
  var shown = withIters.slice(0, MAX_CHART_RANKS);
  if (withIters.length > shown.length)
    s.append(el('p', { class: 'note', text: 'charts show the first ' + shown.length + ' of ' + withIters.length + ' ranks with iterations' }));
  s.append(chart('Overlap ratio per iteration (share of communication hidden)', function (j) { return ITERS[j].overlap_ratio; }, 1,
                 function (v) { return (v * 100).toFixed(0) + '%'; }, shown));
  s.append(chart('Exposed communication per iteration', function (j) { return ITERS[j].exposed_comm_ns; }, 0,
                 function (v) { return fmtDur(Math.round(v)); }, shown));
  var lg = el('div', { class: 'legend' });
  shown.forEach(function (ri) { lg.append(el('span', null, el('i', { style: 'background:' + rankColor(ri) }), rankLabel(ri))); });
  s.append(lg);
}

// ---------------------------------------------------------------- timelines
function decodeLane(l) {
  var d = (l && l.d) || [], n = d.length >> 1, b = l && Array.isArray(l.b) && l.b.length === n ? l.b : null;
  var st = new Float64Array(n), en = new Float64Array(n), bu = new Float64Array(n), t = 0;
  for (var i = 0; i < n; i++) {
    t += d[2 * i]; st[i] = t;
    t += d[2 * i + 1]; en[i] = t;
    bu[i] = b ? b[i] : en[i] - st[i];
  }
  return { s: st, e: en, busy: bu, exact: l ? Number(l.n) : 0, gap: l ? Number(l.gap_ns) : 0 };
}
// Index of the first interval that ends after t.
function firstEndingAfter(lane, t) {
  var lo = 0, hi = lane.e.length;
  while (lo < hi) { var mid = (lo + hi) >> 1; if (lane.e[mid] <= t) lo = mid + 1; else hi = mid; }
  return lo;
}
// Draws the lane's intervals inside the view [a, b) on a canvas W px wide. Intervals less than
// half a pixel apart share one rectangle, whose opacity is the busy share of the time it spans
// (so dense small work, and intervals merged by down-sampling, look as busy as they were);
// every interval is at least 1 px wide.
function drawLane(ctx, lane, a, b, W, y, h) {
  var k = W / (b - a), cs = -1, ce = -1, t0 = 0, t1 = 0, busy = 0;
  function flush() {
    var share = t1 > t0 ? busy / (t1 - t0) : 1;
    ctx.globalAlpha = Math.max(0.3, Math.min(1, share));
    ctx.fillRect(cs, y, ce - cs, h);
  }
  for (var i = firstEndingAfter(lane, a); i < lane.s.length && lane.s[i] < b; i++) {
    var s = Math.max(lane.s[i], a), e = Math.min(lane.e[i], b), len = lane.e[i] - lane.s[i];
    var bz = len > 0 ? lane.busy[i] * (e - s) / len : 0;
    var x0 = (s - a) * k, x1 = (e - a) * k;
    if (x1 - x0 < 1) x1 = x0 + 1;
    if (cs >= 0 && x0 <= ce + 0.5) {
      if (x1 > ce) ce = x1;
      if (e > t1) t1 = e;
      busy += bz;
      continue;
    }
    if (cs >= 0) flush();
    cs = x0; ce = x1; t0 = s; t1 = e; busy = bz;
  }
  if (cs >= 0) flush();
  ctx.globalAlpha = 1;
}
function niceStep(span, n) {
  var raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}
function fmtTick(t, step) {
  if (step >= 1e9) return (t / 1e9).toFixed(step >= 1e10 ? 0 : 1) + ' s';
  if (step >= 1e6) return (t / 1e6).toFixed(step >= 1e7 ? 0 : 1) + ' ms';
  if (step >= 1e3) return (t / 1e3).toFixed(step >= 1e4 ? 0 : 1) + ' \u00b5s';
  return Math.round(t) + ' ns';
}

function renderTimelines() {
  var s = section('timelines', 'Timelines',
      'Per rank, the GPU timeline as unions of activities: compute, communication (red where exposed, green where compute ' +
      'hides it) and memory copies/sets; the overlap (compute \u2229 communication) is shaded. Scroll to zoom, drag to pan, ' +
      'double-click for the whole run; pick an iteration to zoom to it. Times are from the run\'s first GPU activity.');
  var entries = (Array.isArray(T.ranks) ? T.ranks : []).slice().sort(function (x, y) { return x.index - y.index; });
  var rows = entries.map(function (r) {
    var lanes = r.lanes || {};
    return { index: r.index, any: !!r.any, compute: decodeLane(lanes.compute), comm: decodeLane(lanes.comm),
             memory: decodeLane(lanes.memory), overlap: decodeLane(lanes.overlap) };
  });

  // What was simplified for drawing, said on the page.
  var notes = [];
  if (T.ranks_total > T.ranks_shown)
    notes.push('Timelines are shown for the first ' + T.ranks_shown + ' of ' + T.ranks_total +
               ' ranks (at most ' + T.max_ranks + '); the tables cover every rank.');
  var exact = 0, kept = 0, maxGap = 0, lanesDown = 0;
  rows.forEach(function (r) {
    ['compute', 'comm', 'memory', 'overlap'].forEach(function (k) {
      var l = r[k];
      if (l.gap > 0) { lanesDown++; exact += l.exact; kept += l.s.length; maxGap = Math.max(maxGap, l.gap); }
    });
  });
  if (lanesDown)
    notes.push('timeline down-sampled: ' + group(String(exact)) + ' intervals merged into ' + group(String(kept)) + ' in ' +
               lanesDown + (lanesDown === 1 ? ' lane' : ' lanes') + ' (at most ' + group(String(T.lane_limit)) +
               ' per lane; gaps shorter than ' + fmtDur(maxGap) + ' closed). Only the drawing is simplified: every figure ' +
               'in the tables is exact.');
  var runNotes = document.getElementById('run-notes');
  notes.forEach(function (n, i) {
    var p = el('p', { class: 'note', text: n });
    if (n.indexOf('down-sampled') >= 0) p.id = 'timeline-note';
    if (n.indexOf('first') === 0 || n.indexOf('Timelines are shown') === 0) p.id = 'timeline-ranks-note';
    s.append(p);
    if (runNotes) runNotes.append(el('p', { class: 'note', text: n }));
  });

  // Controls: the rank whose iterations are listed, an iteration, the whole run.
  var ctl = el('div', { class: 'controls' });
  var rankSel = el('select', { id: 'iter-rank', 'aria-label': 'rank' });
  RANKS.forEach(function (r, i) { if (itersOf[i].length) rankSel.append(el('option', { value: String(i), text: rankLabel(i) })); });
  var iterSel = el('select', { id: 'iter-select', 'aria-label': 'iteration' });
  var whole = el('button', { id: 'whole-run', type: 'button', text: 'whole run' });
  var win = el('span', { id: 'tl-window', class: 'muted' });
  ctl.append(el('label', null, 'iterations of ', rankSel), el('label', null, 'zoom to ', iterSel), whole, win);
  if (!rankSel.options.length) { rankSel.disabled = true; iterSel.disabled = true; }
  s.append(ctl);
  var legend = el('div', { class: 'legend' });
  [['compute', 'var(--compute)'], ['communication, exposed', 'var(--comm)'], ['communication, hidden by compute', 'var(--hidden)'],
   ['memory copies/sets', 'var(--memory)'], ['overlap (shaded)', 'var(--shade)'], ['iteration boundary', '#9aa3b2']]
    .forEach(function (x) { legend.append(el('span', null, el('i', { style: 'background:' + x[1] }), x[0])); });
  s.append(legend);

  var full = [0, Math.max(Number(T.end) || 0, 1000)];
  var view = full.slice();
  var axisRow = el('div', { class: 'tl-row' }, el('div', { class: 'tl-label' }), el('canvas', { class: 'tl-canvas tl-axis' }));
  s.append(axisRow);
  var rowEls = rows.map(function (r) {
    var lab = el('div', { class: 'tl-label', title: String((RANKS[r.index] || {}).source || '') },
                 el('b', { text: rankLabel(r.index) }), basename((RANKS[r.index] || {}).source));
    var cv = el('canvas', { class: 'tl-canvas', 'data-rank-index': String(r.index) });
    var row = el('div', { class: 'tl-row' }, lab, cv);
    s.append(row);
    return cv;
  });
  if (!rows.length) s.append(el('p', { class: 'muted', text: 'No timeline data.' }));
  var css = getComputedStyle(document.documentElement);
  var color = function (name, dflt) { return (css.getPropertyValue(name) || '').trim() || dflt; };
  var C = { compute: color('--compute', '#3b6fd8'), comm: color('--comm', '#d9453b'), hidden: color('--hidden', '#17a88b'),
            memory: color('--memory', '#4caf50'), shade: color('--shade', 'rgba(255,193,7,0.38)') };

  function prepare(cv, h) {
    var w = cv.clientWidth || 800, dpr = window.devicePixelRatio || 1;
    if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
      cv.width = Math.round(w * dpr);
      cv.height = Math.round(h * dpr);
    }
    var ctx = cv.getContext('2d');
    if (!ctx) return null;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    return { ctx: ctx, w: w };
  }
  function drawAxis() {
    var cv = axisRow.lastChild, p = prepare(cv, 24);
    if (!p) return;
    var a = view[0], b = view[1], step = niceStep(b - a, Math.max(2, p.w / 110));
    p.ctx.fillStyle = '#5d6675';
    p.ctx.font = '11px system-ui, sans-serif';
    for (var t = Math.ceil(a / step) * step; t <= b; t += step) {
      var x = (t - a) / (b - a) * p.w, label = fmtTick(t, step);
      p.ctx.fillRect(x, 16, 1, 8);
      if (x + 3 + p.ctx.measureText(label).width <= p.w) p.ctx.fillText(label, x + 3, 12);
    }
  }
  function drawRow(cv, r) {
    var p = prepare(cv, 46);
    if (!p) return;
    var ctx = p.ctx, W = p.w, a = view[0], b = view[1];
    ctx.fillStyle = '#f6f7f9';
    ctx.fillRect(0, 0, W, 46);
    if (!r.any) {
      ctx.fillStyle = '#5d6675';
      ctx.font = '12px system-ui, sans-serif';
      ctx.fillText('no GPU activity in this trace', 6, 28);
      return;
    }
    // Iteration boundaries.
    var its = itersOf[r.index] || [];
    if (its.length <= 5000) {
      ctx.fillStyle = '#9aa3b2';
      its.forEach(function (j) {
        var st = WINDOWS[j][1];
        if (st >= a && st <= b) ctx.fillRect((st - a) / (b - a) * W, 0, 1, 46);
      });
    }
    ctx.fillStyle = C.compute; drawLane(ctx, r.compute, a, b, W, 3, 13);
    ctx.fillStyle = C.comm; drawLane(ctx, r.comm, a, b, W, 19, 13);
    ctx.fillStyle = C.hidden; drawLane(ctx, r.overlap, a, b, W, 19, 13);
    ctx.fillStyle = C.memory; drawLane(ctx, r.memory, a, b, W, 35, 8);
    ctx.fillStyle = C.shade; drawLane(ctx, r.overlap, a, b, W, 1, 33);
  }
  function draw() {
    drawAxis();
    rows.forEach(function (r, i) { drawRow(rowEls[i], r); });
    win.textContent = fmtDur(Math.round(view[0])) + ' \u2013 ' + fmtDur(Math.round(view[1])) + ' (' +
                      fmtDur(Math.round(view[1] - view[0])) + ' shown)';
  }
  function setView(a, b) {
    var span = Math.max(1000, b - a);
    if (span > full[1] - full[0]) { a = full[0]; span = full[1] - full[0]; }
    a = Math.max(full[0], Math.min(a, full[1] - span));
    view = [a, a + span];
    draw();
  }

  // Wheel zooms around the pointer, dragging pans, double-click shows the whole run.
  var canvases = rowEls.concat([axisRow.lastChild]);
  var drag = null;
  canvases.forEach(function (cv) {
    cv.addEventListener('wheel', guarded('wheel', function (e) {
      e.preventDefault();
      var rect = cv.getBoundingClientRect(), f = e.deltaY > 0 ? 1.25 : 0.8;
      var t = view[0] + (e.clientX - rect.left) / Math.max(1, rect.width) * (view[1] - view[0]);
      setView(t - (t - view[0]) * f, t + (view[1] - t) * f);
    }), { passive: false });
    cv.addEventListener('mousedown', function (e) { drag = { x: e.clientX, a: view[0], b: view[1], w: cv.clientWidth || 1 }; });
    cv.addEventListener('dblclick', guarded('dblclick', function () { iterSel.value = ''; setView(full[0], full[1]); }));
  });
  window.addEventListener('mousemove', guarded('pan', function (e) {
    if (!drag) return;
    var dt = (e.clientX - drag.x) / drag.w * (drag.b - drag.a);
    setView(drag.a - dt, drag.b - dt);
  }));
  window.addEventListener('mouseup', function () { drag = null; });
  window.addEventListener('resize', guarded('resize', draw));
  whole.addEventListener('click', guarded('whole run', function () { iterSel.value = ''; setView(full[0], full[1]); }));
  rankSel.addEventListener('change', guarded('rank select', function () { selectIterRank(Number(rankSel.value), false); }));
  iterSel.addEventListener('change', guarded('iteration select', function () {
    if (iterSel.value === '') setView(full[0], full[1]);
    else zoomToIteration(Number(iterSel.value));
  }));

  timeline = {
    zoom: function (a, b) { setView(a, b); },
    fillIterations: function (ri) {
      rankSel.value = String(ri);
      iterSel.textContent = '';
      iterSel.append(el('option', { value: '', text: 'whole run' }));
      itersOf[ri].forEach(function (j) {
        var it = ITERS[j];
        iterSel.append(el('option', { value: String(j), text: 'iteration ' + it.index +
            (it.step !== null && it.step !== undefined ? ' (step ' + it.step + ')' : '') + (it.warmup ? ', warm-up' : '') }));
      });
    },
    select: function (j) { iterSel.value = String(j); },
  };
  draw();
}

function zoomToIteration(j) {
  var w = WINDOWS[j];
  if (!w || !timeline) return;
  timeline.select(j);
  timeline.zoom(w[1], w[2]);
  var rows = document.querySelectorAll('#iter-table tbody tr');
  rows.forEach(function (tr) { tr.classList.toggle('sel', tr.getAttribute('data-iteration') === String(j)); });
}

// ---------------------------------------------------------------- iteration table
var ITER_COLS = [
  ['index', 'index', 'int'], ['step', 'step', 'int'], ['warm-up', 'warmup', 'bool'], ['wall', 'wall_ns', 'dur'],
  ['compute', 'compute_ns', 'dur'], ['comm', 'comm_ns', 'dur'], ['overlap', 'overlap_ns', 'dur'],
  ['exposed comm', 'exposed_comm_ns', 'dur'], ['overlap ratio', 'overlap_ratio', 'pct'], ['bound', 'achievable_ratio', 'pct'],
  ['comm ops', 'comm_ops', 'int'], ['kernels', 'kernels', 'int']];
function renderIterationSection() {
  var s = section('iterations', 'Iterations', 'The iterations of the rank picked above (or in the rank table); click a row to ' +
                  'zoom the timelines to it.');
  s.append(el('div', { id: 'iter-table-box' }));
  var first = -1;
  RANKS.forEach(function (r, i) { if (first < 0 && itersOf[i].length) first = i; });
  if (first < 0) document.getElementById('iter-table-box').append(el('p', { class: 'muted', text: 'No iterations were found.' }));
  else selectIterRank(first, false);
}
function selectIterRank(ri, scroll) {
  var box = document.getElementById('iter-table-box');
  if (!box || !itersOf[ri]) return;
  state.iterRank = ri;
  box.textContent = '';
  document.querySelectorAll('#rank-table tbody tr').forEach(function (tr) {
    tr.classList.toggle('sel', tr.getAttribute('data-rank-index') === String(ri));
  });
  var list = itersOf[ri];
  if (!list.length) {
    box.append(el('p', { class: 'muted', text: rankLabel(ri) + ': no iterations were found (iteration source: ' +
                                               String(RANKS[ri].iteration_source) + ').' }));
    return;
  }
  if (timeline) timeline.fillIterations(ri);
  box.append(el('h3', { text: rankLabel(ri) + ': ' + list.length + ' iterations' }));
  var t = el('table', { class: 'data', id: 'iter-table' });
  var hr = el('tr');
  ITER_COLS.forEach(function (c) { hr.append(el('th', { text: c[0] })); });
  t.append(el('thead', null, hr));
  var tb = el('tbody');
  list.slice(0, CAP).forEach(function (j) {
    var tr = el('tr', { class: 'click', 'data-iteration': String(j) });
    ITER_COLS.forEach(function (c) { tr.append(cell('td', ['iterations', j, c[1]], c[2])); });
    tr.addEventListener('click', guarded('iteration row', function () { zoomToIteration(j); }));
    tb.append(tr);
  });
  t.append(tb);
  box.append(tableWrap(t));
  if (list.length > CAP) box.append(el('p', { class: 'note', text: 'first ' + CAP + ' of ' + list.length + ' rows shown' }));
  if (scroll && box.scrollIntoView) box.scrollIntoView({ block: 'nearest' });
}

// ---------------------------------------------------------------- cross-rank view
// Shown when the summary has a non-empty cross_rank[] (docs/cross-rank.md): per rank, waiting vs
// transfer; the skew of each listed collective over time; stragglers and clock offsets. The generic
// tables of these keys follow among the analyzer sections.
var XR_WAIT = '#e08a1e', XR_EXPOSED = '#b3261e', XR_TRANSFER = '#3b6fd8';
var XR_MAX_STRAGGLERS = 8, XR_MAX_OFFSETS = 64;
function num(v) { return v === null || v === undefined ? 0 : Number(v); }
function legendItem(color, text) { return el('span', null, el('i', { style: 'background:' + color }), text); }
function renderCrossRank() {
  var XR = S.cross_rank;
  if (!Array.isArray(XR) || !XR.length) return;
  var s = section('cross-rank-view', 'Cross-rank view',
      'A rank\'s communication kernels start when it launches the collective and spin until the last rank arrives: that ' +
      'spinning is waiting (lost to a straggler, not fixable by overlap on this rank); the rest is transfer. Exposed wait ' +
      'is waiting while no compute ran on the rank.');

  // 1. Per rank: wait vs transfer, exposed wait marked; one scale for all ranks.
  s.append(el('h3', { text: 'Waiting vs transfer per rank' }));
  var lg = el('div', { class: 'legend' });
  lg.append(legendItem(XR_WAIT, 'wait (for the last rank)'), legendItem(XR_EXPOSED, 'exposed wait (no compute running)'),
            legendItem(XR_TRANSFER, 'transfer'));
  s.append(lg);
  var maxT = 0;
  XR.forEach(function (r) { maxT = Math.max(maxT, num(r.wait_ns) + num(r.transfer_ns)); });
  if (!(maxT > 0)) maxT = 1;
  var t = el('table', { class: 'data', id: 'xr-bars' }), hr = el('tr');
  ['rank', 'wait / transfer', 'wait', 'exposed wait', 'transfer', 'exposed comm', 'collectives'].forEach(function (c) {
    hr.append(el('th', { text: c }));
  });
  t.append(el('thead', null, hr));
  var tb = el('tbody');
  XR.forEach(function (r, i) {
    var w = num(r.wait_ns), x = num(r.transfer_ns), ex = Math.min(num(r.exposed_wait_ns), w), W = 600;
    var g = svg('svg', { class: 'xr-bar', viewBox: '0 0 ' + W + ' 18', preserveAspectRatio: 'none', role: 'img',
                         'data-rank-index': String(i) });
    g.append(svg('rect', { x: 0, y: 0, width: W, height: 18, fill: '#f6f7f9' }));
    var ww = w / maxT * W, xw = x / maxT * W, ew = ex / maxT * W;
    function bar(x0, width, y, h, color, tip) {
      if (!(width > 0)) return;
      var rc = svg('rect', { x: x0.toFixed(2), y: y, width: Math.max(width, 1).toFixed(2), height: h, fill: color });
      var tt = svg('title');
      tt.textContent = tip;
      rc.append(tt);
      g.append(rc);
    }
    var who = 'rank ' + String(r.rank);
    bar(0, ww, 2, 14, XR_WAIT, who + ': wait ' + fmtDur(r.wait_ns));
    bar(0, ew, 6, 6, XR_EXPOSED, who + ': exposed wait ' + fmtDur(r.exposed_wait_ns));
    bar(ww, xw, 2, 14, XR_TRANSFER, who + ': transfer ' + fmtDur(r.transfer_ns));
    var tr = el('tr', { class: 'xr-row', 'data-rank-index': String(i) });
    tr.append(cell('td', ['cross_rank', i, 'rank'], 'int'), el('td', { class: 'xr-barcell' }, g),
              cell('td', ['cross_rank', i, 'wait_ns'], 'dur'), cell('td', ['cross_rank', i, 'exposed_wait_ns'], 'dur'),
              cell('td', ['cross_rank', i, 'transfer_ns'], 'dur'), cell('td', ['cross_rank', i, 'exposed_comm_ns'], 'dur'),
              cell('td', ['cross_rank', i, 'collectives'], 'int'));
    tb.append(tr);
  });
  t.append(tb);
  s.append(tableWrap(t));

  // 2. Skew over time, one dot per listed collective, coloured by the rank that arrived last.
  var C = Array.isArray(S.collectives) ? S.collectives : [];
  s.append(el('h3', { text: 'Skew of each collective over time' }));
  if (!C.length) s.append(el('p', { class: 'muted', text: 'No collective is listed.' }));
  else s.append(skewChart(C));
  var listed = getPath(S, ['collectives_summary', 'listed']), matched = getPath(S, ['collectives_summary', 'matched']);
  if (typeof listed === 'number' && typeof matched === 'number' && listed < matched)
    s.append(el('p', { class: 'note', id: 'xr-skew-note' }, 'showing the ', cell('span', ['collectives_summary', 'listed'], 'int'),
                ' with the largest skew of ', cell('span', ['collectives_summary', 'matched'], 'int'), ' matched collectives'));

  // 3. Stragglers: a line per rank, most costly first (the summary's order).
  var ST = Array.isArray(S.stragglers) ? S.stragglers : [];
  s.append(el('h3', { text: 'Stragglers' }));
  if (!ST.length) {
    s.append(el('p', { class: 'muted', text: 'No collective was skewed beyond the straggler threshold.' }));
  } else {
    var ul = el('ul', { class: 'xr-stragglers', id: 'xr-stragglers' });
    ST.slice(0, XR_MAX_STRAGGLERS).forEach(function (x, i) {
      var li = el('li', { 'data-straggler': String(i) }, 'rank ', cell('span', ['stragglers', i, 'rank'], 'int'), ' arrived last in ',
                  cell('span', ['stragglers', i, 'last_arrivals'], 'int'), ' of ',
                  cell('span', ['stragglers', i, 'collectives_counted'], 'int'), ' counted collectives (',
                  cell('span', ['stragglers', i, 'last_fraction'], 'pct'), '); the other ranks waited ',
                  cell('span', ['stragglers', i, 'others_wait_ns'], 'dur'), ' for it');
      if (x.mean_lateness_ns !== null && x.mean_lateness_ns !== undefined)
        li.append(' (', cell('span', ['stragglers', i, 'mean_lateness_ns'], 'dur'), ' after the next-latest rank on average)');
      ul.append(li);
    });
    s.append(ul);
    if (ST.length > XR_MAX_STRAGGLERS)
      s.append(el('p', { class: 'muted', text: 'first ' + XR_MAX_STRAGGLERS + ' of ' + ST.length + ' ranks; all are in the stragglers table below' }));
  }

  // Clock offsets, applied ones highlighted.
  var CO = Array.isArray(S.clock_offsets) ? S.clock_offsets : [];
  s.append(el('h3', { text: 'Clock domains' }));
  if (!CO.length) { s.append(el('p', { class: 'muted', text: 'none' })); return; }
  var ct = el('table', { class: 'data', id: 'xr-clocks' }), chr = el('tr');
  ['domain', 'ranks', 'reference', 'offset', 'noise', 'samples', 'applied'].forEach(function (c) { chr.append(el('th', { text: c })); });
  ct.append(el('thead', null, chr));
  var ctb = el('tbody'), applied = 0;
  CO.forEach(function (o) { if (o.applied === true) applied++; });
  CO.slice(0, XR_MAX_OFFSETS).forEach(function (o, i) {
    var tr = el('tr', o.applied === true ? { class: 'xr-applied' } : null);
    tr.append(cell('td', ['clock_offsets', i, 'domain'], 'str'), cell('td', ['clock_offsets', i, 'ranks'], 'json'),
              cell('td', ['clock_offsets', i, 'reference'], 'bool'), cell('td', ['clock_offsets', i, 'offset_ns'], 'dur'),
              cell('td', ['clock_offsets', i, 'noise_ns'], 'dur'), cell('td', ['clock_offsets', i, 'samples'], 'int'),
              cell('td', ['clock_offsets', i, 'applied'], 'bool'));
    ctb.append(tr);
  });
  ct.append(ctb);
  s.append(el('p', { class: 'muted', id: 'xr-clock-note', text: applied ? applied + ' of ' + CO.length +
      ' clock domains had their offset applied (highlighted): their times were shifted onto the reference clock.' :
      'No clock offset was applied: every domain\'s times are used as recorded.' }));
  s.append(tableWrap(ct));
  if (CO.length > XR_MAX_OFFSETS)
    s.append(el('p', { class: 'muted', text: 'first ' + XR_MAX_OFFSETS + ' of ' + CO.length + ' domains; all are in the clock offsets table below' }));
}
// x: the collective's start from the run's first GPU activity (the timelines' origin); y: its skew.
function skewChart(C) {
  var W = 900, H = 260, L = 64, R = 14, TOP = 12, B = 36;
  var base = BigInt(String(T.base_ns || '0')), xs = [], maxX = Math.max(Number(T.end) || 0, 1000), maxY = 0;
  C.forEach(function (c, i) {
    var st = c.start_ns;
    xs[i] = typeof st === 'number' || typeof st === 'bigint' ? Number(BigInt(st) - base) : null;
    if (xs[i] !== null) maxX = Math.max(maxX, xs[i]);
    maxY = Math.max(maxY, num(c.skew_ns));
  });
  var thr = getPath(S, ['collectives_summary', 'straggler_threshold_ns']);
  if (!(maxY > 0)) maxY = 1000;
  var X = function (v) { return L + Math.max(0, v) / maxX * (W - L - R); };
  var Y = function (v) { return TOP + (1 - v / maxY) * (H - TOP - B); };
  var g = svg('svg', { class: 'chart', id: 'xr-skew', viewBox: '0 0 ' + W + ' ' + H, role: 'img' });
  g.append(svg('title')); g.lastChild.textContent = 'Skew of each collective over time';
  var ys = niceStep(maxY, 4);
  for (var yv = 0; yv <= maxY + 1e-9; yv += ys) {
    var y = Y(yv);
    g.append(svg('line', { x1: L, x2: W - R, y1: y, y2: y, stroke: '#dde1e8' }));
    var tx = svg('text', { x: L - 6, y: y + 4, 'text-anchor': 'end' });
    tx.textContent = fmtTick(yv, ys);
    g.append(tx);
  }
  var xsStep = niceStep(maxX, 10);
  for (var xv = 0; xv <= maxX; xv += xsStep) {
    var t2 = svg('text', { x: X(xv), y: H - 20, 'text-anchor': 'middle' });
    t2.textContent = fmtTick(xv, xsStep);
    g.append(t2);
  }
  var xl = svg('text', { x: W - R, y: H - 2, 'text-anchor': 'end' });
  xl.textContent = 'start of the collective, from the run\'s first GPU activity';
  g.append(xl);
  if (typeof thr === 'number' && thr > 0 && thr < maxY) {
    g.append(svg('line', { x1: L, x2: W - R, y1: Y(thr), y2: Y(thr), stroke: '#9a6700', 'stroke-dasharray': '4 3' }));
    var tl = svg('text', { x: L + 4, y: Y(thr) - 4, 'text-anchor': 'start' });
    tl.textContent = 'straggler threshold ' + fmtDur(thr);
    g.append(tl);
  }
  // Colours by last rank (ranks in ascending order, as in the legend): the rank's colour in the per-iteration charts.
  var lastRanks = [], seen = {};
  C.forEach(function (c) { var k = String(c.last_rank); if (!seen[k]) { seen[k] = true; lastRanks.push(c.last_rank); } });
  lastRanks.sort(function (a, b) { return (a === null) - (b === null) || Number(a) - Number(b); });
  var colorOf = {};
  lastRanks.forEach(function (r) {
    var idx = -1;
    RANKS.forEach(function (x, i) { if (idx < 0 && x.rank === r) idx = i; });
    colorOf[String(r)] = r === null ? '#5d6675' : rankColor(idx >= 0 ? idx : Number(r));
  });
  C.forEach(function (c, i) {
    if (xs[i] === null) return;
    var color = colorOf[String(c.last_rank)];
    var pt = svg('circle', { class: 'xr-pt', cx: X(xs[i]).toFixed(1), cy: Y(num(c.skew_ns)).toFixed(1), r: 3.5,
                             fill: color, 'fill-opacity': 0.8, stroke: color, 'data-collective': String(i) });
    var tt = svg('title');
    tt.textContent = String(c.op) + ', ' + (c.bytes === null || c.bytes === undefined ? 'bytes n/a' : group(String(c.bytes)) + ' bytes') +
        ': skew ' + fmtDur(c.skew_ns) + ', last rank ' + (c.last_rank === null ? '?' : String(c.last_rank)) + ', at ' +
        fmtDur(xs[i]) + ' (' + String(c.ranks) + ' ranks, ' + String(c.key) + ')';
    pt.append(tt);
    g.append(pt);
  });
  var lg = el('div', { class: 'legend', id: 'xr-skew-legend' }, 'last to arrive:');
  lastRanks.forEach(function (r) { lg.append(legendItem(colorOf[String(r)], r === null ? 'rank ?' : 'rank ' + String(r))); });
  return el('figure', { style: 'margin:8px 0 6px' }, el('figcaption', { class: 'muted', text:
      'Skew (last arrival minus first) of each listed collective by its start time; the colour is the rank that arrived last. ' +
      'Hover a dot for its operation.' }), g, lg);
}

// ---------------------------------------------------------------- analyzer sections (generic)
var CORE_KEYS = ['schema', 'ranks', 'iterations', 'verdict', 'data_quality', 'tool'];
var KNOWN_SECTIONS = [
  ['collectives_summary', 'Collectives across ranks: summary'], ['collectives', 'Collectives matched across ranks'],
  ['stragglers', 'Cross-rank skew: stragglers'], ['clock_offsets', 'Clock offsets between ranks'],
  ['cross_rank', 'Cross-rank'], ['op_types', 'Communication by operation type'], ['buckets', 'DDP gradient buckets'],
  ['bucket_stalls', 'DDP bucket stalls'], ['fsdp', 'FSDP'], ['fsdp_allgathers', 'FSDP all-gathers'],
  ['tp', 'Tensor parallelism']];

function arrayTable(path, arr, into) {
  if (!arr.length) { into.append(el('p', { class: 'muted', text: 'none' })); return; }
  var rows = arr.slice(0, CAP), cols = [], seen = {}, scalars = false;
  rows.forEach(function (r) {
    if (isPlainObject(r)) Object.keys(r).forEach(function (c) { if (!Object.prototype.hasOwnProperty.call(seen, c)) { seen[c] = true; cols.push(c); } });
    else scalars = true;
  });
  var t = el('table', { class: 'data', 'data-section': path.join('.') });
  var hr = el('tr');
  cols.forEach(function (c) { hr.append(el('th', { text: c })); });
  if (scalars) hr.append(el('th', { text: 'value' }));
  t.append(el('thead', null, hr));
  var tb = el('tbody');
  rows.forEach(function (r, i) {
    var tr = el('tr');
    cols.forEach(function (c) { tr.append(cell('td', path.concat([i, c]))); });
    if (scalars) tr.append(isPlainObject(r) ? el('td') : cell('td', path.concat([i])));
    tb.append(tr);
  });
  t.append(tb);
  into.append(tableWrap(t));
  if (arr.length > CAP) into.append(el('p', { class: 'note', text: 'first ' + CAP + ' of ' + arr.length + ' rows shown' }));
}
function objectTable(path, obj, into) {
  var keys = Object.keys(obj), t = el('table', { class: 'data', 'data-section': path.join('.') }), tb = el('tbody'), subs = [];
  keys.forEach(function (k) {
    var v = obj[k];
    if (Array.isArray(v) && v.length && v.every(isPlainObject)) { subs.push(k); return; }
    tb.append(el('tr', null, el('th', { text: k }), cell('td', path.concat([k]))));
  });
  if (tb.childNodes.length) { t.append(tb); into.append(tableWrap(t)); }
  subs.forEach(function (k) {
    into.append(el('h3', { text: path.concat([k]).join(' \u203a ') }));
    arrayTable(path.concat([k]), obj[k], into);
  });
}
function renderValue(key, title) {
  var v = S[key];
  var s = section('section-' + key, title);
  s.setAttribute('data-key', key);
  if (title !== key) s.querySelector('h2').append(el('span', { class: 'muted', text: ' (' + key + ')' }));
  if (Array.isArray(v)) arrayTable([key], v, s);
  else if (isPlainObject(v)) objectTable([key], v, s);
  else s.append(el('p', null, cell('span', [key])));
}
function renderSections() {
  var known = {};
  CORE_KEYS.forEach(function (k) { known[k] = true; });
  known.findings = true;
  KNOWN_SECTIONS.forEach(function (x) {
    known[x[0]] = true;
    if (Object.prototype.hasOwnProperty.call(S, x[0])) guarded('section ' + x[0], renderValue)(x[0], x[1]);
  });
  Object.keys(S).forEach(function (k) { if (!known[k]) guarded('section ' + k, renderValue)(k, k); });
}
function renderFindings() {
  if (!Object.prototype.hasOwnProperty.call(S, 'findings')) return;
  renderValue('findings', 'Findings');
}

// ---------------------------------------------------------------- data quality
function renderDataQuality() {
  var s = section('data-quality', 'Data quality',
      'Counters the importers and analyzers set when the data was not what it should be. Error-severity counters mean data ' +
      'was lost and the figures are not trustworthy.');
  s.append(el('p', null, 'errors: ', cell('span', ['data_quality', 'errors'], 'int'), ', warnings: ',
              cell('span', ['data_quality', 'warnings'], 'int')));
  var t = el('table', { class: 'data', id: 'dq-table' }), tb = el('tbody'), n = 0, total = 0;
  var hr = el('tr');
  ['rank', 'counter', 'severity', 'value', 'description'].forEach(function (c) { hr.append(el('th', { text: c })); });
  t.append(el('thead', null, hr));
  RANKS.forEach(function (r, i) {
    (Array.isArray(r.data_quality) ? r.data_quality : []).forEach(function (q, j) {
      total++;
      if (n >= CAP_DQ) return;
      n++;
      var sev = cell('td', ['ranks', i, 'data_quality', j, 'severity'], 'str');
      sev.classList.add('sev-' + String(q.severity));
      var rk = el('td', { text: rankLabel(i) });
      tb.append(el('tr', null, rk, cell('td', ['ranks', i, 'data_quality', j, 'counter'], 'str'), sev,
                   cell('td', ['ranks', i, 'data_quality', j, 'value'], 'int'),
                   cell('td', ['ranks', i, 'data_quality', j, 'description'], 'str')));
    });
  });
  if (total) {
    t.append(tb);
    s.append(tableWrap(t));
    if (total > n) s.append(el('p', { class: 'note', text: 'first ' + n + ' of ' + total + ' counters shown' }));
  } else {
    s.append(el('p', { class: 'muted', id: 'dq-none', text: 'No data-quality counter is set on any rank.' }));
  }
  var notices = el('ul', { class: 'notices', id: 'notices' }), k = 0;
  RANKS.forEach(function (r, i) {
    (Array.isArray(r.notices) ? r.notices : []).forEach(function (x, j) {
      if (k++ >= CAP_DQ) return;
      notices.append(el('li', null, rankLabel(i) + ': ', cell('span', ['ranks', i, 'notices', j], 'str')));
    });
  });
  if (k) { s.append(el('h3', { text: 'Notices' })); s.append(notices); }
}

guarded('run summary', renderRun)();
guarded('findings', renderFindings)();
guarded('rank table', renderRanks)();
guarded('charts', renderCharts)();
guarded('timelines', renderTimelines)();
guarded('iterations', renderIterationSection)();
guarded('cross-rank view', renderCrossRank)();
guarded('sections', renderSections)();
guarded('data quality', renderDataQuality)();
// A link may name an iteration to zoom to: report.html#iteration=J (J indexes iterations[]).
guarded('location', function () {
  var m = /^#iteration=(\d+)$/.exec(window.location.hash || '');
  if (m && WINDOWS[Number(m[1])]) { selectIterRank(WINDOWS[Number(m[1])][0], false); zoomToIteration(Number(m[1])); }
})();
if (!window.__opErrors.length) document.body.setAttribute('data-status', 'ok');
})();
</script>
</body>
</html>
)OPHTML";

}  // namespace
}  // namespace overlapprof
