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
// Columns whose integers are identifiers (rank, step number, sequence number): shown without
// thousands separators.
var ID_COLS = /^(rank|step|index|seq|ordinal|step_ordinal|iteration|last_rank|first_rank|root|peer|comm_rank|world_size|ranks)$/;
// An integer in ns this large is a point in time (an epoch timestamp), not a duration: it is shown
// as an offset from the run's first GPU activity (the timelines' origin, T.base_ns).
var EPOCH_NS = 1e15;
function fmtAt(v, base) {
  var d = Number(BigInt(String(v)) - BigInt(String(base || '0')));
  return (d < 0 ? '\u2212' : '+') + fmtDur(Math.abs(d));
}
// A nested value as text (never JSON): a list joined by ", ", an object as "key value; ...".
function fmtNested(v) {
  if (v === null || v === undefined) return 'n/a';
  if (Array.isArray(v)) return v.length ? v.map(fmtNested).join(', ') : 'none';
  if (isPlainObject(v)) {
    var ks = Object.keys(v);
    return ks.length ? ks.map(function (k) { return k.replace(/_/g, ' ') + ' ' + fmtNested(v[k]); }).join('; ') : 'none';
  }
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  return String(v);
}
function fmt(kind, v) {
  if (v === null) return 'n/a';
  switch (kind) {
    case 'id': return String(v);
    case 'at': return fmtAt(v, T.base_ns);
    case 'list': return fmtNested(v);
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
  if (v !== null && typeof v === 'object') return 'list';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number' || typeof v === 'bigint') {
    if (/_ns$/.test(col) && Math.abs(Number(v)) >= EPOCH_NS) return 'at';
    if (/_ns$/.test(col)) return 'dur';
    if (ID_COLS.test(col) && (typeof v === 'bigint' || Number.isInteger(v))) return 'id';
    if (/(ratio|fraction)$/.test(col)) return 'pct';
    return typeof v === 'bigint' || Number.isInteger(v) ? 'int' : 'num';
  }
  return 'str';
}
// A column's header: words, not identifiers ("exposed", not "exposed_ns"); the cells carry the units
// of durations and shares, other units go in the header.
var HEADERS = { algbw_GBps: 'algbw (GB/s)', busbw_GBps: 'busbw (GB/s)', bandwidth_GBps: 'bandwidth (GB/s)',
                ops_under_1MiB: 'ops under 1 MiB', bytes: 'bytes', warmup: 'warm-up', p2p_skipped: 'p2p skipped' };
function human(col) {
  col = String(col);
  if (Object.prototype.hasOwnProperty.call(HEADERS, col)) return HEADERS[col];
  return col.replace(/_ns$/, '').replace(/_GBps$/, ' (GB/s)').replace(/_MiB$/, ' (MiB)').replace(/_bytes$/, ' (bytes)')
            .replace(/_fraction$/, ' share').replace(/_pct$/, ' (%)').replace(/_/g, ' ');
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
    if (k === 'at') e.setAttribute('data-base', String(T.base_ns));
  }
  e.textContent = fmt(k, v);
  if (typeof v === 'number' || typeof v === 'bigint') e.classList.add('num');
  if (k === 'json' || k === 'list') e.classList.add('json');
  if (k === 'str' && typeof v === 'string' && v.length <= 40) e.classList.add('nw');
  return e;
}
function basename(p) { var s = String(p || ''); var i = s.lastIndexOf('/'); return i >= 0 ? s.slice(i + 1) : s; }
// Rank colours (charts, skew dots): none is the exposed red, the hidden green or the compute blue.
var RANK_COLORS = ['#7b3fb5', '#e07b00', '#8c6d31', '#d6579b', '#6b8e23', '#4d4d4d', '#1f9ec9', '#a0522d', '#b8a000',
                   '#9467bd', '#5f3a1e', '#c21d7d', '#3d7a3d', '#707bff', '#ff7f50', '#2e4057'];
// Beyond 16 ranks the colours repeat; the charts' dash pattern (rankDash) tells them apart.
function rankColor(i) { return RANK_COLORS[i % RANK_COLORS.length]; }
function rankDash(i) { return i < RANK_COLORS.length ? null : ['6 3', '2 3', '8 3 2 3'][Math.floor(i / RANK_COLORS.length - 1) % 3]; }

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

