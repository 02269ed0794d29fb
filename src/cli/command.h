#pragma once
// The CLI's subcommands, one file each in src/cli/ (analyze.cc, import.cc, report.cc, gate.cc for
// compare and check, run.cc), and their result: a subcommand returns a Status when it fails, or
// an Outcome, the exit code of an ending that is not an error. ExitCodeOf (command.cc) maps both
// to the process's exit code, in one place (docs/exit-codes.md).
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

struct AnalyzeArgs {
  std::vector<std::string> traces;
  std::string json_path;
  bool per_iteration = false;
  std::string ts_unit = "us";
  bool no_verify = false;
  std::string color = "auto";
  int jobs = 0;  // -j: ranks imported at once; 0: DefaultJobs() (src/cli/pipeline.h)
  std::string step_range;
  std::string cache_dir;  // --cache-dir: where .nsys-rep inputs are exported (ExpandInputs)
  std::vector<std::string> comm_kernel, not_comm;  // src/trace/classify.h CommPatterns
  std::string comm_timing = "auto";  // --comm-timing: auto (the plugin's per-op times when there) or kernels
  std::string iterations = "auto";   // --iterations: auto, markers or pattern (IterationModeNamed)
  bool rank_by_gpu = false;          // --rank-by-gpu (CheckRanksByGpu, src/cli/pipeline.h)
  // `run`: also write the reports into this directory (overlap.summary.json,
  // overlap.perfetto.json, overlap.report.html), beside the rank files.
  std::string report_dir;
};
CommandResult RunAnalyze(const AnalyzeArgs& args);

struct ReportArgs {
  std::vector<std::string> traces;
  std::string chrome_trace, json_path, html_path;
  std::string step_range;
  std::string trace_iterations;  // Chrome trace: --trace-iterations
  double trace_budget_mb = 0;    // Chrome trace: --trace-budget (0: the default)
  std::string cache_dir;         // --cache-dir (.nsys-rep exports)
  std::vector<std::string> comm_kernel, not_comm;  // src/trace/classify.h CommPatterns
  std::string comm_timing = "auto";  // --comm-timing (AnalyzeArgs)
  std::string iterations = "auto";   // --iterations (AnalyzeArgs)
  bool rank_by_gpu = false;          // --rank-by-gpu (AnalyzeArgs)
};
CommandResult RunReport(const ReportArgs& args);

struct ImportArgs {
  std::vector<std::string> inputs;
  std::string output;
  bool force = false;
  std::string ts_unit = "us";
  std::string cache_dir;  // --cache-dir (.nsys-rep exports)
  bool rank_by_gpu = false;  // --rank-by-gpu (AnalyzeArgs)
};
CommandResult RunImport(const ImportArgs& args);

}  // namespace overlapprof
