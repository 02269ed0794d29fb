// The Chrome trace's pure parts: lane packing (slices that do not nest go to overflow lanes),
// the --trace-iterations syntax and the default choice of iterations.
#include "reports/chrome_trace.h"

#include <gtest/gtest.h>

namespace overlapprof {
namespace {

TEST(LanePacker, NestedAndSequentialSlicesStayOnTheTrack) {
  LanePacker p;
  EXPECT_EQ(p.Place(0, 100), 0u);
  EXPECT_EQ(p.Place(10, 50), 0u);   // inside
  EXPECT_EQ(p.Place(20, 50), 0u);   // inside, same end
  EXPECT_EQ(p.Place(50, 100), 0u);  // after the inner ones, inside the outer one
  EXPECT_EQ(p.Place(100, 120), 0u);  // after everything (touching ends nest)
  EXPECT_EQ(p.Place(130, 130), 0u);  // zero length
  EXPECT_EQ(p.lanes(), 1u);
}

TEST(LanePacker, PartlyOverlappingSlicesGoToOverflowLanes) {
  LanePacker p;
  EXPECT_EQ(p.Place(0, 100), 0u);
  EXPECT_EQ(p.Place(50, 150), 1u);   // starts inside [0,100), ends after it
  EXPECT_EQ(p.Place(60, 160), 2u);   // overlaps both
  EXPECT_EQ(p.Place(70, 90), 0u);    // nests in lane 0 again
  EXPECT_EQ(p.Place(120, 140), 0u);  // lane 0 is free after 100
  EXPECT_EQ(p.Place(145, 155), 0u);
  EXPECT_EQ(p.Place(150, 200), 1u);  // lane 0: [145,155) open and 200 > 155; lane 1 closed at 150
  EXPECT_EQ(p.lanes(), 3u);
}

TEST(LanePacker, LimitedLanesRejectWhatDoesNotNest) {
  LanePacker p;
  EXPECT_EQ(p.Place(0, 100, 1), 0u);
  EXPECT_EQ(p.Place(50, 150, 1), LanePacker::kNone);  // host call that would not nest: left out
  EXPECT_EQ(p.Place(100, 150, 1), 0u);                // nothing was recorded for the rejected one
  EXPECT_EQ(p.lanes(), 1u);
}

TEST(TraceIterations, Syntax) {
  auto all = ParseTraceIterations("all");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->all);
  auto def = ParseTraceIterations("");
  ASSERT_TRUE(def.ok());
  EXPECT_FALSE(def->all);
  EXPECT_TRUE(def->indices.empty());
  auto list = ParseTraceIterations("5,0,10-12,11");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->indices, (std::vector<int64_t>{5, 0, 10, 11, 12}));  // order kept, no repeats
  for (const char* bad : {"x", "1,", ",1", "3-1", "-1", "1-", "1.5", "all,1"})
    EXPECT_FALSE(ParseTraceIterations(bad).ok()) << bad;
}

TEST(TraceIterations, DefaultIsSlowestMedianFirstSteady) {
  // Durations 50 (warm-up), 10, 30, 20, 40, 15: steady by duration 10 15 20 30 40.
  std::vector<IterationSpan> its;
  int64_t t = 0;
  int64_t index = 0;
  for (int64_t d : {50, 10, 30, 20, 40, 15}) {
    its.push_back({index, t, t + d, index == 0});
    t += d;
    ++index;
  }
  EXPECT_EQ(DefaultTraceIterations(its), (std::vector<size_t>{4, 3, 1}));  // slowest 40, median 20, first steady
  its.resize(3);  // steady 10, 30: slowest 30 (2), median the lower middle 10 (1) = the first steady
  EXPECT_EQ(DefaultTraceIterations(its), (std::vector<size_t>{2, 1}));
  for (auto& i : its) i.warmup = true;  // only warm-up iterations: they count
  EXPECT_EQ(DefaultTraceIterations(its), (std::vector<size_t>{0, 2}));  // 50 slowest; median 30; first 50
  EXPECT_TRUE(DefaultTraceIterations({}).empty());
}

}  // namespace
}  // namespace overlapprof
