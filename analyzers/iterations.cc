#include "analyzers/iterations.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/common/file_key_map.h"

namespace overlapprof {

namespace {

// A host annotation named `name`, or `name#N` (N its step number).
bool MatchesStepRange(std::string_view range_name, std::string_view name, int64_t* step) {
  if (range_name == name) return true;
  if (range_name.size() > name.size() + 1 && range_name.substr(0, name.size()) == name &&
      range_name[name.size()] == '#') {
    std::string_view num = range_name.substr(name.size() + 1);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
    if (ec == std::errc() && p == num.data() + num.size()) *step = v;
    return true;
  }
  return false;
}

// Windows from step ranges sorted by start (see the header).
void ProjectSteps(const RankTrace& t, const std::vector<Range>& steps, StatCounters& stats, IterationInfo& info) {
  const size_t n = steps.size();
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> first(n, kNone), last(n, std::numeric_limits<int64_t>::min());
  std::vector<int64_t> step_starts(n), step_ends(n);
  for (size_t i = 0; i < n; ++i) {
    step_starts[i] = steps[i].start_ns;
    step_ends[i] = steps[i].end_ns;
  }
  // The step of a launch: the last step starting at or before it (upper_bound - 1).
  // Consecutive activities were mostly launched in the same step, so the previous answer
  // is tried first: it holds while step_starts[i] <= launch < step_starts[i + 1].
  size_t i = 0;
  int64_t lo = INT64_MAX, hi = INT64_MIN;  // launches in [lo, hi) are in step i (none yet)
  for (const Activity& a : t.activities) {
    if (a.kind == ActivityKind::kSync || a.launch_ns == kUnknown) continue;
    const int64_t launch = a.launch_ns;
    if (launch < lo || launch >= hi) {
      auto pos = std::upper_bound(step_starts.begin(), step_starts.end(), launch);
      if (pos == step_starts.begin()) continue;
      i = static_cast<size_t>(pos - step_starts.begin()) - 1;
      lo = step_starts[i];
      hi = i + 1 < n ? step_starts[i + 1] : std::numeric_limits<int64_t>::max();
    }
    if (launch > step_ends[i]) continue;  // launched between steps
    first[i] = std::min(first[i], a.start_ns);
    last[i] = std::max(last[i], a.end_ns);
  }

  info.windows.resize(n);
  for (size_t i = 0; i < n; ++i) {
    IterationWindow& w = info.windows[i];
    w.step = steps[i].step;
    if (first[i] != kNone) {
      w.start_ns = first[i];
      w.end_ns = last[i];
      w.projected = true;
    } else {
      w.start_ns = steps[i].start_ns;
      w.end_ns = steps[i].end_ns;
      stats.Add(Stat::steps_without_gpu_work);
    }
  }
  // Partition: a window ends where the next begins (never before its own start).
  for (size_t i = 0; i + 1 < n; ++i) {
    IterationWindow& w = info.windows[i];
    int64_t next = info.windows[i + 1].start_ns;
    if (next > w.start_ns) w.end_ns = next;
    else w.end_ns = std::max(w.end_ns, w.start_ns);
    info.windows[i + 1].start_ns = std::max(info.windows[i + 1].start_ns, w.end_ns);
    if (info.windows[i + 1].end_ns < info.windows[i + 1].start_ns)
      info.windows[i + 1].end_ns = info.windows[i + 1].start_ns;
  }
}

// Prefix function (KMP) of keys[from..]: the smallest period of that suffix is len - pi[len-1].
size_t SmallestPeriod(const std::vector<uint64_t>& keys, size_t from) {
  const size_t len = keys.size() - from;
  std::vector<size_t> pi(len, 0);
  for (size_t q = 1; q < len; ++q) {
    size_t k = pi[q - 1];
    while (k > 0 && keys[from + q] != keys[from + k]) k = pi[k - 1];
    if (keys[from + q] == keys[from + k]) ++k;
    pi[q] = k;
  }
  return len - pi[len - 1];
}

int64_t Quantile(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

uint64_t OpKey(const OpSpan& o) {
  uint64_t h = std::hash<std::string_view>()(CollectiveName(o.collective));
  return h * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(o.bytes) ^ (static_cast<uint64_t>(o.bytes) << 29);
}

}  // namespace

IterationInfo FindIterations(const RankTrace& t, StatCounters& stats, std::string_view step_range) {
  IterationInfo info;
  std::vector<Range> steps;
  if (step_range.empty()) {
    for (const Range& r : t.ranges)
      if (r.kind == RangeKind::kStep) steps.push_back(r);
  } else {
    int64_t ordinal = 0;
    for (const Range& r : t.ranges) {
      if (r.kind != RangeKind::kAnnotation && r.kind != RangeKind::kStep) continue;
      int64_t step = kUnknown;
      if (!MatchesStepRange(t.names.Get(r.name_id), step_range, &step)) continue;
      Range s = r;
      s.step = step != kUnknown ? step : ordinal;
      ++ordinal;
      steps.push_back(s);
    }
  }
  if (steps.empty()) {
    info.source = "none";
    if (!step_range.empty()) info.notice = fmt::format("no host range named '{}' in the trace", step_range);
    return info;
  }
  std::stable_sort(steps.begin(), steps.end(), [](const Range& a, const Range& b) { return a.start_ns < b.start_ns; });
  // Nested ranges of the same name (a recursive annotation) would overlap: keep the outermost.
  std::vector<Range> outer;
  for (const Range& r : steps)
    if (outer.empty() || r.start_ns >= outer.back().end_ns) outer.push_back(r);
  bool profiler_step = step_range.empty();
  for (const Range& r : outer) profiler_step &= t.names.Get(r.name_id).rfind("ProfilerStep#", 0) == 0;
  info.source = profiler_step ? "ProfilerStep" : "step range";
  info.steps = true;
  ProjectSteps(t, outer, stats, info);
  return info;
}

IterationMode IterationModeNamed(std::string_view name) {
  if (name == "markers") return IterationMode::kMarkers;
  if (name == "pattern") return IterationMode::kPattern;
  return IterationMode::kAuto;
}

IterationEvidence GatherIterationEvidence(const RankTrace& t) {
  IterationEvidence ev;
  // Which names are optimizer kernels, decided once per name.
  std::vector<int8_t> is_opt(t.names.size(), -1);
  auto optimizer = [&](uint32_t id) {
    if (id >= is_opt.size()) return false;
    if (is_opt[id] < 0) {
      const std::string_view n = t.names.Get(id);
      is_opt[id] = ContainsNoCase(n, "multi_tensor_apply") ||
                   (ContainsNoCase(n, "adam") && !ContainsNoCase(n, "hadamard"));
    }
    return is_opt[id] == 1;
  };
  bool open = false;
  Interval cur{0, 0};
  for (const Activity& a : t.activities) {  // sorted by start
    if (a.kind != ActivityKind::kKernel) continue;
    if (a.category == Category::kCompute && optimizer(a.name_id)) {
      if (!open) cur = {a.start_ns, a.end_ns}, open = true;
      else cur.end = std::max(cur.end, a.end_ns);
      continue;
    }
    // Only communication ends a cluster: an optimizer step's kernels with other compute between
    // (gradient clipping's norm, a scalar kernel, then the step) are one cluster.
    if (a.category != Category::kComm) continue;
    if (open) ev.optimizer.push_back(cur), open = false;
  }
  if (open) ev.optimizer.push_back(cur);

  // Outermost forward ranges on the host, by start.
  std::vector<Range> fwd;
  for (const Range& r : t.ranges) {  // sorted by start
    if (r.kind != RangeKind::kAnnotation) continue;
    const std::string_view n = t.names.Get(r.name_id);
    if (!ContainsNoCase(n, "## forward ##") && !(n.size() == 7 && ContainsNoCase(n, "forward"))) continue;
    if (fwd.empty() || r.start_ns >= fwd.back().end_ns) fwd.push_back(r);
  }
  if (fwd.size() >= 3) {
    std::vector<Range> steps;
    std::vector<int64_t> periods;
    for (size_t k = 0; k + 1 < fwd.size(); ++k) periods.push_back(fwd[k + 1].start_ns - fwd[k].start_ns);
    const int64_t period = Quantile(periods, 0.5);
    for (size_t k = 0; k < fwd.size(); ++k) {
      Range st = fwd[k];
      // The last step: as long as the median step on the host.
      st.end_ns = k + 1 < fwd.size() ? fwd[k + 1].start_ns - 1 : fwd[k].start_ns + period - 1;
      st.step = kUnknown;
      steps.push_back(st);
    }
    IterationInfo projected;
    StatCounters scratch;
    ProjectSteps(t, steps, scratch, projected);
    ev.phase_windows = std::move(projected.windows);
  }
  return ev;
}

namespace {

// The start of the first GPU work at or after `t` (kUnknown when none).
int64_t FirstWorkAfter(const IntervalSet& busy, int64_t t) {
  const auto& iv = busy.intervals();
  auto it = std::lower_bound(iv.begin(), iv.end(), t, [](const Interval& x, int64_t v) { return x.end <= v; });
  if (it == iv.end()) return kUnknown;
  // An interval holding t continues the cluster's own work: the next one starts the step.
  if (it->start < t) ++it;
  return it == iv.end() ? kUnknown : it->start;
}

// The last optimizer cluster ending at or before `hi` and starting at or after `lo` (null if none).
const Interval* LastClusterIn(const std::vector<Interval>& clusters, int64_t lo, int64_t hi) {
  auto it = std::upper_bound(clusters.begin(), clusters.end(), hi,
                             [](int64_t v, const Interval& x) { return v < x.end; });
  if (it == clusters.begin()) return nullptr;
  const Interval* c = &*std::prev(it);
  return c->start >= lo ? c : nullptr;
}

// Ops starting in [lo, hi).
size_t OpsStartingIn(const std::vector<OpSpan>& ops, int64_t lo, int64_t hi) {
  auto a = std::lower_bound(ops.begin(), ops.end(), lo, [](const OpSpan& o, int64_t v) { return o.start_ns < v; });
  auto b = std::lower_bound(a, ops.end(), hi, [](const OpSpan& o, int64_t v) { return o.start_ns < v; });
  return static_cast<size_t>(b - a);
}

// Windows between consecutive cuts. The segment before the first cut is a window only when it
// holds a whole period of ops and none of the leading ops (index < lead); the segment after the
// last cut only when it holds a whole period. Ops are counted by start.
void WindowsFromCuts(const std::vector<OpSpan>& ops, const IntervalSet& busy, const std::vector<int64_t>& cuts,
                     size_t period, size_t lead, int64_t first_start, int64_t last_end, IterationInfo& info) {
  auto ops_in = [&](int64_t lo, int64_t hi, size_t* first_index) {
    auto a = std::lower_bound(ops.begin(), ops.end(), lo, [](const OpSpan& o, int64_t v) { return o.start_ns < v; });
    auto b = std::lower_bound(ops.begin(), ops.end(), hi, [](const OpSpan& o, int64_t v) { return o.start_ns < v; });
    if (first_index) *first_index = static_cast<size_t>(a - ops.begin());
    return static_cast<size_t>(b - a);
  };
  if (cuts.empty()) return;
  size_t first_index = 0;
  if (cuts.front() > first_start && ops_in(first_start, cuts.front(), &first_index) >= period && first_index >= lead)
    info.windows.push_back({first_start, cuts.front(), kUnknown, true, false});
  for (size_t i = 0; i + 1 < cuts.size(); ++i) info.windows.push_back({cuts[i], cuts[i + 1], kUnknown, true, false});
  if (last_end > cuts.back() && ops_in(cuts.back(), last_end + 1, nullptr) >= period) {
    info.windows.push_back({cuts.back(), last_end, kUnknown, true, false});
  } else if (!info.windows.empty()) {
    // The partial step after the last cut is in no window: the last window ends at its own last
    // GPU work, as the last marked step does.
    const auto& iv = busy.intervals();
    auto it = std::lower_bound(iv.begin(), iv.end(), cuts.back(), [](const Interval& x, int64_t v) { return x.start < v; });
    if (it != iv.begin()) {
      IterationWindow& w = info.windows.back();
      w.end_ns = std::clamp(std::prev(it)->end, w.start_ns, w.end_ns);
    }
  }
}

// DetectIterationsFromComm, one detection: its phases in the order Run calls them, each reading
// what the ones before it found. Times in ns.
class CommPatternDetector {
 public:
  CommPatternDetector(const std::vector<OpSpan>& ops, const IntervalSet& busy, int64_t first_start, int64_t last_end,
                      const IterationEvidence& ev)
      : ops_(ops), busy_(busy), clusters_(ev.optimizer), first_start_(first_start), last_end_(last_end), n_(ops.size()) {}

  IterationInfo Run() {
    info_.source = "none";
    if (n_ < 4) {
      info_.notice = "too few communication ops to detect iterations";
      return std::move(info_);
    }
    if (!FindRepetition()) return std::move(info_);
    MeasurePauses();
    if (!ChoosePeriod()) return std::move(info_);
    AnchorOnOptimizer();
    CutAtBoundaries();
    MakeWindows();
    return std::move(info_);
  }

 private:
  // A period of m times the smallest one, at the phase of the largest pause (m == 0: none).
  struct Multiple {
    size_t m = 0, phase = 0;
    double ratio = 0;  // the smallest boundary pause over the largest pause inside
  };

  // The smallest leading offset s_ after which the sequence is periodic with at least two full
  // repetitions (the ops before s_: warm-up, e.g. DDP's first iteration with one bucket), and
  // that smallest period p_ in ops. False (and a notice) when the ops do not repeat.
  bool FindRepetition() {
    std::vector<uint64_t> keys(n_);
    for (size_t i = 0; i < n_; ++i) keys[i] = OpKey(ops_[i]);
    max_lead_ = std::min<size_t>(n_ / 2, 64);
    for (size_t from = 0; from <= max_lead_; ++from) {
      size_t period = SmallestPeriod(keys, from);
      if (2 * period <= n_ - from) {
        s_ = from;
        p_ = period;
        break;
      }
    }
    if (p_ == 0) {
      info_.notice = "the communication ops do not repeat";
      return false;
    }
    return true;
  }

  // The pause before each op: idle time of the comm sequence (its start minus the end of every op
  // before it), and that end.
  void MeasurePauses() {
    gap_.assign(n_, 0);
    max_end_.resize(n_);
    int64_t prev_end = ops_[0].start_ns;
    for (size_t i = 0; i < n_; ++i) {
      gap_[i] = std::max<int64_t>(0, ops_[i].start_ns - prev_end);
      prev_end = std::max(prev_end, ops_[i].end_ns);
      max_end_[i] = prev_end;
    }
  }

  // The period in ops: a multiple m*p_ of the smallest one, so that an iteration holding several
  // identical layers is not cut per layer. Iteration boundaries have the largest pauses (forward
  // compute, optimizer, data loading): a multiple is evidence when its boundary pauses (at the
  // phase of the largest pause) are all at least kClearGapRatio times every pause inside its
  // periods; of those, the one with the largest ratio is taken (ties: the smallest m). A period of
  // one op has no pause inside, so it is never evidence by its pauses.
  //
  // When a phase separates, it holds the largest pause: so for each m only the phase of the
  // largest pause is checked, in time proportional to its number of boundaries, with the pauses
  // sorted once (largest first). The whole search over the ops from s0 on (phase relative to s0)
  // is O(L log L), L = n_ - s0.
  Multiple SearchMultiple(size_t s0) const {
    Multiple best;
    const size_t L = n_ - s0;
    std::vector<uint32_t> order(L);  // positions s0.., largest gap first (ties: earlier first)
    for (size_t i = 0; i < L; ++i) order[i] = static_cast<uint32_t>(s0 + i);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return gap_[a] > gap_[b]; });
    for (size_t m = 1; m * p_ * 2 <= L; ++m) {
      const size_t P = m * p_;
      if (P < 2) continue;
      const size_t phase = (order[0] - s0) % P;
      int64_t min_boundary = INT64_MAX;
      size_t boundaries = 0;
      for (size_t i = s0 + phase; i < n_; i += P, ++boundaries)
        if (i > 0) min_boundary = std::min(min_boundary, gap_[i]);  // op 0 has no pause before it
      // The largest gap that is not a boundary: the first such in `order`.
      int64_t max_inner = 0;
      for (size_t k = 0; k < L && k <= boundaries; ++k) {
        if ((order[k] - s0) % P != phase) {
          max_inner = gap_[order[k]];
          break;
        }
      }
      if (min_boundary == INT64_MAX || min_boundary <= 0) continue;
      const double ratio = max_inner > 0 ? static_cast<double>(min_boundary) / static_cast<double>(max_inner)
                                         : std::numeric_limits<double>::infinity();
      if (ratio >= kClearGapRatio && ratio > best.ratio) best = {m, phase, ratio};
    }
    return best;
  }

  // SearchMultiple from s_; failing that, past a start-up (initialization, parameter sync: a few
  // ops, long pauses, then the longest pause before the first step), whose pauses would count as
  // inside the steps: again from the op after the longest pause, the start-up's ops then leading
  // ones (at most max_lead_ of them; s_ moves there when that finds a multiple).
  Multiple MultipleByPauses() {
    Multiple found = SearchMultiple(s_);
    if (found.m == 0) {
      const size_t after = static_cast<size_t>(
          std::max_element(gap_.begin() + static_cast<std::ptrdiff_t>(s_), gap_.end()) - gap_.begin());
      if (after > s_ && after <= max_lead_ && 2 * p_ <= n_ - after) {
        found = SearchMultiple(after);
        if (found.m > 0) s_ = after;
      }
    }
    return found;
  }

  // One op per step (a single-bucket DDP step): an optimizer cluster between every two ops.
  bool ClusterBetweenAllOps() const {
    if (clusters_.empty()) return false;
    for (size_t i = s_ + 1; i < n_; ++i)
      if (!LastClusterIn(clusters_, ops_[i - 1].end_ns, ops_[i].start_ns)) return false;
    return true;
  }

  // The period P_ and the phase of its boundary ops, on the first evidence that holds: clear
  // boundary pauses (MultipleByPauses); else ops that differ in kind or size (p_ > 1: the phase
  // with the most pause); else an optimizer cluster between every two ops. False (and a notice)
  // when none does.
  bool ChoosePeriod() {
    const Multiple found = MultipleByPauses();
    size_t m = found.m;
    if (m > 0) {
      phase_ = found.phase;
      basis_ = fmt::format("its boundary pauses are at least {:.1f}x every pause inside", std::min(found.ratio, 99.0));
    } else if (p_ > 1) {
      m = 1;
      std::vector<int64_t> sums(p_, 0);
      for (size_t i = s_; i < n_; ++i) sums[(i - s_) % p_] += gap_[i];
      phase_ = static_cast<size_t>(std::max_element(sums.begin(), sums.end()) - sums.begin());
      basis_ = "its ops differ in kind or size";
      info_.keys_only = true;
    } else if (ClusterBetweenAllOps()) {
      m = 1;
      phase_ = 0;
      basis_ = "an optimizer kernel cluster runs between every two of its ops";
    } else {
      info_.notice = fmt::format(
          "the {} communication ops are one identical op repeated (same kind and size, or no size), with no pause "
          "or optimizer kernel that tells a step from a layer",
          n_);
      return false;
    }
    P_ = m * p_;
    info_.period_ops = static_cast<int64_t>(P_);
    info_.leading_ops = static_cast<int64_t>(s_);
    return true;
  }

  // Boundary ops: s_ + phase_ + k*P_ (k >= 0). Where the optimizer's kernel cluster runs in every
  // period (between a boundary op and the next, the first boundary excepted), and every period
  // between two of the cuts after it holds exactly P_ ops, the window starts at the first GPU
  // work after the cluster (the step's first kernel, whatever its collectives): by_optimizer_,
  // with those cuts in opt_cut_ (kUnknown where none).
  void AnchorOnOptimizer() {
    for (size_t b = s_ + phase_; b < n_; b += P_) bounds_.push_back(b);
    opt_cut_.assign(bounds_.size(), kUnknown);
    size_t anchored = 0;
    for (size_t k = 0; k < bounds_.size(); ++k) {
      const size_t b = bounds_[k];
      const int64_t lo = b >= P_ ? ops_[b - P_].end_ns : first_start_;
      if (const Interval* c = LastClusterIn(clusters_, lo, ops_[b].start_ns)) {
        opt_cut_[k] = FirstWorkAfter(busy_, c->end);
        if (opt_cut_[k] != kUnknown && opt_cut_[k] <= ops_[b].start_ns) ++anchored;
        else opt_cut_[k] = kUnknown;
      }
    }
    by_optimizer_ = !bounds_.empty() &&
                    (anchored == bounds_.size() || (anchored + 1 == bounds_.size() && opt_cut_[0] == kUnknown));
    for (size_t k = 1; by_optimizer_ && k < bounds_.size(); ++k) {
      if (opt_cut_[k - 1] == kUnknown) continue;
      by_optimizer_ = OpsStartingIn(ops_, opt_cut_[k - 1], opt_cut_[k]) == P_;
    }
  }

  // The start of the GPU work after the largest idle gap in (lo, boundary op b's start], or lo:
  // the iteration's first forward kernel.
  int64_t GapCut(size_t b, int64_t lo) const {
    const auto& iv = busy_.intervals();
    const int64_t hi = ops_[b].start_ns;
    int64_t cut = lo;
    if (hi > lo) {
      auto it = std::upper_bound(iv.begin(), iv.end(), lo, [](int64_t v, const Interval& x) { return v < x.start; });
      int64_t best_gap = 0, prev = lo;
      if (it != iv.begin()) prev = std::max(lo, std::prev(it)->end);
      for (; it != iv.end() && it->start <= hi; ++it) {
        if (it->start - prev > best_gap) best_gap = it->start - prev, cut = it->start;
        prev = std::max(prev, it->end);
      }
    }
    return cut;
  }

  // Gap cuts: a step starts at a steady offset before its boundary op. A cut whose offset is off
  // the median offset by more than 5% of the median period (a start-up's long idle gap taken for
  // the step's) is searched again after the median offset less a tenth of the period, if that
  // is after the previous op's end. `cuts`: (boundary op, cut), at least 3.
  void RealignOutlyingGapCuts(std::vector<std::pair<size_t, int64_t>>& cuts) const {
    std::vector<int64_t> offsets, periods;
    for (size_t k = 0; k < cuts.size(); ++k) {
      offsets.push_back(ops_[cuts[k].first].start_ns - cuts[k].second);
      if (k > 0) periods.push_back(ops_[cuts[k].first].start_ns - ops_[cuts[k - 1].first].start_ns);
    }
    const int64_t offset = Quantile(offsets, 0.5), period = Quantile(periods, 0.5);
    for (size_t k = 0; k < cuts.size(); ++k) {
      const size_t b = cuts[k].first;
      if (b == 0 || std::abs(offsets[k] - offset) * 20 <= period) continue;
      const int64_t lo = ops_[b].start_ns - offset - period / 10;
      if (lo < max_end_[b - 1]) continue;
      cuts[k].second = GapCut(b, lo);
    }
  }

  // Where each step starts (cuts_, increasing): after the optimizer (by_optimizer_), else at the
  // GPU work after the largest idle gap between the previous op's end and the boundary op's start
  // (GapCut, realigned to the steady offset), or the previous op's end.
  void CutAtBoundaries() {
    std::vector<std::pair<size_t, int64_t>> boundary_cuts;  // (boundary op, cut)
    for (size_t k = 0; k < bounds_.size(); ++k) {
      const size_t b = bounds_[k];
      int64_t cut = kUnknown;
      if (by_optimizer_) {
        cut = opt_cut_[k];
      } else if (b > 0) {
        cut = GapCut(b, max_end_[b - 1]);
      } else {
        cut = first_start_;
      }
      if (cut == kUnknown) continue;
      boundary_cuts.push_back({b, cut});
    }
    if (!by_optimizer_ && boundary_cuts.size() >= 3) RealignOutlyingGapCuts(boundary_cuts);
    for (const auto& [b, cut] : boundary_cuts)
      if (cuts_.empty() || cut > cuts_.back()) cuts_.push_back(cut);
  }

  // The windows between the cuts (WindowsFromCuts) and the notice saying how they were found.
  // Steps that end with the optimizer: the last one ends with its cluster (work after it is the
  // start of a step the trace cut).
  void MakeWindows() {
    int64_t end = last_end_;
    if (by_optimizer_ && !cuts_.empty() && !clusters_.empty() && clusters_.back().start >= cuts_.back())
      end = clusters_.back().end;
    WindowsFromCuts(ops_, busy_, cuts_, P_, s_, first_start_, end, info_);
    if (info_.windows.empty()) {
      info_.notice = "the communication ops repeat, but not one whole period lies between two step boundaries";
      return;
    }
    info_.source = "comm pattern";
    info_.notice = fmt::format(
        "no iteration markers: {} iterations detected from the repeating communication sequence ({} ops per "
        "iteration; {}{})",
        info_.windows.size(), P_, basis_, by_optimizer_ ? "; each starts after the optimizer's kernels" : "");
  }

  const std::vector<OpSpan>& ops_;  // sorted by start
  const IntervalSet& busy_;         // every GPU work
  const std::vector<Interval>& clusters_;  // the optimizer's kernel clusters (IterationEvidence)
  const int64_t first_start_, last_end_;
  const size_t n_;  // ops
  IterationInfo info_;
  size_t s_ = 0, p_ = 0;      // FindRepetition: leading ops, smallest period
  size_t max_lead_ = 0;       // the most leading ops allowed
  std::vector<int64_t> gap_, max_end_;  // MeasurePauses
  size_t P_ = 0, phase_ = 0;  // ChoosePeriod: ops per iteration; boundary ops at s_ + phase_ + k*P_
  std::string basis_;         // ChoosePeriod: the evidence, for the notice
  std::vector<size_t> bounds_;     // AnchorOnOptimizer: the boundary ops
  std::vector<int64_t> opt_cut_;   // AnchorOnOptimizer: the cut after the optimizer per boundary
  bool by_optimizer_ = false;      // AnchorOnOptimizer: steps start after the optimizer
  std::vector<int64_t> cuts_;      // CutAtBoundaries
};

}  // namespace

IterationInfo DetectIterationsFromComm(const std::vector<OpSpan>& ops, const IntervalSet& busy, int64_t first_start,
                                       int64_t last_end, const IterationEvidence& ev) {
  return CommPatternDetector(ops, busy, first_start, last_end, ev).Run();
}

IterationInfo DetectIterationsFromOptimizer(const IterationEvidence& ev, const IntervalSet& busy,
                                            const std::vector<OpSpan>& ops) {
  IterationInfo info;
  info.source = "none";
  const std::vector<Interval>& c = ev.optimizer;
  if (c.size() < 3) {
    info.notice = c.empty() ? "no optimizer kernels (multi_tensor_apply, Adam)"
                            : fmt::format("only {} optimizer kernel cluster(s)", c.size());
    return info;
  }
  std::vector<int64_t> cuts;
  for (const Interval& x : c) {
    // Nothing after the last cluster: the trace ends with that step.
    int64_t cut = FirstWorkAfter(busy, x.end);
    if (cut == kUnknown) cut = x.end;
    if (cut != kUnknown && (cuts.empty() || cut > cuts.back())) cuts.push_back(cut);
  }
  std::vector<int64_t> walls;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) walls.push_back(cuts[i + 1] - cuts[i]);
  if (walls.size() < 2) {
    info.notice = "too few optimizer kernel clusters with GPU work after them";
    return info;
  }
  // A steady period: at least two thirds of the windows within ±25% of the median.
  const int64_t median = Quantile(walls, 0.5);
  size_t steady = 0;
  for (int64_t w : walls)
    steady += std::abs(static_cast<double>(w - median)) <= kSteadyPeriodTolerance * static_cast<double>(median);
  if (steady * 3 < walls.size() * 2) {
    info.notice = fmt::format("the {} optimizer kernel clusters do not repeat at a steady period", c.size());
    return info;
  }
  // The clusters end steps only if every window between two of them holds the same communication
  // sequence (op and bytes, at least one op): a cluster that runs mid-step, or more than once a
  // step, splits the sequence unevenly.
  uint64_t first_sig = 0;
  size_t first_count = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    auto a = std::lower_bound(ops.begin(), ops.end(), cuts[i], [](const OpSpan& o, int64_t v) { return o.start_ns < v; });
    uint64_t sig = 0x12345;
    size_t count = 0;
    for (; a != ops.end() && a->start_ns < cuts[i + 1]; ++a, ++count) sig = sig * 1099511628211ull ^ OpKey(*a);
    if (i == 0) first_sig = sig, first_count = count;
    if (count == 0 || count != first_count || sig != first_sig) {
      info.notice = ops.empty() ? "no communication ops to check the optimizer kernel clusters' period against"
                                : fmt::format("the optimizer kernel clusters do not split the communication ops into "
                                              "equal steps");
      return info;
    }
  }
  for (size_t i = 0; i + 1 < cuts.size(); ++i) info.windows.push_back({cuts[i], cuts[i + 1], kUnknown, true, false});
  info.source = "optimizer kernels";
  info.notice = fmt::format(
      "no iteration markers: {} iterations between the optimizer's kernel clusters (multi_tensor_apply/Adam kernels "
      "that end each step, each window holding the same {} communication ops; GPU work before the first and after "
      "the last cluster is in none)",
      info.windows.size(), first_count);
  return info;
}

IterationInfo DetectIterations(const std::vector<OpSpan>& ops, const IntervalSet& busy, int64_t first_start,
                               int64_t last_end, const IterationEvidence& ev) {
  IterationInfo comm = DetectIterationsFromComm(ops, busy, first_start, last_end, ev);
  IterationInfo info = comm;
  // A period resting on differing keys alone may be a layer's ops (an all-gather and a
  // reduce-scatter per layer): the host's forward ranges and the optimizer clusters come first.
  if (comm.keys_only) info = IterationInfo{};
  if (info.windows.empty() && ev.phase_windows.size() >= 2) {
    info.windows = ev.phase_windows;
    info.source = "forward ranges";
    info.notice = fmt::format(
        "no iteration markers: {} iterations from the host's repeating forward ranges (## forward ## or forward, "
        "record_function or NVTX), each from one forward to the next; communication pattern not used: {}",
        info.windows.size(), comm.notice);
  }
  if (info.windows.empty()) {
    info = DetectIterationsFromOptimizer(ev, busy, ops);
    if (!info.windows.empty()) info.notice += fmt::format("; communication pattern not used: {}", comm.notice);
  }
  if (info.windows.empty() && comm.keys_only) info = comm;
  std::string refused;  // bounds
  if (!info.windows.empty()) {
    std::vector<int64_t> walls;
    for (const IterationWindow& w : info.windows) walls.push_back(w.end_ns - w.start_ns);
    const int64_t median = Quantile(walls, 0.5);
    if (static_cast<int64_t>(info.windows.size()) > kMaxIterationWindows || median < kMinIterationWindowNs) {
      refused = fmt::format("{} windows of median {} ns from the {} ({} allowed, at least {} µs each)",
                            info.windows.size(), median, info.source, kMaxIterationWindows,
                            kMinIterationWindowNs / 1000);
      info = IterationInfo{};
      info.source = "none";
    }
  }
  if (info.windows.empty()) {
    std::string why = refused;
    if (why.empty()) {
      why = comm.notice + "; no repeating forward ranges";
      if (info.notice != comm.notice && !info.notice.empty()) why += "; " + info.notice;
    }
    info.notice = fmt::format(
        "no reliable iterations: no iteration markers, {}; whole-trace figures only (mark steps with the profiler's "
        "schedule, which writes ProfilerStep#N, or name an NVTX/record_function range with --step-range NAME)",
        why);
  }
  return info;
}

void FlagWarmup(const std::vector<OpSpan>& ops, IterationInfo& info) {
  auto& w = info.windows;
  if (w.size() < 3) return;
  // Signature of each window: hash of its ops' (op, bytes) sequence.
  std::vector<uint64_t> sig(w.size(), 0x12345);
  std::vector<int64_t> walls(w.size()), nops(w.size(), 0);
  size_t k = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    walls[i] = w[i].end_ns - w[i].start_ns;
    while (k < ops.size() && ops[k].start_ns < w[i].start_ns) ++k;
    for (; k < ops.size() && ops[k].start_ns < w[i].end_ns; ++k, ++nops[i]) sig[i] = sig[i] * 1099511628211ull ^ OpKey(ops[k]);
  }
  // The most common signature among the iterations after the first (a trace often starts and
  // ends mid-iteration, so the middle is the reference). A tie goes to the iteration with the
  // most communication ops (a complete one), then to the earliest: a partial last iteration must
  // not become the reference and turn the steady ones before it into "warm-up" (seen: steps 1009
  // and 1010 of a steady trace that ended inside step 1011, by the order of hash values).
  FileKeyMap<uint64_t, int> count;  // signatures of the file's ops
  for (size_t i = 1; i < w.size(); ++i) ++count[sig[i]];
  size_t ref = 1;
  for (size_t i = 2; i < w.size(); ++i)
    if (count[sig[i]] > count[sig[ref]] || (count[sig[i]] == count[sig[ref]] && nops[i] > nops[ref])) ref = i;
  const uint64_t mode = sig[ref];
  // The reference wall time: the median of the iterations with that signature (not of all of
  // them, which a short partial iteration at either end would pull down).
  std::vector<int64_t> mode_walls;
  for (size_t i = 1; i < w.size(); ++i)
    if (sig[i] == mode) mode_walls.push_back(walls[i]);
  const int64_t median = Quantile(mode_walls, 0.5);
  // Comm-pattern windows that hold the ops before the periodic part are warm-up.
  int64_t lead_end = info.leading_ops > 0 && info.leading_ops <= static_cast<int64_t>(ops.size())
                         ? ops[info.leading_ops - 1].start_ns
                         : INT64_MIN;
  for (size_t i = 0; i < w.size(); ++i) {
    const bool steady = sig[i] == mode && walls[i] * 2 <= median * 3;
    const bool leading = w[i].start_ns <= lead_end;
    if (steady && !leading) break;
    w[i].warmup = true;
  }
  // Never flag them all (no steady iteration: nothing to call warm-up against).
  if (std::all_of(w.begin(), w.end(), [](const IterationWindow& x) { return x.warmup; }))
    for (auto& x : w) x.warmup = false;
}

int64_t IterationAt(const std::vector<IterationWindow>& windows, int64_t t) {
  if (windows.empty()) return kUnknown;
  auto it = std::upper_bound(windows.begin(), windows.end(), t,
                             [](int64_t v, const IterationWindow& w) { return v < w.start_ns; });
  return it == windows.begin() ? 0 : static_cast<int64_t>(it - windows.begin()) - 1;
}

bool ContainsNoCase(std::string_view s, std::string_view k) {
  return std::search(s.begin(), s.end(), k.begin(), k.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         }) != s.end();
}

}  // namespace overlapprof
