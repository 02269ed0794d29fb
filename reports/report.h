#pragma once
// The report-writer interface. A writer renders a Summary; it computes nothing new, so
// every report shows the JSON summary's numbers.
//
// Report writers are consumers of the one analysis pass (src/cli/pipeline.h): each input is
// read once. A writer that draws from the traces themselves (timelines, Chrome trace) gets
// every rank in ConsumeRank, in input order, right after the analyzers' AnalyzeRank for that
// rank, together with what the overlap analyzer derived from it; it keeps only bounded data
// (never a reference to the RankTrace) and renders everything in Write, after the analyzers'
// Finish. Writers depend on the trace model and the analyzers' results only: never on the
// importers or the pipeline.
// To add one: a file in reports/ with a factory, and one line in src/cli/registry.inc.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "analyzers/summary.h"
#include "src/common/status.h"
#include "src/trace/model.h"

namespace overlapprof {

struct ReportOptions {
  bool per_iteration = false;  // terminal: print the per-iteration table
  bool color = false;          // terminal: ANSI colour (only on a TTY, never with NO_COLOR)
  bool utf8 = false;           // terminal: block characters for the step-split bars (else ASCII)
  bool brief = false;          // terminal: the verdict and the run's headline figures only
  bool all_ranks = false;      // terminal: every rank in per-rank tables (--ranks all)
  std::vector<int64_t> ranks;  // terminal: these ranks in per-rank tables (--ranks LIST); empty: those that matter
  int64_t top_findings = 5;    // terminal: at most this many finding lines (--top N)
  int64_t trace_budget_bytes = 0;  // chrome-trace: size budget of the JSON (0: the default)
  std::string trace_iterations;    // chrome-trace: --trace-iterations ("", "all", "0,5,10-12")
  // json, html: BuildSummaryDocument(summary) when the caller has already built it (`report
  // --json --html` builds it once for both); null: the writer builds it. Must be of the same summary.
  const struct SummaryDocument* summary_doc = nullptr;
};

class ReportWriter {
 public:
  virtual ~ReportWriter() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  // What of a RankTrace beyond activities, comm ops and step ranges ConsumeRank reads; the
  // pass decodes the union of the analyzers' and the writers' needs.
  virtual TraceNeeds needs() const { return {}; }
  // Before the first rank of each pass: the number of inputs of the pass (one RankResult each).
  // A pass may start over (src/cli/pipeline.cc: windows planned across ranks): Begin then drops
  // whatever the previous ConsumeRank calls kept.
  virtual Status Begin(size_t inputs, const ReportOptions& options) { return OkStatus(); }
  // Per rank, in input order. `rank_index` indexes summary.ranks as it is during the pass
  // (input order; RankResult::input_index keeps it after the ranks are sorted). `derived` is
  // the overlap analyzer's RankDerived for this rank (analyzers/overlap.h).
  virtual Status ConsumeRank(const RankTrace& trace, const RankDerived& derived, size_t rank_index,
                             const Summary& summary) {
    return OkStatus();
  }
  // After the pass: renders the whole report.
  virtual Status Write(const Summary& summary, const ReportOptions& options, std::ostream& out) = 0;
  // After Write: one line for the terminal saying what the report left out (to keep within
  // its size bound); empty when it left nothing out.
  virtual std::string Notice() const { return {}; }
};

// The JSON summary document (schema "overlapprof.summary/1", docs/summary-schema.md).
nlohmann::ordered_json SummaryToJson(const Summary& summary);

// The same document for writing: `root` holds every key in order, but the analyzers'
// presentational sections (Summary::sections: the DDP buckets and stalls tables, most of a
// big run's summary) are not copied into it: their places hold null and `by_reference` points
// at them in the Summary, which must outlive the document. DumpSummaryDocument writes exactly
// SummaryToJson(summary).dump(indent, ' ', false, handler) (a test holds them equal).
struct SummaryDocument {
  nlohmann::ordered_json root;
  std::vector<std::pair<std::string, const nlohmann::ordered_json*>> by_reference;
};
SummaryDocument BuildSummaryDocument(const Summary& summary);
// Appends the document's text to `out`. indent < 0: compact. Throws nlohmann's type_error on
// invalid UTF-8 with the strict handler, as dump() does.
void DumpSummaryDocument(const SummaryDocument& doc, int indent, nlohmann::ordered_json::error_handler_t handler,
                         std::string& out);
inline constexpr std::string_view kSummarySchema = "overlapprof.summary/1";

}  // namespace overlapprof
