#pragma once
// The transfer-time model of each collective family (docs/what-if.md, "The latency/bandwidth
// fit"): time = latency + bytes / bandwidth, fitted on the trace's own collectives. A robust fit:
// per distinct message size the shortest time (the lower envelope: the times above it are waiting
// and interference), then Theil-Sen over those points (the median of the pairwise slopes, the
// intercept the median of the residuals), both clamped at 0.
//
// Units: ns and bytes; bandwidth in bytes per ns (= GB/s).
#include <cstdint>
#include <string>
#include <vector>

#include "src/trace/collective.h"

namespace overlapprof::whatif {

// One timed collective member: its bytes (this rank's buffer, CommOp::bytes) and its time: the
// transfer of a collective matched across ranks (from the last member's arrival), or else its
// kernel's duration (waiting for the other ranks included).
struct TransferSample {
  Collective op = Collective::kUnknown;
  int64_t bytes = 0;
  int64_t ns = 0;
  bool kernel = false;  // a kernel's duration, not a matched transfer
};

struct TransferFit {
  Collective op = Collective::kUnknown;
  bool from_kernels = false;  // fitted on kernel durations (no collective of the family matched)
  int64_t samples = 0;        // the samples of the family used (transfers, else kernel durations)
  int64_t sizes = 0;          // their distinct message sizes
  bool fitted = false;        // false: `why_not` says what is missing, the figures are 0
  std::string why_not;
  double latency_ns = 0;
  double bytes_per_ns = 0;  // 0: the time does not grow with the size (all of it latency)
  // Median over the samples of (time - fit) / fit, in percent: how far the times lie above the
  // envelope (waiting, interference).
  double median_excess_pct = 0;
  // latency + bytes / bandwidth (ns); 0 when not fitted.
  double At(int64_t bytes) const;
};

// One fit per collective family present in `samples`, in Collective order. A family's matched
// transfers are used where it has any, else its kernel durations. Needs two distinct sizes.
std::vector<TransferFit> FitTransfers(const std::vector<TransferSample>& samples);

// A transfer of `bytes` measured as `ns`, on a network whose latency is multiplied by
// `latency_factor` and bandwidth by `bandwidth_factor`: the time above the fit (waiting,
// interference) kept as measured, the fitted part (at most `ns`) rescaled. ns as measured when the
// fit is missing. Never negative.
int64_t ScaledTransfer(const TransferFit& fit, int64_t bytes, int64_t ns, double latency_factor,
                       double bandwidth_factor);

}  // namespace overlapprof::whatif
