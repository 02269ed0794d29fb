// ---------------------------------------------------------------- analyzer sections (generic)
var CORE_KEYS = ['schema', 'ranks', 'iterations', 'verdict', 'data_quality', 'tool'];
var KNOWN_SECTIONS = [
  ['collectives_summary', 'Collectives across ranks: summary'], ['collectives', 'Collectives matched across ranks'],
  ['stragglers', 'Cross-rank skew: stragglers'], ['clock_offsets', 'Clock offsets between ranks'],
  ['cross_rank', 'Cross-rank'], ['op_types', 'Communication by operation type'], ['buckets', 'DDP gradient buckets'],
  ['bucket_stalls', 'DDP bucket stalls'], ['fsdp', 'FSDP'], ['fsdp_allgathers', 'FSDP all-gathers'],
  ['tp', 'Tensor parallelism'], ['point_to_point', 'Point-to-point (send/recv)']];

// An object of scalars (a skew's quantiles, a wait per rank) in a column becomes a column per key
// (at most MAX_SUBCOLS; with more keys it is one cell of text); nothing is shown as JSON.
var MAX_SUBCOLS = 16;
function isScalarMap(v) {
  return isPlainObject(v) && Object.keys(v).every(function (k) { var x = v[k]; return x === null || typeof x !== 'object'; });
}
// "wait · rank 3" for a per-rank map (keys are rank numbers), else "skew · p90".
function subHeader(col, k) { return human(col) + ' \u00b7 ' + (/^\d+$/.test(k) ? 'rank ' + k : human(k)); }
function arrayTable(path, arr, into) {
  if (!arr.length) { into.append(el('p', { class: 'muted', text: 'none' })); return; }
  var rows = arr.slice(0, CAP), cols = [], seen = {}, scalars = false, subs = {};
  rows.forEach(function (r) {
    if (isPlainObject(r)) Object.keys(r).forEach(function (c) { if (!Object.prototype.hasOwnProperty.call(seen, c)) { seen[c] = true; cols.push(c); } });
    else scalars = true;
  });
  cols.forEach(function (c) {
    var keys = [], ks = {}, ok = true;
    rows.forEach(function (r) {
      var v = isPlainObject(r) ? r[c] : undefined;
      if (v === undefined || v === null) return;
      if (!isScalarMap(v)) { ok = false; return; }
      Object.keys(v).forEach(function (k) { if (!ks[k]) { ks[k] = true; keys.push(k); } });
    });
    if (ok && keys.length && keys.length <= MAX_SUBCOLS) subs[c] = keys;
  });
  var t = el('table', { class: 'data', 'data-section': path.join('.') });
  var hr = el('tr');
  cols.forEach(function (c) {
    if (subs[c]) subs[c].forEach(function (k) { hr.append(el('th', { text: subHeader(c, k) })); });
    else hr.append(el('th', { text: human(c) }));
  });
  if (scalars) hr.append(el('th', { text: 'value' }));
  t.append(el('thead', null, hr));
  var tb = el('tbody');
  rows.forEach(function (r, i) {
    var tr = el('tr');
    cols.forEach(function (c) {
      if (!subs[c]) { tr.append(cell('td', path.concat([i, c]))); return; }
      var v = isPlainObject(r) ? r[c] : undefined;
      subs[c].forEach(function (k) {
        if (isPlainObject(v) && Object.prototype.hasOwnProperty.call(v, k)) tr.append(cell('td', path.concat([i, c, k]), kindFor(c, v[k])));
        else tr.append(el('td', { text: '\u2014' }));
      });
    });
    if (scalars) tr.append(isPlainObject(r) ? el('td') : cell('td', path.concat([i])));
    tb.append(tr);
  });
  t.append(tb);
  into.append(tableWrap(t));
  collapse(t, into, rows.length);
  if (arr.length > CAP) into.append(el('p', { class: 'note', text: 'first ' + CAP + ' of ' + arr.length + ' rows shown' }));
}
function objectTable(path, obj, into) {
  var keys = Object.keys(obj), t = el('table', { class: 'data', 'data-section': path.join('.') }), tb = el('tbody'), subs = [];
  keys.forEach(function (k) {
    var v = obj[k];
    if (Array.isArray(v) && v.length && v.every(isPlainObject)) { subs.push(k); return; }
    if (isScalarMap(v) && Object.keys(v).length) {
      Object.keys(v).forEach(function (sk) {
        tb.append(el('tr', null, el('th', { text: subHeader(k, sk) }), cell('td', path.concat([k, sk]), kindFor(k, v[sk]))));
      });
      return;
    }
    tb.append(el('tr', null, el('th', { text: human(k) }), cell('td', path.concat([k]))));
  });
  if (tb.childNodes.length) { t.append(tb); into.append(tableWrap(t)); }
  subs.forEach(function (k) {
    into.append(el('h3', { text: path.concat([k]).map(human).join(' \u203a ') }));
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
  known.findings = true;  // renderFindings
  known.step_breakdown = true;  // renderStepBreakdown (step.js), first on the page
  KNOWN_SECTIONS.forEach(function (x) {
    known[x[0]] = true;
    if (Object.prototype.hasOwnProperty.call(S, x[0])) guarded('section ' + x[0], renderValue)(x[0], x[1]);
  });
  Object.keys(S).forEach(function (k) { if (!known[k]) guarded('section ' + k, renderValue)(k, human(k)); });
}
// Findings: a finding identical on several ranks (same analyzer, severity and message) is one row
// with the rank list; with none the page says so.
function rankList(ranks) {
  var r = ranks.slice().sort(function (a, b) { return a - b; }), out = [], i = 0;
  while (i < r.length) {
    var j = i;
    while (j + 1 < r.length && r[j + 1] === r[j] + 1) j++;
    out.push(j - i >= 2 ? r[i] + '\u2013' + r[j] : j > i ? r[i] + ', ' + r[j] : String(r[i]));
    i = j + 1;
  }
  return out.join(', ');
}
function renderFindings() {
  var F = Array.isArray(S.findings) ? S.findings : [];
  var s = section('section-findings', 'Findings', 'What to change: one line per finding, errors first; a finding seen on ' +
                  'several ranks is one line with their ranks.');
  s.setAttribute('data-key', 'findings');
  if (!F.length) {
    s.append(el('p', { class: 'muted', id: 'findings-none', text: 'No findings: no analyzer found anything to change.' }));
    return;
  }
  var groups = [], byKey = {};
  F.forEach(function (f, i) {
    var key = JSON.stringify([String(f.analyzer), String(f.severity), String(f.message)]);
    var g = byKey[key];
    if (!g) { g = byKey[key] = { first: i, ranks: [], seen: {}, n: 0 }; groups.push(g); }
    g.n++;
    var rs = Array.isArray(f.ranks) ? f.ranks : f.rank !== null && f.rank !== undefined ? [f.rank] : [];
    rs.forEach(function (r) { if (typeof r === 'number' && !g.seen[r]) { g.seen[r] = true; g.ranks.push(r); } });
  });
  var sev = { error: 0, warning: 1, info: 2 };
  function order(g) { var v = sev[F[g.first].severity]; return v === undefined ? 3 : v; }
  groups.sort(function (a, b) { return order(a) - order(b) || a.first - b.first; });
  var t = el('table', { class: 'data', id: 'findings-table' }), hr = el('tr');
  ['severity', 'finding', 'ranks', 'analyzer'].forEach(function (c) { hr.append(el('th', { text: c })); });
  t.append(el('thead', null, hr));
  var tb = el('tbody');
  groups.forEach(function (g) {
    var i = g.first, sv = cell('td', ['findings', i, 'severity'], 'str');
    sv.classList.add('sev-' + String(F[i].severity));
    var sorted = g.ranks.slice().sort(function (a, b) { return a - b; });
    var rk = el('td', { class: 'merged-ranks', 'data-ranks': sorted.join(','), text: sorted.length ? rankList(sorted) : 'n/a' });
    tb.append(el('tr', { class: 'finding', 'data-merged': String(g.n) }, sv, cell('td', ['findings', i, 'message'], 'str'), rk,
                 cell('td', ['findings', i, 'analyzer'], 'str')));
  });
  t.append(tb);
  s.append(tableWrap(t));
  collapse(t, s, groups.length);
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
    collapse(t, s, n);
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

