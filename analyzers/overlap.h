#pragma once
// The overlap engine: per rank and per iteration,
//   compute = |∪ compute|, comm = |∪ comm|, overlap = |compute ∩ comm|,
//   overlap_ratio = overlap / comm (the hidden share: equal to the mission's
//   (T_serial - T_overlapped) / T_comm only where overlap slows nothing down; the overlap tax
//   and overlap_efficiency are analyzers/interference.h, docs/classification.md),
//   exposed = comm - overlap, achievable = min(1, compute / comm).
// Classification: src/trace/classify.h. Exact on integer ns, O(n log n).
#include <string>
#include <vector>

#include "analyzers/comm_ops.h"
#include "analyzers/intervals.h"
#include "analyzers/iterations.h"
#include "analyzers/summary.h"
#include "src/trace/model.h"

namespace overlapprof {

struct TimelineSets {
  IntervalSet compute, comm, memory, overlap, busy;
  CommTiming timing;  // which times the communication union is built from (comm_ops.h)
  // Sorted start times, for counting what starts inside a window.
  std::vector<int64_t> kernel_starts, comm_kernel_starts, memcpy_starts, memset_starts, comm_op_starts;
  int64_t first_start = 0, last_end = 0;
  bool any_activity = false;
};

// What the overlap analyzer derives from a rank once, shared with later analyzers through
// Summary::current.
struct RankDerived {
  TimelineSets sets;
  std::vector<OpSpan> ops;   // CommOpSpans: every communication op, sorted by start
  IterationInfo iterations;  // windows (with warm-up flags) and their source
  int64_t rank = kUnknown;
  size_t rank_index = 0;
};

// Communication intervals: every communication activity, except the kernels of the launch groups
// NCCL's profiler plugin times, whose ops' own GPU intervals are taken instead (CommTiming).
TimelineSets BuildTimelineSets(const RankTrace& trace);
// Figures for the window [lo, hi).
OverlapFigures FiguresFor(const TimelineSets& sets, int64_t lo, int64_t hi);
// Figures for the whole trace (first to last GPU activity).
OverlapFigures WholeTraceFigures(const TimelineSets& sets);
// One line saying whether overlap or volume is the problem, with numbers.
std::string RankVerdict(const OverlapFigures& f);

// Quantiles of `values` (linear interpolation); n = 0 when empty.
Spread SpreadOf(std::vector<double> values);

// Formats ns for people: "1.25 ms", "830 µs", "2.40 s".
std::string FormatDuration(int64_t ns);
// Formats a ratio as a percentage with 1 decimal ("15.6%"), or "n/a".
std::string FormatPercent(const std::optional<double>& ratio);

}  // namespace overlapprof
