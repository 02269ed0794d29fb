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
function renderStepBreakdown() {
  var B = S.step_breakdown;
  if (!isPlainObject(B) || !Array.isArray(B.ranks)) return;
  var s = section('section-step_breakdown', 'Where the step time goes',
      'Each rank\u2019s wall time (summed over its steady iterations, else the whole trace) split exactly into compute ' +
      'only, communication hidden by compute, communication exposed, exposed communication spent waiting for another ' +
      'rank to arrive, memory copies hidden by neither, and GPU idle.');
  s.setAttribute('data-key', 'step_breakdown');
  var v = cell('p', ['verdict'], 'str');
  v.classList.add('verdict');
  v.id = 'step-verdict';
  s.append(v);
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
  B.ranks.slice(0, CAP_DQ).forEach(function (r, i) { row(rankLabel(i), ['step_breakdown', 'ranks', i], r); });
  if (isPlainObject(B.run) && B.ranks.length > 1) row('run', ['step_breakdown', 'run'], B.run);
  t.append(tb);
  s.append(tableWrap(t));
  if (B.ranks.length > CAP_DQ) s.append(el('p', { class: 'note', text: 'first ' + CAP_DQ + ' of ' + B.ranks.length + ' ranks shown' }));
}
