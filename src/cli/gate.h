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
  bool allow_different_runs = false;      // compare runs that Differences() finds not comparable
  std::vector<std::string> comm_kernel, not_comm;  // --comm-kernel / --not-comm (traces only)
};

// A JSON summary: a .json file whose beginning names the summary schema (a Chrome trace, also
// .json, does not).
bool IsSummaryFile(const std::string& path);

CommandResult RunCompare(const GateArgs& args);
CommandResult RunCheck(const GateArgs& args);

}  // namespace overlapprof
