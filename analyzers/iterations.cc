#include "analyzers/iterations.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
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
  uint64_t h = std::hash<std::string>()(o.op_name);
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

IterationInfo DetectIterationsFromComm(const std::vector<OpSpan>& ops, const IntervalSet& busy, int64_t first_start,
                                       int64_t last_end) {
  IterationInfo info;
  info.source = "none";
  const size_t n = ops.size();
  if (n < 4) {
    info.notice = "no iteration markers, and too few communication ops to detect iterations";
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
    info.notice = "no iteration markers, and the communication ops do not repeat: whole-trace figures only";
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
  // compute, optimizer, data loading): take the smallest m whose boundary gaps (at the best
  // phase) are all larger than every gap inside the iterations; m = 1 when none separates.
  //
  // Boundaries at phase j of period P are the ops i >= s with (i - s) % P == j. When a phase
  // separates (its every gap larger than every other gap), it holds the largest gap: so for
  // each m only the phase of the largest gap is checked, in time proportional to its number of
  // boundaries, with the gaps sorted once (largest first). The whole search is O(L log L), not
  // O(L^2 / p) (a trace of 30 k identical all-reduces took seconds). Without a separating m,
  // the phase of m = 1 is the one with the largest sum of gaps.
  size_t best_m = 1, best_phase = 0;
  const size_t L = n - s;
  {
    std::vector<int64_t> sums(p, 0);
    for (size_t i = s; i < n; ++i) sums[(i - s) % p] += gap[i];
    best_phase = static_cast<size_t>(std::max_element(sums.begin(), sums.end()) - sums.begin());
  }
  std::vector<uint32_t> order(L);  // positions s.., largest gap first (ties: earlier first)
  for (size_t i = 0; i < L; ++i) order[i] = static_cast<uint32_t>(s + i);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return gap[a] > gap[b]; });
  for (size_t m = 1; m * p * 2 <= L; ++m) {
    const size_t P = m * p;
    const size_t phase = (order[0] - s) % P;
    int64_t min_boundary = INT64_MAX;
    size_t boundaries = 0;
    for (size_t i = s + phase; i < n; i += P, ++boundaries) min_boundary = std::min(min_boundary, gap[i]);
    // The largest gap that is not a boundary: the first such in `order`; if the phase
    // separates, the boundaries come first there.
    int64_t max_inner = 0;
    for (size_t k = 0; k < L && k <= boundaries; ++k) {
      if ((order[k] - s) % P != phase) {
        max_inner = gap[order[k]];
        break;
      }
    }
    if (min_boundary != INT64_MAX && min_boundary > max_inner) {
      best_m = m;
      best_phase = phase;
      break;
    }
  }
  const size_t P = best_m * p;
  info.period_ops = static_cast<int64_t>(P);
  info.leading_ops = static_cast<int64_t>(s);
  // Boundary ops: s + phase + k*P (k >= 0), except op 0. The window boundary is the start of the
  // GPU work after the largest idle gap between the previous op's end and the boundary op's
  // start (the iteration's first forward kernel), or the previous op's end when there is none.
  std::vector<int64_t> cuts;
  const auto& iv = busy.intervals();
  for (size_t b = s + best_phase; b < n; b += P) {
    if (b == 0) continue;
    int64_t lo = max_end[b - 1], hi = ops[b].start_ns;
    int64_t cut = lo;
    if (hi > lo) {
      auto it = std::upper_bound(iv.begin(), iv.end(), lo, [](int64_t v, const Interval& x) { return v < x.start; });
      int64_t best_gap = 0, prev = lo;
      // Busy intervals starting in (lo, hi]: the one after the largest idle gap starts the iteration.
      if (it != iv.begin()) prev = std::max(lo, std::prev(it)->end);
      for (; it != iv.end() && it->start <= hi; ++it) {
        if (it->start - prev > best_gap) best_gap = it->start - prev, cut = it->start;
        prev = std::max(prev, it->end);
      }
    }
    if (cuts.empty() || cut > cuts.back()) cuts.push_back(cut);
  }
  int64_t start = first_start;
  for (int64_t c : cuts) {
    if (c <= start) continue;
    info.windows.push_back({start, c, kUnknown, true, false});
    start = c;
  }
  info.windows.push_back({start, std::max(start, last_end), kUnknown, true, false});
  info.source = "comm pattern";
  info.notice = fmt::format(
      "no iteration markers: {} iterations detected from the repeating communication sequence ({} ops per iteration)",
      info.windows.size(), P);
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
