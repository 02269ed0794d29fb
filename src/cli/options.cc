#include "src/cli/options.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>

#include "src/cli/command.h"
#include "src/cli/pipeline.h"

namespace overlapprof {

CLI::Validator Quiet(CLI::Validator v) { return v.description(""); }

void AddTsUnitOption(CLI::App& app, ImportFlags& flags, const char* help) {
  app.add_option("--ts-unit", flags.ts_unit, help);
}

void AddNoVerifyOption(CLI::App& app, ImportFlags& flags) {
  app.add_flag("--no-verify", flags.no_verify, "skip SQLite quick_check on store files (trusted files only)");
}

void AddCacheDirOption(CLI::App& app, ImportFlags& flags) {
  app.add_option("--cache-dir", flags.cache_dir,
                 "directory for the SQLite exports of .nsys-rep inputs (default $TMPDIR/overlapprof-nsys-UID)")
      ->type_name("DIR");
}

void AddCommPatternOptions(CLI::App& app, std::vector<std::string>& comm_kernel, std::vector<std::string>& not_comm) {
  app.add_option("--comm-kernel", comm_kernel,
                 "kernels whose name matches REGEX are communication (repeatable; docs/classification.md)")
      ->allow_extra_args(false)
      ->type_name("REGEX");
  app.add_option("--not-comm", not_comm,
                 "kernels whose name matches REGEX are never communication, unless an NCCL record says so (repeatable)")
      ->allow_extra_args(false)
      ->type_name("REGEX");
}

void AddCommTimingOption(CLI::App& app, ImportFlags& flags) {
  app.add_option("--comm-timing", flags.comm_timing,
                 "auto: communication timed per operation by NCCL's profiler plugin where the trace has it, else "
                 "by its kernels (default); kernels: by its kernels always")
      ->check(Quiet(CLI::IsMember({"auto", "kernels"})))
      ->type_name("SOURCE");
}

void AddRankByGpuOption(CLI::App& app, ImportFlags& flags) {
  app.add_flag("--rank-by-gpu", flags.rank_by_gpu,
               "Nsight Systems exports that do not say their ranks (one nsys around torchrun): number each "
               "rank by its CUDA device, as LOCAL_RANK does on one node with one GPU per rank");
}

void AddStepRangeOption(CLI::App& app, std::string& step_range, const char* help) {
  app.add_option("--step-range", step_range, help);
}

void AddExcludeOption(CLI::App& app, ImportFlags& flags) {
  app.add_option("--exclude", flags.exclude,
                 "leave out the files of input directories whose name, or path below the directory, matches GLOB "
                 "(repeatable; they are listed as skipped)")
      ->allow_extra_args(false)
      ->type_name("GLOB");
}

void AddWhatIfOption(CLI::App& app, bool& what_if) {
  app.add_flag("--what-if", what_if,
               "model the step's dependencies across ranks, replay it, and predict what each change would gain "
               "(docs/what-if.md; reads every host call)");
}

void AddScenarioOption(CLI::App& app, std::vector<std::string>& specs) {
  app.add_option("--scenario", specs,
                 "predict a custom change (repeatable; implies --what-if): comm*K, host*K, kernel~REGEX*K, "
                 "rank=R:median, ddp.bucket_cap_mb=X, ddp.compress=bf16|fp16, ddp.accumulate=N, fsdp.prefetch=+1, "
                 "pp.slowest=median (docs/what-if.md)")
      ->allow_extra_args(false)
      ->type_name("SPEC");
}

void AddPassOptions(CLI::App& app, ImportFlags& import, std::string& iterations, bool& what_if) {
  AddCacheDirOption(app, import);
  AddCommPatternOptions(app, import.comm_kernel, import.not_comm);
  AddCommTimingOption(app, import);
  AddIterationsOption(app, iterations);
  AddWhatIfOption(app, what_if);
  AddRankByGpuOption(app, import);
  AddExcludeOption(app, import);
}

void AddIterationsOption(CLI::App& app, std::string& iterations) {
  app.add_option("--iterations", iterations,
                 "where iteration windows come from: auto (ProfilerStep/--step-range markers, else detected from the "
                 "trace; default), markers (markers only), pattern (detected, markers ignored)")
      ->check(Quiet(CLI::IsMember({"auto", "markers", "pattern"})))
      ->type_name("MODE");
}

void AddColorOption(CLI::App& app, std::string& color) {
  app.add_option("--color", color, "auto (TTY and no NO_COLOR, the default), always or never")
      ->check(Quiet(CLI::IsMember({"auto", "always", "never"})))
      ->type_name("WHEN");
}

bool UseColor(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;
  return ::isatty(STDOUT_FILENO) == 1;
}

bool TerminalIsUtf8() {
  const char* locale = nullptr;
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* v = std::getenv(name);
    if (v && *v) {
      locale = v;
      break;
    }
  }
  if (!locale) return false;
  std::string l(locale);
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return l.find("utf-8") != std::string::npos || l.find("utf8") != std::string::npos;
}

void AddJobsOption(CLI::App& app, int& jobs) {
  app.add_option("-j,--jobs", jobs,
                 "read up to N traces at once on other threads, each with its rank's own analysis (at most N "
                 "ranks in memory; 1: one at a time on this thread; the output is the same); 1 to 256, default: "
                 "the CPUs this process may use")
      ->check(Quiet(CLI::Range(1, 256)))
      ->type_name("N");
}

void AddTerminalOptions(CLI::App& app, TerminalFlags& flags) {
  app.add_option("--ranks", flags.ranks,
                 "ranks the per-rank tables show: all, or a list like 0,3,8-11 (default: every rank up to 8, "
                 "else the ones that matter: slowest, fastest, most exposed, stragglers, outliers)")
      ->type_name("all|LIST");
  app.add_flag("--brief", flags.brief, "print the verdict and the run's headline figures only");
  app.add_option("--top", flags.top, "print at most N findings (default 5; all of them are in --json)")
      ->check(Quiet(CLI::NonNegativeNumber))
      ->type_name("N");
}

Status ApplyTerminalFlags(const TerminalFlags& flags, ReportOptions& ro) {
  ro.brief = flags.brief;
  ro.top_findings = flags.top;
  ro.all_ranks = flags.ranks == "all";
  if (flags.ranks.empty() || ro.all_ranks) return OkStatus();
  // A list: N or N-M, comma-separated.
  std::string_view rest = flags.ranks;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    int64_t lo = 0, hi = 0;
    const size_t dash = item.find('-');
    auto parse = [](std::string_view t, int64_t& v) {
      if (t.empty() || t.size() > 9) return false;
      v = 0;
      for (char c : t) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + (c - '0');
      }
      return true;
    };
    const bool ok = dash == std::string_view::npos
                        ? parse(item, lo) && (hi = lo, true)
                        : parse(item.substr(0, dash), lo) && parse(item.substr(dash + 1), hi) && lo <= hi &&
                              hi - lo < 1000000;
    if (!ok)
      return MakeError(StatusCode::kInvalidArgument,
                       "--ranks {}: not 'all' nor a list of ranks like 0,3,8-11", flags.ranks);
    for (int64_t r = lo; r <= hi; ++r) ro.ranks.push_back(r);
  }
  return OkStatus();
}

StatusOr<ImportOptions> ImportOptionsOf(const ImportFlags& flags) {
  ImportOptions io;
  OVERLAPPROF_ASSIGN_OR_RETURN(io.kineto.time_exp, ParseTsUnit(flags.ts_unit));
  io.store_quick_check = !flags.no_verify;
  io.kernel_timing_only = flags.comm_timing == "kernels";
  return io;
}

Status CompleteImportOptions(const ImportFlags& flags, const std::vector<TraceInput>& files, ImportOptions& io) {
  OVERLAPPROF_ASSIGN_OR_RETURN(io.comm_patterns, MakeCommPatterns(flags.comm_kernel, flags.not_comm));
  if (flags.rank_by_gpu) {
    OVERLAPPROF_ASSIGN_OR_RETURN(io.nsys.rank_by_gpu_world, CheckRanksByGpu(files));
  }
  return OkStatus();
}

}  // namespace overlapprof
