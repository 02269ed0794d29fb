#pragma once
// What the cross-rank analyzer (docs/cross-rank.md) found: a typed result that later analyzers
// (the DDP bucket analyzer) and reports (terminal) read, and that the JSON summary renders as the
// sections `collectives_summary`, `collectives`, `stragglers`, `clock_offsets` and `cross_rank`.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  std::string op;
  std::optional<int64_t> bytes;  // the lowest rank's CommOp::bytes; none when unknown
  int64_t start_ns = 0, skew_ns = 0, last_rank = 0;
  std::vector<CollectiveMember> members;
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

struct CrossRankResult {
  CollectivesSummary summary;
  // The rest is filled (and rendered) only when at least one collective matched.
  bool any_matched = false;
  std::vector<ListedCollective> collectives;  // in time order
  std::vector<StragglerRow> stragglers;       // by others_wait_ns descending, then last_arrivals
  std::vector<ClockDomainRow> clock_offsets;
  std::vector<CrossRankRow> ranks;            // by rank
};

}  // namespace overlapprof
