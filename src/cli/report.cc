// `overlapprof report TRACE... --chrome-trace FILE --html FILE --json FILE`: the files a user
// opens or automates on, all from the one analysis pass. Each output goes to FILE.partial first.
#include <cstdio>

#include "src/cli/command.h"
#include "src/cli/output.h"
#include "src/pipeline.h"
#include "src/registry.h"

namespace overlapprof {

CommandResult RunReport(const ReportArgs& a) {
  if (a.chrome_trace.empty() && a.json_path.empty() && a.html_path.empty())
    return MakeError(StatusCode::kInvalidArgument,
                     "report: name at least one output (--chrome-trace FILE, --json FILE, --html FILE)");
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandInputs(a.traces));
  ImportOptions io;
  AnalysisOptions ao;
  ao.step_range = a.step_range;
  ReportOptions ro;
  ro.trace_iterations = a.trace_iterations;
  ro.trace_budget_bytes = static_cast<int64_t>(a.trace_budget_mb * 1e6);
  std::unique_ptr<ReportWriter> html = a.html_path.empty() ? nullptr : MakeReportWriter("html");
  std::unique_ptr<ReportWriter> chrome = a.chrome_trace.empty() ? nullptr : MakeReportWriter("chrome-trace");
  std::vector<ReportWriter*> consumers;
  if (html) consumers.push_back(html.get());
  if (chrome) consumers.push_back(chrome.get());
  OVERLAPPROF_ASSIGN_OR_RETURN(Summary summary, AnalyzeFiles(files, io, ao, 1, consumers, ro));
  if (!a.json_path.empty()) OVERLAPPROF_RETURN_IF_ERROR(WriteJsonFile(summary, a.json_path));
  if (chrome) {
    OVERLAPPROF_RETURN_IF_ERROR(
        WriteAtomically(a.chrome_trace, [&](std::ostream& o) { return chrome->Write(summary, ro, o); }));
    if (std::string note = chrome->Notice(); !note.empty())
      std::fprintf(stderr, "overlapprof: %s: %s\n", a.chrome_trace.c_str(), note.c_str());
  }
  if (html) OVERLAPPROF_RETURN_IF_ERROR(WriteAtomically(a.html_path, [&](std::ostream& o) { return html->Write(summary, {}, o); }));
  return DataQualityOutcome(summary, "data was lost");
}

}  // namespace overlapprof
