// `overlapprof analyze TRACE...`: the one pass over the traces, the terminal table, the JSON
// summary; for `run`, also the report files beside the rank files.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "src/cli/command.h"
#include "src/cli/gate.h"
#include "src/cli/output.h"
#include "src/cli/pipeline.h"
#include "src/cli/registry.h"
#include "src/common/memory.h"
#include "src/common/utf8.h"

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

bool UseColor(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;
  return ::isatty(STDOUT_FILENO) == 1;
}

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

}  // namespace

CommandResult RunAnalyze(const AnalyzeArgs& a) {
  OVERLAPPROF_ASSIGN_OR_RETURN(int exp, ParseTsUnit(a.ts_unit));
  // A JSON summary is already analyzed: say what takes it.
  for (const std::string& t : a.traces)
    if (IsSummaryFile(t))
      return MakeError(StatusCode::kInvalidInput,
                       "{}: this is an overlapprof JSON summary, already analyzed: compare it with another run "
                       "('overlapprof compare {} NEW') or gate a new run on it ('overlapprof check TRACE --baseline {}')",
                       t, t, t);
  // `run`'s reports include a Chrome trace, which draws host calls.
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<TraceInput> files,
                               ExpandInputs(a.traces, a.cache_dir, a.report_dir.empty() ? TraceNeeds{} : TraceNeeds::All()));
  ImportOptions io;
  io.kineto.time_exp = exp;
  io.store_quick_check = !a.no_verify;
  OVERLAPPROF_ASSIGN_OR_RETURN(io.comm_patterns, MakeCommPatterns(a.comm_kernel, a.not_comm));
  io.kernel_timing_only = a.comm_timing == "kernels";
  if (a.rank_by_gpu) {
    OVERLAPPROF_ASSIGN_OR_RETURN(io.nsys.rank_by_gpu_world, CheckRanksByGpu(files));
  }
  AnalysisOptions ao;
  ao.step_range = a.step_range;
  ao.iterations = IterationModeNamed(a.iterations);
  // `run`: the HTML page and the Chrome trace take their data from this same pass.
  std::unique_ptr<ReportWriter> html = a.report_dir.empty() ? nullptr : MakeReportWriter("html");
  std::unique_ptr<ReportWriter> chrome = a.report_dir.empty() ? nullptr : MakeReportWriter("chrome-trace");
  std::vector<ReportWriter*> consumers;
  if (html) consumers.push_back(html.get());
  if (chrome) consumers.push_back(chrome.get());
  OVERLAPPROF_ASSIGN_OR_RETURN(Summary summary, AnalyzeFiles(files, io, ao, a.jobs, consumers));

  if (!a.json_path.empty()) OVERLAPPROF_RETURN_IF_ERROR(WriteJsonFile(summary, a.json_path));
  if (!a.report_dir.empty()) OVERLAPPROF_RETURN_IF_ERROR(WriteRunReports(a.report_dir, summary, *chrome, *html));
  if (a.json_path != "-") {
    ReportOptions ro;
    ro.per_iteration = a.per_iteration;
    ro.color = UseColor(a.color);
    OVERLAPPROF_RETURN_IF_ERROR(MakeReportWriter("terminal")->Write(summary, ro, std::cout));
  }
  std::cout.flush();
  Outcome outcome = DataQualityOutcome(summary, "data was lost, the figures above are not trustworthy");
  KeepUntilExit(std::move(summary));  // the process ends next: no freeing node by node
  return outcome;
}

}  // namespace overlapprof
