#include "src/cli/options.h"

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
}

void AddIterationsOption(CLI::App& app, std::string& iterations) {
  app.add_option("--iterations", iterations,
                 "where iteration windows come from: auto (ProfilerStep/--step-range markers, else detected from the "
                 "trace; default), markers (markers only), pattern (detected, markers ignored)")
      ->check(Quiet(CLI::IsMember({"auto", "markers", "pattern"})))
      ->type_name("MODE");
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
