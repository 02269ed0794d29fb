#pragma once
// Rendering of the interference analyzer's result (analyzers/interference.h, docs/interference.md):
// the JSON summary's `interference` section and the terminal's overlap-tax line.
#include <nlohmann/json.hpp>

#include <ostream>

#include "analyzers/interference.h"
#include "analyzers/summary.h"

namespace overlapprof {

// The `interference` section (docs/summary-schema.md).
nlohmann::ordered_json InterferenceJson(const InterferenceResult& r);

// One line when the measured compute tax of the run's steady iterations is at least 1% of their
// wall time; nothing otherwise, or when the analyzer did not run.
void WriteInterferenceLine(const Summary& s, std::ostream& out);

}  // namespace overlapprof
