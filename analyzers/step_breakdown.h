#pragma once
// Where the step time goes (analyzer "step_breakdown", docs/analyzers.md "Step time"): each
// iteration window's wall time split exactly into compute only, communication hidden by compute,
// communication exposed, communication exposed while waiting for another rank, memory only and GPU
// idle (StepSplit, analyzers/summary.h); per rank summed over its steady iterations (the whole
// trace when it has none), and for the run. It also writes the verdicts (RankResult::verdict and
// Summary::verdict), which name the largest recoverable share of the step first.
#include <memory>
#include <string>
#include <vector>

#include "analyzers/analyzer.h"
#include "analyzers/summary.h"

namespace overlapprof {

// The split of a window from its overlap figures, with no waiting (the cross-rank analyzer's
// share is moved out of comm_exposed_ns by WithWaiting). PartsSum() == f.wall_ns always.
StepSplit SplitOf(const OverlapFigures& f);
// `s` with min(exposed_wait_ns, comm exposed) moved from comm_exposed_ns to comm_waiting_ns.
StepSplit WithWaiting(StepSplit s, int64_t exposed_wait_ns);

// A share of the step counts in the verdict from 10% of the wall time.
inline constexpr int64_t kVerdictSharePercent = 10;
// GPU idle leads the verdict ("input- or CPU-bound") only from 25% of the step and when it is at
// least 1.5 times every other recoverable share; else it is named after them.
inline constexpr int64_t kIdleLeadPercent = 25;
inline constexpr double kIdleLeadMargin = 1.5;

// The verdict for a split: the largest recoverable share (GPU idle, exposed communication,
// memory only) first, with its cause and what limits the job; "well overlapped" when none reaches
// kVerdictSharePercent. `waited_for` (rank, exposed waiting ns; largest first) names whom the
// waiting was for.
std::string StepVerdict(const StepSplit& s, const std::vector<std::pair<int64_t, int64_t>>& waited_for);

std::unique_ptr<Analyzer> MakeStepBreakdownAnalyzer();

}  // namespace overlapprof
