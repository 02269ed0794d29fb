#include "src/cli/registry.h"

#include "src/io/input_file.h"

namespace overlapprof {

#define OVERLAPPROF_IMPORTER(factory) std::unique_ptr<Importer> factory();
#define OVERLAPPROF_ANALYZER(factory) std::unique_ptr<Analyzer> factory();
#define OVERLAPPROF_REPORT(factory) std::unique_ptr<ReportWriter> factory();
#include "src/cli/registry.inc"
#undef OVERLAPPROF_IMPORTER
#undef OVERLAPPROF_ANALYZER
#undef OVERLAPPROF_REPORT

const std::vector<std::unique_ptr<Importer>>& Importers() {
  static const auto* list = [] {
    auto* v = new std::vector<std::unique_ptr<Importer>>();
#define OVERLAPPROF_IMPORTER(factory) v->push_back(factory());
#define OVERLAPPROF_ANALYZER(factory)
#define OVERLAPPROF_REPORT(factory)
#include "src/cli/registry.inc"
#undef OVERLAPPROF_IMPORTER
#undef OVERLAPPROF_ANALYZER
#undef OVERLAPPROF_REPORT
    return v;
  }();
  return *list;
}

std::vector<std::unique_ptr<Analyzer>> MakeAnalyzers() {
  std::vector<std::unique_ptr<Analyzer>> v;
#define OVERLAPPROF_IMPORTER(factory)
#define OVERLAPPROF_ANALYZER(factory) v.push_back(factory());
#define OVERLAPPROF_REPORT(factory)
#include "src/cli/registry.inc"
#undef OVERLAPPROF_IMPORTER
#undef OVERLAPPROF_ANALYZER
#undef OVERLAPPROF_REPORT
  return v;
}

const std::vector<std::unique_ptr<ReportWriter>>& ReportWriters() {
  static const auto* list = [] {
    auto* v = new std::vector<std::unique_ptr<ReportWriter>>();
#define OVERLAPPROF_IMPORTER(factory)
#define OVERLAPPROF_ANALYZER(factory)
#define OVERLAPPROF_REPORT(factory) v->push_back(factory());
#include "src/cli/registry.inc"
#undef OVERLAPPROF_IMPORTER
#undef OVERLAPPROF_ANALYZER
#undef OVERLAPPROF_REPORT
    return v;
  }();
  return *list;
}

std::unique_ptr<ReportWriter> MakeReportWriter(std::string_view name) {
#define OVERLAPPROF_IMPORTER(factory)
#define OVERLAPPROF_ANALYZER(factory)
#define OVERLAPPROF_REPORT(factory)               \
  if (auto w = factory(); w->name() == name) return w;
#include "src/cli/registry.inc"
#undef OVERLAPPROF_IMPORTER
#undef OVERLAPPROF_ANALYZER
#undef OVERLAPPROF_REPORT
  return nullptr;
}

StatusOr<const Importer*> ChooseImporter(const std::string& path) {
  OVERLAPPROF_ASSIGN_OR_RETURN(std::string head, ReadFileHead(path, 4096));
  if (head.empty()) return MakeError(StatusCode::kInvalidInput, "empty file");
  const Importer* best = nullptr;
  int best_score = 0;
  for (const auto& imp : Importers()) {
    int score = imp->Probe(head);
    if (score > best_score) {
      best = imp.get();
      best_score = score;
    }
  }
  if (!best)
    return MakeError(StatusCode::kInvalidInput,
                     "not a trace: neither PyTorch-profiler JSON (.json, .json.gz) nor an overlapprof store");
  return best;
}

}  // namespace overlapprof
