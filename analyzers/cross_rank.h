#pragma once
// The cross-rank analyzer (docs/cross-rank.md): matches each collective across ranks by
// communicator and key (NCCL sequence number where the trace has it, else the op's ordinal per
// communicator, within its ProfilerStep when the rank has steps), and splits every rank's
// communication time into waiting for the last rank to arrive and transfer after it.
//
//   skew      = latest start - earliest start                (of one collective)
//   wait      = min(latest start, own end) - own start        (per rank)
//   transfer  = max(0, own end - latest start)                (per rank)
//   exposed wait = |[own start, own start + wait) \ compute|  (waiting no compute hid)
//
// Per-host clock offsets are estimated from the end times of matched collectives (nearly
// simultaneous across ranks) and applied when they exceed the measurement noise.
// Fills Summary::cross_rank (analyzers/cross_rank_result.h; the JSON summary renders it as the
// sections `collectives_summary`, `collectives`, `stragglers`, `clock_offsets`, `cross_rank`) and
// adds findings. Its parts: cross_rank_match.* (matching), cross_rank_clocks.* (clock domains and
// offsets), cross_rank_figures.* (wait, transfer, skew), cross_rank_stragglers.* (stragglers).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "analyzers/analyzer.h"

namespace overlapprof {

// A collective counts for straggler statistics when its skew exceeds this (ns): below it,
// who arrived last is launch jitter, not a straggler.
inline constexpr int64_t kStragglerSkewNs = 20000;
// The `collectives` array lists at most this many (those with the largest skew).
inline constexpr size_t kMaxListedCollectives = 5000;
// Clock offsets: the noise floor (ns), the minimum number of shared collectives, and how many
// noise widths an offset must exceed to be applied.
inline constexpr int64_t kClockNoiseFloorNs = 1000;
inline constexpr int64_t kMinClockSamples = 5;
inline constexpr int64_t kClockNoiseFactor = 3;
// Pieces of an op's interval not covered by compute kept per op (neighbours merged beyond that,
// keeping their uncovered total exact: docs/cross-rank.md).
inline constexpr int kMaxGapsPerOp = 4;

struct ClockEstimate {
  int64_t offset_ns = 0;  // median of the differences
  int64_t noise_ns = 0;   // max(kClockNoiseFloorNs, 1.4826 * MAD)
  int64_t samples = 0;
  bool applied = false;   // samples >= kMinClockSamples and |offset| > kClockNoiseFactor * noise
};

// The estimate from per-collective differences of mean end times (domain minus reference)
// (analyzers/cross_rank_clocks.cc).
ClockEstimate EstimateClockOffset(std::vector<int64_t> diffs);

std::unique_ptr<Analyzer> MakeCrossRankAnalyzer();

}  // namespace overlapprof
