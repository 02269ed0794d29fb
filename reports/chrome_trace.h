#pragma once
// Chrome trace JSON (Trace Event Format) for Perfetto UI and chrome://tracing, written by
// `overlapprof report --chrome-trace FILE` and by `overlapprof run` (docs/chrome-trace.md).
//
// A process per rank; a thread per GPU stream (named as the source names it), one per host
// thread with its launching API calls, and an "iterations" thread with the iteration windows.
// Communication activities carry their op's arguments (op, bytes, communicator, seq,
// bandwidth). A flow goes from each host API call to the GPU activity it launched (by
// correlation id). Counter tracks per rank: the overlap ratio and the exposed communication of
// each iteration. Slices on one track nest properly: an activity that partly overlaps the
// previous one on its stream (clock skew between records) goes to an overflow thread of that
// stream (LanePacker), and the number moved is stated in the metadata. Times: µs with ns
// precision, from the earliest time of all ranks (given as otherData.base_time_ns).
//
// The writer is the registered report "chrome-trace" (MakeChromeTraceReport, src/registry.inc):
// it takes each rank from the analysis pass and keeps only the events it will write, already
// formatted except for the process id and the timestamp (both known only at the end), so it
// holds at most the size budget. A trace over the budget keeps whole iterations: by default the
// slowest steady one, the median one and the first steady one of each rank; the metadata and
// LeftOutNote() say what was left out.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/common/status.h"

namespace overlapprof {

// Default size budget of the Chrome trace (uncompressed JSON bytes): what Perfetto UI opens
// comfortably (docs/chrome-trace.md has the measurement).
inline constexpr int64_t kChromeTraceDefaultBudget = 100'000'000;

// Places slices on lanes so that the slices of each lane nest: slices come sorted by start,
// parents first (longer first on equal starts); each goes to the first lane where it lies
// inside the innermost open slice or after it; lane 0 is the track itself, higher lanes are
// overflow tracks.
class LanePacker {
 public:
  static constexpr size_t kNone = static_cast<size_t>(-1);
  // The lane of [start, end), or kNone when it fits none of the first `max_lanes` lanes (then
  // nothing is recorded).
  size_t Place(int64_t start, int64_t end, size_t max_lanes = kNone);
  size_t lanes() const { return open_.size(); }

 private:
  std::vector<std::vector<int64_t>> open_;  // per lane, the ends of its open slices (innermost last)
};

// Which iterations go into the trace (`--trace-iterations`): empty = the default (everything
// when it fits the budget; else the slowest steady, median and first steady iteration),
// "all" = every iteration in time order while they fit, or a list of 0-based iteration
// indices and ranges ("0,5,10-12") in the order given.
struct TraceSelection {
  bool all = false;
  std::vector<int64_t> indices;  // empty and !all: the default
};
StatusOr<TraceSelection> ParseTraceIterations(const std::string& spec);

struct IterationSpan {
  int64_t index = 0;
  int64_t start_ns = 0, end_ns = 0;
  bool warmup = false;
};
// The default choice, in priority order, as positions into `its` (time order): the slowest
// steady iteration, the median steady one (by duration; the lower middle of an even count)
// and the first steady one, without repeats. Without steady iterations the warm-up ones count.
std::vector<size_t> DefaultTraceIterations(const std::vector<IterationSpan>& its);

}  // namespace overlapprof
