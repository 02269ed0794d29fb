guarded('headline', renderHeadline)();
guarded('step time', renderStepBreakdown)();
guarded('findings', renderFindings)();
guarded('rank table', renderRanks)();
guarded('run summary', renderRun)();
guarded('charts', renderCharts)();
guarded('timelines', renderTimelines)();
guarded('iterations', renderIterationSection)();
guarded('cross-rank view', renderCrossRank)();
guarded('sections', renderSections)();
guarded('data quality', renderDataQuality)();
guarded('data quality placement', placeDataQuality)();
guarded('contents', renderToc)();
// A link may name an iteration to zoom to: report.html#iteration=J (J indexes iterations[]).
guarded('location', function () {
  var m = /^#iteration=(\d+)$/.exec(window.location.hash || '');
  if (m && WINDOWS[Number(m[1])]) { selectIterRank(WINDOWS[Number(m[1])][0], false); zoomToIteration(Number(m[1])); }
})();
if (!window.__opErrors.length) document.body.setAttribute('data-status', 'ok');
