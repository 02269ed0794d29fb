#pragma once
// Iteration windows on a rank's GPU timeline.
//
// Sources, in order of preference:
//  1. Step ranges on the host: ProfilerStep#N (RangeKind::kStep), or, with --step-range NAME,
//     the host annotations named NAME (or NAME#N). Host ranges run ahead of the GPU, so each
//     step is projected onto the GPU timeline: the GPU work of step i is the work launched
//     (Activity::launch_ns) inside step i's host range. Window i starts at its first GPU
//     activity and ends where window i+1 starts (the last ends at its last GPU activity), so
//     windows partition the timeline and per-iteration figures add up. A step that launched
//     nothing keeps its host range. Without correlation ids the host ranges are used as they are.
//  2. Without step ranges: the repeating sequence of communication ops (op and bytes) per rank
//     (DetectIterationsFromComm, docs/analyzers.md "Iterations").
// Warm-up iterations (FlagWarmup): the leading iterations before the first steady one.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analyzers/comm_ops.h"
#include "analyzers/intervals.h"
#include "src/trace/model.h"

namespace overlapprof {

struct IterationWindow {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t step = kUnknown;
  bool projected = false;  // from launched GPU work (true) or the host range (false)
  bool warmup = false;     // set by FlagWarmup
};

struct IterationInfo {
  std::vector<IterationWindow> windows;
  std::string source;  // "ProfilerStep" / "step range" / "comm pattern" / "none"
  std::string notice;  // why no iterations were found, or how they were detected
  // comm pattern only: ops per iteration, and how many leading ops precede the periodic part.
  int64_t period_ops = 0, leading_ops = 0;
};

// Step ranges (source 1). `step_range` empty: ProfilerStep#N. Adds steps_without_gpu_work.
IterationInfo FindIterations(const RankTrace& trace, StatCounters& stats, std::string_view step_range = {});

// Source 2. `ops` sorted by start (CommOpSpans), `busy` the union of all GPU work. Needs at
// least two full repetitions of the op sequence; otherwise no windows and a notice.
IterationInfo DetectIterationsFromComm(const std::vector<OpSpan>& ops, const IntervalSet& busy, int64_t first_start,
                                       int64_t last_end);

// Flags leading warm-up iterations: those before the first steady iteration, where steady means
// its communication signature (the sequence of op and bytes) is the most common one among the
// iterations and its wall time at most 1.5 times the median. A comm-pattern window that holds the
// ops before the periodic part is warm-up too.
void FlagWarmup(const std::vector<OpSpan>& ops, IterationInfo& info);

// Index of the window holding GPU time `t` (the last starting at or before it; 0 before the
// first), or kUnknown when there are no windows.
int64_t IterationAt(const std::vector<IterationWindow>& windows, int64_t t);

// Case-insensitive substring test (ASCII), for matching annotation names ("## backward ##").
bool ContainsNoCase(std::string_view text, std::string_view key);

}  // namespace overlapprof
