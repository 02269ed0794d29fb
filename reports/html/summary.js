// ---------------------------------------------------------------- run summary
function renderRun() {
  var s = section('run', 'Run');
  var dl = el('dl', { class: 'kv' });
  function row(label, node) { dl.append(el('dt', { text: label }), node); }
  var v = cell('dd', ['verdict'], 'str');
  v.classList.add('verdict');
  row('verdict', v);
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
var RANK_COLS = [
  ['rank', 'rank', 'int'], ['source', 'source', 'str'], ['device', 'device', 'str'], ['world size', 'world_size', 'int'],
  ['iterations', 'iterations', 'int'], ['wall', 'wall_ns', 'dur'], ['busy', 'busy_ns', 'dur'],
  ['compute', 'compute_ns', 'dur'], ['comm', 'comm_ns', 'dur'], ['overlap', 'overlap_ns', 'dur'],
  ['exposed comm', 'exposed_comm_ns', 'dur'], ['overlap ratio', 'overlap_ratio', 'pct'],
  ['bound (achievable)', 'achievable_ratio', 'pct'], ['median iteration ratio', 'iteration_spread.overlap_ratio.median', 'pct'],
  ['verdict', 'verdict', 'str']];
function renderRanks() {
  var s = section('ranks', 'Ranks',
      'Overlap ratio = the share of communication time that compute hides; bound = min(1, compute / comm), what perfect ' +
      'scheduling could reach. Click a row to pick its iterations below.');
  if (!RANKS.length) { s.append(el('p', { class: 'muted', text: 'No ranks.' })); return; }
  var t = el('table', { class: 'data', id: 'rank-table' });
  var hr = el('tr');
  RANK_COLS.forEach(function (c) { hr.append(el('th', { text: c[0] })); });
  t.append(el('thead', null, hr));
  var tb = el('tbody');
  RANKS.slice(0, CAP_DQ).forEach(function (r, i) {
    var tr = el('tr', { class: 'click', 'data-rank-index': String(i) });
    RANK_COLS.forEach(function (c) {
      var td = cell('td', ['ranks', i].concat(c[1].split('.')), c[2]);
      if (c[1] === 'overlap_ratio' && r.overlap_ratio === null && r.overlap_ratio_reason) td.title = String(r.overlap_ratio_reason);
      if (c[1] === 'verdict') td.classList.add('wide');
      tr.append(td);
    });
    tr.addEventListener('click', guarded('rank row', function () { selectIterRank(i, true); }));
    tb.append(tr);
  });
  t.append(tb);
  s.append(tableWrap(t));
  if (RANKS.length > CAP_DQ) s.append(el('p', { class: 'note', text: 'first ' + CAP_DQ + ' of ' + RANKS.length + ' ranks shown' }));
}

