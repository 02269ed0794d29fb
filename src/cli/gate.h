#pragma once
// `overlapprof compare BASE NEW` and `overlapprof check TRACE --baseline BASE` (docs/ci-gate.md).
#include <string>

#include "analyzers/compare.h"

namespace overlapprof {

struct GateArgs {
  std::string base, next;  // a JSON summary, a trace file, or a directory of traces
  std::string policy_file;
  Policy policy;
  std::string markdown_path, junit_path;  // check: also write these ("-": stdout)
  std::string step_range;                 // AnalysisOptions::step_range for traces
};

int RunCompare(const GateArgs& args);
int RunCheck(const GateArgs& args);

}  // namespace overlapprof
