#pragma once
// The ranks of one job get the same iteration windows (docs/analyzers.md, "Iterations", "Across
// ranks"). Each rank's windows are found alone (analyzers/iterations.h); the pipeline keeps per
// rank only its communication ops' match keys and times and its windows (RankWindowRecord, about
// 24 bytes per op), and after the pass plans the windows of every rank (PlanRankWindows):
//  - the reference is the rank with the strongest evidence, markers (ProfilerStep, --step-range)
//    before any detected windows (comm pattern, forward ranges, optimizer kernels), the lowest
//    rank number first among equals;
//  - its windows are mapped to every rank with weaker evidence, and to every other rank with
//    detected windows, through the matched communication ops: a window starts on the other rank
//    as far before the same op (NCCL sequence number, else ordinal per communicator) as on the
//    reference, never before the previous op's end; a rank with markers of its own keeps them;
//  - a rank whose own windows start at other ops than the reference's (over the ops both hold)
//    disagrees: counted (iteration_windows_disagree) and said in a notice; two ranks with markers
//    are not compared (their step numbers name the same steps).
// The pipeline analyzes again, with the planned windows, when a rank's windows change.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analyzers/iterations.h"
#include "src/trace/model.h"

namespace overlapprof {

struct RankDerived;  // analyzers/overlap.h

// How strong a rank's window evidence is.
enum class WindowEvidence : uint8_t { kNone = 0, kDetected = 1, kMarkers = 2 };

// What planning needs of one rank.
struct RankWindowRecord {
  size_t input_index = 0;
  int64_t rank = kUnknown;
  WindowEvidence evidence = WindowEvidence::kNone;
  std::string source;  // IterationInfo::source
  // Communication ops in start order: match key (communicator, and NCCL sequence number or the
  // op's ordinal on its communicator) and GPU times on the rank's own clock.
  struct Op {
    uint64_t key = 0;
    int64_t start_ns = 0, end_ns = 0;
  };
  std::vector<Op> ops;
  std::vector<IterationWindow> windows;
  bool steps = false;  // IterationInfo::steps
};

// The record of a rank after its analysis (`derived`: the overlap analyzer's).
RankWindowRecord RecordRankWindows(const RankTrace& trace, const RankDerived& derived, size_t input_index);

// What the plan says of one rank (by input index).
struct RankWindowPlan {
  bool replace = false;  // analyze the rank again with `windows` (source "carried")
  IterationInfo windows;
  // Window starts (over the ops both ranks hold) where the rank's own windows and the
  // reference's differ; with `notice` saying so.
  int64_t disagreeing = 0;
  std::string notice;
};
struct WindowPlan {
  std::map<size_t, RankWindowPlan> ranks;  // only ranks the plan changes or notes
  bool any_replaced() const;
};

WindowPlan PlanRankWindows(const std::vector<RankWindowRecord>& records);

}  // namespace overlapprof
