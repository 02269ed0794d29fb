#pragma once
// The option groups several subcommands share, each declared once here (its name, value type,
// check and help), and the import options they turn into. A subcommand's own options are
// declared in its own file (src/cli/subcommand.h).
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "src/common/status.h"
#include "reports/report.h"
#include "src/cli/pipeline.h"
#include "src/importers/importer.h"

namespace overlapprof {

// A validator without its description, so that help shows the option's own words for its
// range ("1 to 256") instead of "INT:INT in [1 - 256]".
CLI::Validator Quiet(CLI::Validator v);

// The flags that say how inputs are imported. A subcommand declares the ones it offers (the
// Add*Option functions below); the others keep these defaults.
struct ImportFlags {
  std::string ts_unit = "us";  // --ts-unit (ParseTsUnit)
  bool no_verify = false;      // --no-verify: no SQLite quick_check on store files
  std::string cache_dir;       // --cache-dir: where .nsys-rep inputs are exported (ExpandInputs)
  std::vector<std::string> comm_kernel, not_comm;  // --comm-kernel / --not-comm (CommPatterns)
  std::string comm_timing = "auto";  // --comm-timing: auto (the plugin's per-op times when there) or kernels
  bool rank_by_gpu = false;          // --rank-by-gpu (CheckRanksByGpu, src/cli/pipeline.h)
  std::vector<std::string> exclude;  // --exclude GLOB: files of directories left out (ExpandInputs)
};

// --ts-unit; `help` differs by subcommand.
void AddTsUnitOption(CLI::App& app, ImportFlags& flags, const char* help);
// --no-verify.
void AddNoVerifyOption(CLI::App& app, ImportFlags& flags);
// --cache-dir (.nsys-rep exports).
void AddCacheDirOption(CLI::App& app, ImportFlags& flags);
// --comm-kernel / --not-comm (docs/classification.md), repeatable.
void AddCommPatternOptions(CLI::App& app, std::vector<std::string>& comm_kernel, std::vector<std::string>& not_comm);
// --comm-timing (docs/nccl-profiler.md, "timing_source").
void AddCommTimingOption(CLI::App& app, ImportFlags& flags);
// --rank-by-gpu (docs/nsys.md, "Ranks").
void AddRankByGpuOption(CLI::App& app, ImportFlags& flags);
// --step-range (AnalysisOptions::step_range); `help` differs by subcommand.
void AddStepRangeOption(CLI::App& app, std::string& step_range, const char* help);
// --iterations (docs/analyzers.md, "Iterations"): auto, markers or pattern (IterationModeNamed).
void AddIterationsOption(CLI::App& app, std::string& iterations);

// --exclude GLOB (repeatable): files in directories given as inputs left out.
void AddExcludeOption(CLI::App& app, ImportFlags& flags);

// --what-if (docs/what-if.md): the causal model of the step, replayed, and its scenarios.
void AddWhatIfOption(CLI::App& app, bool& what_if);
// --scenario SPEC (repeatable; implies --what-if): a custom what-if scenario (docs/what-if.md).
void AddScenarioOption(CLI::App& app, std::vector<std::string>& specs);

// What every command that runs an analysis pass takes, in help order: --cache-dir,
// --comm-kernel/--not-comm, --comm-timing, --iterations, --what-if, --rank-by-gpu, --exclude.
void AddPassOptions(CLI::App& app, ImportFlags& import, std::string& iterations, bool& what_if);

// --color WHEN: auto (a TTY and no NO_COLOR, the default), always or never.
void AddColorOption(CLI::App& app, std::string& color);
// Whether to colour stdout for --color `mode` (NO_COLOR set and not empty: never in auto).
bool UseColor(const std::string& mode);
// Whether the terminal takes UTF-8: the locale the environment names (LC_ALL, else LC_CTYPE,
// else LANG) says UTF-8.
bool TerminalIsUtf8();
// -j/--jobs N (1 to 256; 0, the default: DefaultJobs()).
void AddJobsOption(CLI::App& app, int& jobs);

// What the terminal report shows: --ranks all|LIST, --brief, --top N.
struct TerminalFlags {
  std::string ranks;      // "", "all" or "0,3,8-11"
  bool brief = false;
  int64_t top = 5;
};
void AddTerminalOptions(CLI::App& app, TerminalFlags& flags);
// `flags` into `ro`; a --ranks list that does not parse is a usage error.
Status ApplyTerminalFlags(const TerminalFlags& flags, ReportOptions& ro);

// The import options `flags` ask for, in two steps, the order in which every subcommand checks
// its inputs: ImportOptionsOf before the inputs are expanded (an invalid --ts-unit is a usage
// error), CompleteImportOptions once they are (the comm patterns compiled, an invalid regex is a
// usage error naming it; --rank-by-gpu checked against `files`).
StatusOr<ImportOptions> ImportOptionsOf(const ImportFlags& flags);
Status CompleteImportOptions(const ImportFlags& flags, const std::vector<TraceInput>& files, ImportOptions& options);

}  // namespace overlapprof
