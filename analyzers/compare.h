#pragma once
// Comparing two runs (`overlapprof compare`) and gating a change on it (`overlapprof check`).
// Both sides are RunViews read from the JSON summary (overlapprof.summary/1) by the CLI
// (src/cli/summary_input.h), whether it was written by `analyze --json` and committed as a
// baseline, or produced on the fly from traces, so a baseline is a small file and one code path
// decides; the renderings are reports/comparison.h. This file computes only.
//
// Metrics (docs/ci-gate.md): step time (wall time per steady iteration; lower is better), the
// run's overlap ratio (sum of overlap / sum of communication over ranks; higher is better),
// exposed communication per iteration (lower is better), and, for
// information, communication and compute per iteration and the exposed time of each op type
// (all-reduce, all-gather, ...) per iteration. Where both sides have enough
// iterations (kMinSamples per side) the per-iteration distributions are compared with a
// two-sided Mann-Whitney U test, and a change counts only when it is both significant and at
// least the threshold; otherwise the aggregates are compared with the threshold and the
// verdict says that no test was possible. A change whose absolute effect per iteration is below
// Policy::min_effect_ms or 1% of the base step time is never a regression (nor an improvement).
// Runs that are not comparable (world size, rank set, op mix) are refused by the caller
// (Differences) unless asked otherwise.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/status.h"

namespace overlapprof {

// What compare needs from a summary.
struct RunView {
  std::string source;  // what it was read from
  int64_t ranks = 0;
  int64_t comm_ns = 0, compute_ns = 0, overlap_ns = 0, exposed_comm_ns = 0;  // sums over ranks
  int64_t iterations = 0;                                                  // over ranks
  int64_t warmup_iterations = 0;  // left out of the per-iteration distributions
  // Per op family ("op_types" section, summed over ranks): GPU time and exposed time.
  std::map<std::string, std::pair<int64_t, int64_t>> op_time_exposed_ns;
  std::vector<double> iter_overlap_ratio;  // per (rank, iteration), when not null
  std::vector<double> iter_exposed_ns, iter_comm_ns, iter_compute_ns;
  std::vector<double> iter_wall_ns;  // step time of each steady (rank, iteration)
  std::vector<std::string> rank_ids;  // each rank's id in summary order ("?" when unknown)
  int64_t world_size = -1;            // the first rank's that says it; -1 when none does
  // Op mix: per op family, ops and bytes over all ranks (bytes -1 when some size is unknown).
  std::map<std::string, std::pair<int64_t, int64_t>> op_count_bytes;
  bool marked_iterations = true;  // every rank's iterations come from markers (ProfilerStep, --step-range)
  int64_t data_lost = 0;  // sum of the values of error-severity counters, over ranks
  std::vector<std::string> data_lost_counters;  // "rank 0: records_dropped_cupti = 5"
  // The what-if model's replay error (the summary's what_if.replay; docs/what-if.md): the modeled
  // ranks, the median of their median errors and the largest of their max errors, in percent.
  // what_if_ranks is -1 when the summary has no what_if section (not analyzed with --what-if).
  // Printed beside the comparison, never gated.
  int64_t what_if_ranks = -1;
  double what_if_median_error_pct = 0, what_if_max_error_pct = 0;
};

// Two-sided Mann-Whitney U test, normal approximation with tie and continuity corrections.
// Returns the p-value (1 when either side is empty or every value is equal).
double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b);

struct Policy {
  std::vector<std::string> warnings;  // from reading the policy file (duplicate keys), for the CLI to print
  double max_step_time_increase_pct = 5;     // step time (wall per steady iteration), %
  double max_overlap_drop_pp = 2.0;          // overlap ratio, percentage points
  double max_exposed_comm_increase_pct = 10;  // exposed communication per iteration, %
  double info_threshold_pct = 10;            // comm / compute per iteration (not gated), %
  int64_t max_data_loss = 0;                 // error-severity counter total allowed in NEW
  double alpha = 0.05;                       // significance level
  double min_effect_ms = 0.5;                // absolute floor per iteration, ms (besides 1% of the step); 0: no floor
  double op_mix_tolerance_pct = 10;          // Differences: ops / bytes per iteration, %
  static constexpr size_t kMinSamples = 5;   // per side, for the test
  // Classification patterns for traces (keys "comm_kernel", "not_comm": a regex or a list of
  // them; the same as --comm-kernel / --not-comm, which add to them).
  std::vector<std::string> comm_kernel, not_comm;
};

enum class Verdict { kUnchanged, kImproved, kRegressed, kInconclusive };
const char* VerdictName(Verdict v);

struct MetricResult {
  std::string name, unit;  // "overlap_ratio" ("%"), "exposed_comm_per_iter" ("ms"), ...
  bool gated = false;
  double base = 0, next = 0;  // aggregates, in `unit`
  double delta = 0;           // next - base, in `unit`
  double change = 0;          // the quantity held against the threshold: pp or %
  std::string change_unit;    // "pp" or "%"
  double threshold = 0;
  size_t n_base = 0, n_next = 0;
  std::optional<double> p;  // when the test was possible
  Verdict verdict = Verdict::kUnchanged;
  std::string why;  // one line: what decided
};

// A metric's change as its verdict and the renderings word it: "+1.23 pp", "-4.00 %", or "new"
// for a relative change from zero.
std::string ChangeText(const MetricResult& m);

struct Comparison {
  std::vector<MetricResult> metrics;
  Verdict gate = Verdict::kUnchanged;  // worst over gated metrics (regressed > inconclusive)
  bool data_lost = false;              // NEW lost more data than the policy allows
  std::string data_lost_why;
  std::vector<std::string> notes;  // printed above the table (e.g. runs compared despite differences)
};

Comparison Compare(const RunView& base, const RunView& next, const Policy& policy);

// What makes the two runs not comparable, one phrase each (empty: comparable): world size, rank
// set (one rank against another rank is said as such), op mix (op families, ops or bytes per
// iteration differing by more than policy.op_mix_tolerance_pct; per rank when either run's
// iterations were not marked, since detected iterations may be cut differently).
std::vector<std::string> Differences(const RunView& base, const RunView& next, const Policy& policy);

}  // namespace overlapprof
