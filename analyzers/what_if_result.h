#pragma once
// What the what-if analyzer (analyzers/what_if.cc, docs/what-if.md) found: how well the replayed
// model gives back the measured steps, and the predicted step of each scenario. Rendered by the
// JSON summary as the section `what_if` and by the terminal as the "what would help" table.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace overlapprof {

// One rank's replay of its modeled steady iterations: error per iteration is
// |replayed step - measured step| / measured step, in percent.
struct WhatIfReplayRank {
  int64_t rank = -1;
  int64_t iterations = 0;  // modeled iterations (0: the rank could not be modeled, `why_not` says why)
  double median_error_pct = 0, max_error_pct = 0;
  int64_t measured_step_ns = 0;  // mean over the modeled iterations
  int64_t replayed_step_ns = 0;
  int64_t dependencies_inferred = 0;
  int64_t dependencies_recorded = 0;  // from the trace's CUDA event records
  std::string why_not;
};

struct WhatIfScenario {
  std::string name;
  bool predictable = false;
  int64_t predicted_step_ns = 0;  // the run's: the slowest rank's mean modeled step
  int64_t saving_ns = 0;          // replayed (unmodified) step minus predicted step
  double saving_pct = 0;          // saving / replayed step, in percent
  std::string why_not;            // when not predictable: what is missing
  std::string assumptions;        // one line
  // When predictable: per modeled rank, its predicted mean step (rank, ns), in Summary::ranks order.
  std::vector<std::pair<int64_t, int64_t>> rank_steps;
  bool custom = false;            // from --scenario SPEC (`name` is the SPEC)
};

// One modeled iteration's critical path (its replayed step), split into shares of the path's time.
struct WhatIfPathRow {
  int64_t rank = -1;
  int64_t iteration = 0;  // 0-based among the rank's modeled iterations
  int64_t length_ns = 0;
  // compute, communication, waiting (for another rank), host, launch, memory, other; sum to 1 (0s
  // when the path has no time)
  double shares[7] = {};
  int64_t waiting_for = -1;  // the rank waited on longest; -1 none (or unknown)
};

// The transfer-time model of one collective family, fitted on the trace's collectives
// (analyzers/what_if_fit.h): time = latency + bytes / bandwidth.
struct WhatIfFitRow {
  std::string op;                // CollectiveName
  bool from_kernels = false;     // fitted on kernel durations (waiting included), not matched transfers
  int64_t samples = 0, sizes = 0;
  bool fitted = false;
  std::string why_not;
  int64_t latency_ns = 0;
  double bandwidth_gbps = 0;     // bytes per ns; 0 when the time does not grow with the size
  double median_excess_pct = 0;  // how far the samples lie above the fit (median, percent)
};

struct WhatIfResult {
  std::vector<WhatIfReplayRank> replay;  // in Summary::ranks order
  int64_t measured_step_ns = 0;          // the run's: the slowest modeled rank's mean measured step
  int64_t replayed_step_ns = 0;          // the same, replayed
  std::vector<WhatIfScenario> scenarios;
  std::vector<WhatIfPathRow> critical_path;  // per modeled rank and iteration, in replay order
  std::vector<WhatIfFitRow> fit;             // per collective family with timed members
};

}  // namespace overlapprof
