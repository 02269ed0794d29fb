// `overlapprof report TRACE... --chrome-trace FILE --html FILE --json FILE`: the files a user
// opens or automates on, all from the one analysis pass. Each output goes to FILE.partial first.
#include <cstdio>
#include <functional>
#include <optional>
#include <system_error>
#include <thread>

#include <nlohmann/json.hpp>

#include "src/cli/command.h"
#include "src/cli/options.h"
#include "src/cli/output.h"
#include "src/cli/pipeline.h"
#include "src/cli/registry.h"
#include "src/cli/subcommand.h"
#include "src/common/utf8.h"

namespace overlapprof {
namespace {

struct ReportArgs {
  std::vector<std::string> traces;
  std::string chrome_trace, json_path, html_path;
  std::string step_range;
  std::string trace_iterations;  // Chrome trace: --trace-iterations
  double trace_budget_mb = 0;    // Chrome trace: --trace-budget (0: the default)
  bool what_if = false;  // --what-if
  std::vector<std::string> scenarios;  // --scenario SPEC (implies --what-if)
  int jobs = 0;          // -j
  bool force = false;    // --force
  std::string iterations = "auto";  // --iterations (IterationModeNamed)
  ImportFlags import;
};

CommandResult RunReport(const ReportArgs& a) {
  if (a.chrome_trace.empty() && a.json_path.empty() && a.html_path.empty())
    return MakeError(StatusCode::kInvalidArgument,
                     "report: name at least one output (--chrome-trace FILE, --json FILE, --html FILE)");
  OVERLAPPROF_RETURN_IF_ERROR(CheckOutputPaths(
      {{"--json", a.json_path}, {"--chrome-trace", a.chrome_trace}, {"--html", a.html_path}}, a.force));
  OVERLAPPROF_ASSIGN_OR_RETURN(ImportOptions io, ImportOptionsOf(a.import));
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<whatif::ScenarioSpec> scenarios, whatif::ParseScenarios(a.scenarios));
  const bool what_if = a.what_if || !scenarios.empty();
  OVERLAPPROF_ASSIGN_OR_RETURN(
      std::vector<TraceInput> files,
      ExpandInputs(a.traces, a.import.cache_dir,
                   a.chrome_trace.empty() ? TraceNeeds{.host_calls = what_if} : TraceNeeds::All(), {},
                   a.import.exclude));  // host calls drawn
  OVERLAPPROF_RETURN_IF_ERROR(CompleteImportOptions(a.import, files, io));
  AnalysisOptions ao;
  ao.step_range = a.step_range;
  ao.iterations = IterationModeNamed(a.iterations);
  ao.what_if = what_if;
  ao.scenarios = std::move(scenarios);
  ReportOptions ro;
  ro.trace_iterations = a.trace_iterations;
  ro.trace_budget_bytes = static_cast<int64_t>(a.trace_budget_mb * 1e6);
  std::unique_ptr<ReportWriter> html = a.html_path.empty() ? nullptr : MakeReportWriter("html");
  std::unique_ptr<ReportWriter> chrome = a.chrome_trace.empty() ? nullptr : MakeReportWriter("chrome-trace");
  std::vector<ReportWriter*> consumers;
  if (html) consumers.push_back(html.get());
  if (chrome) consumers.push_back(chrome.get());
  OVERLAPPROF_ASSIGN_OR_RETURN(Summary summary, AnalyzeFiles(files, io, ao, a.jobs, consumers, ro));

  OVERLAPPROF_RETURN_IF_ERROR(
      WriteReportFiles({a.json_path, a.chrome_trace, a.html_path}, summary, chrome.get(), html.get(), ro));
  return DataQualityOutcome(summary, "data was lost");
}

class ReportCommand : public Subcommand {
 public:
  std::string_view name() const override { return "report"; }
  std::string_view description() const override {
    return "Write report files: Chrome trace for Perfetto, JSON summary, HTML page";
  }
  std::string_view usage() const override {
    return "report [OPTIONS] TRACE... --chrome-trace FILE | --json FILE | --html FILE";
  }
  void AddOptions(CLI::App& app) override {
    app.add_option("TRACE", a_.traces, "trace files or directories of them")->required();
    app.add_option("--chrome-trace", a_.chrome_trace,
                   "Chrome trace JSON for Perfetto UI / chrome://tracing (NAME.json.gz: gzip)");
    app.add_option("--json", a_.json_path, "the JSON summary (overlapprof.summary/1), '-' for stdout");
    app.add_option("--html", a_.html_path,
                   "self-contained HTML report (opens offline in a browser; docs/html-report.md)");
    AddStepRangeOption(app, a_.step_range, "host annotation that marks an iteration, instead of ProfilerStep#N");
    app.add_option("--trace-iterations", a_.trace_iterations,
                   "Chrome trace: the iterations to keep: 'all', or 0-based indices like 0,5,10-12 (default: "
                   "everything when it fits the budget, else the slowest, median and first steady iteration per "
                   "rank)");
    app.add_option("--trace-budget", a_.trace_budget_mb, "Chrome trace: size budget in MB of JSON, more than 0 (default 100)")
        ->check(Quiet(CLI::PositiveNumber))
        ->type_name("MB");
    app.add_flag("--force", a_.force, "replace existing output files");
    AddJobsOption(app, a_.jobs);
    AddPassOptions(app, a_.import, a_.iterations, a_.what_if);
    AddScenarioOption(app, a_.scenarios);
  }
  CommandResult Run(const std::vector<std::string>&) override { return RunReport(a_); }

 private:
  ReportArgs a_;
};

}  // namespace

std::unique_ptr<Subcommand> MakeReportCommand() { return std::make_unique<ReportCommand>(); }

}  // namespace overlapprof
