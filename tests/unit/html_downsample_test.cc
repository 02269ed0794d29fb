// The HTML report's timeline down-sampling (reports/html_report.h, docs/html-report.md "Bounded
// size"): DownSampleIntervals closes the shortest gaps of a lane until at most `limit` intervals
// remain, keeping the exact busy time of each merged interval; HtmlLaneLimit shares the budget out.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "analyzers/intervals.h"
#include "reports/html_report.h"

namespace overlapprof {
namespace {

// Intervals from (gap, length) pairs, the first gap from 0.
std::vector<Interval> FromGaps(const std::vector<std::pair<int64_t, int64_t>>& gl) {
  std::vector<Interval> v;
  int64_t t = 0;
  for (auto [gap, len] : gl) {
    t += gap;
    v.push_back({t, t + len});
    t += len;
  }
  return v;
}

int64_t Length(const std::vector<Interval>& v) {
  int64_t n = 0;
  for (const Interval& iv : v) n += iv.end - iv.start;
  return n;
}

// Everything the result must satisfy for input `in` and `limit` (in non-empty, more than limit).
void CheckMerged(const std::vector<Interval>& in, size_t limit, const DownSampled& ds) {
  const size_t n = in.size();
  ASSERT_GT(n, limit);
  ASSERT_GT(limit, 0u);
  // g is one more than the (n - limit)-th shortest gap.
  std::vector<int64_t> gaps;
  for (size_t i = 0; i + 1 < n; ++i) gaps.push_back(in[i + 1].start - in[i].end);
  std::sort(gaps.begin(), gaps.end());
  EXPECT_EQ(ds.gap_ns, gaps[n - limit - 1] + 1);
  // At most `limit` intervals; exactly one per gap kept (a gap >= g), all others closed.
  const size_t kept = static_cast<size_t>(std::count_if(gaps.begin(), gaps.end(), [&](int64_t g) { return g >= ds.gap_ns; }));
  EXPECT_LE(ds.intervals.size(), limit);
  EXPECT_EQ(ds.intervals.size(), kept + 1);
  ASSERT_EQ(ds.busy.size(), ds.intervals.size());
  // Each output interval is the hull of a run of consecutive inputs; its busy time is theirs exactly.
  size_t j = 0;
  for (size_t o = 0; o < ds.intervals.size(); ++o) {
    const Interval& out = ds.intervals[o];
    ASSERT_LT(j, n);
    EXPECT_EQ(out.start, in[j].start) << o;
    int64_t busy = 0;
    size_t first = j;
    while (j < n && in[j].start < out.end) {
      EXPECT_LE(in[j].end, out.end);
      if (j > first) {
        EXPECT_LT(in[j].start - in[j - 1].end, ds.gap_ns) << "a gap this long must stay open";
      }
      busy += in[j].end - in[j].start;
      ++j;
    }
    EXPECT_EQ(out.end, in[j - 1].end) << o;
    EXPECT_EQ(ds.busy[o], busy) << o;
    EXPECT_GT(ds.busy[o], 0);
    EXPECT_LE(ds.busy[o], out.end - out.start);
    if (o + 1 < ds.intervals.size()) {
      EXPECT_GE(ds.intervals[o + 1].start - out.end, ds.gap_ns) << o;
    }
  }
  EXPECT_EQ(j, n) << "every input interval is inside one output interval";
  // Busy time is exact: nothing dropped, nothing counted twice.
  EXPECT_EQ(std::accumulate(ds.busy.begin(), ds.busy.end(), int64_t{0}), Length(in));
}

TEST(HtmlDownSample, EmptyInput) {
  for (size_t limit : {size_t{0}, size_t{1}, size_t{5}}) {
    DownSampled ds = DownSampleIntervals({}, limit);
    EXPECT_TRUE(ds.intervals.empty());
    EXPECT_TRUE(ds.busy.empty());
    EXPECT_EQ(ds.gap_ns, 0);
  }
}

TEST(HtmlDownSample, WithinLimitIsExact) {
  std::vector<Interval> in = FromGaps({{5, 10}, {3, 2}, {1, 7}, {9, 1}});
  for (size_t limit : {size_t{4}, size_t{5}, size_t{1000}}) {
    DownSampled ds = DownSampleIntervals(in, limit);
    ASSERT_EQ(ds.intervals.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ(ds.intervals[i].start, in[i].start);
      EXPECT_EQ(ds.intervals[i].end, in[i].end);
    }
    EXPECT_EQ(ds.gap_ns, 0) << "0 = exact, nothing merged";
    EXPECT_TRUE(ds.busy.empty()) << "busy times only come with merged lanes";
  }
}

TEST(HtmlDownSample, LimitZeroMeansNoLimit) {
  std::vector<Interval> in = FromGaps({{5, 10}, {3, 2}, {1, 7}, {9, 1}});
  DownSampled ds = DownSampleIntervals(in, 0);
  EXPECT_EQ(ds.intervals.size(), in.size());
  EXPECT_EQ(ds.gap_ns, 0);
  EXPECT_TRUE(ds.busy.empty());
}

TEST(HtmlDownSample, ClosesTheShortestGapsFirst) {
  // Gaps between the intervals: 3, 1, 9, 2 (distinct). Limit 3: the two shortest (1 and 2) close.
  std::vector<Interval> in = FromGaps({{5, 10}, {3, 2}, {1, 7}, {9, 1}, {2, 4}});
  DownSampled ds = DownSampleIntervals(in, 3);
  EXPECT_EQ(ds.gap_ns, 3);  // the 2nd shortest gap (2) + 1
  ASSERT_EQ(ds.intervals.size(), 3u);
  // [5,15) | [18,20)+[21,28) | [37,38)+[40,44)
  EXPECT_EQ(ds.intervals[0].start, 5);
  EXPECT_EQ(ds.intervals[0].end, 15);
  EXPECT_EQ(ds.intervals[1].start, 18);
  EXPECT_EQ(ds.intervals[1].end, 28);
  EXPECT_EQ(ds.intervals[2].start, 37);
  EXPECT_EQ(ds.intervals[2].end, 44);
  EXPECT_EQ(ds.busy, (std::vector<int64_t>{10, 9, 5}));
  CheckMerged(in, 3, ds);
}

TEST(HtmlDownSample, DistinctGapsUseTheWholeLimit) {
  // With no two gaps equal, exactly n - limit gaps close: exactly `limit` intervals remain.
  std::vector<std::pair<int64_t, int64_t>> gl;
  for (int64_t i = 0; i < 50; ++i) gl.push_back({1 + (i * 37) % 50, 1 + i % 4});  // gaps 1..50, each once
  std::vector<Interval> in = FromGaps(gl);
  for (size_t limit = 1; limit < in.size(); ++limit) {
    DownSampled ds = DownSampleIntervals(in, limit);
    EXPECT_EQ(ds.intervals.size(), limit) << limit;
    CheckMerged(in, limit, ds);
  }
}

TEST(HtmlDownSample, TiesCloseTogether) {
  // All gaps equal: closing any one of them closes all, so one interval remains whatever the limit.
  std::vector<Interval> in = FromGaps({{0, 4}, {5, 4}, {5, 4}, {5, 4}, {5, 4}, {5, 4}});
  for (size_t limit = 1; limit < in.size(); ++limit) {
    DownSampled ds = DownSampleIntervals(in, limit);
    EXPECT_EQ(ds.gap_ns, 6);
    ASSERT_EQ(ds.intervals.size(), 1u);
    EXPECT_EQ(ds.intervals[0].start, 0);
    EXPECT_EQ(ds.intervals[0].end, in.back().end);
    EXPECT_EQ(ds.busy, std::vector<int64_t>{24});
    CheckMerged(in, limit, ds);
  }
  // Gaps 1, 2, 2, 2, 7: limit 4 must close 2 gaps; the 2nd shortest is a 2, so every 2 closes too
  // (fewer than `limit` intervals remain, never more).
  std::vector<Interval> mixed = FromGaps({{0, 3}, {1, 3}, {2, 3}, {2, 3}, {2, 3}, {7, 3}});
  DownSampled ds = DownSampleIntervals(mixed, 4);
  EXPECT_EQ(ds.gap_ns, 3);
  ASSERT_EQ(ds.intervals.size(), 2u);
  EXPECT_EQ(ds.busy, (std::vector<int64_t>{15, 3}));
  CheckMerged(mixed, 4, ds);
}

TEST(HtmlDownSample, TouchingIntervalsAndLimitOne) {
  // A zero gap (touching intervals) is the shortest; limit 1 merges everything.
  std::vector<Interval> in = FromGaps({{10, 5}, {0, 5}, {100, 1}, {3, 2}});
  DownSampled one = DownSampleIntervals(in, 1);
  ASSERT_EQ(one.intervals.size(), 1u);
  EXPECT_EQ(one.intervals[0].start, 10);
  EXPECT_EQ(one.intervals[0].end, in.back().end);
  EXPECT_EQ(one.busy, std::vector<int64_t>{13});
  CheckMerged(in, 1, one);
  DownSampled three = DownSampleIntervals(in, 3);
  EXPECT_EQ(three.gap_ns, 1);
  EXPECT_EQ(three.intervals.size(), 3u);
  CheckMerged(in, 3, three);
}

TEST(HtmlDownSample, RandomLanesKeepExactBusyTime) {
  std::mt19937_64 rng(18);
  for (int round = 0; round < 200; ++round) {
    const size_t n = 2 + rng() % 400;
    std::vector<std::pair<int64_t, int64_t>> gl;
    const int64_t max_gap = 1 + static_cast<int64_t>(rng() % 30);  // small: many ties
    for (size_t i = 0; i < n; ++i)
      gl.push_back({static_cast<int64_t>(rng() % (max_gap + 1)), 1 + static_cast<int64_t>(rng() % 1000)});
    std::vector<Interval> in = FromGaps(gl);
    const size_t limit = 1 + rng() % (n - 1);
    DownSampled ds = DownSampleIntervals(in, limit);
    SCOPED_TRACE(testing::Message() << "round " << round << " n " << n << " limit " << limit);
    CheckMerged(in, limit, ds);
    if (testing::Test::HasFailure()) return;
  }
}

TEST(HtmlDownSample, LaneLimit) {
  // kHtmlTimelineBudget / (4 x ranks shown), clamped to [kHtmlMinLaneIntervals, kHtmlMaxLaneIntervals].
  EXPECT_EQ(HtmlLaneLimit(0), kHtmlMaxLaneIntervals);
  EXPECT_EQ(HtmlLaneLimit(1), 20'000u);
  EXPECT_EQ(HtmlLaneLimit(12), 20'000u);  // 20,833 clamped
  EXPECT_EQ(HtmlLaneLimit(13), 19'230u);
  EXPECT_EQ(HtmlLaneLimit(64), 3'906u);   // docs/html-report.md
  EXPECT_EQ(HtmlLaneLimit(125), 2'000u);
  EXPECT_EQ(HtmlLaneLimit(126), 2'000u);  // 1,984 clamped up
  EXPECT_EQ(HtmlLaneLimit(100'000), kHtmlMinLaneIntervals);
  size_t prev = HtmlLaneLimit(1);
  for (size_t r = 1; r <= kHtmlMaxTimelineRanks; ++r) {
    const size_t l = HtmlLaneLimit(r);
    EXPECT_LE(l, prev) << r;
    EXPECT_GE(l, kHtmlMinLaneIntervals);
    EXPECT_LE(l, kHtmlMaxLaneIntervals);
    EXPECT_LE(4 * r * l, std::max(kHtmlTimelineBudget, 4 * r * kHtmlMinLaneIntervals)) << "within the budget";
    prev = l;
  }
}

}  // namespace
}  // namespace overlapprof
