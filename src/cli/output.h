#pragma once
// Writing the CLI's output files: each goes to FILE.partial first and is renamed into place only
// when complete, so a reader never sees half a file.
#include <functional>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "analyzers/summary.h"
#include "reports/report.h"
#include "src/common/status.h"

namespace overlapprof {

// Writes `path` through `write` into path.partial, renamed into place when complete; on error
// the partial file is removed. A path ending in ".gz" is written gzip-compressed.
Status WriteAtomically(const std::string& path, const std::function<Status(std::ostream&)>& write);

// The JSON summary (overlapprof.summary/1) into `path`, or to stdout for "-".
// `summary_doc`: BuildSummaryDocument(summary) when the caller has built it already (else built here).
Status WriteJsonFile(const Summary& summary, const std::string& path,
                     const SummaryDocument* summary_doc = nullptr);

}  // namespace overlapprof
