#pragma once
// The analyzer interface. An analyzer sees each rank's trace once (AnalyzeRank, in input
// order, a bounded number of ranks in memory at a time so memory does not grow with the number
// of ranks) and then the whole run (Finish, for cross-rank views). It must not keep references
// to a RankTrace after AnalyzeRank returns.
// The part of a rank's analysis that needs nothing but that rank may be split off into
// PrepareRank, which the pipeline runs on the thread that imported the rank, in parallel
// across ranks (src/cli/pipeline.h, -j); AnalyzeRank then only adds its result to the summary.
// To add one: a file in analyzers/ with a factory, and one line in src/cli/registry.inc.
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "analyzers/iterations.h"
#include "analyzers/summary.h"
#include "analyzers/what_if_scenarios.h"
#include "src/common/status.h"
#include "src/trace/model.h"

namespace overlapprof {

struct AnalysisOptions {
  bool per_iteration = true;
  // Host annotation that marks iterations (--step-range NAME), instead of ProfilerStep#N.
  std::string step_range;
  // --iterations: markers, the detected pattern, or markers else the pattern (analyzers/iterations.h).
  IterationMode iterations = IterationMode::kAuto;
  // Windows planned across ranks (analyzers/cross_rank_windows.h), by input index: such a rank
  // takes these instead of finding its own. Set by the pipeline for its second pass.
  std::shared_ptr<const std::map<size_t, IterationInfo>> carried_windows;
  // --what-if: the causal model of the step, its replay and scenarios (analyzers/what_if.h,
  // docs/what-if.md). Off by default: it needs every host call, which costs the Nsight Systems
  // reader its read-while-listing path.
  bool what_if = false;
  // --scenario SPEC (repeatable; implies what_if): custom scenarios, parsed (analyzers/what_if_scenarios.h).
  std::vector<whatif::ScenarioSpec> scenarios;
};

struct RankDerived;  // analyzers/overlap.h

// What an analyzer's PrepareRank derived from one rank, handed to its AnalyzeRank.
struct RankWork {
  virtual ~RankWork() = default;
};

// One rank as PrepareRank sees it: its trace and index, and what the analyzers before this one
// derived from it for the analyzers after them (as Summary::current does for AnalyzeRank).
struct RankPrep {
  const RankTrace& trace;
  size_t rank_index = 0;
  // The overlap analyzer's RankDerived for this rank, set by its PrepareRank; null before, or
  // when it did not prepare the rank. The same object AnalyzeRank then finds in Summary::current.
  std::shared_ptr<const RankDerived> derived;
};

class Analyzer {
 public:
  virtual ~Analyzer() = default;
  virtual std::string_view name() const = 0;
  // What of a RankTrace beyond activities, comm ops and step ranges AnalyzeRank reads;
  // stores skip decoding the rest.
  virtual TraceNeeds needs(const AnalysisOptions&) const { return {}; }
  // `rank_index` is the index of this rank's RankResult in summary.ranks (the first
  // analyzer, "overlap", creates it).
  virtual Status AnalyzeRank(const RankTrace& trace, size_t rank_index, const AnalysisOptions& options,
                             Summary& summary) = 0;
  // Optional: the work on one rank that needs nothing but that rank (`rank`: its trace, and
  // what the analyzers before this one prepared). The pipeline calls it before AnalyzeRank for
  // the same rank, possibly on another thread, while other ranks are prepared or analyzed: it
  // must not read or change the analyzer's state or anything else shared (hence const), only
  // `rank`. Errors are AnalyzeRank's to return, so that they come in the same order as without
  // it. Null (the default): nothing prepared.
  virtual std::unique_ptr<RankWork> PrepareRank(RankPrep& rank, const AnalysisOptions& options) const {
    return nullptr;
  }
  // AnalyzeRank with what PrepareRank returned for this rank (null when it returned null). An
  // analyzer with a PrepareRank overrides both: called without `prepared`, it prepares itself.
  virtual Status AnalyzeRank(const RankTrace& trace, size_t rank_index, const AnalysisOptions& options,
                             std::unique_ptr<RankWork> prepared, Summary& summary) {
    return AnalyzeRank(trace, rank_index, options, summary);
  }
  virtual Status Finish(const AnalysisOptions& options, Summary& summary) { return OkStatus(); }
};

// An analyzer whose work on a rank is all prepared (PrepareRank): AnalyzeRank without
// `prepared` is the one with null, which then prepares the rank itself.
class PreparingAnalyzer : public Analyzer {
 public:
  using Analyzer::AnalyzeRank;
  Status AnalyzeRank(const RankTrace& trace, size_t rank_index, const AnalysisOptions& options,
                     Summary& summary) final {
    return AnalyzeRank(trace, rank_index, options, nullptr, summary);
  }
  Status AnalyzeRank(const RankTrace& trace, size_t rank_index, const AnalysisOptions& options,
                     std::unique_ptr<RankWork> prepared, Summary& summary) override = 0;
};

}  // namespace overlapprof
