#include "analyzers/iterations.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

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
    if (a.category != Category::kCompute && a.category != Category::kComm) continue;
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

}  // namespace

IterationInfo DetectIterationsFromComm(const std::vector<OpSpan>& ops, const IntervalSet& busy, int64_t first_start,
                                       int64_t last_end, const IterationEvidence& ev) {
  IterationInfo info;
  info.source = "none";
  const size_t n = ops.size();
  if (n < 4) {
    info.notice = "too few communication ops to detect iterations";
    return info;
  }
  std::vector<uint64_t> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = OpKey(ops[i]);
  // The smallest leading offset s after which the sequence is periodic with at least two full
  // repetitions (the ops before s: warm-up, e.g. DDP's first iteration with one bucket).
  size_t s = 0, p = 0;
  const size_t max_lead = std::min<size_t>(n / 2, 64);
  for (size_t from = 0; from <= max_lead; ++from) {
    size_t period = SmallestPeriod(keys, from);
    if (2 * period <= n - from) {
      s = from;
      p = period;
      break;
    }
  }
  if (p == 0) {
    info.notice = "the communication ops do not repeat";
    return info;
  }
  // Gap before each op: idle time of the comm sequence (its start minus the previous op's end).
  std::vector<int64_t> gap(n, 0), max_end(n);
  int64_t prev_end = ops[0].start_ns;
  for (size_t i = 0; i < n; ++i) {
    gap[i] = std::max<int64_t>(0, ops[i].start_ns - prev_end);
    prev_end = std::max(prev_end, ops[i].end_ns);
    max_end[i] = prev_end;
  }
  // The period in ops: a multiple m*p of the smallest one, so that an iteration holding several
  // identical layers is not cut per layer. Iteration boundaries have the largest gaps (forward
  // compute, optimizer, data loading): a multiple is evidence when its boundary gaps (at the
  // phase of the largest gap) are all at least kClearGapRatio times every gap inside its periods;
  // of those, the one with the largest ratio is taken (ties: the smallest m). A period of one op
  // has no gap inside, so it is never evidence by its gaps.
  //
  // When a phase separates, it holds the largest gap: so for each m only the phase of the
  // largest gap is checked, in time proportional to its number of boundaries, with the gaps
  // sorted once (largest first). The whole search is O(L log L) (a trace of 30 k identical
  // all-reduces took seconds before).
  struct Multiple {
    size_t m = 0, phase = 0;  // m == 0: none passes
    double ratio = 0;
  };
  // The search over the ops from s0 on (phase relative to s0).
  auto search = [&](size_t s0) {
    Multiple best;
    const size_t L = n - s0;
    std::vector<uint32_t> order(L);  // positions s0.., largest gap first (ties: earlier first)
    for (size_t i = 0; i < L; ++i) order[i] = static_cast<uint32_t>(s0 + i);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return gap[a] > gap[b]; });
    for (size_t m = 1; m * p * 2 <= L; ++m) {
      const size_t P = m * p;
      if (P < 2) continue;
      const size_t phase = (order[0] - s0) % P;
      int64_t min_boundary = INT64_MAX;
      size_t boundaries = 0;
      for (size_t i = s0 + phase; i < n; i += P, ++boundaries)
        if (i > 0) min_boundary = std::min(min_boundary, gap[i]);  // op 0 has no pause before it
      // The largest gap that is not a boundary: the first such in `order`.
      int64_t max_inner = 0;
      for (size_t k = 0; k < L && k <= boundaries; ++k) {
        if ((order[k] - s0) % P != phase) {
          max_inner = gap[order[k]];
          break;
        }
      }
      if (min_boundary == INT64_MAX || min_boundary <= 0) continue;
      const double ratio = max_inner > 0 ? static_cast<double>(min_boundary) / static_cast<double>(max_inner)
                                         : std::numeric_limits<double>::infinity();
      if (ratio >= kClearGapRatio && ratio > best.ratio) best = {m, phase, ratio};
    }
    return best;
  };
  Multiple found = search(s);
  // A start-up (initialization, parameter sync: a few ops, long pauses, then the longest pause
  // before the first step) would count its pauses as inside the steps: search again from the op
  // after the longest pause, the start-up's ops then leading ones (at most max_lead of them).
  if (found.m == 0) {
    const size_t after = static_cast<size_t>(std::max_element(gap.begin() + static_cast<std::ptrdiff_t>(s), gap.end()) -
                                              gap.begin());
    if (after > s && after <= max_lead && 2 * p <= n - after) {
      found = search(after);
      if (found.m > 0) s = after;
    }
  }
  size_t best_m = found.m, best_phase = found.phase;
  const double best_ratio = found.ratio;
  const std::vector<Interval>& clusters = ev.optimizer;
  // One op per step (a single-bucket DDP step): an optimizer cluster between every two ops.
  auto cluster_between_all = [&] {
    if (clusters.empty()) return false;
    for (size_t i = s + 1; i < n; ++i)
      if (!LastClusterIn(clusters, ops[i - 1].end_ns, ops[i].start_ns)) return false;
    return true;
  };
  std::string basis;
  if (best_m > 0) {
    basis = fmt::format("its boundary pauses are at least {:.1f}x every pause inside", std::min(best_ratio, 99.0));
  } else if (p > 1) {
    best_m = 1;
    std::vector<int64_t> sums(p, 0);
    for (size_t i = s; i < n; ++i) sums[(i - s) % p] += gap[i];
    best_phase = static_cast<size_t>(std::max_element(sums.begin(), sums.end()) - sums.begin());
    basis = "its ops differ in kind or size";
    info.keys_only = true;
  } else if (cluster_between_all()) {
    best_m = 1;
    best_phase = 0;
    basis = "an optimizer kernel cluster runs between every two of its ops";
  } else {
    info.notice = fmt::format(
        "the {} communication ops are one identical op repeated (same kind and size, or no size), with no pause "
        "or optimizer kernel that tells a step from a layer",
        n);
    return info;
  }
  const size_t P = best_m * p;
  info.period_ops = static_cast<int64_t>(P);
  info.leading_ops = static_cast<int64_t>(s);
  // Boundary ops: s + phase + k*P (k >= 0). Where the optimizer's kernel cluster runs in every
  // period (between a boundary op and the next, the first boundary excepted), the window starts
  // at the first GPU work after it (the step's first kernel, whatever its collectives). Else the
  // window starts at the GPU work after the largest idle gap between the previous op's end and the
  // boundary op's start (the iteration's first forward kernel), or the previous op's end.
  std::vector<size_t> bounds;
  for (size_t b = s + best_phase; b < n; b += P) bounds.push_back(b);
  std::vector<int64_t> opt_cut(bounds.size(), kUnknown);
  size_t anchored = 0;
  for (size_t k = 0; k < bounds.size(); ++k) {
    const size_t b = bounds[k];
    const int64_t lo = b >= P ? ops[b - P].end_ns : first_start;
    if (const Interval* c = LastClusterIn(clusters, lo, ops[b].start_ns)) {
      opt_cut[k] = FirstWorkAfter(busy, c->end);
      if (opt_cut[k] != kUnknown && opt_cut[k] <= ops[b].start_ns) ++anchored;
      else opt_cut[k] = kUnknown;
    }
  }
  bool by_optimizer =
      !bounds.empty() && (anchored == bounds.size() || (anchored + 1 == bounds.size() && opt_cut[0] == kUnknown));
  // And every period between two of those cuts holds exactly the period's ops.
  for (size_t k = 1; by_optimizer && k < bounds.size(); ++k) {
    if (opt_cut[k - 1] == kUnknown) continue;
    by_optimizer = OpsStartingIn(ops, opt_cut[k - 1], opt_cut[k]) == P;
  }
  std::vector<int64_t> cuts;
  std::vector<std::pair<size_t, int64_t>> gap_cuts;  // (boundary op, cut)
  const auto& iv = busy.intervals();
  // The start of the GPU work after the largest idle gap in (lo, boundary op's start], or lo.
  auto gap_cut = [&](size_t b, int64_t lo) {
    const int64_t hi = ops[b].start_ns;
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
  };
  for (size_t k = 0; k < bounds.size(); ++k) {
    const size_t b = bounds[k];
    int64_t cut = kUnknown;
    if (by_optimizer) {
      cut = opt_cut[k];
    } else if (b > 0) {
      cut = gap_cut(b, max_end[b - 1]);
    } else {
      cut = first_start;
    }
    if (cut == kUnknown) continue;
    gap_cuts.push_back({b, cut});
  }
  // Gap cuts: a step starts at a steady offset before its boundary op. A cut whose offset is off
  // the median offset by more than 5% of the median period (a start-up's long idle gap taken for
  // the step's) is searched again after the median offset less a tenth of the period, if that
  // is after the previous op's end.
  if (!by_optimizer && gap_cuts.size() >= 3) {
    std::vector<int64_t> offsets, periods;
    for (size_t k = 0; k < gap_cuts.size(); ++k) {
      offsets.push_back(ops[gap_cuts[k].first].start_ns - gap_cuts[k].second);
      if (k > 0) periods.push_back(ops[gap_cuts[k].first].start_ns - ops[gap_cuts[k - 1].first].start_ns);
    }
    const int64_t offset = Quantile(offsets, 0.5), period = Quantile(periods, 0.5);
    for (size_t k = 0; k < gap_cuts.size(); ++k) {
      const size_t b = gap_cuts[k].first;
      if (b == 0 || std::abs(offsets[k] - offset) * 20 <= period) continue;
      const int64_t lo = ops[b].start_ns - offset - period / 10;
      if (lo < max_end[b - 1]) continue;
      gap_cuts[k].second = gap_cut(b, lo);
    }
  }
  for (const auto& [b, cut] : gap_cuts)
    if (cuts.empty() || cut > cuts.back()) cuts.push_back(cut);
  // Steps that end with the optimizer: the last one ends with its cluster (work after it is the
  // start of a step the trace cut).
  int64_t end = last_end;
  if (by_optimizer && !cuts.empty() && !clusters.empty() && clusters.back().start >= cuts.back())
    end = clusters.back().end;
  WindowsFromCuts(ops, busy, cuts, P, s, first_start, end, info);
  if (info.windows.empty()) {
    info.notice = "the communication ops repeat, but not one whole period lies between two step boundaries";
    return info;
  }
  info.source = "comm pattern";
  info.notice = fmt::format(
      "no iteration markers: {} iterations detected from the repeating communication sequence ({} ops per iteration; "
      "{}{})",
      info.windows.size(), P, basis, by_optimizer ? "; each starts after the optimizer's kernels" : "");
  return info;
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
  std::unordered_map<uint64_t, int> count;
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
