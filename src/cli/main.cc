// overlapprof command line. Every failure ends in one line on stderr and an exit code
// from src/common/exit_codes.h; nothing is allowed to escape as an uncaught exception.
#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>

#include "overlapprof/version.h"
#include "src/common/exit_codes.h"
#include "src/cli/gate.h"
#include "src/cli/run.h"
#include "reports/chrome_trace.h"
#include "reports/html_report.h"
#include "src/pipeline.h"
#include "src/registry.h"
#include "src/store/writer.h"

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

// One line on stderr, always: embedded newlines (e.g. from SQLite) become spaces.
int Fail(const Status& st) {
  std::string line = st.message();
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "overlapprof: error: %s\n", line.c_str());
  return st.code() == StatusCode::kInternal ? kExitInternal : kExitUsageOrInput;
}

bool UseColor(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;
  return ::isatty(STDOUT_FILENO) == 1;
}

StatusOr<int> TimeExp(const std::string& unit) {
  if (unit == "us") return 3;
  if (unit == "ns") return 0;
  return MakeError(StatusCode::kInvalidArgument, "--ts-unit must be us or ns, not '{}'", unit);
}

Status WriteJsonFile(const Summary& summary, const std::string& path) {
  std::unique_ptr<ReportWriter> json = MakeReportWriter("json");
  if (path == "-") return json->Write(summary, {}, std::cout);
  std::string tmp = path + ".partial";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return MakeError(StatusCode::kIo, "{}: cannot write", path);
    OVERLAPPROF_RETURN_IF_ERROR(json->Write(summary, {}, f).WithPrefix(path));
    f.close();
    if (!f) return MakeError(StatusCode::kIo, "{}: write failed", path);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return MakeError(StatusCode::kIo, "{}: cannot rename into place: {}", path, ec.message());
  return OkStatus();
}

struct AnalyzeArgs {
  std::vector<std::string> traces;
  std::string json_path;
  bool per_iteration = false;
  std::string ts_unit = "us";
  bool no_verify = false;
  std::string color = "auto";
  int jobs = 1;
  std::string step_range;
  // `run`: also write the reports into this directory (overlap.summary.json,
  // overlap.perfetto.json, overlap.report.html), beside the rank files.
  std::string report_dir;
};

// Writes `path` through `write` into path.partial, renamed into place only when complete.
Status WriteAtomically(const std::string& path, const std::function<Status(std::ostream&)>& write) {
  const std::string tmp = path + ".partial";
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  if (!f) return MakeError(StatusCode::kIo, "{}: cannot write", path);
  Status st = write(f);
  f.close();
  if (st.ok() && !f) st = MakeError(StatusCode::kIo, "write failed");
  if (!st.ok()) {
    std::remove(tmp.c_str());
    return st.WithPrefix(path);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return MakeError(StatusCode::kIo, "{}: cannot rename into place: {}", path, ec.message());
  return OkStatus();
}

int RunAnalyze(const AnalyzeArgs& a) {
  StatusOr<int> exp = TimeExp(a.ts_unit);
  if (!exp.ok()) return Fail(exp.status());
  StatusOr<std::vector<std::string>> files = ExpandInputs(a.traces);
  if (!files.ok()) return Fail(files.status());
  ImportOptions io;
  io.kineto_time_exp = *exp;
  io.store_quick_check = !a.no_verify;
  AnalysisOptions ao;
  ao.step_range = a.step_range;
  // `run`: the HTML page takes its timelines from this same pass.
  std::unique_ptr<ReportWriter> html = a.report_dir.empty() ? nullptr : MakeReportWriter("html");
  std::vector<ReportWriter*> consumers;
  if (html) consumers.push_back(html.get());
  StatusOr<Summary> summary = AnalyzeFiles(*files, io, ao, a.jobs, consumers);
  if (!summary.ok()) return Fail(summary.status());

  if (!a.json_path.empty()) {
    Status st = WriteJsonFile(*summary, a.json_path);
    if (!st.ok()) return Fail(st);
  }
  if (!a.report_dir.empty()) {
    const std::string json = (fs::path(a.report_dir) / "overlap.summary.json").string();
    const std::string chrome = (fs::path(a.report_dir) / "overlap.perfetto.json").string();
    if (Status st = WriteJsonFile(*summary, json); !st.ok()) return Fail(st);
    if (Status st = WriteAtomically(chrome, [&](std::ostream& o) { return WriteChromeTrace(*files, io, *summary, o); });
        !st.ok())
      return Fail(st);
    const std::string html_path = (fs::path(a.report_dir) / "overlap.report.html").string();
    if (Status st = WriteAtomically(html_path, [&](std::ostream& o) { return html->Write(*summary, {}, o); }); !st.ok())
      return Fail(st);
    std::fprintf(stderr, "overlapprof: reports: %s, %s (open in ui.perfetto.dev), %s\n", json.c_str(), chrome.c_str(),
                 html_path.c_str());
  }
  if (a.json_path != "-") {
    ReportOptions ro;
    ro.per_iteration = a.per_iteration;
    ro.color = UseColor(a.color);
    Status st = MakeReportWriter("terminal")->Write(*summary, ro, std::cout);
    if (!st.ok()) return Fail(st);
  }
  std::cout.flush();
  if (int errors = summary->ErrorCounters(); errors > 0) {
    std::fprintf(stderr,
                 "overlapprof: error: %d data-quality counter(s) of severity error are set: data was lost, "
                 "the figures above are not trustworthy\n",
                 errors);
    return kExitDataQuality;
  }
  return kExitOk;
}

struct ReportArgs {
  std::vector<std::string> traces;
  std::string chrome_trace, json_path, html_path;
  std::string step_range;
};

// `report`: the files a user opens or automates on. Each output goes to FILE.partial first.
int RunReport(const ReportArgs& a) {
  if (a.chrome_trace.empty() && a.json_path.empty() && a.html_path.empty())
    return Fail(MakeError(StatusCode::kInvalidArgument,
                          "report: name at least one output (--chrome-trace FILE, --json FILE, --html FILE)"));
  StatusOr<std::vector<std::string>> files = ExpandInputs(a.traces);
  if (!files.ok()) return Fail(files.status());
  ImportOptions io;
  AnalysisOptions ao;
  ao.step_range = a.step_range;
  std::unique_ptr<ReportWriter> html = a.html_path.empty() ? nullptr : MakeReportWriter("html");
  std::vector<ReportWriter*> consumers;
  if (html) consumers.push_back(html.get());
  StatusOr<Summary> summary = AnalyzeFiles(*files, io, ao, 1, consumers);
  if (!summary.ok()) return Fail(summary.status());
  if (!a.json_path.empty())
    if (Status st = WriteJsonFile(*summary, a.json_path); !st.ok()) return Fail(st);
  if (!a.chrome_trace.empty()) {
    std::string tmp = a.chrome_trace + ".partial";
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Fail(MakeError(StatusCode::kIo, "{}: cannot write", a.chrome_trace));
    Status st = WriteChromeTrace(*files, io, *summary, f);
    f.close();
    if (st.ok() && !f) st = MakeError(StatusCode::kIo, "write failed");
    if (!st.ok()) {
      std::remove(tmp.c_str());
      return Fail(st.WithPrefix(a.chrome_trace));
    }
    std::error_code ec;
    fs::rename(tmp, a.chrome_trace, ec);
    if (ec) return Fail(MakeError(StatusCode::kIo, "{}: cannot rename into place: {}", a.chrome_trace, ec.message()));
  }
  if (!a.html_path.empty())
    if (Status st = WriteAtomically(a.html_path, [&](std::ostream& o) { return html->Write(*summary, {}, o); });
        !st.ok())
      return Fail(st);
  if (int errors = summary->ErrorCounters(); errors > 0) {
    std::fprintf(stderr, "overlapprof: error: %d data-quality counter(s) of severity error are set: data was lost\n", errors);
    return kExitDataQuality;
  }
  return kExitOk;
}

struct ImportArgs {
  std::vector<std::string> inputs;
  std::string output;
  bool force = false;
  std::string ts_unit = "us";
};

// "dir/a.json.gz" -> "a"; one rank of a multi-rank file, "dir/r.sqlite#pid7.gpu1" -> "r.pid7.gpu1".
std::string StemOf(const std::string& input) {
  auto [path, unit] = SplitUnit(input);
  std::string name = fs::path(path).filename().string();
  for (std::string_view ext : {".json.gz", ".json", ".db", ".sqlite3", ".sqlite", ".gz"}) {
    if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0) {
      name.resize(name.size() - ext.size());
      break;
    }
  }
  return unit.empty() ? name : name + "." + unit;
}

int RunImport(const ImportArgs& a) {
  StatusOr<int> exp = TimeExp(a.ts_unit);
  if (!exp.ok()) return Fail(exp.status());
  StatusOr<std::vector<std::string>> files = ExpandInputs(a.inputs);
  if (!files.ok()) return Fail(files.status());
  std::error_code ec;
  bool to_dir = files->size() > 1 || fs::is_directory(a.output, ec) || (!a.output.empty() && a.output.back() == '/');
  if (to_dir) {
    fs::create_directories(a.output, ec);
    if (ec) return Fail(MakeError(StatusCode::kIo, "{}: cannot create directory: {}", a.output, ec.message()));
  }
  ImportOptions io;
  io.kineto_time_exp = *exp;
  ImportScratch scratch;  // the document buffer and JSON parser, reused for every file
  io.scratch = &scratch;
  for (const std::string& in : *files) {
    StatusOr<RankTrace> t = ImportFile(in, io);
    if (!t.ok()) return Fail(t.status());
    std::string out = to_dir ? (fs::path(a.output) / (StemOf(in) + ".db")).string() : a.output;
    Status st = WriteStore(*t, out, a.force);
    if (!st.ok()) return Fail(st.WithPrefix(out));
    std::printf("%s -> %s (%zu GPU activities, %zu communication ops)\n", in.c_str(), out.c_str(),
                t->activities.size(), t->comm_ops.size());
  }
  return kExitOk;
}

int Main(int argc, char** argv) {
  CLI::App app{"overlapprof: how well communication is hidden behind computation in distributed training"};
  app.set_version_flag("--version", std::string("overlapprof ") + kToolVersion);
  app.require_subcommand(1);

  AnalyzeArgs aa;
  CLI::App* analyze = app.add_subcommand("analyze", "Analyze traces (PyTorch-profiler JSON, Nsight Systems SQLite exports, overlapprof stores)");
  analyze->add_option("TRACE", aa.traces, "trace files or directories of them")->required();
  analyze->add_option("--json", aa.json_path, "write the JSON summary (overlapprof.summary/1) to FILE, '-' for stdout");
  analyze->add_flag("--per-iteration", aa.per_iteration, "print the per-iteration table");
  analyze->add_option("--ts-unit", aa.ts_unit, "unit of Chrome-trace ts/dur: us (the format's, default) or ns");
  analyze->add_flag("--no-verify", aa.no_verify, "skip SQLite quick_check on store files (trusted files only)");
  analyze->add_option("--color", aa.color, "auto (TTY and no NO_COLOR), always, never");
  analyze->add_option("-j,--jobs", aa.jobs, "import up to N-1 traces ahead on other threads (N ranks in memory)")
      ->check(CLI::Range(1, 256));
  analyze->add_option("--step-range", aa.step_range,
                      "host annotation (NVTX or record_function) that marks an iteration, instead of ProfilerStep#N");

  ImportArgs ia;
  CLI::App* import = app.add_subcommand("import", "Convert PyTorch-profiler JSON traces and Nsight Systems exports into overlapprof stores");
  import->add_option("INPUT", ia.inputs, "trace files or directories")->required();
  import->add_option("-o,--output", ia.output, "output file (one input) or directory")->required();
  import->add_flag("--force", ia.force, "replace existing output files");
  import->add_option("--ts-unit", ia.ts_unit, "unit of Chrome-trace ts/dur: us (default) or ns");

  RunArgs ra;
  CLI::App* run = app.add_subcommand(
      "run", "Run a training command with the injector and record every rank (overlapprof run -- CMD ARGS...)");
  run->add_option("-o,--output", ra.output_dir, "directory for the rank files (default overlapprof-YYYYmmdd-HHMMSS)");
  run->add_option("--flush-ms", ra.flush_ms, "commit the rank files at least this often (ms); bounds what SIGKILL loses")
      ->check(CLI::Range(10, 600000));
  run->add_flag("--no-analyze", ra.no_analyze, "only record; do not analyze afterwards");
  // Everything from the first positional argument (or after "--") is the command, passed on
  // untouched, its own options included.
  run->prefix_command();
  run->allow_extras();

  ReportArgs pa;
  CLI::App* report = app.add_subcommand("report", "Write report files: Chrome trace for Perfetto, JSON summary, HTML page");
  report->add_option("TRACE", pa.traces, "trace files or directories of them")->required();
  report->add_option("--chrome-trace", pa.chrome_trace, "Chrome trace JSON for Perfetto UI / chrome://tracing");
  report->add_option("--json", pa.json_path, "the JSON summary (overlapprof.summary/1), '-' for stdout");
  report->add_option("--html", pa.html_path, "self-contained HTML report (opens offline in a browser; docs/html-report.md)");
  report->add_option("--step-range", pa.step_range, "host annotation that marks an iteration, instead of ProfilerStep#N");

  GateArgs ca;
  CLI::App* compare = app.add_subcommand("compare", "Compare two runs (traces, or JSON summaries): per metric, verdict");
  compare->add_option("BASE", ca.base, "baseline: a JSON summary, a trace, or a directory of traces")->required();
  compare->add_option("NEW", ca.next, "the run to compare with it")->required();
  compare->add_option("--markdown", ca.markdown_path, "also write a Markdown table to FILE ('-': stdout)");
  compare->add_option("--step-range", ca.step_range, "host annotation that marks an iteration (traces only)");

  GateArgs ka;
  double max_drop = 0, max_increase = 0;
  int64_t max_loss = 0;
  CLI::App* check = app.add_subcommand(
      "check", "CI gate: exit 0 pass, 1 regression, 3 inconclusive, 4 data lost, 2 usage (docs/ci-gate.md)");
  check->add_option("TRACE", ka.next, "the new run: a trace, a directory of traces, or a JSON summary")->required();
  check->add_option("--baseline", ka.base, "the baseline: a JSON summary (commit it) or traces")->required();
  CLI::Option* o_drop = check->add_option("--max-overlap-drop", max_drop,
                                          "fail when the overlap ratio drops by more than this many percentage points (default 2)")
                            ->check(CLI::NonNegativeNumber);
  CLI::Option* o_inc = check->add_option("--max-exposed-comm-increase", max_increase,
                                         "fail when exposed communication per iteration grows by more than this % (default 10)")
                           ->check(CLI::NonNegativeNumber);
  CLI::Option* o_loss = check->add_option("--max-data-loss", max_loss,
                                          "fail (exit 4) when the new run's error-severity counters total more (default 0)")
                            ->check(CLI::NonNegativeNumber);
  check->add_option("--policy", ka.policy_file, "JSON policy file with the same thresholds (flags override it)");
  check->add_option("--markdown", ka.markdown_path, "write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY; '-': stdout)");
  check->add_option("--junit", ka.junit_path, "write JUnit XML (a test case per gated metric)");
  check->add_option("--step-range", ka.step_range, "host annotation that marks an iteration (traces only)");

  if (argc > 1 && argv[1][0] != '-' && std::string_view(argv[1]) != "analyze" &&
      std::string_view(argv[1]) != "import" && std::string_view(argv[1]) != "run" &&
      std::string_view(argv[1]) != "compare" && std::string_view(argv[1]) != "check" &&
      std::string_view(argv[1]) != "report") {
    std::fprintf(stderr,
                 "overlapprof: error: unknown command '%s' (commands: analyze, import, run, report, compare, check; see "
                 "overlapprof --help)\n",
                 argv[1]);
    return kExitUsageOrInput;
  }
  // `run ... -- CMD ARGS`: everything after the first "--" is the command, untouched.
  std::vector<std::string> after_dashes;
  if (argc > 1 && std::string_view(argv[1]) == "run") {
    for (int i = 2; i < argc; ++i) {
      if (std::string_view(argv[i]) == "--") {
        after_dashes.assign(argv + i + 1, argv + argc);
        argc = i;
        break;
      }
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "overlapprof: error: %s (see overlapprof --help)\n", e.what());
    return kExitUsageOrInput;
  }
  if (analyze->parsed()) return RunAnalyze(aa);
  if (import->parsed()) return RunImport(ia);
  if (compare->parsed()) return RunCompare(ca);
  if (report->parsed()) return RunReport(pa);
  if (check->parsed()) {
    if (!ka.policy_file.empty()) {
      StatusOr<Policy> p = LoadPolicy(ka.policy_file, ka.policy);
      if (!p.ok()) return Fail(p.status());
      ka.policy = *p;
    }
    if (o_drop->count()) ka.policy.max_overlap_drop_pp = max_drop;
    if (o_inc->count()) ka.policy.max_exposed_comm_increase_pct = max_increase;
    if (o_loss->count()) ka.policy.max_data_loss = max_loss;
    return RunCheck(ka);
  }
  if (run->parsed()) {
    ra.command = run->remaining();
    ra.command.insert(ra.command.end(), after_dashes.begin(), after_dashes.end());
    return RunCommand(ra, [](const std::string& dir) {
      AnalyzeArgs a;
      a.traces = {dir};
      a.report_dir = dir;
      return RunAnalyze(a);
    });
  }
  return kExitUsageOrInput;
}

}  // namespace
}  // namespace overlapprof

int main(int argc, char** argv) {
  // Ranks are processed one after another with buffers of similar size (RankTrace
  // vectors, timeline sets, chunk reads: tens to hundreds of MB). Serve them from the
  // heap and keep freed memory there for the next rank, instead of mmap/munmap per
  // allocation, which faulted every page in again for every rank (158k -> 26k minor faults
  // for 8 imported ranks, see docs/performance.md). Buffers over 1 GiB are still mapped.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  try {
    return overlapprof::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "overlapprof: error: out of memory\n");
    return overlapprof::kExitInternal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "overlapprof: error: internal error: %s\n", e.what());
    return overlapprof::kExitInternal;
  }
}
