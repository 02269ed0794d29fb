#pragma once
// The analyzer interface. An analyzer sees each rank's trace once (AnalyzeRank, in input
// order, one rank in memory at a time so memory does not grow with the number of ranks)
// and then the whole run (Finish, for cross-rank views). It must not keep references to
// a RankTrace after AnalyzeRank returns.
// To add one: a file in analyzers/ with a factory, and one line in src/cli/registry.inc.
#include <memory>
#include <string>
#include <string_view>

#include "analyzers/summary.h"
#include "src/common/status.h"
#include "src/trace/model.h"

namespace overlapprof {

struct AnalysisOptions {
  bool per_iteration = true;
  // Host annotation that marks iterations (--step-range NAME), instead of ProfilerStep#N.
  std::string step_range;
};

class Analyzer {
 public:
  virtual ~Analyzer() = default;
  virtual std::string_view name() const = 0;
  // What of a RankTrace beyond activities, comm ops and step ranges AnalyzeRank reads;
  // stores skip decoding the rest.
  virtual TraceNeeds needs() const { return {}; }
  // `rank_index` is the index of this rank's RankResult in summary.ranks (the first
  // analyzer, "overlap", creates it).
  virtual Status AnalyzeRank(const RankTrace& trace, size_t rank_index, const AnalysisOptions& options,
                             Summary& summary) = 0;
  virtual Status Finish(const AnalysisOptions& options, Summary& summary) { return OkStatus(); }
};

}  // namespace overlapprof
