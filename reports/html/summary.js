// ---------------------------------------------------------------- run summary
function renderRun() {
  var s = section('run', 'Run');
  var dl = el('dl', { class: 'kv' });
  function row(label, node) { dl.append(el('dt', { text: label }), node); }
  row('ranks', cell('dd', ['ranks', 'length'], 'int'));
  row('iterations (all ranks)', cell('dd', ['iterations', 'length'], 'int'));
  row('data-quality errors', cell('dd', ['data_quality', 'errors'], 'int'));
  row('data-quality warnings', cell('dd', ['data_quality', 'warnings'], 'int'));
  row('tool', el('dd', null, cell('span', ['tool', 'name'], 'str'), ' ', cell('span', ['tool', 'version'], 'str')));
  row('schema', cell('dd', ['schema'], 'str'));
  s.append(dl);
  s.append(el('div', { id: 'run-notes' }));
  var sub = document.getElementById('header-sub');
  if (sub) sub.textContent = RANKS.length + (RANKS.length === 1 ? ' rank' : ' ranks') + ', ' + ITERS.length +
      ' iterations; overlapprof ' + String(getPath(S, ['tool', 'version']) || '?');
}

// ---------------------------------------------------------------- per-rank table
// Key columns first (the first KEY_COLS), provenance last. A path starting with "step:" reads the
// rank's step_breakdown row.
var RANK_COLS = [
  ['rank', 'rank', 'id'], ['step time', 'step:step_ns', 'dur'], ['overlap', 'overlap_ratio', 'pct'],
  ['exposed comm', 'exposed_comm_ns', 'dur'], ['idle', 'step:fractions.idle', 'pct'],
  ['bound', 'achievable_ratio', 'pct'], ['wall', 'wall_ns', 'dur'], ['compute', 'compute_ns', 'dur'],
  ['comm', 'comm_ns', 'dur'], ['overlapped', 'overlap_ns', 'dur'], ['verdict', 'verdict', 'str'],
  ['world', 'world_size', 'id'], ['device', 'device', 'str'], ['source', 'source', 'str']];
var KEY_COLS = 6;
// The index in step_breakdown.ranks of ranks[i] (the same order and length; checked by rank), or -1.
function stepRowOf(i) {
  var B = getPath(S, ['step_breakdown', 'ranks']);
  if (!Array.isArray(B) || B.length !== RANKS.length || !B[i] || B[i].rank !== RANKS[i].rank) return -1;
  return i;
}
function renderRanks() {
  var s = section('ranks', 'Ranks',
      'Overlap = the share of communication time that compute hides (whole trace); bound = min(1, compute / comm), ' +
      'what perfect scheduling could reach; step time and idle (GPU idle, share of the step) are over the steady ' +
      'iterations; hover a verdict or source for all of it. Click a row to pick its iterations below.');
  if (!RANKS.length) { s.append(el('p', { class: 'muted', text: 'No ranks.' })); return; }
  var t = el('table', { class: 'data oneline', id: 'rank-table' });
  var hr = el('tr');
  // With NCCL profiler plugin data: what each rank's communication was timed by.
  var cols = RANK_COLS;
  if (RANKS.some(function (r) { return r.timing_source; })) {
    cols = RANK_COLS.slice();
    cols.splice(cols.length - 3, 0, ['comm timing', 'timing_source', 'str']);
  }
  cols.forEach(function (c, k) { hr.append(el('th', k < KEY_COLS ? { class: 'key', text: c[0] } : { text: c[0] })); });
  t.append(el('thead', null, hr));
  var tb = el('tbody');
  RANKS.slice(0, CAP_DQ).forEach(function (r, i) {
    var tr = el('tr', { class: 'click', 'data-rank-index': String(i) });
    cols.forEach(function (c, k) {
      var td, step = c[1].indexOf('step:') === 0, j = step ? stepRowOf(i) : -1;
      if (step && j < 0) td = el('td', { text: '\u2014' });
      else td = cell('td', step ? ['step_breakdown', 'ranks', j].concat(c[1].slice(5).split('.')) : ['ranks', i].concat(c[1].split('.')), c[2]);
      if (c[1] === 'overlap_ratio' && r.overlap_ratio === null && r.overlap_ratio_reason) td.title = String(r.overlap_ratio_reason);
      if (c[1] === 'verdict') { td.classList.add('wide'); td.title = String(r.verdict || ''); }
      if (c[1] === 'source') { td.classList.add('path'); td.title = String(r.source || ''); }
      if (c[1] === 'device') { td.classList.add('short'); td.title = String(r.device || ''); }
      if (k < KEY_COLS) td.classList.add('key');
      tr.append(td);
    });
    tr.addEventListener('click', guarded('rank row', function () { selectIterRank(i, true); }));
    tb.append(tr);
  });
  t.append(tb);
  s.append(tableWrap(t));
  collapse(t, s, Math.min(RANKS.length, CAP_DQ));
  if (RANKS.length > CAP_DQ) s.append(el('p', { class: 'note', text: 'first ' + CAP_DQ + ' of ' + RANKS.length + ' ranks shown' }));
}

// A table with more than COLLAPSE_ROWS body rows shows the first ones and a button with the count
// (data-collapsed is the row count); the other rows are in the page, hidden until it is pressed.
var COLLAPSE_ROWS = 12;
function collapse(t, into, count) {
  var rows = t.tBodies.length ? t.tBodies[0].rows : [];
  if (rows.length <= COLLAPSE_ROWS) return;
  for (var i = COLLAPSE_ROWS; i < rows.length; i++) rows[i].classList.add('more');
  t.setAttribute('data-collapsed', String(rows.length));
  var label = 'show all ' + group(String(count)) + ' rows (' + COLLAPSE_ROWS + ' shown)';
  var b = el('button', { type: 'button', class: 'more', text: label });
  b.addEventListener('click', function () {
    var open = t.classList.toggle('expanded');
    b.textContent = open ? 'show the first ' + COLLAPSE_ROWS + ' rows of ' + group(String(count)) : label;
  });
  into.append(b);
}
