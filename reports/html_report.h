#pragma once
// The self-contained HTML report, written by `overlapprof report TRACE... --html FILE`
// (docs/html-report.md).
//
// One file that opens offline in any current browser (no network: no CDN, fonts or scripts
// from elsewhere). It embeds the JSON summary (SummaryToJson, so every number on the page is
// the JSON summary's number) and per-rank timeline data, and renders them with plain
// JavaScript, inline SVG and canvas: the run summary, the per-rank table, per-iteration charts,
// a timeline per rank (compute, communication and memory lanes, the overlap shaded, zoomable to
// one iteration), the analyzers' tables, and a data-quality panel.
// The page's markup, stylesheet and scripts are the files in reports/html/, embedded at build
// time (cmake/EmbedAssets.cmake); this writer adds only the two JSON blobs.
//
// The timeline is bounded: at most kHtmlMaxTimelineRanks ranks, and per lane at most
// HtmlLaneLimit(ranks shown) intervals; a lane with more is down-sampled by closing its
// shortest gaps (each merged interval keeps its exact busy time), and the page says so.
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "analyzers/intervals.h"
#include "analyzers/summary.h"
#include "src/common/status.h"

namespace overlapprof {

inline constexpr size_t kHtmlMaxTimelineRanks = 64;       // timelines drawn (the first, in summary order)
inline constexpr size_t kHtmlMaxLaneIntervals = 20'000;   // per lane per rank
inline constexpr size_t kHtmlMinLaneIntervals = 2'000;    // per lane per rank, however many ranks
inline constexpr size_t kHtmlTimelineBudget = 1'000'000;  // intervals over all lanes of all ranks shown

// The interval limit of one lane when `ranks_shown` timelines are drawn (4 lanes each):
// kHtmlTimelineBudget shared out, clamped to [kHtmlMinLaneIntervals, kHtmlMaxLaneIntervals].
size_t HtmlLaneLimit(size_t ranks_shown);

struct DownSampled {
  std::vector<Interval> intervals;
  std::vector<int64_t> busy;  // when gap_ns > 0: per interval, the exact busy ns it covers
  int64_t gap_ns = 0;         // gaps shorter than this were closed; 0 = exact (nothing merged)
};
// `in`: sorted, disjoint intervals (an IntervalSet's). At most `limit` of them come back: when
// there are more, the shortest gaps are closed (neighbours merged): every gap shorter than g,
// where g is one more than the (n - limit)-th shortest gap, so at least n - limit gaps close.
// Nothing is dropped: each merged interval keeps the busy time it covers.
DownSampled DownSampleIntervals(const std::vector<Interval>& in, size_t limit);

// The writer itself is the registered report "html" (MakeHtmlReport, src/registry.inc): it takes
// each rank's interval unions from the analysis pass (down-sampled at once, so it keeps at most
// kHtmlMaxTimelineRanks ranks' bounded lanes) and writes the page at the end.

}  // namespace overlapprof
