#pragma once
// Exact interval arithmetic on integer ns. Intervals are half-open [start, end): two
// intervals that touch (a.end == b.start) do not overlap, and merge in a union.
// Zero-length intervals contribute nothing. All operations are O(n log n) or better.
#include <cstddef>
#include <cstdint>
#include <climits>
#include <vector>

namespace overlapprof {

struct Interval {
  int64_t start;
  int64_t end;
};

// A union of intervals: sorted, disjoint, non-touching, no empty intervals; with prefix
// sums of lengths so the length inside any window costs O(log n).
class IntervalSet {
 public:
  IntervalSet() = default;
  // Builds the union of `intervals` (sorted here if not already sorted by start).
  static IntervalSet Union(std::vector<Interval> intervals);
  // The intersection of two unions (linear merge).
  static IntervalSet Intersect(const IntervalSet& a, const IntervalSet& b);
  // The union of two unions (linear merge).
  static IntervalSet Merge(const IntervalSet& a, const IntervalSet& b);

  // Builds a union from intervals added in non-decreasing start order (no sort, no copy).
  class Builder {
   public:
    // Room for n intervals (huge pages advised: src/common/memory.h).
    void Reserve(size_t n);
    // Precondition: start >= the start of the previous Add.
    void Add(int64_t start, int64_t end) {
      if (end <= start) return;
      if (!items_.empty() && start <= items_.back().end) {
        if (end > items_.back().end) items_.back().end = end;
      } else {
        items_.push_back({start, end});
      }
    }
    IntervalSet Build() &&;

   private:
    std::vector<Interval> items_;
  };

  int64_t Length() const { return prefix_.empty() ? 0 : prefix_.back(); }
  // |this ∩ [lo, hi)|.
  int64_t LengthWithin(int64_t lo, int64_t hi) const;
  // The index of the first interval ending after `t` (size() when none).
  size_t FirstEndingAfter(int64_t t) const;

  // For many queries whose `lo` mostly does not decrease (a pass over a trace in start
  // order): the same answers as the set's own functions, searched from where the previous
  // query's first interval was (galloping) instead of over the whole set. Any order is correct;
  // a smaller `lo` than the last one searches from the start.
  class Cursor {
   public:
    explicit Cursor(const IntervalSet& set) : set_(&set) {}
    int64_t LengthWithin(int64_t lo, int64_t hi);
    size_t FirstEndingAfter(int64_t t);

   private:
    const IntervalSet* set_;
    size_t first_ = 0;       // FirstEndingAfter(last_) (0 before the first query)
    int64_t last_ = INT64_MIN;
  };
  const std::vector<Interval>& intervals() const { return items_; }
  bool empty() const { return items_.empty(); }

 private:
  void BuildPrefix();
  // |this ∩ [lo, hi)| given f = FirstEndingAfter(lo).
  int64_t LengthFrom(size_t f, int64_t lo, int64_t hi) const;
  std::vector<Interval> items_;
  std::vector<int64_t> prefix_;  // prefix_[i] = total length of items_[0..i]
};

}  // namespace overlapprof
