#pragma once
// Data-quality counters (Perfetto's stats table). The list lives in stats.def.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace overlapprof {

enum class Severity : uint8_t { kInfo = 0, kWarning = 1, kError = 2 };
std::string_view SeverityName(Severity s);
std::optional<Severity> ParseSeverity(std::string_view s);

enum class Stat : uint16_t {
#define X(name, severity, description) name,
#include "src/common/stats.def"
#undef X
  kCount
};
inline constexpr size_t kStatCount = static_cast<size_t>(Stat::kCount);

struct StatInfo {
  std::string_view name;
  Severity severity;
  std::string_view description;
};
const StatInfo& GetStatInfo(Stat s);
std::optional<Stat> FindStat(std::string_view name);

// One set of counters (per rank). Plain values: not thread-safe, not meant to be.
class StatCounters {
 public:
  void Add(Stat s, int64_t n = 1) { values_[static_cast<size_t>(s)] += n; }
  void Set(Stat s, int64_t v) { values_[static_cast<size_t>(s)] = v; }
  int64_t Get(Stat s) const { return values_[static_cast<size_t>(s)]; }
  // Non-zero counters of severity kError.
  int ErrorCount() const;
  int WarningCount() const;

 private:
  std::array<int64_t, kStatCount> values_{};
};

}  // namespace overlapprof
