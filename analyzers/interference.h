#pragma once
// The overlap tax (docs/interference.md): how much slower identical work runs while the other kind
// of work shares the GPU. Compute kernels are compared alone (no communication on the device at any
// point of them) against under communication (covered at least kMinCover); communication kernels
// alone (no compute) against under compute. Only identical work is compared:
//   compute: the kernel's name and its position among the launches of that name in the iteration
//            (the k-th, in GPU start order), across the rank's steady iterations (the trace model
//            carries no launch configuration or input shapes, so the position stands for them);
//   comm:    the kernel's name, collective, bytes and communicator when its op's bytes are known,
//            else its name and position as for compute.
// An identity seen at least kMinSamples times each way is measurable: its slowdown is the
// Hodges-Lehmann estimate of the ratio (under / alone), with a 95% interval from the Mann-Whitney
// distribution (normal approximation). Nothing else is given a number.
// Times in integer ns on the trace's clock.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzers/overlap.h"
#include "src/trace/model.h"

namespace overlapprof {

inline constexpr int64_t kInterferenceMinSamples = 5;   // alone and under, each
inline constexpr double kInterferenceMinCover = 0.9;    // "under": covered at least this share
inline constexpr size_t kInterferenceMaxSamples = 100;  // per side for the estimate (evenly spaced)
inline constexpr size_t kInterferenceMaxKernels = 20;   // identities listed per rank and kind

// A slowdown as a fraction (0.2: 20% slower), with its 95% interval.
struct SlowdownEstimate {
  double slowdown = 0, low = 0, high = 0;
  int64_t alone_median_ns = 0;  // the alone estimate each overlapped instance is compared with
};
// Hodges-Lehmann on log durations: the median of log(u) - log(a) over every pair (a alone, u
// under), exp'd; interval: the K-th smallest and K-th largest pair difference with
// K = floor(mn/2 - 1.96 sqrt(mn(m+n+1)/12)) (at least 1). At most kInterferenceMaxSamples of each
// side, evenly spaced in the given order. Nullopt with fewer than kInterferenceMinSamples on a side
// or a non-positive duration.
std::optional<SlowdownEstimate> EstimateSlowdown(const std::vector<int64_t>& alone, const std::vector<int64_t>& under);

enum class WorkKind : uint8_t { kCompute = 0, kComm = 1 };
std::string_view WorkKindName(WorkKind k);

// Sums over a set of windows (one iteration, or a rank's steady iterations).
struct InterferenceTotals {
  int64_t wall_ns = 0, comm_ns = 0, hidden_ns = 0;  // the overlap engine's figures of the windows
  // Kernels of the kind that overlapped the other kind at all: their summed durations; of those,
  // the instances measured (covered >= kMinCover, identity measurable), and their tax: the sum of
  // (duration - the identity's alone estimate).
  int64_t compute_overlapped_ns = 0, compute_measured_ns = 0, compute_tax_ns = 0;
  int64_t comm_overlapped_ns = 0, comm_measured_ns = 0, comm_tax_ns = 0;
  void Add(const InterferenceTotals& o);
  bool ComputeMeasurable() const { return compute_measured_ns > 0; }
  bool CommMeasurable() const { return comm_measured_ns > 0; }
  // measured / overlapped; nullopt without overlapped time.
  std::optional<double> ComputeMeasuredShare() const;
  std::optional<double> CommMeasuredShare() const;
  // hidden / comm (the overlap engine's ratio).
  std::optional<double> HiddenShare() const;
  // hidden communication - compute tax; nullopt when no compute tax is measurable.
  std::optional<int64_t> NetGainNs() const;
  // (T_serial - T_overlapped) / T_comm with T_serial = compute and communication at alone speeds
  // one after the other (idle and memory kept): (hidden - compute tax - comm tax) / (comm - comm
  // tax). Unmeasured tax counts as none, so with a measured share under 1 it is an upper bound.
  // Nullopt when no compute tax is measurable or there is no communication.
  std::optional<double> OverlapEfficiency() const;
  // compute tax / wall; nullopt when not measurable.
  std::optional<double> TaxShareOfStep() const;
};

struct InterferenceKernel {
  int64_t rank = kUnknown;
  WorkKind kind = WorkKind::kCompute;
  std::string name;
  int64_t position = kUnknown;  // k (0-based) of the name in the iteration; kUnknown: keyed by op
  std::string op;               // comm by op: the collective; else ""
  int64_t bytes = kUnknown;
  std::string communicator;
  int64_t alone = 0, overlapped = 0;  // instances in the steady iterations
  SlowdownEstimate estimate;
  int64_t tax_ns = 0;  // over the rank's steady iterations
};

struct InterferenceIteration {
  int64_t rank = kUnknown;
  size_t rank_index = 0;
  int64_t index = 0, step = kUnknown;
  InterferenceTotals totals;
};

struct InterferenceRank {
  int64_t rank = kUnknown;
  int64_t iterations = 0;  // steady iterations measured over
  std::string why_not;     // when nothing is measurable: why (else empty)
  InterferenceTotals totals;
};

struct InterferenceResult {
  std::vector<InterferenceRank> ranks;  // in Summary::ranks order
  std::vector<InterferenceKernel> kernels;
  std::vector<InterferenceIteration> iterations;  // steady ones, when per-iteration output is on
  InterferenceTotals run;                          // the ranks' totals summed
};

// One rank's measurement (what the analyzer prepares per rank; `rank_index` left 0 in iterations).
struct InterferenceRankWork {
  InterferenceRank rank;
  std::vector<InterferenceKernel> kernels;
  std::vector<InterferenceIteration> iterations;
};
InterferenceRankWork MeasureInterference(const RankTrace& trace, const RankDerived& derived, bool per_iteration);

}  // namespace overlapprof
