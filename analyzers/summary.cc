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

}  // namespace overlapprof
