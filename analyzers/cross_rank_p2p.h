#pragma once
// Point-to-point across ranks (docs/cross-rank.md, "Point-to-point"): each send is paired with
// the recv of the same communicator, source and destination, in order per (source, destination)
// pair. A recv waits for its peer's send: wait = min(max(0, send start - recv start), recv
// duration), on the reference clock (the clock offsets of the collectives applied). Per rank and
// iteration (the recv's step) that wait is the pipeline bubble communication causes; the stage
// everyone waits on is the rank whose sends the others' recvs waited longest for, less what its
// own recvs waited (the largest positive difference). Internal to the cross-rank analyzer.
#include <vector>

#include "analyzers/cross_rank_clocks.h"
#include "analyzers/cross_rank_match.h"
#include "analyzers/cross_rank_result.h"

namespace overlapprof {

struct Summary;

namespace cross_rank {

// The `point_to_point` section; none when no rank has a send or recv (counted or paired).
// `ranks` sorted by rank; `domains` with their offsets estimated.
std::optional<PointToPoint> PairPointToPoint(const std::vector<RankOps>& ranks, const ClockDomains& domains,
                                             const RecordCounts& counts, const Interner& comms);

// A finding naming the stage everyone waits on, when there is one.
void AddPointToPointFindings(const PointToPoint& p, Summary& summary);

}  // namespace cross_rank
}  // namespace overlapprof
