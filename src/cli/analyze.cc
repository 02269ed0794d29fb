// `overlapprof analyze TRACE...`: the one pass over the traces, the terminal table, the JSON
// summary; for `run`, also the report files beside the rank files.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "src/cli/command.h"
#include "src/cli/gate.h"
#include "src/cli/options.h"
#include "src/cli/output.h"
#include "src/cli/pipeline.h"
#include "src/cli/registry.h"
#include "src/cli/subcommand.h"
#include "src/common/memory.h"
#include "src/common/utf8.h"

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

struct AnalyzeArgs {
  std::vector<std::string> traces;
  std::string json_path;
  std::string chrome_trace, html_path;  // --chrome-trace, --html: from the same pass
  bool force = false;                   // --force: replace existing output files
  std::string csv_dir;                  // --csv DIR: the main tables as CSV
  std::string trace_iterations;         // Chrome trace: --trace-iterations
  double trace_budget_mb = 0;           // Chrome trace: --trace-budget (0: the default)
  bool per_iteration = false;
  std::string color = "auto";
  int jobs = 0;  // -j: ranks imported at once; 0: DefaultJobs() (src/cli/pipeline.h)
  std::string step_range;
  bool what_if = false;  // --what-if
  std::vector<std::string> scenarios;  // --scenario SPEC (implies --what-if)
  std::string iterations = "auto";  // --iterations: auto, markers or pattern (IterationModeNamed)
  ImportFlags import;
  TerminalFlags terminal;  // --ranks, --brief, --top
  // `run`: also write the reports into this directory (overlap.summary.json,
  // overlap.perfetto.json, overlap.report.html), beside the rank files.
  std::string report_dir;
};

// `run`: the summary, the Chrome trace and the HTML page into `dir`, from the pass's writers.
Status WriteRunReports(const std::string& dir, const Summary& summary, ReportWriter& chrome, ReportWriter& html) {
  const std::string json = (fs::path(dir) / "overlap.summary.json").string();
  const std::string chrome_path = (fs::path(dir) / "overlap.perfetto.json").string();
  const std::string html_path = (fs::path(dir) / "overlap.report.html").string();
  OVERLAPPROF_RETURN_IF_ERROR(WriteJsonFile(summary, json));
  OVERLAPPROF_RETURN_IF_ERROR(WriteAtomically(chrome_path, [&](std::ostream& o) { return chrome.Write(summary, {}, o); }));
  if (std::string note = chrome.Notice(); !note.empty())
    std::fprintf(stderr, "overlapprof: %s: %s\n", EscapeForTerminal(chrome_path).c_str(), EscapeForTerminal(note).c_str());
  OVERLAPPROF_RETURN_IF_ERROR(WriteAtomically(html_path, [&](std::ostream& o) { return html.Write(summary, {}, o); }));
  std::fprintf(stderr, "overlapprof: reports: %s, %s (open in ui.perfetto.dev), %s\n", EscapeForTerminal(json).c_str(),
               EscapeForTerminal(chrome_path).c_str(), EscapeForTerminal(html_path).c_str());
  return OkStatus();
}

CommandResult RunAnalyze(const AnalyzeArgs& a) {
  OVERLAPPROF_ASSIGN_OR_RETURN(ImportOptions io, ImportOptionsOf(a.import));
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<whatif::ScenarioSpec> scenarios, whatif::ParseScenarios(a.scenarios));
  const bool what_if = a.what_if || !scenarios.empty();
  ReportOptions ro;  // the terminal's
  OVERLAPPROF_RETURN_IF_ERROR(ApplyTerminalFlags(a.terminal, ro));
  if (!a.csv_dir.empty()) {  // its tables, before the pass
    std::vector<std::pair<std::string, std::string>> tables;
    for (const char* t : {"ranks.csv", "iterations.csv", "op_types.csv", "collectives.csv", "findings.csv"})
      tables.emplace_back("--csv", (fs::path(a.csv_dir) / t).string());
    OVERLAPPROF_RETURN_IF_ERROR(CheckOutputPaths(tables, a.force));
  }
  if (a.report_dir.empty())
    OVERLAPPROF_RETURN_IF_ERROR(CheckOutputPaths(
        {{"--json", a.json_path}, {"--html", a.html_path}, {"--chrome-trace", a.chrome_trace}}, a.force));
  // A JSON summary is already analyzed: say what takes it.
  for (const std::string& t : a.traces)
    if (IsSummaryFile(t))
      return MakeError(StatusCode::kInvalidInput,
                       "{}: this is an overlapprof JSON summary, already analyzed: compare it with another run "
                       "('overlapprof compare {} NEW') or gate a new run on it ('overlapprof check TRACE --baseline {}')",
                       t, t, t);
  // A Chrome trace (`run`'s reports include one) draws host calls.
  TraceNeeds listing = a.report_dir.empty() && a.chrome_trace.empty() ? TraceNeeds{} : TraceNeeds::All();
  listing.host_calls = listing.host_calls || what_if;  // the model reads every host call
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<TraceInput> files, ExpandInputs(a.traces, a.import.cache_dir, listing, {}, a.import.exclude));
  OVERLAPPROF_RETURN_IF_ERROR(CompleteImportOptions(a.import, files, io));
  AnalysisOptions ao;
  ao.step_range = a.step_range;
  ao.iterations = IterationModeNamed(a.iterations);
  ao.what_if = what_if;
  ao.scenarios = std::move(scenarios);
  // The HTML page and the Chrome trace (--html, --chrome-trace, `run`'s reports) take their data
  // from this same pass.
  const bool want_html = !a.report_dir.empty() || !a.html_path.empty();
  const bool want_chrome = !a.report_dir.empty() || !a.chrome_trace.empty();
  std::unique_ptr<ReportWriter> html = want_html ? MakeReportWriter("html") : nullptr;
  std::unique_ptr<ReportWriter> chrome = want_chrome ? MakeReportWriter("chrome-trace") : nullptr;
  std::vector<ReportWriter*> consumers;
  if (html) consumers.push_back(html.get());
  if (chrome) consumers.push_back(chrome.get());
  ReportOptions chrome_options;
  chrome_options.trace_iterations = a.trace_iterations;
  chrome_options.trace_budget_bytes = static_cast<int64_t>(a.trace_budget_mb * 1e6);
  OVERLAPPROF_ASSIGN_OR_RETURN(Summary summary, AnalyzeFiles(files, io, ao, a.jobs, consumers, chrome_options));

  if (!a.report_dir.empty()) {
    if (!a.json_path.empty()) OVERLAPPROF_RETURN_IF_ERROR(WriteJsonFile(summary, a.json_path));
    OVERLAPPROF_RETURN_IF_ERROR(WriteRunReports(a.report_dir, summary, *chrome, *html));
  } else if (!a.json_path.empty() || html || chrome) {
    ReportPaths paths{a.json_path, a.chrome_trace, a.html_path};
    paths.announce_json = false;
    OVERLAPPROF_RETURN_IF_ERROR(WriteReportFiles(paths, summary, chrome.get(), html.get(), chrome_options));
  }
  if (!a.csv_dir.empty()) OVERLAPPROF_RETURN_IF_ERROR(WriteCsvTables(summary, a.csv_dir, a.force));
  if (a.json_path != "-") {
    ro.per_iteration = a.per_iteration;
    ro.color = UseColor(a.color);
    ro.utf8 = TerminalIsUtf8();
    OVERLAPPROF_RETURN_IF_ERROR(MakeReportWriter("terminal")->Write(summary, ro, std::cout));
  }
  std::cout.flush();
  Outcome outcome = DataQualityOutcome(summary, "data was lost, the figures above are not trustworthy");
  KeepUntilExit(std::move(summary));  // the process ends next: no freeing node by node
  return outcome;
}

class AnalyzeCommand : public Subcommand {
 public:
  std::string_view name() const override { return "analyze"; }
  std::string_view description() const override {
    return "Analyze traces (PyTorch-profiler JSON, Nsight Systems SQLite exports, overlapprof stores)";
  }
  std::string_view usage() const override { return "analyze [OPTIONS] TRACE..."; }
  void AddOptions(CLI::App& app) override {
    app.add_option("TRACE", a_.traces, "trace files or directories of them")->required();
    app.add_option("--json", a_.json_path, "write the JSON summary (overlapprof.summary/1) to FILE, '-' for stdout");
    app.add_option("--html", a_.html_path,
                   "also write the self-contained HTML report to FILE, from the same pass (docs/html-report.md)");
    app.add_option("--chrome-trace", a_.chrome_trace,
                   "also write a Chrome trace for Perfetto UI to FILE (NAME.json.gz: gzip), from the same pass");
    app.add_option("--csv", a_.csv_dir,
                   "also write the main tables as CSV into DIR (ranks, iterations, op types, collectives, findings; "
                   "units in the headers)")
        ->type_name("DIR");
    app.add_flag("--force", a_.force, "replace existing output files");
    app.add_option("--trace-iterations", a_.trace_iterations,
                   "Chrome trace: the iterations to keep: 'all', or 0-based indices like 0,5,10-12 (as report)");
    app.add_option("--trace-budget", a_.trace_budget_mb, "Chrome trace: size budget in MB of JSON, more than 0 (default 100)")
        ->check(Quiet(CLI::PositiveNumber))
        ->type_name("MB");
    app.add_flag("--per-iteration", a_.per_iteration, "print the per-iteration table");
    AddTsUnitOption(app, a_.import, "unit of Chrome-trace ts/dur: us (the format's, default) or ns");
    AddNoVerifyOption(app, a_.import);
    AddColorOption(app, a_.color);
    AddJobsOption(app, a_.jobs);
    AddTerminalOptions(app, a_.terminal);
    AddStepRangeOption(app, a_.step_range,
                       "host annotation (NVTX or record_function) that marks an iteration, instead of ProfilerStep#N");
    AddPassOptions(app, a_.import, a_.iterations, a_.what_if);
    AddScenarioOption(app, a_.scenarios);
  }
  CommandResult Run(const std::vector<std::string>&) override { return RunAnalyze(a_); }

 private:
  AnalyzeArgs a_;
};

}  // namespace

CommandResult AnalyzeRunDirectory(const std::string& dir) {
  AnalyzeArgs a;
  a.traces = {dir};
  a.report_dir = dir;
  return RunAnalyze(a);
}

std::unique_ptr<Subcommand> MakeAnalyzeCommand() { return std::make_unique<AnalyzeCommand>(); }

}  // namespace overlapprof
