#pragma once
// Stragglers (docs/cross-rank.md, "Stragglers"): the ranks the others wait for, from the per-rank
// totals of the collectives whose skew exceeds kStragglerSkewNs, and the findings about them and
// about exposed communication that is waiting. Internal to the cross-rank analyzer.
#include <cstddef>
#include <vector>

#include "analyzers/cross_rank_figures.h"
#include "analyzers/cross_rank_match.h"
#include "analyzers/cross_rank_result.h"

namespace overlapprof {

struct Summary;

namespace cross_rank {

// Slots of the ranks in a counted collective, by the time the others lost waiting for them
// (descending), then by last arrivals (descending); stable.
std::vector<size_t> StragglerOrder(const std::vector<RankTotals>& totals);

// The `stragglers` rows, in `order`.
std::vector<StragglerRow> StragglerRows(const std::vector<RankOps>& ranks, const std::vector<RankTotals>& totals,
                                        const std::vector<size_t>& order);

// Persistent stragglers (a warning each, up to 3), or else the rank costing the others most (info).
void AddStragglerFindings(const std::vector<RankOps>& ranks, const std::vector<RankTotals>& totals,
                          const std::vector<size_t>& order, Summary& summary);

// Up to 5 ranks whose exposed wait is at least 10% of their exposed communication.
void AddWaitFindings(const std::vector<RankOps>& ranks, const std::vector<RankTotals>& totals, Summary& summary);

}  // namespace cross_rank
}  // namespace overlapprof
