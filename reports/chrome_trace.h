#pragma once
// Chrome trace JSON (Trace Event Format) for Perfetto UI and chrome://tracing, written by
// `overlapprof report --chrome-trace FILE` (docs/chrome-trace.md).
//
// A process per rank; a thread per GPU stream (named as the source names it), one per host
// thread with its launching API calls, and an "iterations" thread with the iteration windows.
// Communication activities carry their op's arguments (op, bytes, communicator, seq,
// bandwidth). A flow goes from each host API call to the GPU activity it launched (by
// correlation id). Counter tracks per rank: the overlap ratio and the exposed communication of
// each iteration. Slices on one track nest properly: an activity that partly overlaps the
// previous one on its stream (clock skew between records) goes to an overflow thread of that
// stream, and the number moved is stated in the metadata. Times: µs with ns precision, from
// the earliest time of all ranks (given as otherData.base_time_ns).
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "analyzers/summary.h"
#include "src/common/status.h"
#include "src/importers/importer.h"

namespace overlapprof {

// Reads one input: the program's ImportFile (src/cli/pipeline.h), which reports, a lower layer,
// cannot call themselves.
using ImportFileFn = std::function<StatusOr<RankTrace>(const std::string& path, const ImportOptions& options)>;

// Reads `files` one at a time with `import` (memory bounded by the largest) and streams the
// trace to `out`. `summary` is their analysis (for the iteration counters; ranks matched by
// source path).
Status WriteChromeTrace(const std::vector<std::string>& files, const ImportOptions& options,
                        const ImportFileFn& import, const Summary& summary, std::ostream& out);

}  // namespace overlapprof
