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
// The lane's intervals inside the view [a, b) on a drawing W px wide, as rectangles [x0, x1,
// opacity]. Intervals less than half a pixel apart share one rectangle, whose opacity is the busy
// share of the time it spans (so dense small work, and intervals merged by down-sampling, look as
// busy as they were); every interval is at least 1 px wide.
function laneRects(lane, a, b, W) {
  var k = W / (b - a), cs = -1, ce = -1, t0 = 0, t1 = 0, busy = 0, out = [];
  function flush() {
    var share = t1 > t0 ? busy / (t1 - t0) : 1;
    out.push([cs, ce, Math.max(0.3, Math.min(1, share))]);
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
  return out;
}
// The communication ops of a timeline entry (the blob's "ops"): start, end, exposed ns, bytes,
// seq (null when unknown), op name; sorted by start.
function decodeOps(o) {
  var d = (o && Array.isArray(o.d)) ? o.d : [], names = (o && Array.isArray(o.names)) ? o.names : [], out = [], t = 0;
  for (var i = 0; i + 5 < d.length; i += 6) {
    t += d[i];
    out.push({ s: t, e: t + d[i + 1], exposed: d[i + 2], bytes: d[i + 3] < 0 ? null : d[i + 3],
               seq: d[i + 4] < 0 ? null : d[i + 4], op: String(names[d[i + 5]] || 'communication') });
  }
  return { list: out, total: o ? Number(o.n) || 0 : 0 };
}
// The op under time t (or the nearest within `slack` ns), else null.
function opAt(ops, t, slack) {
  var best = null, bestD = Infinity;
  for (var i = 0; i < ops.length && ops[i].s <= t + slack; i++) {
    var o = ops[i], dd = t < o.s ? o.s - t : t > o.e ? t - o.e : 0;
    if (dd <= slack && dd < bestD) { best = o; bestD = dd; }
  }
  return best;
}
function fmtBytes(n) {
  if (n === null || n === undefined) return 'bytes n/a';
  var a = Math.abs(n);
  if (a < 1024) return n + ' B';
  if (a < 1048576) return (n / 1024).toFixed(1) + ' KiB';
  if (a < 1073741824) return (n / 1048576).toFixed(1) + ' MiB';
  return (n / 1073741824).toFixed(2) + ' GiB';
}
function opTip(o) {
  var dur = o.e - o.s;
  return o.op + ' \u00b7 ' + fmtBytes(o.bytes) + ' \u00b7 seq ' + (o.seq === null ? 'n/a' : String(o.seq)) +
      ' \u00b7 ' + fmtDur(dur) + ', exposed ' + fmtDur(o.exposed) + (dur > 0 ? ' (' + fmtPct(o.exposed / dur) + ')' : '');
}
// The timeline's colours: the legend and the drawing both read this table (tests/e2e/html_test.py
// checks that each legend swatch has the colour of the drawn shapes of its class).
var TL_CLASSES = [
  ['compute', 'compute', '#3b6fd8'], ['comm-exposed', 'communication, exposed', '#d9453b'],
  ['comm-hidden', 'communication, hidden by compute', '#17a88b'], ['memory', 'memory copies/sets', '#e0a526'],
  ['iteration', 'iteration boundary', '#5d6675']];
var TL_COLOR = {};
TL_CLASSES.forEach(function (c) { TL_COLOR[c[0]] = c[2]; });
// Lanes of a row: [class drawn, y, height, label].
var TL_H = 54, TL_LANES = { compute: [4, 14], comm: [21, 14], memory: [38, 12] };
function niceStep(span, n) {
  var raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}
// A tick label: every tick of one axis in one unit (chosen by the axis' largest value `max`),
// with as many decimals as its step needs, so the labels are round numbers.
function fmtTick(t, step, max) {
  var m = Math.max(Math.abs(max === undefined ? t : max), step), u = m >= 1e9 ? 1e9 : m >= 1e6 ? 1e6 : m >= 1e3 ? 1e3 : 1;
  var name = u === 1e9 ? ' s' : u === 1e6 ? ' ms' : u === 1e3 ? ' \u00b5s' : ' ns';
  var digits = Math.max(0, Math.min(6, Math.ceil(-Math.log10(step / u) - 1e-9)));
  return (t / u).toFixed(digits) + name;
}

function renderTimelines() {
  var s = section('timelines', 'Timelines',
      'Per rank, the GPU timeline as unions of activities in three lanes: compute, communication (red where exposed, ' +
      'green where compute hides it) and memory copies/sets. Hover a communication slice for its operation. Click the ' +
      'timeline, then scroll to zoom; drag to pan, double-click for the whole run; pick an iteration to zoom to it. Times ' +
      'are from the run\'s first GPU activity.');
  var entries = (Array.isArray(T.ranks) ? T.ranks : []).slice().sort(function (x, y) { return x.index - y.index; });
  var rows = entries.map(function (r) {
    var lanes = r.lanes || {};
    return { index: r.index, any: !!r.any, compute: decodeLane(lanes.compute), comm: decodeLane(lanes.comm),
             memory: decodeLane(lanes.memory), overlap: decodeLane(lanes.overlap), ops: decodeOps(r.ops) };
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
  notes.forEach(function (n) {
    var p = el('p', { class: 'note', text: n });
    if (n.indexOf('down-sampled') >= 0) p.id = 'timeline-note';
    if (n.indexOf('Timelines are shown') === 0) p.id = 'timeline-ranks-note';
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
  var legend = el('div', { class: 'legend', id: 'tl-legend' });
  TL_CLASSES.forEach(function (c) {
    legend.append(el('span', { 'data-class': c[0] }, el('i', { style: 'background:' + c[2], 'data-color': c[2] }), c[1]));
  });
  s.append(legend);

  var full = [0, Math.max(Number(T.end) || 0, 1000)];
  var view = full.slice();
  // The rows live in one focusable box: the wheel zooms only while it has focus (a click gives it),
  // so scrolling the page over it scrolls the page.
  var box = el('div', { class: 'tl-box', id: 'tl-box', tabindex: '0', 'aria-label': 'timelines (click, then scroll to zoom)' });
  s.append(box);
  var axisSvg = svg('svg', { class: 'tl-svg tl-axis', id: 'tl-axis', height: 24 });
  box.append(el('div', { class: 'tl-row' }, el('div', { class: 'tl-label' }), el('div', { class: 'tl-lanes' }), axisSvg));
  var rowEls = rows.map(function (r) {
    var lab = el('div', { class: 'tl-label', title: String((RANKS[r.index] || {}).source || '') },
                 el('b', { text: rankLabel(r.index) }), basename((RANKS[r.index] || {}).source));
    var lanes = el('div', { class: 'tl-lanes' });
    [['compute', 'compute'], ['comm', 'comm'], ['memory', 'memory']].forEach(function (l) {
      lanes.append(el('span', { style: 'top:' + TL_LANES[l[0]][0] + 'px;height:' + TL_LANES[l[0]][1] + 'px', text: l[1] }));
    });
    var g = svg('svg', { class: 'tl-svg', 'data-rank-index': String(r.index), height: TL_H });
    box.append(el('div', { class: 'tl-row' }, lab, lanes, g));
    return g;
  });
  if (!rows.length) s.append(el('p', { class: 'muted', text: 'No timeline data.' }));
  var tip = el('div', { class: 'tl-tip', id: 'tl-tip', hidden: '' });
  s.append(tip);

  function width(g) { return g.getBoundingClientRect().width || g.clientWidth || 800; }
  function clear(g) { while (g.firstChild) g.removeChild(g.firstChild); }
  function drawAxis() {
    var W = width(axisSvg), a = view[0], b = view[1], step = niceStep(b - a, Math.max(2, W / 110));
    clear(axisSvg);
    axisSvg.setAttribute('viewBox', '0 0 ' + W + ' 24');
    for (var t = Math.ceil(a / step) * step; t <= b; t += step) {
      var x = (t - a) / (b - a) * W, label = fmtTick(t, step, b);
      axisSvg.append(svg('rect', { x: x.toFixed(1), y: 16, width: 1, height: 8, fill: '#5d6675' }));
      if (x + 3 + label.length * 6 <= W) {
        var tx = svg('text', { x: (x + 3).toFixed(1), y: 12 });
        tx.textContent = label;
        axisSvg.append(tx);
      }
    }
  }
  function drawRow(g, r) {
    var W = width(g), a = view[0], b = view[1];
    clear(g);
    g.setAttribute('viewBox', '0 0 ' + W + ' ' + TL_H);
    g.append(svg('rect', { x: 0, y: 0, width: W, height: TL_H, fill: '#f6f7f9' }));
    if (!r.any) {
      var tx = svg('text', { x: 6, y: 30 });
      tx.textContent = 'no GPU activity in this trace';
      g.append(tx);
      return;
    }
    var its = itersOf[r.index] || [];
    if (its.length <= 5000) its.forEach(function (j) {
      var st = WINDOWS[j][1];
      if (st >= a && st <= b)
        g.append(svg('rect', { class: 'iteration', 'data-class': 'iteration', x: ((st - a) / (b - a) * W).toFixed(1), y: 0,
                               width: 1, height: TL_H, fill: TL_COLOR.iteration }));
    });
    function lane(data, cls, ly) {
      laneRects(data, a, b, W).forEach(function (q) {
        var at = { 'data-class': cls, x: q[0].toFixed(2), y: ly[0], width: Math.max(1, q[1] - q[0]).toFixed(2), height: ly[1],
                   fill: TL_COLOR[cls] };
        if (q[2] < 1) at['fill-opacity'] = q[2].toFixed(2);
        g.append(svg('rect', at));
      });
    }
    lane(r.compute, 'compute', TL_LANES.compute);
    lane(r.comm, 'comm-exposed', TL_LANES.comm);
    lane(r.overlap, 'comm-hidden', TL_LANES.comm);
    lane(r.memory, 'memory', TL_LANES.memory);
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

  // Wheel zooms around the pointer (only while the box has focus), dragging pans, double-click
  // shows the whole run; hovering the communication lane shows the op under the pointer.
  var drag = null;
  var svgs = rowEls.concat([axisSvg]);
  svgs.forEach(function (g) {
    g.addEventListener('wheel', guarded('wheel', function (e) {
      if (document.activeElement !== box) return;
      e.preventDefault();
      var rect = g.getBoundingClientRect(), f = e.deltaY > 0 ? 1.25 : 0.8;
      var t = view[0] + (e.clientX - rect.left) / Math.max(1, rect.width) * (view[1] - view[0]);
      setView(t - (t - view[0]) * f, t + (view[1] - t) * f);
    }), { passive: false });
    g.addEventListener('mousedown', function (e) {
      box.focus({ preventScroll: true });
      drag = { x: e.clientX, a: view[0], b: view[1], w: width(g) || 1 };
    });
    g.addEventListener('dblclick', guarded('dblclick', function () { iterSel.value = ''; setView(full[0], full[1]); }));
  });
  rowEls.forEach(function (g, i) {
    g.addEventListener('mousemove', guarded('hover', function (e) {
      var rect = g.getBoundingClientRect(), y = e.clientY - rect.top, L = TL_LANES.comm;
      var o = null;
      if (y >= L[0] - 2 && y <= L[0] + L[1] + 2) {
        var k = (view[1] - view[0]) / Math.max(1, rect.width);
        o = opAt(rows[i].ops.list, view[0] + (e.clientX - rect.left) * k, 3 * k);
      }
      if (!o) { tip.hidden = true; return; }
      tip.textContent = opTip(o);
      tip.hidden = false;
      tip.style.left = Math.min(e.clientX + 12, window.innerWidth - 380) + 'px';
      tip.style.top = (e.clientY + 14) + 'px';
    }));
    g.addEventListener('mouseleave', function () { tip.hidden = true; });
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

