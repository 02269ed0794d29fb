#pragma once
// `overlapprof run [-o DIR] [--flush-ms N] [--no-analyze] -- CMD...` (docs/run.md).
#include <functional>
#include <string>
#include <vector>
#include "src/cli/command.h"

namespace overlapprof {

struct RunArgs {
  std::string output_dir;  // empty: overlapprof-YYYYmmdd-HHMMSS/
  int flush_ms = 1000;
  bool no_analyze = false;
  std::vector<std::string> command;
};

// Runs the command with the injector in its environment, forwards signals, gathers the
// rank files and (unless no_analyze) calls `analyze` on the output directory. Returns the
// command's exit code (128+N when a signal N ended it; Outcome::CommandExited), or an error
// when it could not start (kInternal when the system refused a pipe or a fork).
CommandResult RunCommand(const RunArgs& args, const std::function<CommandResult(const std::string& dir)>& analyze);

}  // namespace overlapprof
