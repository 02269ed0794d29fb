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
//  2. Without step ranges (DetectIterations, docs/analyzers.md "Iterations"): the repeating
//     sequence of communication ops (op and bytes) per rank, when it can be told apart from "one op
//     per layer" (DetectIterationsFromComm); else the host's repeating forward ranges; else the
//     optimizer's kernel clusters that end each step (DetectIterationsFromOptimizer); else a
//     period resting on differing keys alone; else no windows and a notice.
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

// Which evidence may give the windows (--iterations): kAuto markers, else the detected pattern;
// kMarkers only step ranges; kPattern only the detection (markers ignored: the self-check).
enum class IterationMode : uint8_t { kAuto, kMarkers, kPattern };
// "auto", "markers", "pattern"; anything else is kAuto (the CLI checks the name).
IterationMode IterationModeNamed(std::string_view name);

// The detection's thresholds (docs/analyzers.md "Iterations").
inline constexpr double kClearGapRatio = 1.5;        // boundary pauses >= 1.5x every pause inside
inline constexpr int64_t kMaxIterationWindows = 100000;  // more: "no reliable iterations"
inline constexpr int64_t kMinIterationWindowNs = 100000;  // median window under 100 µs: same
inline constexpr double kSteadyPeriodTolerance = 0.25;  // optimizer windows within ±25% of the median

// Evidence besides the communication ops, gathered once per rank (GatherIterationEvidence).
struct IterationEvidence {
  // Optimizer kernel clusters, sorted: maximal runs (in GPU start order) of optimizer kernels
  // (multi_tensor_apply, Adam/AdamW) with no communication kernel between them (other compute
  // may run between: gradient clipping, a scalar kernel, then the step are one cluster).
  std::vector<Interval> optimizer;
  // Windows from host ranges that repeat once a step (the outermost `## forward ##` or `forward`
  // record_function/NVTX ranges): step k runs from forward k to forward k+1 on the host, projected
  // onto the GPU as markers are (the last forward, whose step the trace may cut, starts none).
  // Empty with fewer than 3 such ranges.
  std::vector<IterationWindow> phase_windows;
};
IterationEvidence GatherIterationEvidence(const RankTrace& trace);

struct IterationInfo {
  std::vector<IterationWindow> windows;
  // "ProfilerStep" / "step range" / "comm pattern" / "forward ranges" / "optimizer kernels" /
  // "carried" (another rank's, analyzers/cross_rank_windows.h) / "none"
  std::string source;
  std::string notice;  // why no iterations were found, or how they were detected
  // comm pattern only: ops per iteration, and how many leading ops precede the periodic part.
  int64_t period_ops = 0, leading_ops = 0;
  // comm pattern only: resting on keys that differ alone (no clear pause, no optimizer between
  // ops): DetectIterations prefers the forward ranges and the optimizer clusters then.
  bool keys_only = false;
  // The windows are marked steps (IterationWindow::step from the markers): this rank's own, or
  // carried from a rank with markers.
  bool steps = false;
};

// Step ranges (source 1). `step_range` empty: ProfilerStep#N. Adds steps_without_gpu_work.
IterationInfo FindIterations(const RankTrace& trace, StatCounters& stats, std::string_view step_range = {});

// Source 2. `ops` sorted by start (CommOpSpans), `busy` the union of all GPU work. Needs at
// least two full repetitions of the op sequence and evidence that the period is a step (keys
// that differ, clearly longer boundary pauses, or an optimizer cluster between every two ops);
// otherwise no windows and a notice. Windows hold whole periods: the ops before the periodic part
// and a partial period at either end are left out of every window.
IterationInfo DetectIterationsFromComm(const std::vector<OpSpan>& ops, const IntervalSet& busy, int64_t first_start,
                                       int64_t last_end, const IterationEvidence& evidence = {});

// Source 3: one window from the first GPU work after each optimizer cluster to the first after the
// next; needs at least 3 clusters, a steady period (kSteadyPeriodTolerance) and the same
// communication sequence (at least one op) in every window.
IterationInfo DetectIterationsFromOptimizer(const IterationEvidence& evidence, const IntervalSet& busy,
                                            const std::vector<OpSpan>& ops);

// Sources 2, then 3; then no windows with one notice saying what is missing. Windows beyond
// kMaxIterationWindows or shorter than kMinIterationWindowNs (median) are refused the same way.
IterationInfo DetectIterations(const std::vector<OpSpan>& ops, const IntervalSet& busy, int64_t first_start,
                               int64_t last_end, const IterationEvidence& evidence);

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
