// ---------------------------------------------------------------- iteration table
var ITER_COLS = [
  ['index', 'index', 'id'], ['step', 'step', 'id'], ['warm-up', 'warmup', 'bool'], ['wall', 'wall_ns', 'dur'],
  ['compute', 'compute_ns', 'dur'], ['comm', 'comm_ns', 'dur'], ['overlap', 'overlap_ns', 'dur'],
  ['exposed comm', 'exposed_comm_ns', 'dur'], ['overlap ratio', 'overlap_ratio', 'pct'], ['bound', 'achievable_ratio', 'pct'],
  ['comm ops', 'comm_ops', 'int'], ['kernels', 'kernels', 'int']];
function renderIterationSection() {
  var s = section('iterations', 'Iterations', 'The iterations of the rank picked above (or in the rank table); click a row to ' +
                  'zoom the timelines to it.');
  s.append(el('div', { id: 'iter-table-box' }));
  var first = -1;
  RANKS.forEach(function (r, i) { if (first < 0 && itersOf[i].length) first = i; });
  if (first < 0) document.getElementById('iter-table-box').append(el('p', { class: 'muted', text: 'No iterations were found.' }));
  else selectIterRank(first, false);
}
function selectIterRank(ri, scroll) {
  var box = document.getElementById('iter-table-box');
  if (!box || !itersOf[ri]) return;
  state.iterRank = ri;
  box.textContent = '';
  document.querySelectorAll('#rank-table tbody tr').forEach(function (tr) {
    tr.classList.toggle('sel', tr.getAttribute('data-rank-index') === String(ri));
  });
  var list = itersOf[ri];
  if (!list.length) {
    box.append(el('p', { class: 'muted', text: rankLabel(ri) + ': no iterations were found (iteration source: ' +
                                               String(RANKS[ri].iteration_source) + ').' }));
    return;
  }
  if (timeline) timeline.fillIterations(ri);
  box.append(el('h3', { text: rankLabel(ri) + ': ' + list.length + ' iterations' }));
  var t = el('table', { class: 'data', id: 'iter-table' });
  var hr = el('tr');
  ITER_COLS.forEach(function (c) { hr.append(el('th', { text: c[0] })); });
  t.append(el('thead', null, hr));
  var tb = el('tbody');
  list.slice(0, CAP).forEach(function (j) {
    var tr = el('tr', { class: 'click', 'data-iteration': String(j) });
    ITER_COLS.forEach(function (c) { tr.append(cell('td', ['iterations', j, c[1]], c[2])); });
    tr.addEventListener('click', guarded('iteration row', function () { zoomToIteration(j); }));
    tb.append(tr);
  });
  t.append(tb);
  box.append(tableWrap(t));
  collapse(t, box, Math.min(list.length, CAP));
  if (list.length > CAP) box.append(el('p', { class: 'note', text: 'first ' + CAP + ' of ' + list.length + ' rows shown' }));
  if (scroll && box.scrollIntoView) box.scrollIntoView({ block: 'nearest' });
}

