#pragma once
// What the CLI's subcommands (src/cli/subcommand.h) share: their result, a Status when they fail
// or an Outcome, the exit code of an ending that is not an error; ExitCodeOf (command.cc) maps
// both to the process's exit code, in one place (docs/exit-codes.md).
#include <memory>
#include <string>
#include <vector>

#include "analyzers/summary.h"
#include "src/common/exit_codes.h"
#include "src/common/status.h"
#include "src/trace/classify.h"

namespace overlapprof {

// How a subcommand ended without an error.
class Outcome {
 public:
  static Outcome Ok() { return Outcome(kExitOk); }
  static Outcome Regression() { return Outcome(kExitRegression); }      // `check`
  static Outcome Inconclusive() { return Outcome(kExitInconclusive); }  // `check`
  static Outcome DataLost() { return Outcome(kExitDataQuality); }       // results printed, data was lost
  static Outcome CommandExited(int code) { return Outcome(code); }      // `run`: the command's own code
  int exit_code() const { return code_; }

 private:
  explicit Outcome(int code) : code_(code) {}
  int code_;
};

// A failure is a Status: internal errors exit 5, every other error (usage, input, I/O) exits 2.
using CommandResult = StatusOr<Outcome>;

// The process exit code of `result`; a failure is printed first, as one line on stderr
// ("overlapprof: error: MESSAGE", newlines in the message turned into spaces).
int ExitCodeOf(const CommandResult& result);

// --ts-unit: the power of ten of Chrome-trace ts/dur in ns ("us": 3, "ns": 0).
StatusOr<int> ParseTsUnit(const std::string& unit);

// The data-quality ending shared by analyze and report: DataLost (after one line on stderr)
// when an error-severity counter is set, else Ok.
Outcome DataQualityOutcome(const Summary& summary, const char* what_it_means);

// --comm-kernel / --not-comm: compiled once (null when both are empty); an invalid regex is
// a usage error naming it.
StatusOr<std::shared_ptr<const CommPatterns>> MakeCommPatterns(const std::vector<std::string>& comm_kernel,
                                                               const std::vector<std::string>& not_comm);

// `run`: analyzes the rank files in `dir` as `overlapprof analyze DIR` does with its defaults,
// and writes the report files beside them (overlap.summary.json, overlap.perfetto.json,
// overlap.report.html). Defined in analyze.cc.
CommandResult AnalyzeRunDirectory(const std::string& dir);

}  // namespace overlapprof
