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

