#include "analyzers/iterations.h"

#include <algorithm>
#include <limits>

namespace overlapprof {

IterationInfo FindIterations(const RankTrace& t, StatCounters& stats) {
  IterationInfo info;
  std::vector<const Range*> steps;
  for (const Range& r : t.ranges)
    if (r.kind == RangeKind::kStep) steps.push_back(&r);
  if (steps.empty()) {
    info.source = "none";
    return info;
  }
  std::sort(steps.begin(), steps.end(), [](const Range* a, const Range* b) { return a->start_ns < b->start_ns; });
  bool profiler_step = true;
  for (const Range* r : steps) profiler_step &= t.names.Get(r->name_id).rfind("ProfilerStep#", 0) == 0;
  info.source = profiler_step ? "ProfilerStep" : "step range";

  const size_t n = steps.size();
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> first(n, kNone), last(n, std::numeric_limits<int64_t>::min());

  std::vector<int64_t> step_starts(n), step_ends(n);
  for (size_t i = 0; i < n; ++i) {
    step_starts[i] = steps[i]->start_ns;
    step_ends[i] = steps[i]->end_ns;
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
    w.step = steps[i]->step;
    if (first[i] != kNone) {
      w.start_ns = first[i];
      w.end_ns = last[i];
      w.projected = true;
    } else {
      w.start_ns = steps[i]->start_ns;
      w.end_ns = steps[i]->end_ns;
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
  return info;
}

}  // namespace overlapprof
