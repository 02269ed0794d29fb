#pragma once
// What the cross-rank analyzer (docs/cross-rank.md) found: a typed result that later analyzers
// (the DDP bucket analyzer) and reports (terminal) read, and that the JSON summary renders as the
// sections `collectives_summary`, `collectives`, `stragglers`, `clock_offsets` and `cross_rank`.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/trace/collective.h"

namespace overlapprof {

// `collectives_summary.partial_communicators[]`: a communicator held by fewer ranks than its size.
struct PartialCommunicator {
  std::string communicator;
  int64_t nranks = 0, ranks_present = 0;
};

// Median, p90 and max of the skews of all matched collectives (ns).
struct SkewStats {
  int64_t median = 0, p90 = 0, max = 0;
};

// `collectives_summary`: always present once the analyzer ran.
struct CollectivesSummary {
  int64_t matched = 0, unmatched = 0, listed = 0, mismatched = 0, ranks = 0, ops = 0, p2p_skipped = 0,
          duplicate_keys = 0;
  int64_t matched_by_seq = 0, matched_by_step_ordinal = 0, matched_by_ordinal = 0;
  std::optional<SkewStats> skew_ns;  // none when nothing matched
  int64_t straggler_threshold_ns = 0;
  int64_t ends_before_last_arrival = 0;
  std::vector<PartialCommunicator> partial_communicators;
  std::vector<std::string> notices;
  // Matched collectives whose wait and transfer came from every rank's NCCL profiler plugin
  // GPU times, and those timed by kernels although some rank had plugin times. Rendered (as
  // `timing`) only when some rank had plugin-timed ops: `plugin_timing` says so.
  bool plugin_timing = false;
  int64_t timed_by_nccl_profiler = 0, timed_by_kernels_fallback = 0;
};

// One rank's share of one listed collective.
struct CollectiveMember {
  int64_t rank = 0, wait_ns = 0, transfer_ns = 0;
};

// `collectives[]`: one matched collective (members in rank order).
struct ListedCollective {
  std::string communicator;
  std::optional<int64_t> seq;  // the key when it is a sequence number
  std::string key;             // seq:N, step:S:K, step:none:K, ord:K
  Collective op = Collective::kUnknown;  // the lowest rank's
  std::optional<int64_t> bytes;  // the lowest rank's CommOp::bytes; none when unknown
  int64_t start_ns = 0, skew_ns = 0, last_rank = 0;
  std::vector<CollectiveMember> members;
  // What wait and transfer were measured from (docs/cross-rank.md, "Timing"): "nccl_profiler"
  // (every member's plugin GPU times) or "kernels". Rendered only when some rank had plugin times.
  std::string timing;
};

// `stragglers[]`: one rank that took part in a collective with skew above the straggler threshold.
struct StragglerRow {
  int64_t rank = 0, last_arrivals = 0, collectives_counted = 0;
  double last_fraction = 0;  // rounded to 4 decimals
  int64_t others_wait_ns = 0;
  std::optional<int64_t> mean_lateness_ns;  // none when never last
};

// `clock_offsets[]`: one clock domain.
struct ClockDomainRow {
  std::string domain;  // host name, or "rank N"
  std::vector<int64_t> ranks;
  bool reference = false;
  int64_t offset_ns = 0;
  std::optional<int64_t> noise_ns;  // none for the reference
  int64_t samples = 0;
  bool applied = false;
};

// `cross_rank[]`: one rank's totals over its matched collectives.
struct CrossRankRow {
  int64_t rank = 0;
  std::string clock_domain;
  int64_t collectives = 0, wait_ns = 0, transfer_ns = 0, exposed_wait_ns = 0, exposed_comm_ns = 0;
  // Not rendered in `cross_rank[]`; read by the step_breakdown analyzer. exposed_wait_ns by the
  // rank's iteration window (index into its windows; an op counts in the window holding its
  // start), and by the rank waited for (the last to arrive; over its steady iterations, else every
  // op), largest first. Before the step breakdown's cap at the exposed communication.
  std::vector<int64_t> exposed_wait_by_window;
  std::vector<std::pair<int64_t, int64_t>> waited_for;
};

// `point_to_point.ranks[]`: one rank's sends and recvs paired across ranks.
struct P2pRankRow {
  int64_t rank = 0;
  int64_t sends = 0, recvs = 0;  // paired ones
  int64_t recv_wait_ns = 0;      // its recvs' time waiting for the peers' sends
  int64_t waited_on_ns = 0;      // the other ranks' recvs' time waiting for its sends
};

// `point_to_point.iterations[]`: one rank's recv wait in one iteration (step).
struct P2pStepRow {
  int64_t rank = 0;
  std::optional<int64_t> step;  // none: outside every iteration window
  int64_t recvs = 0, recv_wait_ns = 0;
  std::optional<int64_t> waited_most_on;  // the peer (global rank) its recvs waited longest for; none when no wait
};

// `point_to_point`: sends matched to recvs across ranks (communicator, source, destination, order
// per pair); present when any rank has a send or recv.
struct PointToPoint {
  int64_t pairs = 0, unpaired_sends = 0, unpaired_recvs = 0;
  int64_t recv_wait_ns = 0;             // over all pairs
  std::optional<int64_t> bottleneck_rank;  // the stage everyone waits on; none when no one waits
  int64_t bottleneck_waited_on_ns = 0;
  std::vector<P2pRankRow> ranks;        // by rank
  std::vector<P2pStepRow> iterations;   // by rank, then step
  std::vector<std::string> notices;     // why ops were not paired
};

struct CrossRankResult {
  CollectivesSummary summary;
  // The rest is filled (and rendered) only when at least one collective matched.
  bool any_matched = false;
  std::vector<ListedCollective> collectives;  // in time order
  std::vector<StragglerRow> stragglers;       // by others_wait_ns descending, then last_arrivals
  std::vector<ClockDomainRow> clock_offsets;
  std::vector<CrossRankRow> ranks;            // by rank
  std::optional<PointToPoint> point_to_point;  // rendered whether or not a collective matched
};

}  // namespace overlapprof
