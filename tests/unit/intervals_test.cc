#include "analyzers/intervals.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>

namespace overlapprof {
namespace {

TEST(IntervalSet, UnionMergesOverlappingNestedAndTouching) {
  // [0,10) [2,5) nested, [10,12) touches, [20,20) empty, [15,18) separate.
  IntervalSet s = IntervalSet::Union({{10, 12}, {0, 10}, {2, 5}, {20, 20}, {15, 18}});
  ASSERT_EQ(s.intervals().size(), 2u);
  EXPECT_EQ(s.intervals()[0].start, 0);
  EXPECT_EQ(s.intervals()[0].end, 12);
  EXPECT_EQ(s.intervals()[1].start, 15);
  EXPECT_EQ(s.intervals()[1].end, 18);
  EXPECT_EQ(s.Length(), 15);
}

TEST(IntervalSet, IntersectionOfTouchingIsEmpty) {
  IntervalSet a = IntervalSet::Union({{0, 10}});
  IntervalSet b = IntervalSet::Union({{10, 20}});
  EXPECT_EQ(IntervalSet::Intersect(a, b).Length(), 0);
}

TEST(IntervalSet, LengthWithinClipsBothEnds) {
  IntervalSet s = IntervalSet::Union({{0, 10}, {20, 30}, {40, 50}});
  EXPECT_EQ(s.LengthWithin(5, 45), 5 + 10 + 5);
  EXPECT_EQ(s.LengthWithin(10, 20), 0);
  EXPECT_EQ(s.LengthWithin(-100, 100), 30);
  EXPECT_EQ(s.LengthWithin(25, 26), 1);
  EXPECT_EQ(s.LengthWithin(30, 30), 0);
  EXPECT_EQ(s.LengthWithin(50, 40), 0);
}

// Brute force over a small integer domain: every operation must equal the per-ns count.
TEST(IntervalSet, MatchesBruteForceOnRandomInputs) {
  std::mt19937 rng(12345);
  for (int round = 0; round < 300; ++round) {
    const int kDomain = 200;
    auto random_set = [&](std::vector<bool>& bits) {
      std::vector<Interval> v;
      int n = rng() % 12;
      for (int i = 0; i < n; ++i) {
        int64_t a = rng() % kDomain, len = rng() % 30;
        int64_t b = std::min<int64_t>(kDomain, a + len);
        v.push_back({a, b});
        for (int64_t x = a; x < b; ++x) bits[x] = true;
      }
      return IntervalSet::Union(v);
    };
    std::vector<bool> ba(kDomain, false), bb(kDomain, false);
    IntervalSet a = random_set(ba), b = random_set(bb);
    IntervalSet inter = IntervalSet::Intersect(a, b);
    IntervalSet uni = IntervalSet::Merge(a, b);
    int64_t lo = rng() % kDomain, hi = rng() % (kDomain + 1);
    int64_t want_a = 0, want_i = 0, want_u = 0, want_a_win = 0, want_i_win = 0;
    for (int x = 0; x < kDomain; ++x) {
      want_a += ba[x];
      want_i += ba[x] && bb[x];
      want_u += ba[x] || bb[x];
      if (x >= lo && x < hi) {
        want_a_win += ba[x];
        want_i_win += ba[x] && bb[x];
      }
    }
    ASSERT_EQ(a.Length(), want_a);
    ASSERT_EQ(inter.Length(), want_i);
    ASSERT_EQ(uni.Length(), want_u);
    ASSERT_EQ(a.LengthWithin(lo, hi), want_a_win) << lo << " " << hi;
    ASSERT_EQ(inter.LengthWithin(lo, hi), want_i_win);
  }
}


// A cursor answers as the set does, for queries in start order (its use) and in any order.
TEST(IntervalSet, CursorMatchesTheSetInAnyQueryOrder) {
  std::mt19937 rng(777);
  for (int round = 0; round < 200; ++round) {
    const int64_t kDomain = 400;
    std::vector<Interval> v;
    const int n = static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      const int64_t a = rng() % kDomain;
      v.push_back({a, std::min<int64_t>(kDomain, a + static_cast<int64_t>(rng() % 25))});
    }
    const IntervalSet s = IntervalSet::Union(v);
    std::vector<std::pair<int64_t, int64_t>> q;
    for (int i = 0; i < 80; ++i) {
      const int64_t lo = static_cast<int64_t>(rng() % (kDomain + 40)) - 20;
      q.push_back({lo, lo + static_cast<int64_t>(rng() % 120) - 10});
    }
    for (const bool sorted : {true, false}) {
      if (sorted) std::sort(q.begin(), q.end());
      IntervalSet::Cursor c(s), f(s);
      for (const auto& [lo, hi] : q) {
        ASSERT_EQ(c.LengthWithin(lo, hi), s.LengthWithin(lo, hi)) << lo << " " << hi;
        ASSERT_EQ(f.FirstEndingAfter(lo), s.FirstEndingAfter(lo)) << lo;
        size_t want = 0;
        while (want < s.intervals().size() && s.intervals()[want].end <= lo) ++want;
        ASSERT_EQ(s.FirstEndingAfter(lo), want);
      }
    }
  }
}

}  // namespace
}  // namespace overlapprof
