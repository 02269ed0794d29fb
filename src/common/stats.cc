#include "src/common/stats.h"

namespace overlapprof {

namespace {
constexpr Severity kInfo = Severity::kInfo;
constexpr Severity kWarning = Severity::kWarning;
constexpr Severity kError = Severity::kError;
const StatInfo kStatTable[] = {
#define X(name, severity, description) {#name, severity, description},
#include "src/common/stats.def"
#undef X
};
static_assert(sizeof(kStatTable) / sizeof(kStatTable[0]) == kStatCount);
}  // namespace

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "info";
}

std::optional<Severity> ParseSeverity(std::string_view s) {
  if (s == "info") return Severity::kInfo;
  if (s == "warning") return Severity::kWarning;
  if (s == "error") return Severity::kError;
  return std::nullopt;
}

const StatInfo& GetStatInfo(Stat s) { return kStatTable[static_cast<size_t>(s)]; }

std::optional<Stat> FindStat(std::string_view name) {
  for (size_t i = 0; i < kStatCount; ++i)
    if (kStatTable[i].name == name) return static_cast<Stat>(i);
  return std::nullopt;
}

int StatCounters::ErrorCount() const {
  int n = 0;
  for (size_t i = 0; i < kStatCount; ++i)
    if (values_[i] != 0 && kStatTable[i].severity == Severity::kError) ++n;
  return n;
}

int StatCounters::WarningCount() const {
  int n = 0;
  for (size_t i = 0; i < kStatCount; ++i)
    if (values_[i] != 0 && kStatTable[i].severity == Severity::kWarning) ++n;
  return n;
}

}  // namespace overlapprof
