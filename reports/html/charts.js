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

