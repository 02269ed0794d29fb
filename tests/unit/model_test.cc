// RankTrace::Finalize: the order every importer hands its records to the analyzers in.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "src/trace/model.h"

namespace overlapprof {
namespace {

bool ByTime(const Activity& a, const Activity& b) {
  return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns < b.end_ns;
}

// Activities whose correlation_id is their input position, so that the order of equal
// (start, end) pairs, which must be kept, can be checked.
std::vector<Activity> Shuffled(size_t n, int64_t base, int64_t spread, int64_t max_dur, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Activity> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i].start_ns = base + static_cast<int64_t>(rng() % static_cast<uint64_t>(spread));
    v[i].end_ns = v[i].start_ns + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_dur));
    v[i].correlation_id = static_cast<int64_t>(i);
  }
  return v;
}

void ExpectSameAsStableSort(std::vector<Activity> v) {
  std::vector<Activity> want = v;
  std::stable_sort(want.begin(), want.end(), ByTime);
  RankTrace t;
  t.activities = std::move(v);
  t.Finalize();
  ASSERT_EQ(t.activities.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(t.activities[i].start_ns, want[i].start_ns) << "at " << i;
    ASSERT_EQ(t.activities[i].end_ns, want[i].end_ns) << "at " << i;
    ASSERT_EQ(t.activities[i].correlation_id, want[i].correlation_id) << "at " << i << ": equal elements reordered";
  }
}

// Large enough for the radix path (16,384 and more), small for the merge sort's.
TEST(Finalize, SortsAsAStableSortDoesAtEverySize) {
  for (size_t n : {size_t{10}, size_t{5000}, size_t{16384}, size_t{200000}}) {
    SCOPED_TRACE(n);
    // Many equal starts and equal (start, end) pairs: a narrow spread and short durations.
    ExpectSameAsStableSort(Shuffled(n, 1'716'423'322'417'364'997, static_cast<int64_t>(n / 4 + 1), 3, 7));
    // Starts spread over 40 s, as a real trace's: 36 bits, three passes of 12.
    ExpectSameAsStableSort(Shuffled(n, 1'716'423'322'417'364'997, 40'000'000'000, 1'000'000, 11));
  }
}

TEST(Finalize, SortsStartsThatSpanTheWholeRangeAndNegativeOnes) {
  std::vector<Activity> v = Shuffled(40000, -(int64_t{1} << 62), int64_t{1} << 62, 5, 3);
  for (size_t i = 0; i < v.size(); i += 3) v[i].start_ns = (int64_t{1} << 62) - static_cast<int64_t>(i);
  ExpectSameAsStableSort(v);
}

TEST(Finalize, AllStartsEqualSortsByEndKeepingTies) {
  std::vector<Activity> v = Shuffled(30000, 42, 1, 50, 5);
  ExpectSameAsStableSort(v);
}

}  // namespace
}  // namespace overlapprof
