#pragma once
// `overlapprof compare BASE NEW` and `overlapprof check TRACE --baseline BASE` (docs/ci-gate.md).
#include <string>
#include <vector>

#include "analyzers/compare.h"
#include "src/cli/command.h"

namespace overlapprof {

struct GateArgs {
  std::string base, next;  // a JSON summary, a trace file, or a directory of traces
  std::string policy_file;
  Policy policy;
  std::string markdown_path, junit_path;  // check: also write these ("-": stdout)
  std::string step_range;                 // AnalysisOptions::step_range for traces
  std::vector<std::string> comm_kernel, not_comm;  // --comm-kernel / --not-comm (traces only)
};

CommandResult RunCompare(const GateArgs& args);
CommandResult RunCheck(const GateArgs& args);

}  // namespace overlapprof
