#pragma once
// `overlapprof compare BASE NEW` and `overlapprof check TRACE --baseline BASE` (docs/ci-gate.md).
#include <string>

namespace overlapprof {

// A JSON summary: a .json file whose beginning names the summary schema (a Chrome trace, also
// .json, does not).
bool IsSummaryFile(const std::string& path);

}  // namespace overlapprof
