#pragma once
// Iteration windows on a rank's GPU timeline.
//
// Source: step ranges (RangeKind::kStep, e.g. ProfilerStep#N) on the host. Host ranges
// run ahead of the GPU, so each step is projected onto the GPU timeline: the GPU work of
// step i is the work launched (Activity::launch_ns: the host call matched by correlation id when the trace was written) inside step i's host
// range. Window i starts at its first GPU activity and ends where window i+1 starts (the
// last window ends at its last GPU activity), so windows partition the timeline and
// per-iteration figures add up. A step that launched nothing keeps its host range.
// Without correlation ids the host ranges are used as they are.
#include <cstdint>
#include <string>
#include <vector>

#include "src/trace/model.h"

namespace overlapprof {

struct IterationWindow {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t step = kUnknown;
  bool projected = false;  // from launched GPU work (true) or the host range (false)
};

struct IterationInfo {
  std::vector<IterationWindow> windows;
  std::string source;  // "ProfilerStep" / "step range" / "none"
};

// Adds steps_without_gpu_work to `stats`.
IterationInfo FindIterations(const RankTrace& trace, StatCounters& stats);

}  // namespace overlapprof
