#pragma once
// The CI gate's inputs (`overlapprof compare` and `check`): a JSON summary read back into what
// compare needs (the schema reports/json_summary.cc writes, docs/summary-schema.md), and the
// policy file. The statistics are analyzers/compare.h.
#include <nlohmann/json.hpp>

#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "analyzers/compare.h"
#include "src/common/status.h"

namespace overlapprof {

// Parses a JSON policy (or any small document) as every overlapprof reader treats JSON
// (docs/schema.md): NaN and Infinity are not JSON and refuse the document (kInvalidInput, the
// parser's position); a key given twice in one object keeps its first value, the later keys are
// appended to *duplicates (the caller warns). Linear time.
StatusOr<nlohmann::json> ParseJsonFirstKeyWins(std::istream& in, const std::string& source,
                                              std::vector<std::string>* duplicates);

// Reads a JSON summary's text (overlapprof.summary/1) in one streaming pass: linear time, and
// memory for what the gate keeps (the RunView: about 40 bytes per steady iteration), whatever
// else the document holds. JSON as ParseJsonFirstKeyWins reads it; duplicate keys are looked for
// in the objects the gate reads (a key it does not read is skipped, whichever value it holds).
// Counters' severities are this overlapprof's (src/common/stats.def), not the file's; a counter
// it does not know counts as lost data. A malformed summary is kInvalidInput naming the field.
StatusOr<RunView> ReadSummary(std::string_view text, const std::string& source, std::vector<std::string>* duplicates);
// The same, of a parsed summary.
StatusOr<RunView> RunViewFromSummary(const nlohmann::json& summary, const std::string& source);
// Every key ReadSummary reads, as paths into the document: "schema", "ranks", "ranks[].comm_ns",
// "ranks[].data_quality[].value", ... (a list's elements are "[]"). The writer
// (reports/json_summary.cc) must emit each of them: tests/unit/summary_input_test.cc checks it
// on every golden summary.
std::vector<std::string> SummaryKeysRead();

// Reads a policy file: JSON with any of max_step_time_increase_pct, max_overlap_drop_pp,
// max_exposed_comm_increase_pct, max_data_loss, alpha, min_effect_ms, op_mix_tolerance_pct, comm_kernel,
// not_comm (unknown keys are an error, so a typo does not silently gate nothing).
StatusOr<Policy> LoadPolicy(const std::string& path, Policy defaults);

}  // namespace overlapprof
