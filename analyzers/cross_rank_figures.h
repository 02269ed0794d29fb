#pragma once
// Per matched collective: skew, each rank's wait for the last rank to arrive and transfer after
// it (docs/cross-rank.md, "Definitions"), summed per rank; and the collectives the JSON summary
// lists. Internal to the cross-rank analyzer (analyzers/cross_rank.cc) and its tests.
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "analyzers/cross_rank_clocks.h"
#include "analyzers/cross_rank_match.h"
#include "analyzers/cross_rank_result.h"

namespace overlapprof::cross_rank {

// One rank's totals over its matched collectives.
struct RankTotals {
  int64_t wait_ns = 0, transfer_ns = 0, exposed_wait_ns = 0, collectives = 0;
  // Straggler statistics over collectives with skew > kStragglerSkewNs.
  int64_t counted = 0, last_arrivals = 0, others_wait_ns = 0;
  __int128 lateness_sum = 0;
  double fair_share_sum = 0;  // sum of 1 / ranks over the counted collectives
  // exposed_wait_ns by the rank's iteration window (RankOps::WindowOf of the op's start; sized
  // to its windows), and by the rank that arrived last (the one waited for) over the steady
  // windows (every op when none is steady).
  std::vector<int64_t> exposed_wait_by_window;
  std::map<int64_t, int64_t> exposed_wait_for;
};

// A collective kept for the `collectives` list, with ids still interned.
struct Listed {
  uint32_t comm = 0;
  uint8_t key_kind = 0;
  int64_t key_major = 0;
  uint32_t key_minor = 0;
  Collective op = Collective::kUnknown;
  int64_t bytes = kUnknown;
  int64_t start_ns = 0, skew_ns = 0, last_rank = 0;
  std::vector<std::array<int64_t, 3>> per_rank;  // rank, wait, transfer
  bool plugin_timed = false;  // figures from every rank's NCCL profiler plugin GPU start (CollectiveFigures)
};

struct CollectiveFigures {
  std::vector<RankTotals> totals;  // per RankOps slot
  std::vector<double> skews;       // one per matched collective
  int64_t mismatched = 0;          // members disagreeing on op or bytes
  int64_t ends_before_last = 0;    // rank-collectives whose kernel ended before the last arrival
  int64_t over_full = 0;           // collectives with more ranks than their communicator's size
  int64_t memberships = 0;         // rank-collectives
  std::array<int64_t, 3> by_kind{};  // matched collectives per KeyKind
  // Which times wait and transfer came from (docs/cross-rank.md, "Timing"): every member's
  // NCCL profiler plugin GPU start and end, or (when some member lacks them) every member's
  // kernel. kernel_fallback: collectives timed by kernels although some member had plugin times.
  int64_t timed_by_plugin = 0, kernel_fallback = 0;
  bool any_plugin = false;  // some rank had plugin-timed ops
  std::vector<Listed> listed;      // at most kMaxListedCollectives (largest skew), in time order
};

// Communicator -> the largest comm_nranks any rank saw.
std::map<uint32_t, int64_t> CommunicatorSizes(const std::vector<RankOps>& ranks);

// The second pass over the groups of equal keys, on the reference clock (domains.clocks set).
// `matched` (from the first pass) sizes the skews.
CollectiveFigures MeasureCollectives(const std::vector<RankOps>& ranks, const ClockDomains& domains,
                                     const std::map<uint32_t, int64_t>& comm_size, int64_t matched);

// The `collectives` rows: the listed collectives with names resolved.
std::vector<ListedCollective> ListedCollectives(const std::vector<Listed>& listed, const Interner& comms);

}  // namespace overlapprof::cross_rank
