#pragma once
// The results of analysis: what every report writer renders. The JSON summary
// (docs/summary-schema.md, "overlapprof.summary/1") is a direct rendering of this.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "src/common/stats.h"
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

struct RankResult {
  int64_t rank = kUnknown;
  int64_t world_size = kUnknown;
  std::string source_path, source_format, device, host;
  OverlapFigures whole;  // the whole trace: first to last GPU activity
  int64_t iteration_count = 0;
  std::string iteration_source;  // "ProfilerStep", "none"
  int64_t streams = 0;
  StatCounters stats;
  std::vector<ExtraStat> extra_stats;
  std::vector<std::string> notices;
  std::string verdict;
};

struct IterationResult {
  int64_t rank = kUnknown;
  size_t rank_index = 0;  // index into Summary::ranks
  int64_t index = 0;      // 0-based within the rank
  int64_t step = kUnknown;  // N of ProfilerStep#N when known
  OverlapFigures figures;
};

struct Summary {
  std::vector<RankResult> ranks;
  std::vector<IterationResult> iterations;
  std::string verdict;  // one line for the whole run
  // Sections of later analyzers, keyed by analyzer name, rendered into the JSON summary.
  nlohmann::ordered_json sections = nlohmann::ordered_json::object();

  int ErrorCounters() const;    // non-zero error-severity counters over all ranks
  int WarningCounters() const;  // the same for warnings
};

}  // namespace overlapprof
