#include "analyzers/intervals.h"

#include <algorithm>

#include "src/common/memory.h"

namespace overlapprof {

IntervalSet IntervalSet::Union(std::vector<Interval> v) {
  auto by_start = [](const Interval& a, const Interval& b) { return a.start < b.start; };
  if (!std::is_sorted(v.begin(), v.end(), by_start)) std::sort(v.begin(), v.end(), by_start);
  IntervalSet s;
  for (const Interval& iv : v) {
    if (iv.end <= iv.start) continue;
    if (!s.items_.empty() && iv.start <= s.items_.back().end) {
      s.items_.back().end = std::max(s.items_.back().end, iv.end);
    } else {
      s.items_.push_back(iv);
    }
  }
  s.BuildPrefix();
  return s;
}

IntervalSet IntervalSet::Intersect(const IntervalSet& a, const IntervalSet& b) {
  IntervalSet s;
  std::vector<Interval>& items = s.items_;
  ReserveHuge(items, a.items_.size() + b.items_.size());  // the most pieces there can be
  size_t i = 0, j = 0;
  const Interval* x = a.items_.data();
  const Interval* y = b.items_.data();
  const size_t nx = a.items_.size(), ny = b.items_.size();
  while (i < nx && j < ny) {
    int64_t lo = std::max(x[i].start, y[j].start);
    int64_t hi = std::min(x[i].end, y[j].end);
    if (lo < hi) {
      // Pieces of two disjoint unions can touch (a.end == b.start) after intersection only
      // if the inputs touched, which unions exclude; still, normalise to be safe.
      if (!items.empty() && lo <= items.back().end) items.back().end = std::max(items.back().end, hi);
      else items.push_back({lo, hi});
    }
    if (x[i].end < y[j].end) ++i;
    else ++j;
  }
  s.BuildPrefix();
  return s;
}

IntervalSet IntervalSet::Merge(const IntervalSet& a, const IntervalSet& b) {
  std::vector<Interval> all;
  all.reserve(a.items_.size() + b.items_.size());
  std::merge(a.items_.begin(), a.items_.end(), b.items_.begin(), b.items_.end(), std::back_inserter(all),
             [](const Interval& p, const Interval& q) { return p.start < q.start; });
  return Union(std::move(all));
}

void IntervalSet::Builder::Reserve(size_t n) { ReserveHuge(items_, n); }

IntervalSet IntervalSet::Builder::Build() && {
  IntervalSet s;
  s.items_ = std::move(items_);  // not shrunk: that would copy it all once more
  s.BuildPrefix();
  return s;
}

void IntervalSet::BuildPrefix() {
  prefix_.clear();
  ReserveHuge(prefix_, items_.size());
  int64_t sum = 0;
  for (const Interval& iv : items_) {
    sum += iv.end - iv.start;
    prefix_.push_back(sum);
  }
}

namespace {

// The first index in [from, n) whose interval satisfies `past` (a predicate false then true
// along the set), galloping from `from`: O(log distance) rather than O(log n).
template <typename Past>
size_t Gallop(const std::vector<Interval>& v, size_t from, Past past) {
  const size_t n = v.size();
  size_t lo = from, step = 1, hi = from;
  while (hi < n && !past(v[hi])) {
    lo = hi + 1;
    hi = from + step;
    step *= 2;
  }
  if (hi > n) hi = n;
  return static_cast<size_t>(std::partition_point(v.begin() + lo, v.begin() + hi, [&](const Interval& x) { return !past(x); }) -
                             v.begin());
}

}  // namespace

size_t IntervalSet::FirstEndingAfter(int64_t t) const {
  return static_cast<size_t>(
      std::upper_bound(items_.begin(), items_.end(), t, [](int64_t v, const Interval& iv) { return v < iv.end; }) -
      items_.begin());
}

int64_t IntervalSet::LengthWithin(int64_t lo, int64_t hi) const {
  if (hi <= lo || items_.empty()) return 0;
  return LengthFrom(FirstEndingAfter(lo), lo, hi);
}

int64_t IntervalSet::LengthFrom(size_t f, int64_t lo, int64_t hi) const {
  // f: first interval ending after lo; last: the first starting at or after hi, from f on.
  const size_t last = Gallop(items_, f, [&](const Interval& iv) { return iv.start >= hi; });
  if (f >= last) return 0;
  const size_t l = last - 1;  // inclusive
  int64_t total = prefix_[l] - (f == 0 ? 0 : prefix_[f - 1]);
  if (items_[f].start < lo) total -= lo - items_[f].start;
  if (items_[l].end > hi) total -= items_[l].end - hi;
  return total;
}

size_t IntervalSet::Cursor::FirstEndingAfter(int64_t t) {
  if (t < last_) first_ = 0;
  last_ = t;
  first_ = Gallop(set_->items_, first_, [&](const Interval& iv) { return iv.end > t; });
  return first_;
}

int64_t IntervalSet::Cursor::LengthWithin(int64_t lo, int64_t hi) {
  if (hi <= lo || set_->items_.empty()) return 0;
  return set_->LengthFrom(FirstEndingAfter(lo), lo, hi);
}

}  // namespace overlapprof
