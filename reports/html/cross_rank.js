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
    tr.append(cell('td', ['cross_rank', i, 'rank'], 'id'), el('td', { class: 'xr-barcell' }, g),
              cell('td', ['cross_rank', i, 'wait_ns'], 'dur'), cell('td', ['cross_rank', i, 'exposed_wait_ns'], 'dur'),
              cell('td', ['cross_rank', i, 'transfer_ns'], 'dur'), cell('td', ['cross_rank', i, 'exposed_comm_ns'], 'dur'),
              cell('td', ['cross_rank', i, 'collectives'], 'int'));
    tb.append(tr);
  });
  t.append(tb);
  s.append(tableWrap(t));
  collapse(t, s, XR.length);

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
      var li = el('li', { 'data-straggler': String(i) }, 'rank ', cell('span', ['stragglers', i, 'rank'], 'id'), ' arrived last in ',
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
    tr.append(cell('td', ['clock_offsets', i, 'domain'], 'str'), cell('td', ['clock_offsets', i, 'ranks'], 'list'),
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
  collapse(ct, s, ctb.rows.length);
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
    tx.textContent = fmtTick(yv, ys, maxY);
    g.append(tx);
  }
  var xsStep = niceStep(maxX, 10);
  for (var xv = 0; xv <= maxX; xv += xsStep) {
    var t2 = svg('text', { x: X(xv), y: H - 20, 'text-anchor': 'middle' });
    t2.textContent = fmtTick(xv, xsStep, maxX);
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

