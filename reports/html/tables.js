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
  known.step_breakdown = true;  // renderStepBreakdown (step.js), first on the page
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

