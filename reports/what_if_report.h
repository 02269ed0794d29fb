#pragma once
// Rendering of the what-if analyzer's result (analyzers/what_if_result.h, docs/what-if.md): the
// JSON summary's `what_if` section and the terminal's "what would help" table.
#include <nlohmann/json.hpp>

#include <ostream>

#include "analyzers/summary.h"
#include "analyzers/what_if_result.h"

namespace overlapprof {

// The `what_if` section (docs/summary-schema.md).
nlohmann::ordered_json WhatIfJson(const WhatIfResult& w);

// The terminal's "what would help" table; writes nothing when the analyzer did not run.
void WriteWhatIfTable(const Summary& s, std::ostream& out);

}  // namespace overlapprof
