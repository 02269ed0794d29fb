// overlapprof command line: the options of each subcommand and the dispatch to it (one file per
// subcommand in src/cli/, command.h). Every failure ends in one line on stderr and an exit code
// from src/common/exit_codes.h, mapped in one place (ExitCodeOf); nothing is allowed to escape
// as an uncaught exception.
#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "overlapprof/version.h"
#include "src/cli/command.h"
#include "src/cli/gate.h"
#include "src/cli/run.h"
#include "src/common/memory.h"

namespace overlapprof {
namespace {

// Help: each subcommand's usage line as it is really called (CLI11 cannot show `run`'s "--"
// or check's required --baseline).
class Formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    static const std::pair<const char*, const char*> kUsage[] = {
        {"analyze", "analyze [OPTIONS] TRACE..."},
        {"import", "import [OPTIONS] INPUT... -o OUTPUT"},
        {"run", "run [OPTIONS] -- CMD [ARGS...]"},
        {"report", "report [OPTIONS] TRACE... --chrome-trace FILE | --json FILE | --html FILE"},
        {"compare", "compare [OPTIONS] BASE NEW"},
        {"check", "check [OPTIONS] TRACE --baseline BASE"},
    };
    for (const auto& [sub, usage] : kUsage)
      if (app->get_name() == sub) return std::string("Usage: overlapprof ") + usage + "\n";
    return CLI::Formatter::make_usage(app, std::move(name));
  }
};

// A validator without its description, so that help shows the option's own words for its
// range ("1 to 256") instead of "INT:INT in [1 - 256]".
CLI::Validator Quiet(CLI::Validator v) { return v.description(""); }

// Every subcommand's arguments, filled in by CLI11 when it parses the command line.
struct Commands {
  AnalyzeArgs aa;
  ImportArgs ia;
  RunArgs ra;
  ReportArgs pa;
  GateArgs ca, ka;
  double max_drop = 0, max_increase = 0, max_step = 0, min_effect = 0;  // check: flags that override the policy file
  int64_t max_loss = 0;
  CLI::App *analyze = nullptr, *import = nullptr, *run = nullptr, *report = nullptr, *compare = nullptr,
           *check = nullptr;
  CLI::Option *o_drop = nullptr, *o_inc = nullptr, *o_loss = nullptr, *o_step = nullptr, *o_effect = nullptr;
};

// --comm-kernel / --not-comm (docs/classification.md), repeatable.
void AddCommPatternOptions(CLI::App* app, std::vector<std::string>& comm_kernel, std::vector<std::string>& not_comm) {
  app->add_option("--comm-kernel", comm_kernel,
                  "kernels whose name matches REGEX are communication (repeatable; docs/classification.md)")
      ->allow_extra_args(false)
      ->type_name("REGEX");
  app->add_option("--not-comm", not_comm,
                  "kernels whose name matches REGEX are never communication, unless an NCCL record says so (repeatable)")
      ->allow_extra_args(false)
      ->type_name("REGEX");
}

// --comm-timing (docs/nccl-profiler.md, "timing_source").
void AddCommTimingOption(CLI::App* app, std::string& comm_timing) {
  app->add_option("--comm-timing", comm_timing,
                  "auto: communication timed per operation by NCCL's profiler plugin where the trace has it, else "
                  "by its kernels (default); kernels: by its kernels always")
      ->check(Quiet(CLI::IsMember({"auto", "kernels"})))
      ->type_name("SOURCE");
}

// --iterations (docs/analyzers.md, "Iterations").
void AddIterationsOption(CLI::App* app, std::string& iterations) {
  app->add_option("--iterations", iterations,
                  "where iteration windows come from: auto (ProfilerStep/--step-range markers, else detected from the "
                  "trace; default), markers (markers only), pattern (detected, markers ignored)")
      ->check(Quiet(CLI::IsMember({"auto", "markers", "pattern"})))
      ->type_name("MODE");
}

// --rank-by-gpu (docs/nsys.md, "Ranks").
void AddRankByGpuOption(CLI::App* app, bool& rank_by_gpu) {
  app->add_flag("--rank-by-gpu", rank_by_gpu,
                "Nsight Systems exports that do not say their ranks (one nsys around torchrun): number each "
                "rank by its CUDA device, as LOCAL_RANK does on one node with one GPU per rank");
}

// The subcommands and their options.
void DefineCommands(CLI::App& app, Commands& c) {
  AnalyzeArgs& aa = c.aa;
  ImportArgs& ia = c.ia;
  RunArgs& ra = c.ra;
  ReportArgs& pa = c.pa;
  GateArgs& ca = c.ca;
  GateArgs& ka = c.ka;
  double& max_drop = c.max_drop;
  double& max_increase = c.max_increase;
  int64_t& max_loss = c.max_loss;
  CLI::App* analyze = app.add_subcommand("analyze", "Analyze traces (PyTorch-profiler JSON, Nsight Systems SQLite exports, overlapprof stores)");
  analyze->add_option("TRACE", aa.traces, "trace files or directories of them")->required();
  analyze->add_option("--json", aa.json_path, "write the JSON summary (overlapprof.summary/1) to FILE, '-' for stdout");
  analyze->add_flag("--per-iteration", aa.per_iteration, "print the per-iteration table");
  analyze->add_option("--ts-unit", aa.ts_unit, "unit of Chrome-trace ts/dur: us (the format's, default) or ns");
  analyze->add_flag("--no-verify", aa.no_verify, "skip SQLite quick_check on store files (trusted files only)");
  analyze->add_option("--color", aa.color, "auto (TTY and no NO_COLOR, the default), always or never")
      ->check(Quiet(CLI::IsMember({"auto", "always", "never"})))
      ->type_name("WHEN");
  analyze->add_option("-j,--jobs", aa.jobs,
                      "read up to N traces at once on other threads, each with its rank's own analysis (at most N "
                      "ranks in memory; 1: one at a time on this thread; the output is the same); 1 to 256, default: "
                      "the CPUs this process may use")
      ->check(Quiet(CLI::Range(1, 256)))
      ->type_name("N");
  analyze->add_option("--step-range", aa.step_range,
                      "host annotation (NVTX or record_function) that marks an iteration, instead of ProfilerStep#N");
  constexpr const char* kCacheDirHelp = "directory for the SQLite exports of .nsys-rep inputs (default $TMPDIR/overlapprof-nsys-UID)";
  analyze->add_option("--cache-dir", aa.cache_dir, kCacheDirHelp)->type_name("DIR");
  AddCommPatternOptions(analyze, aa.comm_kernel, aa.not_comm);
  AddCommTimingOption(analyze, aa.comm_timing);
  AddIterationsOption(analyze, aa.iterations);
  AddRankByGpuOption(analyze, aa.rank_by_gpu);

  CLI::App* import = app.add_subcommand("import", "Convert PyTorch-profiler JSON traces and Nsight Systems exports into overlapprof stores");
  import->add_option("INPUT", ia.inputs, "trace files or directories")->required();
  import->add_option("-o,--output", ia.output, "output file (one input) or directory")->required();
  import->add_flag("--force", ia.force, "replace existing output files");
  import->add_option("--ts-unit", ia.ts_unit, "unit of Chrome-trace ts/dur: us (default) or ns");
  import->add_option("--cache-dir", ia.cache_dir, kCacheDirHelp)->type_name("DIR");
  AddRankByGpuOption(import, ia.rank_by_gpu);

  CLI::App* run = app.add_subcommand(
      "run", "Run a training command with the injector and record every rank (overlapprof run -- CMD ARGS...)");
  run->add_option("-o,--output", ra.output_dir, "directory for the rank files, refused if it holds a trace or is a symbolic link (default: a new overlapprof-YYYYmmdd-HHMMSS)");
  run->add_option("--flush-ms", ra.flush_ms,
                  "commit the rank files at least this often, in ms from 10 to 600000 (10 minutes); bounds what "
                  "SIGKILL loses")
      ->check(Quiet(CLI::Range(10, 600000)))
      ->type_name("MS");
  run->add_flag("--no-analyze", ra.no_analyze, "only record; do not analyze afterwards");
  run->add_flag("--force", ra.force,
                "record into an output directory that already holds traces, or into the directory a symbolic "
                "link -o names");
  run->add_option("--wait-s", ra.wait_s,
                  "after the command exits, wait at most this long (0 to 86400 s, default 30) for the processes it "
                  "left behind (workers started in the background or with setsid) and those still writing rank files")
      ->check(Quiet(CLI::Range(0, 86400)))
      ->type_name("S");
  run->add_option("--nccl-detail", ra.nccl_detail,
                  "what NCCL's profiler plugin reports beyond each operation's GPU time: 'proxy' adds the proxy "
                  "thread's network progress (ProxyOp/ProxyStep counts per operation; more events, more cost)")
      ->check(Quiet(CLI::IsMember({"proxy"})))
      ->type_name("proxy");
  // Everything from the first positional argument (or after "--") is the command, passed on
  // untouched, its own options included.
  run->prefix_command();
  run->allow_extras();

  CLI::App* report = app.add_subcommand("report", "Write report files: Chrome trace for Perfetto, JSON summary, HTML page");
  report->add_option("TRACE", pa.traces, "trace files or directories of them")->required();
  report->add_option("--chrome-trace", pa.chrome_trace, "Chrome trace JSON for Perfetto UI / chrome://tracing (NAME.json.gz: gzip)");
  report->add_option("--json", pa.json_path, "the JSON summary (overlapprof.summary/1), '-' for stdout");
  report->add_option("--html", pa.html_path, "self-contained HTML report (opens offline in a browser; docs/html-report.md)");
  report->add_option("--step-range", pa.step_range, "host annotation that marks an iteration, instead of ProfilerStep#N");
  report->add_option("--trace-iterations", pa.trace_iterations,
                     "Chrome trace: the iterations to keep: 'all', or 0-based indices like 0,5,10-12 (default: everything "
                     "when it fits the budget, else the slowest, median and first steady iteration per rank)");
  report->add_option("--trace-budget", pa.trace_budget_mb,
                     "Chrome trace: size budget in MB of JSON, more than 0 (default 100)")
      ->check(Quiet(CLI::PositiveNumber))
      ->type_name("MB");
  report->add_option("--cache-dir", pa.cache_dir, kCacheDirHelp)->type_name("DIR");
  AddCommPatternOptions(report, pa.comm_kernel, pa.not_comm);
  AddCommTimingOption(report, pa.comm_timing);
  AddIterationsOption(report, pa.iterations);
  AddRankByGpuOption(report, pa.rank_by_gpu);

  CLI::App* compare = app.add_subcommand("compare", "Compare two runs (traces, or JSON summaries): per metric, verdict");
  compare->add_option("BASE", ca.base, "baseline: a JSON summary, a trace, or a directory of traces")->required();
  compare->add_option("NEW", ca.next, "the run to compare with it")->required();
  compare->add_option("--markdown", ca.markdown_path, "also write a Markdown table to FILE ('-': stdout)");
  compare->add_option("--step-range", ca.step_range, "host annotation that marks an iteration (traces only)");
  compare->add_flag("--allow-different-runs", ca.allow_different_runs,
                    "compare runs of another world size, rank set or op mix (refused otherwise, exit 2)");
  AddCommPatternOptions(compare, ca.comm_kernel, ca.not_comm);

  CLI::App* check = app.add_subcommand(
      "check", "CI gate: exit 0 pass, 1 regression, 3 inconclusive, 4 data lost, 2 usage (docs/ci-gate.md)");
  check->add_option("TRACE", ka.next, "the new run: a trace, a directory of traces, or a JSON summary")->required();
  check->add_option("--baseline", ka.base, "the baseline: a JSON summary (commit it) or traces")->required();
  CLI::Option* o_drop = check->add_option("--max-overlap-drop", max_drop,
                                          "fail when the overlap ratio drops by more than this many percentage points, 0 "
                                          "or more (default 2)")
                            ->check(Quiet(CLI::NonNegativeNumber))
                            ->type_name("PP");
  CLI::Option* o_inc = check->add_option("--max-exposed-comm-increase", max_increase,
                                         "fail when exposed communication per iteration grows by more than this %, 0 or "
                                         "more (default 10)")
                           ->check(Quiet(CLI::NonNegativeNumber))
                           ->type_name("PCT");
  CLI::Option* o_loss = check->add_option("--max-data-loss", max_loss,
                                          "fail (exit 4) when the new run's error-severity counters total more, 0 or more "
                                          "(default 0)")
                            ->check(Quiet(CLI::NonNegativeNumber))
                            ->type_name("N");
  c.o_step = check->add_option("--max-step-time-increase", c.max_step,
                               "fail when the step time grows by more than this %, 0 or more (default 5)")
                   ->check(Quiet(CLI::NonNegativeNumber))
                   ->type_name("PCT");
  c.o_effect = check->add_option("--min-effect-ms", c.min_effect,
                                 "a change smaller than this many ms per iteration (or 1% of the step) never fails "
                                 "(0 or more, default 0.5)")
                   ->check(Quiet(CLI::NonNegativeNumber))
                   ->type_name("MS");
  check->add_flag("--allow-different-runs", ka.allow_different_runs,
                  "compare runs of another world size, rank set or op mix (refused otherwise, exit 2)");
  check->add_option("--policy", ka.policy_file, "JSON policy file with the same thresholds (flags override it)");
  check->add_option("--markdown", ka.markdown_path, "write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY; '-': stdout)");
  check->add_option("--junit", ka.junit_path, "write JUnit XML (a test case per gated metric)");
  check->add_option("--step-range", ka.step_range, "host annotation that marks an iteration (traces only)");
  AddCommPatternOptions(check, ka.comm_kernel, ka.not_comm);
  c.analyze = analyze, c.import = import, c.run = run, c.report = report, c.compare = compare, c.check = check;
  c.o_drop = o_drop, c.o_inc = o_inc, c.o_loss = o_loss;
}

// Runs the subcommand that was parsed; `after_dashes`: `run`'s command after "--".
CommandResult Dispatch(Commands& c, const std::vector<std::string>& after_dashes) {
  if (c.analyze->parsed()) return RunAnalyze(c.aa);
  if (c.import->parsed()) return RunImport(c.ia);
  if (c.compare->parsed()) return RunCompare(c.ca);
  if (c.report->parsed()) return RunReport(c.pa);
  if (c.check->parsed()) {
    GateArgs& ka = c.ka;
    if (!ka.policy_file.empty()) {
      OVERLAPPROF_ASSIGN_OR_RETURN(ka.policy, LoadPolicy(ka.policy_file, ka.policy));
    }
    if (c.o_drop->count()) ka.policy.max_overlap_drop_pp = c.max_drop;
    if (c.o_inc->count()) ka.policy.max_exposed_comm_increase_pct = c.max_increase;
    if (c.o_loss->count()) ka.policy.max_data_loss = c.max_loss;
    if (c.o_step->count()) ka.policy.max_step_time_increase_pct = c.max_step;
    if (c.o_effect->count()) ka.policy.min_effect_ms = c.min_effect;
    return RunCheck(ka);
  }
  if (c.run->parsed()) {
    c.ra.command = c.run->remaining();
    c.ra.command.insert(c.ra.command.end(), after_dashes.begin(), after_dashes.end());
    return RunCommand(c.ra, [](const std::string& dir) {
      AnalyzeArgs a;
      a.traces = {dir};
      a.report_dir = dir;
      return RunAnalyze(a);
    });
  }
  return MakeError(StatusCode::kInvalidArgument, "no command given (see overlapprof --help)");
}

int Main(int argc, char** argv) {
  CLI::App app{"overlapprof: how well communication is hidden behind computation in distributed training"};
  app.set_version_flag("--version", std::string("overlapprof ") + kToolVersion);
  app.require_subcommand(1);

  app.formatter(std::make_shared<Formatter>());  // before the subcommands: they copy it
  Commands commands;
  DefineCommands(app, commands);
  if (argc > 1 && argv[1][0] != '-' && std::string_view(argv[1]) != "analyze" &&
      std::string_view(argv[1]) != "import" && std::string_view(argv[1]) != "run" &&
      std::string_view(argv[1]) != "compare" && std::string_view(argv[1]) != "check" &&
      std::string_view(argv[1]) != "report") {
    return ExitCodeOf(MakeError(StatusCode::kInvalidArgument,
                                "unknown command '{}' (commands: analyze, import, run, report, compare, check; see "
                                "overlapprof --help)",
                                argv[1]));
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
    return ExitCodeOf(MakeError(StatusCode::kInvalidArgument, "{} (see overlapprof --help)", e.what()));
  }
  return ExitCodeOf(Dispatch(commands, after_dashes));
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
  // Ranks are read and prepared on worker threads (-j): one arena, so that what one rank freed
  // serves the next whichever thread has it (a thread's own arena maps its large blocks apart and
  // unmaps them when freed), and the heap below is the only one.
  mallopt(M_ARENA_MAX, 1);
  // Huge pages under the heap the ranks fill (interval unions, op records, the JSON summary's rows):
  // a first rank's ~100 MB then take a few hundred page faults instead of ~25,000 (src/common/memory.h).
  overlapprof::AdviseHugePagesForHeap(size_t{768} << 20);
  try {
    return overlapprof::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    return overlapprof::ExitCodeOf(overlapprof::MakeError(overlapprof::StatusCode::kInternal, "out of memory"));
  } catch (const std::exception& e) {
    return overlapprof::ExitCodeOf(
        overlapprof::MakeError(overlapprof::StatusCode::kInternal, "internal error: {}", e.what()));
  }
}
