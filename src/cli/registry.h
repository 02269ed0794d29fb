#pragma once
// Access to the registered importers, analyzers and report writers (src/cli/registry.inc).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analyzers/analyzer.h"
#include "reports/report.h"
#include "src/importers/importer.h"

namespace overlapprof {

const std::vector<std::unique_ptr<Importer>>& Importers();
// Fresh analyzer instances for one run (analyzers keep per-run state).
std::vector<std::unique_ptr<Analyzer>> MakeAnalyzers();
// One instance of every registered report writer (for their names and descriptions).
const std::vector<std::unique_ptr<ReportWriter>>& ReportWriters();
// A fresh instance of the writer called `name` for one pass (writers keep per-run state);
// null when there is none.
std::unique_ptr<ReportWriter> MakeReportWriter(std::string_view name);

// Picks the importer for `path` from its first bytes. kInvalidInput when none claims it.
StatusOr<const Importer*> ChooseImporter(const std::string& path);

}  // namespace overlapprof
