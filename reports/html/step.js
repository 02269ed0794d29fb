// ---------------------------------------------------------------- where the step time goes
// The first thing on the page (docs/html-report.md): the verdict, then each rank's step time
// split (step_breakdown, docs/summary-schema.md) as one stacked bar, and the run's. The parts add
// up to the wall time exactly; each bar is drawn on its own 100% scale. Marked cells are the
// summary's numbers (fractions of the wall time, the step time per iteration).
var STEP_PARTS = [
  ['compute_only', 'compute only', '#3b6fd8', 'compute'], ['comm_hidden', 'communication hidden', '#17a88b', 'hidden'],
  ['comm_exposed', 'communication exposed', '#d9453b', 'exposed'],
  ['comm_waiting', 'exposed, waiting for another rank', '#8e44ad', 'waiting'],
  ['memory_only', 'memory only', '#e0a526', 'memory'], ['idle', 'GPU idle', '#c3c8d0', 'idle']];
function stepBar(path, row) {
  var W = 600, H = 18, x = 0;
  var g = svg('svg', { class: 'step-bar', viewBox: '0 0 ' + W + ' ' + H, preserveAspectRatio: 'none', role: 'img',
                       'data-path': path.join('.') });
  var wall = Number(row.wall_ns);
  STEP_PARTS.forEach(function (p) {
    var ns = Number(row[p[0] + '_ns']);
    if (!(wall > 0) || !(ns > 0)) return;
    var w = ns / wall * W;
    var r = svg('rect', { x: x.toFixed(3), y: 0, width: w.toFixed(3), height: H, fill: p[2], 'data-part': p[0] });
    r.append(svg('title', null));
    r.firstChild.textContent = p[1] + ': ' + fmtDur(row[p[0] + '_ns']) + ' (' + fmtPct(ns / wall) + ')';
    g.append(r);
    x += w;
  });
  return g;
}
// ---------------------------------------------------------------- the headline strip
// The page's first lines: is communication hidden, what it costs per step, what to change (the
// verdict). Step time and GPU idle are the summary's cells; the other figures are computed here
// from step_breakdown's run row (the ranks' steady iterations; the only rank's row when the run
// has none), each marked with data-h (its name) and data-hv (its exact value) for the tests:
//   hidden   = comm_hidden / (comm_hidden + comm_exposed + comm_waiting)
//   exposed  = (comm_exposed + comm_waiting) / wall × step_ns  (per step, n/a without step_ns; share = / wall)
//   bound    = min(1, (compute_only + comm_hidden) / (comm_hidden + comm_exposed + comm_waiting))
function headlineRow() {
  var B = S.step_breakdown;
  if (!isPlainObject(B)) return null;
  if (isPlainObject(B.run)) return { path: ['step_breakdown', 'run'], r: B.run };
  if (Array.isArray(B.ranks) && B.ranks.length === 1) return { path: ['step_breakdown', 'ranks', 0], r: B.ranks[0] };
  return null;
}
function headlineFigures(r) {
  var hid = Number(r.comm_hidden_ns), exp = Number(r.comm_exposed_ns) + Number(r.comm_waiting_ns);
  var comm = hid + exp, wall = Number(r.wall_ns), compute = Number(r.compute_only_ns) + hid;
  var step = r.step_ns === null || r.step_ns === undefined ? NaN : Number(r.step_ns);
  return { hidden: comm > 0 ? hid / comm : null, exposed_step: wall > 0 && isFinite(step) ? exp / wall * step : null,
           exposed_share: wall > 0 ? exp / wall : null, waiting_share: wall > 0 ? Number(r.comm_waiting_ns) / wall : null,
           bound: comm > 0 ? Math.min(1, compute / comm) : null };
}
function figure(name, v, kind, tag) {
  var e = el(tag || 'div', { class: tag ? 'h' : 'v', 'data-h': name, 'data-hv': v === null ? 'null' : String(v), text: v === null ? 'n/a' : fmt(kind, v) });
  return e;
}
function renderHeadline() {
  var h = headlineRow();
  var s = section('headline', 'At a glance');
  var v = cell('p', ['verdict'], 'str');
  v.classList.add('verdict');
  v.id = 'step-verdict';
  if (!h) { s.append(v); return; }
  var f = headlineFigures(h.r), strip = el('div', { class: 'headline', id: 'headline' });
  function tile(label, value, sub, cls) {
    var t = el('div', { class: 'tile' + (cls ? ' ' + cls : '') }, value, el('div', { class: 'l', text: label }));
    if (sub) t.append(el('div', { class: 's' }, sub));
    strip.append(t);
  }
  var hiddenCls = f.hidden === null ? '' : f.bound !== null && f.hidden >= 0.9 * f.bound ? 'good' : f.hidden < 0.5 ? 'bad' : '';
  tile('of communication hidden by compute', figure('hidden', f.hidden, 'pct'), null, hiddenCls);
  var idleCell = cell('div', h.path.concat(['fractions', 'idle']), 'pct');
  tile('exposed communication per step', figure('exposed_step', f.exposed_step === null ? null : Math.round(f.exposed_step), 'dur'),
       el('span', null, figure('exposed_share', f.exposed_share, 'pct', 'b'), ' of the step' +
          (f.waiting_share ? ', ' + fmtPct(f.waiting_share) + ' waiting for other ranks' : '')),
       f.exposed_share !== null && f.exposed_share > 0.1 ? 'bad' : '');
  var st = cell('div', h.path.concat(['step_ns']), 'dur');
  st.classList.add('v');
  tile('step time', st, el('span', null, cell('span', h.path.concat(['iterations']), 'int'), ' steady iterations' +
       (Number(h.r.ranks) > 1 ? ' \u00d7 ' + h.r.ranks + ' ranks' : '')));
  idleCell.classList.add('v');
  tile('GPU idle', idleCell, null, Number(h.r.fractions && h.r.fractions.idle) > 0.2 ? 'bad' : '');
  tile('bound: the most overlap could hide', figure('bound', f.bound, 'pct'), 'min(1, compute / communication)');
  s.append(strip, v);
  var sub = el('p', { class: 'muted', text: 'Over the steady iterations (warm-up left out) of ' + (Number(h.r.ranks) > 1 ?
      'all ' + h.r.ranks + ' ranks' : 'the rank') + '; the split of each rank\u2019s step follows.' });
  s.append(sub);
}
// A table of contents: a link per section (scrolls to it; no href, the page loads nothing).
function renderToc() {
  var secs = Array.prototype.slice.call(document.querySelectorAll('main > section'));
  if (secs.length < 3) return;
  var nav = el('nav', { class: 'toc', id: 'toc' }, el('b', { text: 'Contents:' }));
  secs.forEach(function (sec) {
    var h = sec.querySelector('h2');
    if (!h || !sec.id) return;
    var a = el('a', { role: 'link', tabindex: '0', 'data-target': sec.id, text: h.firstChild ? h.firstChild.textContent : h.textContent });
    a.addEventListener('click', function () { sec.scrollIntoView(); });
    nav.append(a);
  });
  var first = secs[0];
  first.parentNode.insertBefore(nav, first.nextSibling);
}
// Data quality goes right under the headline when any counter is at warning or error.
function placeDataQuality() {
  var dq = document.getElementById('data-quality'), head = document.getElementById('headline');
  var n = Number(getPath(S, ['data_quality', 'errors']) || 0) + Number(getPath(S, ['data_quality', 'warnings']) || 0);
  if (!dq || !n) return;
  var anchor = head ? head.closest('section') : null;
  if (anchor) anchor.parentNode.insertBefore(dq, anchor.nextSibling);
  dq.classList.add('dq-top');
}

function renderStepBreakdown() {
  var B = S.step_breakdown;
  if (!isPlainObject(B) || !Array.isArray(B.ranks)) return;
  var s = section('section-step_breakdown', 'Where the step time goes',
      'Each rank\u2019s wall time (summed over its steady iterations, else the whole trace) split exactly into compute ' +
      'only, communication hidden by compute, communication exposed, exposed communication spent waiting for another ' +
      'rank to arrive, memory copies hidden by neither, and GPU idle.');
  s.setAttribute('data-key', 'step_breakdown');
  var lg = el('div', { class: 'legend', id: 'step-legend' });
  STEP_PARTS.forEach(function (p) {
    lg.append(el('span', { 'data-part': p[0] }, el('i', { style: 'background:' + p[2] }), p[1]));
  });
  s.append(lg);
  var t = el('table', { class: 'data', id: 'step-table' }), hr = el('tr');
  ['rank', 'iterations', 'step time', 'split of the step'].concat(STEP_PARTS.map(function (p) { return p[3]; }))
      .forEach(function (c) { hr.append(el('th', { text: c })); });
  t.append(el('thead', null, hr));
  var tb = el('tbody');
  function row(label, path, r) {
    var tr = el('tr', { 'data-path': path.join('.') });
    tr.append(el('td', { class: 'nw', text: label }), cell('td', path.concat(['iterations']), 'int'),
              cell('td', path.concat(['step_ns']), 'dur'), el('td', { class: 'step-barcell' }, stepBar(path, r)));
    STEP_PARTS.forEach(function (p) { tr.append(cell('td', path.concat(['fractions', p[0]]), 'pct')); });
    tb.append(tr);
  }
  // The run first (with several ranks), so that it stays in view when the ranks' rows are collapsed.
  if (isPlainObject(B.run) && B.ranks.length > 1) row('run', ['step_breakdown', 'run'], B.run);
  B.ranks.slice(0, CAP_DQ).forEach(function (r, i) { row(rankLabel(i), ['step_breakdown', 'ranks', i], r); });
  t.append(tb);
  s.append(tableWrap(t));
  collapse(t, s, tb.rows.length);
  if (B.ranks.length > CAP_DQ) s.append(el('p', { class: 'note', text: 'first ' + CAP_DQ + ' of ' + B.ranks.length + ' ranks shown' }));
}
