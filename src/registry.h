#pragma once
// Access to the registered importers, analyzers and report writers (src/registry.inc).
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
const std::vector<std::unique_ptr<ReportWriter>>& ReportWriters();
const ReportWriter* FindReportWriter(std::string_view name);

// Picks the importer for `path` from its first bytes. kInvalidInput when none claims it.
StatusOr<const Importer*> ChooseImporter(const std::string& path);

}  // namespace overlapprof
