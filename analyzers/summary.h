#pragma once
// The results of analysis: what every report writer renders. The JSON summary
// (docs/summary-schema.md, "overlapprof.summary/1") is a direct rendering of this.
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analyzers/cross_rank_result.h"
#include "src/common/stats.h"
#include "src/trace/collective.h"
#include "src/trace/model.h"

namespace overlapprof {

// Overlap figures for one window of one rank's GPU timeline. Integer ns throughout.
struct OverlapFigures {
  int64_t start_ns = 0, end_ns = 0;  // the window
  int64_t wall_ns = 0;               // end - start
  int64_t busy_ns = 0;               // |compute ∪ comm ∪ memory|
  int64_t idle_ns = 0;               // wall - busy
  int64_t compute_ns = 0;            // |∪ compute kernels|
  int64_t comm_ns = 0;               // |∪ communication activities|
  int64_t memory_ns = 0;             // |∪ memcpy/memset|
  int64_t overlap_ns = 0;            // |compute ∩ comm|
  int64_t exposed_comm_ns = 0;       // comm - overlap
  int64_t comm_ops = 0;              // communication operations started in the window
  int64_t kernels = 0, comm_kernels = 0, memcpys = 0, memsets = 0;
  // overlap / comm, in 0..1; nullopt when there is no communication (reason says why).
  std::optional<double> overlap_ratio;
  // min(1, compute / comm): the ratio that perfect scheduling could reach.
  std::optional<double> achievable_ratio;
  std::string ratio_reason;  // non-empty when overlap_ratio is null
};

// Spread of a per-iteration figure over a rank's steady (non-warm-up) iterations: quantiles
// with linear interpolation between order statistics (numpy's default).
struct Spread {
  double median = 0, p10 = 0, p90 = 0;
  int64_t n = 0;  // iterations it was taken over; 0 = no values (rendered as null)
};

struct RankDerived;  // analyzers/overlap.h
struct WhatIfResult;  // analyzers/what_if_result.h
struct InterferenceResult;  // analyzers/interference.h

struct RankResult {
  int64_t rank = kUnknown;
  size_t input_index = 0;  // position of its input in the pass (ranks are sorted afterwards); not rendered
  int64_t world_size = kUnknown;
  std::string source_path, source_format, device, host;
  OverlapFigures whole;  // the whole trace: first to last GPU activity
  int64_t iteration_count = 0;
  std::string iteration_source;  // "ProfilerStep", "step range", "comm pattern", "forward ranges", "optimizer kernels", "none"
  int64_t warmup_iterations = 0;
  Spread spread_overlap_ratio, spread_exposed_comm_ns, spread_wall_ns;
  int64_t streams = 0;
  StatCounters stats;
  std::vector<ExtraStat> extra_stats;
  std::vector<std::string> notices;
  std::string verdict;
  // Communication ops by the rule that classified them (CommRuleName -> count;
  // docs/classification.md). Ordered, so the JSON is stable.
  std::map<std::string, int64_t> comm_rules;
  // What its communication intervals were timed by (analyzers/comm_ops.h, CommTiming):
  // "nccl_profiler" or "kernels"; empty, and not rendered, when the trace holds no data of
  // NCCL's profiler plugin (so summaries of other traces are unchanged).
  std::string timing_source;
  int64_t nccl_profiler_ops = 0;        // the plugin's ops in the trace
  int64_t nccl_profiler_timed_ops = 0;  // of those, the ones whose intervals the analysis used
  // The job's overlap-relevant environment as the recorder stored it (meta `overlap_env`,
  // docs/schema.md): variable -> value. Unset (not rendered) when the trace does not say, so
  // summaries of other traces are unchanged; set and empty when none of the variables was set.
  std::optional<std::map<std::string, std::string>> overlap_env;
};

struct IterationResult {
  int64_t rank = kUnknown;
  size_t rank_index = 0;  // index into Summary::ranks
  int64_t index = 0;      // 0-based within the rank
  int64_t step = kUnknown;  // N of ProfilerStep#N when known
  bool warmup = false;      // a leading warm-up iteration (analyzers/iterations.h)
  OverlapFigures figures;
};

// One row of the `op_types` section: one rank and op family (analyzers/op_types.cc).
struct OpTypeRow {
  int64_t rank = kUnknown;
  Collective op = Collective::kUnknown;  // the family (OpFamily; named by OpFamilyName)
  int64_t count = 0;
  std::optional<int64_t> bytes;  // none when some op's size is unknown
  int64_t time_ns = 0, exposed_ns = 0;
  std::optional<double> exposed_fraction;       // rounded to 4 decimals; none without time
  std::optional<double> algbw_GBps, busbw_GBps;  // rounded to 3 decimals; none without timed sizes
  int64_t ops_under_1MiB = 0;
};

// A line a person acts on (the `findings` section).
struct Finding {
  std::string analyzer;
  int64_t rank = kUnknown;  // kUnknown: the whole run
  Severity severity = Severity::kInfo;
  std::string message;
};

// Findings as reports show them: those with the same analyzer, severity and message are one,
// with every rank that has it (ascending, unknown left out; empty for a run-level finding).
struct GroupedFinding {
  const Finding* first = nullptr;  // the first of the group, in Summary::findings order
  std::vector<int64_t> ranks;
};
std::vector<GroupedFinding> GroupFindings(const std::vector<Finding>& findings);

// One window's wall time split into parts that add up to it exactly (integer ns):
//   wall = compute_only + comm_hidden + comm_exposed + comm_waiting + memory_only + idle, where
//   compute_only = |compute \ comm|, comm_hidden = |compute ∩ comm|, comm_exposed + comm_waiting =
//   |comm \ compute| (comm_waiting: the part the cross-rank analyzer found waiting for another rank
//   to arrive, capped at it), memory_only = |memory \ (compute ∪ comm)|, idle = wall - |busy|.
// analyzers/step_breakdown.h builds it; docs/summary-schema.md, `step_breakdown`.
struct StepSplit {
  int64_t wall_ns = 0, compute_only_ns = 0, comm_hidden_ns = 0, comm_exposed_ns = 0, comm_waiting_ns = 0,
          memory_only_ns = 0, idle_ns = 0;
  int64_t PartsSum() const {
    return compute_only_ns + comm_hidden_ns + comm_exposed_ns + comm_waiting_ns + memory_only_ns + idle_ns;
  }
  void Add(const StepSplit& o) {
    wall_ns += o.wall_ns;
    compute_only_ns += o.compute_only_ns;
    comm_hidden_ns += o.comm_hidden_ns;
    comm_exposed_ns += o.comm_exposed_ns;
    comm_waiting_ns += o.comm_waiting_ns;
    memory_only_ns += o.memory_only_ns;
    idle_ns += o.idle_ns;
  }
};

// `step_breakdown.ranks[]`: one rank's split summed over its steady iterations (the whole trace
// when it has none).
struct StepBreakdownRank {
  int64_t rank = kUnknown;
  std::string basis;         // "steady iterations" or "whole trace"
  int64_t iterations = 0;    // steady iterations summed (0 for the whole trace)
  StepSplit split;
  // The ranks this one waited for (exposed waiting time, ns), largest first.
  std::vector<std::pair<int64_t, int64_t>> waited_for;
};

// `step_breakdown.iterations[]`: one iteration window (every one, warm-up included).
struct StepBreakdownIteration {
  int64_t rank = kUnknown;
  size_t rank_index = 0;  // index into Summary::ranks
  int64_t index = 0, step = kUnknown;
  bool warmup = false;
  StepSplit split;
};

struct StepBreakdown {
  std::vector<StepBreakdownRank> ranks;            // in Summary::ranks order
  std::vector<StepBreakdownIteration> iterations;  // when per-iteration output is on
  StepSplit run;                                   // the ranks' splits summed
  std::vector<std::pair<int64_t, int64_t>> run_waited_for;  // over all ranks, largest first
};

// A row of a presentational section: a JSON object built field by field in order, without
// ordered_json's operator[], which searches the keys so far and copies each key (the bucket
// rows are up to tens of thousands). Keys must be distinct.
class JsonRow {
 public:
  explicit JsonRow(size_t fields) { fields_.reserve(fields); }
  template <typename T>
  JsonRow& Add(const char* key, T&& value) {
    fields_.emplace_back(key, std::forward<T>(value));
    return *this;
  }
  nlohmann::ordered_json Take() && { return nlohmann::ordered_json(std::move(fields_)); }

 private:
  nlohmann::ordered_json::object_t fields_;
};

struct Summary {
  std::vector<RankResult> ranks;
  std::vector<IterationResult> iterations;
  std::string verdict;  // one line for the whole run

  // Typed results of the analyzers after "overlap": what later analyzers and reports read.
  // The JSON summary renders each as a section (reports/json_summary.cc).
  std::optional<std::vector<OpTypeRow>> op_types;  // set once the op_types analyzer saw a rank
  std::vector<Finding> findings;                   // section "findings" once there is one
  std::optional<CrossRankResult> cross_rank;       // set by the cross_rank analyzer's Finish
  std::optional<StepBreakdown> step_breakdown;     // set by the step_breakdown analyzer's Finish
  std::shared_ptr<const WhatIfResult> what_if;     // set by the what_if analyzer's Finish
  std::shared_ptr<const InterferenceResult> interference;  // set by the interference analyzer's Finish

  // Purely presentational sections (rendered into the JSON summary as they are, read by no
  // analyzer or report), keyed by section name. Write them through Section().
  nlohmann::ordered_json sections = nlohmann::ordered_json::object();
  // Every analyzer section's key, typed or not, in the order it first appeared: the order of the
  // JSON summary's keys after the fixed ones.
  std::vector<std::string> section_order;

  // The presentational section `key` (null when new), noting its place in section_order.
  nlohmann::ordered_json& Section(std::string_view key);
  // Notes that the section `key` exists (a typed one being filled), if it is new.
  void NoteSection(std::string_view key);
  // Sets the cross-rank result and notes its sections (all five only when something matched).
  void SetCrossRank(CrossRankResult result);
  // What the first analyzer ("overlap") derived from the rank being analyzed (unions, comm
  // op spans, iteration windows), for the analyzers after it; replaced for each rank and never
  // rendered. Null before the first rank.
  std::shared_ptr<const RankDerived> current;

  // Adds a finding (a line a person acts on) to `findings`.
  void AddFinding(std::string_view analyzer, int64_t rank, Severity severity, std::string message);

  int ErrorCounters() const;    // non-zero error-severity counters over all ranks
  int WarningCounters() const;  // the same for warnings
};

}  // namespace overlapprof
