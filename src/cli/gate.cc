// The CI gate's command-line side: loads both runs as JSON summaries (a committed summary is
// read as it is; traces are analyzed first), compares them (analyzers/compare.h), prints the
// table and the values that decided, and maps the gate's verdict to the exit code.
#include "src/cli/gate.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "src/cli/command.h"
#include "src/cli/pipeline.h"
#include "src/cli/registry.h"
#include "src/common/utf8.h"
#include "src/io/input_file.h"

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

}  // namespace

bool IsSummaryFile(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::path(path).extension() != ".json") return false;
  std::ifstream f(path, std::ios::binary);
  std::string head(4096, '\0');
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(f.gcount()));
  return head.find("\"overlapprof.summary/") != std::string::npos;
}

namespace {

StatusOr<RunView> LoadRun(const std::string& path, const std::string& step_range,
                          const std::shared_ptr<const CommPatterns>& patterns) {
  if (IsSummaryFile(path)) {
    // Read as the traces are (src/io/input_file.h), in one streaming pass (ReadSummary): NaN /
    // Infinity refuse the summary (exit 2); a key given twice keeps its first value, with a
    // warning (docs/schema.md).
    OVERLAPPROF_ASSIGN_OR_RETURN(InputBuffer text, ReadInputFile(path));
    std::vector<std::string> duplicates;
    StatusOr<RunView> v = ReadSummary(std::string_view(text.data(), text.size()), path, &duplicates);
    for (const std::string& d : duplicates)
      std::fprintf(stderr, "overlapprof: warning: %s: key \"%s\" given twice in one object: the first value is used\n",
                   EscapeForTerminal(path).c_str(), EscapeForTerminal(d).c_str());
    return v;
  }
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<TraceInput> files, ExpandInputs({path}));
  ImportOptions io;
  io.comm_patterns = patterns;
  AnalysisOptions ao;
  ao.step_range = step_range;
  OVERLAPPROF_ASSIGN_OR_RETURN(Summary s, AnalyzeFiles(files, io, ao, DefaultJobs()));
  std::ostringstream out;
  OVERLAPPROF_RETURN_IF_ERROR(MakeReportWriter("json")->Write(s, {}, out));
  return ReadSummary(out.str(), path, nullptr);
}

Status WriteText(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return OkStatus();
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return MakeError(StatusCode::kIo, "{}: cannot write", path);
  f << text;
  f.close();
  if (!f) return MakeError(StatusCode::kIo, "{}: write failed", path);
  return OkStatus();
}

struct Loaded {
  RunView base, next;
  Policy policy;
};

StatusOr<Loaded> Load(const GateArgs& a) {
  Loaded l;
  l.policy = a.policy;
  for (const std::string& w : a.policy.warnings) std::fprintf(stderr, "overlapprof: warning: %s\n", EscapeForTerminal(w).c_str());
  // The policy file's patterns, then the flags'.
  std::vector<std::string> add = a.policy.comm_kernel, veto = a.policy.not_comm;
  add.insert(add.end(), a.comm_kernel.begin(), a.comm_kernel.end());
  veto.insert(veto.end(), a.not_comm.begin(), a.not_comm.end());
  OVERLAPPROF_ASSIGN_OR_RETURN(std::shared_ptr<const CommPatterns> patterns, MakeCommPatterns(add, veto));
  OVERLAPPROF_ASSIGN_OR_RETURN(l.base, LoadRun(a.base, a.step_range, patterns));
  OVERLAPPROF_ASSIGN_OR_RETURN(l.next, LoadRun(a.next, a.step_range, patterns));
  return l;
}

// Refuses runs that are not comparable (exit 2, one line), or with --allow-different-runs
// notes what differs above the table.
Status CheckComparable(const GateArgs& a, const Loaded& l, Comparison& c) {
  std::vector<std::string> d = Differences(l.base, l.next, l.policy);
  if (d.empty()) return OkStatus();
  std::string what;
  for (const std::string& x : d) what += (what.empty() ? "" : "; ") + x;
  if (!a.allow_different_runs)
    return MakeError(StatusCode::kInvalidInput,
                     "the runs are not comparable: {} (--allow-different-runs to compare them anyway)", what);
  c.notes.push_back("the runs differ: " + what);
  return OkStatus();
}

}  // namespace

CommandResult RunCompare(const GateArgs& a) {
  OVERLAPPROF_ASSIGN_OR_RETURN(Loaded l, Load(a));
  Comparison c = Compare(l.base, l.next, l.policy);
  OVERLAPPROF_RETURN_IF_ERROR(CheckComparable(a, l, c));
  std::cout << RenderComparisonText(c, l.base, l.next);
  if (!a.markdown_path.empty())
    OVERLAPPROF_RETURN_IF_ERROR(WriteText(a.markdown_path, RenderComparisonMarkdown(c, l.base, l.next, "compare")));
  return Outcome::Ok();
}

CommandResult RunCheck(const GateArgs& a) {
  OVERLAPPROF_ASSIGN_OR_RETURN(Loaded l, Load(a));
  Comparison c = Compare(l.base, l.next, l.policy);
  if (Status comparable = CheckComparable(a, l, c); !comparable.ok()) {
    // Lost data decides before comparability (exit 4, as `analyze` on the new run exits): the
    // loss itself can make the runs look different.
    if (!c.data_lost) return comparable;
    c.notes.push_back("not comparable, shown because the new run lost data: " + comparable.message());
  }
  std::cout << RenderComparisonText(c, l.base, l.next);
  if (!a.markdown_path.empty())
    OVERLAPPROF_RETURN_IF_ERROR(WriteText(a.markdown_path, RenderComparisonMarkdown(c, l.base, l.next, "check")));
  if (!a.junit_path.empty()) OVERLAPPROF_RETURN_IF_ERROR(WriteText(a.junit_path, RenderComparisonJUnit(c, l.base, l.next)));
  std::cout.flush();
  // The one line that decided, on stderr, so CI logs show it without the table.
  if (c.data_lost) {
    std::fprintf(stderr, "overlapprof: check failed: %s\n", EscapeForTerminal(c.data_lost_why).c_str());
    return Outcome::DataLost();
  }
  for (const MetricResult& m : c.metrics) {
    if (m.gated && m.verdict == Verdict::kRegressed) {
      std::fprintf(stderr, "overlapprof: check failed: %s regressed from %.2f to %.2f %s: %s\n", EscapeForTerminal(m.name).c_str(),
                   m.base, m.next, m.unit.c_str(), EscapeForTerminal(m.why).c_str());
    }
  }
  if (c.gate == Verdict::kRegressed) return Outcome::Regression();
  if (c.gate == Verdict::kInconclusive) {
    for (const MetricResult& m : c.metrics)
      if (m.gated && m.verdict == Verdict::kInconclusive)
        std::fprintf(stderr, "overlapprof: check inconclusive: %s: %s\n", EscapeForTerminal(m.name).c_str(),
                     EscapeForTerminal(m.why).c_str());
    return Outcome::Inconclusive();
  }
  std::fprintf(stderr, "overlapprof: check passed (%s)\n", VerdictName(c.gate));
  return Outcome::Ok();
}

}  // namespace overlapprof
