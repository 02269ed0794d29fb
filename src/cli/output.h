#pragma once
// Writing the CLI's output files: each goes to FILE.partial first and is renamed into place only
// when complete, so a reader never sees half a file.
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyzers/summary.h"
#include "reports/report.h"
#include "src/common/status.h"

namespace overlapprof {

// Before anything is read: the output files a command was asked for, each (the flag that named
// it, its path; an empty path or "-" is none), are refused (a usage error naming it) when two name
// the same file, when one is not a regular file (a directory, a device: use '-' for stdout), or
// when one exists and `force` is not set.
Status CheckOutputPaths(const std::vector<std::pair<std::string, std::string>>& outputs, bool force);

// Writes `path` through `write` into path.partial, renamed into place when complete; on error
// the partial file is removed. A path ending in ".gz" is written gzip-compressed.
Status WriteAtomically(const std::string& path, const std::function<Status(std::ostream&)>& write);

// The JSON summary (overlapprof.summary/1) into `path`, or to stdout for "-".
// `summary_doc`: BuildSummaryDocument(summary) when the caller has built it already (else built here).
Status WriteJsonFile(const Summary& summary, const std::string& path,
                     const SummaryDocument* summary_doc = nullptr);

// The report files of one pass; an empty path is not asked for. `json` may be "-" (stdout).
struct ReportPaths {
  std::string json, chrome_trace, html;
  bool announce_json = true;  // a line on stderr for the JSON file too (`analyze` writes none for it)
};

// After the pass: writes the files `paths` name, the Chrome trace from `chrome` and the HTML page
// from `html` (each non-null when its path is set), each on its own thread where one can be had,
// and one line on stderr per file written, in the order JSON, Chrome trace, HTML (stdout stays
// free). Errors are returned in that order. `chrome_options`: --trace-iterations, --trace-budget.
Status WriteReportFiles(const ReportPaths& paths, const Summary& summary, ReportWriter* chrome, ReportWriter* html,
                        const ReportOptions& chrome_options);

// --csv DIR: the main tables as CSV (RFC 4180, one header row naming each column and its unit),
// for spreadsheets and pandas: ranks.csv, iterations.csv, op_types.csv, collectives.csv (when
// collectives were matched across ranks), findings.csv. DIR is created when missing; a table file
// that exists is refused unless `force`. The figures are the JSON summary's.
Status WriteCsvTables(const Summary& summary, const std::string& dir, bool force);

}  // namespace overlapprof
