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

#include "analyzers/compare.h"
#include "reports/comparison.h"
#include "src/cli/command.h"
#include "src/cli/options.h"
#include "src/cli/pipeline.h"
#include "src/cli/registry.h"
#include "src/cli/subcommand.h"
#include "src/cli/output.h"
#include "src/cli/summary_input.h"
#include "src/common/utf8.h"
#include "src/io/input_file.h"

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

struct GateArgs {
  std::string base, next;  // a JSON summary, a trace file, or a directory of traces
  std::string policy_file;
  Policy policy;
  std::string markdown_path, junit_path;  // check: also write these ("-": stdout)
  std::string json_path;                  // --json: the comparison as JSON ("-": stdout, instead of the table)
  std::string step_range;                 // AnalysisOptions::step_range for traces
  bool allow_different_runs = false;      // compare runs that Differences() finds not comparable
  // Traces only: how they are read and analyzed, as `analyze` takes them (src/cli/options.h).
  ImportFlags import;               // --comm-kernel/--not-comm (after the policy's), --comm-timing, ...
  std::string iterations = "auto";  // --iterations
  int jobs = 0;                     // -j
  std::string color = "auto";       // --color
  bool force = false;               // --force: replace existing output files
};

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

StatusOr<RunView> LoadRun(const std::string& path, const GateArgs& a, const ImportFlags& flags, ImportOptions io) {
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
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<TraceInput> files, ExpandInputs({path}, flags.cache_dir, {}, {}, flags.exclude));
  OVERLAPPROF_RETURN_IF_ERROR(CompleteImportOptions(flags, files, io));
  AnalysisOptions ao;
  ao.step_range = a.step_range;
  ao.iterations = IterationModeNamed(a.iterations);
  OVERLAPPROF_ASSIGN_OR_RETURN(Summary s, AnalyzeFiles(files, io, ao, a.jobs));
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
  ImportFlags flags = a.import;
  flags.comm_kernel = a.policy.comm_kernel;
  flags.not_comm = a.policy.not_comm;
  flags.comm_kernel.insert(flags.comm_kernel.end(), a.import.comm_kernel.begin(), a.import.comm_kernel.end());
  flags.not_comm.insert(flags.not_comm.end(), a.import.not_comm.begin(), a.import.not_comm.end());
  OVERLAPPROF_ASSIGN_OR_RETURN(ImportOptions io, ImportOptionsOf(flags));
  ImportFlags patterns;  // an invalid pattern is an error before anything is read
  patterns.comm_kernel = flags.comm_kernel;
  patterns.not_comm = flags.not_comm;
  OVERLAPPROF_RETURN_IF_ERROR(CompleteImportOptions(patterns, {}, io));
  OVERLAPPROF_ASSIGN_OR_RETURN(l.base, LoadRun(a.base, a, flags, io));
  OVERLAPPROF_ASSIGN_OR_RETURN(l.next, LoadRun(a.next, a, flags, io));
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

CommandResult RunCompare(const GateArgs& a) {
  OVERLAPPROF_RETURN_IF_ERROR(CheckOutputPaths({{"--markdown", a.markdown_path}, {"--json", a.json_path}}, a.force));
  OVERLAPPROF_ASSIGN_OR_RETURN(Loaded l, Load(a));
  Comparison c = Compare(l.base, l.next, l.policy);
  OVERLAPPROF_RETURN_IF_ERROR(CheckComparable(a, l, c));
  if (a.json_path != "-") std::cout << RenderComparisonText(c, l.base, l.next, UseColor(a.color));
  if (!a.json_path.empty())
    OVERLAPPROF_RETURN_IF_ERROR(WriteText(a.json_path, RenderComparisonJson(c, l.base, l.next, "compare")));
  if (!a.markdown_path.empty())
    OVERLAPPROF_RETURN_IF_ERROR(WriteText(a.markdown_path, RenderComparisonMarkdown(c, l.base, l.next, "compare")));
  return Outcome::Ok();
}

CommandResult RunCheck(const GateArgs& a) {
  OVERLAPPROF_RETURN_IF_ERROR(
      CheckOutputPaths({{"--markdown", a.markdown_path}, {"--junit", a.junit_path}, {"--json", a.json_path}}, a.force));
  OVERLAPPROF_ASSIGN_OR_RETURN(Loaded l, Load(a));
  Comparison c = Compare(l.base, l.next, l.policy);
  if (Status comparable = CheckComparable(a, l, c); !comparable.ok()) {
    // Lost data decides before comparability (exit 4, as `analyze` on the new run exits): the
    // loss itself can make the runs look different.
    if (!c.data_lost) return comparable;
    c.notes.push_back("not comparable, shown because the new run lost data: " + comparable.message());
  }
  if (a.json_path != "-") std::cout << RenderComparisonText(c, l.base, l.next, UseColor(a.color));
  if (!a.json_path.empty())
    OVERLAPPROF_RETURN_IF_ERROR(WriteText(a.json_path, RenderComparisonJson(c, l.base, l.next, "check")));
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

// What compare and check take as analyze does (src/cli/options.h): the output's colour, and
// for traces how they are read and analyzed.
void AddTraceOptions(CLI::App& app, GateArgs& a) {
  app.add_option("--json", a.json_path,
                 "write the comparison as JSON (overlapprof.comparison/1) to FILE, '-' for stdout instead of the table");
  app.add_flag("--force", a.force, "replace existing output files");
  AddColorOption(app, a.color);
  AddJobsOption(app, a.jobs);
  AddCacheDirOption(app, a.import);
  AddCommPatternOptions(app, a.import.comm_kernel, a.import.not_comm);
  AddCommTimingOption(app, a.import);
  AddIterationsOption(app, a.iterations);
  AddRankByGpuOption(app, a.import);
  AddExcludeOption(app, a.import);
}

constexpr const char* kAllowDifferentRunsHelp =
    "compare runs of another world size, rank set or op mix (refused otherwise, exit 2)";

class CompareCommand : public Subcommand {
 public:
  std::string_view name() const override { return "compare"; }
  std::string_view description() const override {
    return "Compare two runs (traces, or JSON summaries): per metric, verdict";
  }
  std::string_view usage() const override { return "compare [OPTIONS] BASE NEW"; }
  void AddOptions(CLI::App& app) override {
    app.add_option("BASE", a_.base, "baseline: a JSON summary, a trace, or a directory of traces")->required();
    app.add_option("NEW", a_.next, "the run to compare with it")->required();
    app.add_option("--markdown", a_.markdown_path, "also write a Markdown table to FILE ('-': stdout)");
    AddStepRangeOption(app, a_.step_range, "host annotation that marks an iteration (traces only)");
    app.add_flag("--allow-different-runs", a_.allow_different_runs, kAllowDifferentRunsHelp);
    AddTraceOptions(app, a_);
  }
  CommandResult Run(const std::vector<std::string>&) override { return RunCompare(a_); }

 private:
  GateArgs a_;
};

// check's thresholds: the flags override the policy file's values (GateArgs::policy), only
// those given on the command line.
class CheckCommand : public Subcommand {
 public:
  std::string_view name() const override { return "check"; }
  std::string_view description() const override {
    return "CI gate: exit 0 pass, 1 regression, 3 inconclusive, 4 data lost, 2 usage (docs/ci-gate.md)";
  }
  std::string_view usage() const override { return "check [OPTIONS] TRACE --baseline BASE"; }
  void AddOptions(CLI::App& app) override {
    app.add_option("TRACE", a_.next, "the new run: a trace, a directory of traces, or a JSON summary")->required();
    app.add_option("--baseline", a_.base, "the baseline: a JSON summary (commit it) or traces")->required();
    max_drop_ = app.add_option("--max-overlap-drop", max_drop_pp_,
                               "fail when the overlap ratio drops by more than this many percentage points, 0 or "
                               "more (default 2)")
                    ->check(Quiet(CLI::NonNegativeNumber))
                    ->type_name("PP");
    max_increase_ = app.add_option("--max-exposed-comm-increase", max_increase_pct_,
                                   "fail when exposed communication per iteration grows by more than this %, 0 or "
                                   "more (default 10)")
                        ->check(Quiet(CLI::NonNegativeNumber))
                        ->type_name("PCT");
    max_loss_ = app.add_option("--max-data-loss", max_loss_count_,
                               "fail (exit 4) when the new run's error-severity counters total more, 0 or more "
                               "(default 0)")
                    ->check(Quiet(CLI::NonNegativeNumber))
                    ->type_name("N");
    max_step_ = app.add_option("--max-step-time-increase", max_step_pct_,
                               "fail when the step time grows by more than this %, 0 or more (default 5)")
                    ->check(Quiet(CLI::NonNegativeNumber))
                    ->type_name("PCT");
    min_effect_ = app.add_option("--min-effect-ms", min_effect_ms_,
                                 "a change smaller than this many ms per iteration (or 1% of the step) never fails "
                                 "(default 0.5; 0 switches this floor off, the 1% with it)")
                      ->check(Quiet(CLI::NonNegativeNumber))
                      ->type_name("MS");
    app.add_flag("--allow-different-runs", a_.allow_different_runs, kAllowDifferentRunsHelp);
    app.add_option("--policy", a_.policy_file, "JSON policy file with the same thresholds (flags override it)");
    app.add_option("--markdown", a_.markdown_path, "write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY; '-': stdout)");
    app.add_option("--junit", a_.junit_path, "write JUnit XML (a test case per gated metric)");
    AddStepRangeOption(app, a_.step_range, "host annotation that marks an iteration (traces only)");
    AddTraceOptions(app, a_);
  }
  CommandResult Run(const std::vector<std::string>&) override {
    if (!a_.policy_file.empty()) {
      OVERLAPPROF_ASSIGN_OR_RETURN(a_.policy, LoadPolicy(a_.policy_file, a_.policy));
    }
    if (max_drop_->count()) a_.policy.max_overlap_drop_pp = max_drop_pp_;
    if (max_increase_->count()) a_.policy.max_exposed_comm_increase_pct = max_increase_pct_;
    if (max_loss_->count()) a_.policy.max_data_loss = max_loss_count_;
    if (max_step_->count()) a_.policy.max_step_time_increase_pct = max_step_pct_;
    if (min_effect_->count()) a_.policy.min_effect_ms = min_effect_ms_;
    return RunCheck(a_);
  }

 private:
  GateArgs a_;
  double max_drop_pp_ = 0, max_increase_pct_ = 0, max_step_pct_ = 0, min_effect_ms_ = 0;
  int64_t max_loss_count_ = 0;
  CLI::Option *max_drop_ = nullptr, *max_increase_ = nullptr, *max_loss_ = nullptr, *max_step_ = nullptr,
              *min_effect_ = nullptr;
};

}  // namespace

std::unique_ptr<Subcommand> MakeCompareCommand() { return std::make_unique<CompareCommand>(); }
std::unique_ptr<Subcommand> MakeCheckCommand() { return std::make_unique<CheckCommand>(); }

}  // namespace overlapprof
