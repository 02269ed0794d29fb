// The gate's statistics and decisions (analyzers/compare.h).
#include "analyzers/compare.h"

#include <gtest/gtest.h>

#include "compare_util.h"

namespace overlapprof {
namespace {

using testing::View;

TEST(MannWhitney, KnownValues) {
  // Completely separated samples of 5: U = 0, z = (12.5 - 0.5) / sqrt(25 * 11 / 12): p = 0.01219
  // (scipy.stats.mannwhitneyu(..., method="asymptotic", use_continuity=True) gives the same).
  EXPECT_NEAR(MannWhitneyP({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}), 0.012186, 1e-5);
  EXPECT_NEAR(MannWhitneyP({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5}), 0.012186, 1e-5);  // symmetric
  EXPECT_DOUBLE_EQ(MannWhitneyP({3, 3, 3}, {3, 3, 3}), 1.0);                     // all tied
  EXPECT_DOUBLE_EQ(MannWhitneyP({}, {1, 2}), 1.0);
  // Ties across samples: 20/80 vs 15/75 three times each: U = 27, p = 0.161.
  EXPECT_NEAR(MannWhitneyP({20, 80, 20, 80, 20, 80}, {15, 75, 15, 75, 15, 75}), 0.1615, 1e-3);
}

TEST(Compare, RegressionImprovementNoiseAndTooNoisy) {
  Policy p;
  RunView base = View({75, 76, 74, 75, 77, 73, 75, 76});
  EXPECT_EQ(Compare(base, View({50, 51, 49, 50, 52, 48, 50, 51}), p).gate, Verdict::kRegressed);
  EXPECT_EQ(Compare(base, View({95, 96, 94, 95, 97, 93, 95, 96}), p).gate, Verdict::kImproved);
  EXPECT_EQ(Compare(base, View({75, 74, 76, 75, 73, 77, 76, 75}), p).gate, Verdict::kUnchanged);
  Comparison noisy = Compare(View({20, 80, 20, 80, 20, 80}), View({15, 75, 15, 75, 15, 75}), p);
  EXPECT_EQ(noisy.metrics[0].verdict, Verdict::kInconclusive);
  ASSERT_TRUE(noisy.metrics[0].p.has_value());
  EXPECT_NEAR(noisy.metrics[0].change, -5.0, 1e-9);
}

TEST(Compare, FewIterationsUseTheAggregatesAndNoTest) {
  Policy p;
  Comparison c = Compare(View({75, 75}), View({70, 70}), p);
  EXPECT_EQ(c.metrics[0].verdict, Verdict::kRegressed);
  EXPECT_FALSE(c.metrics[0].p.has_value());
  EXPECT_NE(c.metrics[0].why.find("no statistical test possible"), std::string::npos);
  p.max_overlap_drop_pp = 6;
  p.max_exposed_comm_increase_pct = 50;
  EXPECT_EQ(Compare(View({75, 75}), View({70, 70}), p).gate, Verdict::kUnchanged);
}

TEST(Compare, DataLossBeyondTheLimit) {
  Policy p;
  RunView n = View({75, 75});
  n.data_lost = 3;
  n.data_lost_counters = {"rank 0: records_dropped_hooks = 3"};
  Comparison c = Compare(View({75, 75}), n, p);
  EXPECT_TRUE(c.data_lost);
  EXPECT_NE(c.data_lost_why.find("records_dropped_hooks = 3"), std::string::npos);
  p.max_data_loss = 3;
  EXPECT_FALSE(Compare(View({75, 75}), n, p).data_lost);
}

}  // namespace
}  // namespace overlapprof
