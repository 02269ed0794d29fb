// ---------------------------------------------------------------- per-iteration charts
function svg(tag, attrs) {
  var e = document.createElementNS(SVGNS, tag);
  if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}
var SVGNS = (function () { var d = document.createElement('div'); d.innerHTML = '<svg></svg>'; return d.firstChild.namespaceURI; })();

// The x of an iteration: its step number when every charted iteration has one, else its index.
function chartXKey(rankIdx) {
  var all = true;
  rankIdx.forEach(function (ri) { itersOf[ri].forEach(function (j) { if (typeof ITERS[j].step !== 'number') all = false; }); });
  return all ? 'step' : 'index';
}
// A line per rank over the iterations. Warm-up iterations are hollow dots in a shaded band, left out
// of the y-scale (one above the scale is drawn at its top as a hollow triangle); the y ticks are
// round numbers of one unit (`unit`: 'pct' or 'dur').
function chart(title, valueOf, fixedMax, unit, rankIdx) {
  var W = 900, H = 200, L = 64, R = 14, TOP = 12, B = 34;
  var xKey = chartXKey(rankIdx), minX = Infinity, maxX = -Infinity, maxV = 0;
  rankIdx.forEach(function (ri) {
    itersOf[ri].forEach(function (j) {
      var x = Number(ITERS[j][xKey]);
      minX = Math.min(minX, x); maxX = Math.max(maxX, x);
      var v = valueOf(j);
      if (v !== null && v !== undefined && !ITERS[j].warmup) maxV = Math.max(maxV, Number(v));
    });
  });
  if (!isFinite(minX)) { minX = 0; maxX = 0; }
  var yStep, top;
  if (fixedMax) { top = fixedMax; yStep = fixedMax / 4; }
  else {
    if (!(maxV > 0)) maxV = 1;
    yStep = niceStep(maxV, 4);
    top = Math.ceil(maxV / yStep - 1e-9) * yStep;
  }
  var fmtY = unit === 'pct' ? function (v) { return Math.round(v * 100) + '%'; } : function (v) { return fmtTick(v, yStep, top); };
  var X = function (x) { return L + (maxX > minX ? (x - minX) / (maxX - minX) * (W - L - R) : (W - L - R) / 2); };
  var Y = function (v) { return TOP + (1 - Math.min(Number(v), top) / top) * (H - TOP - B); };
  var g = svg('svg', { class: 'chart', viewBox: '0 0 ' + W + ' ' + H, role: 'img' });
  g.append(svg('title')); g.lastChild.textContent = title;
  // Warm-up iterations: a shaded band behind each.
  var half = maxX > minX ? (W - L - R) / (maxX - minX) / 2 : 8;
  rankIdx.forEach(function (ri) {
    itersOf[ri].forEach(function (j) {
      if (!ITERS[j].warmup) return;
      var cx = X(Number(ITERS[j][xKey]));
      g.append(svg('rect', { class: 'warmup-band', x: (cx - half).toFixed(1), y: TOP, width: (2 * half).toFixed(1),
                             height: H - TOP - B, fill: '#eceef2' }));
    });
  });
  for (var yv = 0; yv <= top + 1e-9 * top; yv += yStep) {
    var y = Y(yv);
    g.append(svg('line', { x1: L, x2: W - R, y1: y, y2: y, stroke: '#dde1e8' }));
    var tx = svg('text', { x: L - 6, y: y + 4, 'text-anchor': 'end', class: 'ytick' });
    tx.textContent = fmtY(yv);
    g.append(tx);
  }
  var xStep = Math.max(1, niceStep(Math.max(1, maxX - minX), 10));
  for (var xi = Math.ceil(minX / xStep) * xStep; xi <= maxX; xi += xStep) {
    var t2 = svg('text', { x: X(xi), y: H - 18, 'text-anchor': 'middle', class: 'xtick' });
    t2.textContent = String(xi);
    g.append(t2);
  }
  var xl = svg('text', { x: W - R, y: H - 3, 'text-anchor': 'end' });
  xl.textContent = xKey === 'step' ? 'step number' : 'iteration index';
  g.append(xl);
  var total = 0;
  rankIdx.forEach(function (ri) { total += itersOf[ri].length; });
  rankIdx.forEach(function (ri) {
    var color = rankColor(ri), dash = rankDash(ri), pts = [];
    var flush = function () {
      if (pts.length > 1) {
        var pl = svg('polyline', { points: pts.join(' '), fill: 'none', stroke: color, 'stroke-width': 1.5 });
        if (dash) pl.setAttribute('stroke-dasharray', dash);
        g.append(pl);
      }
      pts = [];
    };
    itersOf[ri].forEach(function (j) {
      var v = valueOf(j);
      if (v === null || v === undefined) { flush(); return; }
      var it = ITERS[j], x = X(Number(it[xKey])), y = Y(v), off = Number(v) > top;
      if (!it.warmup) pts.push(x.toFixed(1) + ',' + y.toFixed(1));
      if (total <= MAX_POINTS || it.warmup) {
        var c = off ? svg('path', { class: 'pt warmup', d: 'M' + x.toFixed(1) + ',' + (y - 1).toFixed(1) + ' l-5,9 l10,0 z',
                                    fill: '#fff', stroke: color })
                    : svg('circle', { class: 'pt' + (it.warmup ? ' warmup' : ''), cx: x.toFixed(1), cy: y.toFixed(1), r: 3.5,
                                      fill: it.warmup ? '#fff' : color, stroke: color });
        var tt = svg('title');
        tt.textContent = rankLabel(ri) + ', ' + (xKey === 'step' ? 'step ' + it.step : 'iteration ' + it.index) +
            (it.warmup ? ' (warm-up, left out of the scale)' : '') + ': ' +
            (unit === 'pct' ? fmtPct(v) : fmtDur(Math.round(Number(v)))) + ' (click to zoom the timelines)';
        c.append(tt);
        c.addEventListener('click', guarded('chart point', function () { selectIterRank(ri, false); zoomToIteration(j); }));
        g.append(c);
      }
    });
    flush();
  });
  return el('figure', { style: 'margin:8px 0 14px' }, el('figcaption', { class: 'muted', text: title + ', by ' +
      (xKey === 'step' ? 'step number' : 'iteration index') }), g);
}

function renderCharts() {
  var s = section('per-iteration', 'Per iteration',
      'Each line is a rank; warm-up iterations are hollow dots on a grey band, off the line and out of the y-scale. Click a ' +
      'dot to zoom the timelines to that iteration.');
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
                 'pct', shown));
  s.append(chart('Exposed communication per iteration', function (j) { return ITERS[j].exposed_comm_ns; }, 0,
                 'dur', shown));
  var lg = el('div', { class: 'legend' });
  shown.forEach(function (ri) { lg.append(el('span', null, el('i', { style: 'background:' + rankColor(ri) }), rankLabel(ri))); });
  s.append(lg);
}

