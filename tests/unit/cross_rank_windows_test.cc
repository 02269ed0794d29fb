// One set of iteration windows for the ranks of one job (analyzers/cross_rank_windows.h).
#include "analyzers/cross_rank_windows.h"

#include <gtest/gtest.h>

#include <vector>

namespace overlapprof {
namespace {

constexpr int64_t kMs = 1000000;

// A rank with `n` ops keyed first_key.., op k (its key) at `clock` + 5 ms + k * 10 ms, 2 ms each, and
// windows starting 4 ms before the ops `boundaries` (each to the next; the last 20 ms long).
RankWindowRecord Rank(size_t input, int64_t rank, WindowEvidence evidence, const char* source, int n,
                      std::vector<int> boundaries, int64_t clock = 0, uint64_t first_key = 0) {
  RankWindowRecord r;
  r.input_index = input;
  r.rank = rank;
  r.evidence = evidence;
  r.source = source;
  r.steps = evidence == WindowEvidence::kMarkers;
  for (int i = 0; i < n; ++i) {
    const int64_t k = static_cast<int64_t>(first_key) + i;
    r.ops.push_back({first_key + i, clock + 5 * kMs + k * 10 * kMs, clock + 7 * kMs + k * 10 * kMs});
  }
  for (size_t k = 0; k < boundaries.size(); ++k) {
    IterationWindow w;
    w.start_ns = r.ops[boundaries[k]].start_ns - 4 * kMs;
    w.end_ns = k + 1 < boundaries.size() ? r.ops[boundaries[k + 1]].start_ns - 4 * kMs : w.start_ns + 20 * kMs;
    w.step = r.steps ? static_cast<int64_t>(k) : kUnknown;
    r.windows.push_back(w);
  }
  return r;
}

TEST(CrossRankWindows, RankWithoutMarkersTakesTheMarkedWindowsThroughMatchedOps) {
  // Rank 1 (input 0) has no windows and a clock 3 ms ahead; its trace lacks the first two ops.
  std::vector<RankWindowRecord> recs = {Rank(0, 1, WindowEvidence::kNone, "none", 10, {}, 3 * kMs, 2),
                                        Rank(1, 0, WindowEvidence::kMarkers, "ProfilerStep", 12, {0, 2, 4, 6, 8, 10})};
  const WindowPlan plan = PlanRankWindows(recs);
  ASSERT_TRUE(plan.any_replaced());
  ASSERT_EQ(plan.ranks.count(0), 1u);
  EXPECT_EQ(plan.ranks.count(1), 0u);  // the reference is untouched
  const RankWindowPlan& p = plan.ranks.at(0);
  EXPECT_EQ(p.disagreeing, 0);
  EXPECT_EQ(p.windows.source, "carried");
  EXPECT_TRUE(p.windows.steps);
  // Window 0's first op (key 0) is not on rank 1: the other 5 are carried, with their steps, at
  // the same lead before the same op on rank 1's clock.
  ASSERT_EQ(p.windows.windows.size(), 5u);
  for (size_t k = 0; k < 5; ++k) {
    const IterationWindow& w = p.windows.windows[k];
    EXPECT_EQ(w.step, static_cast<int64_t>(k + 1));
    EXPECT_EQ(w.start_ns, recs[1].windows[k + 1].start_ns + 3 * kMs) << k;
    EXPECT_EQ(w.end_ns, recs[1].windows[k + 1].end_ns + 3 * kMs) << k;
  }
  EXPECT_NE(p.windows.notice.find("5 iterations carried from rank 0's ProfilerStep windows"), std::string::npos)
      << p.windows.notice;
}

TEST(CrossRankWindows, DetectedWindowsThatDisagreeTakeTheReferencesAndAreCounted) {
  // Both detected: rank 0 starts its steps at even ops, rank 1 at odd ones.
  std::vector<RankWindowRecord> recs = {Rank(0, 0, WindowEvidence::kDetected, "comm pattern", 12, {0, 2, 4, 6, 8, 10}),
                                        Rank(1, 1, WindowEvidence::kDetected, "comm pattern", 12, {1, 3, 5, 7, 9})};
  const WindowPlan plan = PlanRankWindows(recs);
  ASSERT_EQ(plan.ranks.count(1), 1u);
  const RankWindowPlan& p = plan.ranks.at(1);
  // Over ops 1..10 (both spans): rank 0 starts at 2, 4, 6, 8, 10 and rank 1 at 1, 3, 5, 7, 9.
  EXPECT_EQ(p.disagreeing, 10);
  EXPECT_NE(p.notice.find("disagree on where a step starts"), std::string::npos) << p.notice;
  ASSERT_TRUE(p.replace);
  ASSERT_EQ(p.windows.windows.size(), 6u);
  EXPECT_EQ(p.windows.windows[0].start_ns, recs[0].windows[0].start_ns);
  EXPECT_FALSE(p.windows.steps);
}

TEST(CrossRankWindows, AgreeingRanksKeepTheirOwnWindows) {
  std::vector<RankWindowRecord> recs = {Rank(0, 0, WindowEvidence::kDetected, "comm pattern", 12, {0, 2, 4, 6, 8, 10}),
                                        Rank(1, 1, WindowEvidence::kDetected, "comm pattern", 12, {2, 4, 6, 8}, kMs)};
  EXPECT_TRUE(PlanRankWindows(recs).ranks.empty());
  // Markers on both, cut differently: each keeps its own, not compared (step numbers name steps).
  recs = {Rank(0, 0, WindowEvidence::kMarkers, "ProfilerStep", 12, {0, 2, 4, 6, 8, 10}),
          Rank(1, 1, WindowEvidence::kMarkers, "ProfilerStep", 12, {0, 3, 4, 6, 8, 10})};
  EXPECT_TRUE(PlanRankWindows(recs).ranks.empty());
  // Markers against detected windows that agree: the detected rank takes the markers' (stronger).
  recs = {Rank(0, 0, WindowEvidence::kMarkers, "ProfilerStep", 12, {0, 2, 4, 6, 8, 10}),
          Rank(1, 1, WindowEvidence::kDetected, "comm pattern", 12, {2, 4, 6, 8})};
  const WindowPlan plan = PlanRankWindows(recs);
  EXPECT_TRUE(plan.any_replaced());
  EXPECT_EQ(plan.ranks.at(1).disagreeing, 0);
  // No rank has windows: nothing to plan.
  recs = {Rank(0, 0, WindowEvidence::kNone, "none", 12, {}), Rank(1, 1, WindowEvidence::kNone, "none", 12, {})};
  EXPECT_TRUE(PlanRankWindows(recs).ranks.empty());
}

TEST(CrossRankWindows, NoCommonOpsCarryNothingAndSaySo) {
  std::vector<RankWindowRecord> recs = {Rank(0, 0, WindowEvidence::kMarkers, "ProfilerStep", 6, {0, 2, 4}),
                                        Rank(1, 1, WindowEvidence::kNone, "none", 6, {}, 0, 100)};
  const WindowPlan plan = PlanRankWindows(recs);
  EXPECT_FALSE(plan.any_replaced());
  EXPECT_NE(plan.ranks.at(1).notice.find("could not be carried"), std::string::npos);
}

}  // namespace
}  // namespace overlapprof
