#pragma once
// Clock domains and their offsets (docs/cross-rank.md, "Clocks"): ranks on one host share a
// clock; every other domain's offset to the reference (the lowest rank's) is estimated from the
// end times of the collectives they share, and applied when it exceeds the noise.
// Internal to the cross-rank analyzer (analyzers/cross_rank.cc) and its tests.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "analyzers/cross_rank.h"
#include "analyzers/cross_rank_match.h"
#include "analyzers/cross_rank_result.h"

namespace overlapprof {

struct Summary;

namespace cross_rank {

// Times after an offset is applied are clamped to ±kTimeClamp, so that the difference of two
// never overflows (offsets come from the data; a hostile trace could make them huge).
inline constexpr int64_t kTimeClamp = (int64_t{1} << 62) - 1;

// At most kCap values kept, evenly spread over all seen (a stride that doubles when full):
// enough for a median, and bounded however many clock domains there are.
struct DiffSampler {
  static constexpr size_t kCap = 4096;
  std::vector<int64_t> values;
  int64_t seen = 0;
  int64_t stride = 1;
  void Add(int64_t v) {
    if (seen++ % stride != 0) return;
    values.push_back(v);
    if (values.size() >= kCap) {
      size_t k = 0;
      for (size_t i = 0; i < values.size(); i += 2) values[k++] = values[i];
      values.resize(k);
      stride *= 2;
    }
  }
};

struct ClockDomains {
  std::vector<std::string> names;           // host, or "rank N"
  std::vector<std::vector<int64_t>> ranks;  // per domain, its ranks
  std::vector<size_t> of_slot;              // per RankOps slot, its domain
  size_t ref = 0;                           // the domain of the lowest rank
  std::vector<ClockEstimate> clocks;        // per domain (the reference's stays zero); EstimateClocks

  size_t size() const { return names.size(); }
  // Time t of slot's rank on the reference clock: the domain's offset subtracted when applied.
  int64_t Adjust(size_t slot, int64_t t) const {
    const ClockEstimate& c = clocks[of_slot[slot]];
    if (!c.applied) return t;
    return std::clamp(SatSub(t, c.offset_ns), -kTimeClamp, kTimeClamp);
  }
};

// One domain per non-empty host name (in order of first appearance), one per rank without a host.
// `ranks` sorted by rank.
ClockDomains AssignClockDomains(const std::vector<RankOps>& ranks);

// How many keys were found on two or more ranks (matched) and on one only (unmatched).
struct MatchCounts {
  int64_t matched = 0, unmatched = 0;
};

// The first pass over the groups of equal keys: counts them and, with several domains, estimates
// each domain's offset from the differences of mean end times (filling domains.clocks).
MatchCounts EstimateClocks(const std::vector<RankOps>& ranks, ClockDomains& domains);

// The `clock_offsets` rows, one per domain.
std::vector<ClockDomainRow> ClockDomainRows(const ClockDomains& domains);

// Findings: applied offsets (up to 3 lines, then one), domains that could not be aligned.
void AddClockFindings(const ClockDomains& domains, Summary& summary);

}  // namespace cross_rank
}  // namespace overlapprof
