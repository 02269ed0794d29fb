#pragma once
// The report-writer interface. A writer renders a Summary; it computes nothing new, so
// every report shows the JSON summary's numbers.
// To add one: a file in reports/ with a factory, and one line in src/registry.inc.
#include <nlohmann/json.hpp>

#include <ostream>
#include <string_view>

#include "analyzers/summary.h"
#include "src/common/status.h"

namespace overlapprof {

struct ReportOptions {
  bool per_iteration = false;  // terminal: print the per-iteration table
  bool color = false;          // terminal: ANSI colour (only on a TTY, never with NO_COLOR)
};

class ReportWriter {
 public:
  virtual ~ReportWriter() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  virtual Status Write(const Summary& summary, const ReportOptions& options, std::ostream& out) const = 0;
};

// The JSON summary document (schema "overlapprof.summary/1", docs/summary-schema.md).
nlohmann::ordered_json SummaryToJson(const Summary& summary);
inline constexpr std::string_view kSummarySchema = "overlapprof.summary/1";

}  // namespace overlapprof
