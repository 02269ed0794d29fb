#include "analyzers/summary.h"

namespace overlapprof {

int Summary::ErrorCounters() const {
  int n = 0;
  for (const RankResult& r : ranks) {
    n += r.stats.ErrorCount();
    for (const ExtraStat& e : r.extra_stats) n += (e.value != 0 && e.severity == Severity::kError);
  }
  return n;
}

int Summary::WarningCounters() const {
  int n = 0;
  for (const RankResult& r : ranks) {
    n += r.stats.WarningCount();
    for (const ExtraStat& e : r.extra_stats) n += (e.value != 0 && e.severity == Severity::kWarning);
  }
  return n;
}

void Summary::AddFinding(std::string_view analyzer, int64_t rank, std::string_view severity, std::string message) {
  auto& list = sections["findings"];
  if (!list.is_array()) list = nlohmann::ordered_json::array();
  nlohmann::ordered_json f;
  f["analyzer"] = analyzer;
  f["rank"] = rank == kUnknown ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(rank);
  f["severity"] = severity;
  f["message"] = std::move(message);
  list.push_back(std::move(f));
}

}  // namespace overlapprof
