#pragma once
// Rendering of the interference analyzer's result (analyzers/interference.h, docs/interference.md):
// the JSON summary's `interference` section and the terminal's overlap-tax line (the terminal
// section `interference`, WriteInterferenceSection, declared by reports/terminal.h).
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "analyzers/interference.h"
#include "analyzers/summary.h"

namespace overlapprof {

// The `interference` section (docs/summary-schema.md).
nlohmann::ordered_json InterferenceJson(const InterferenceResult& r);

// The terminal's line (without a line break) when the measured compute tax of the run's steady
// iterations is at least 1% of their wall time; nullopt otherwise, or when the analyzer did not run.
std::optional<std::string> InterferenceLine(const Summary& s);

}  // namespace overlapprof
