// `overlapprof whatif TRACE... [--scenario SPEC]...`: `analyze --what-if` that prints only the
// "what would help" table (docs/what-if.md), the custom scenarios after the built-in ones.
#include <iostream>

#include "reports/what_if_report.h"
#include "src/cli/command.h"
#include "src/cli/options.h"
#include "src/cli/pipeline.h"
#include "src/cli/subcommand.h"

namespace overlapprof {
namespace {

struct WhatIfArgs {
  std::vector<std::string> traces;
  std::vector<std::string> scenarios;
  std::string step_range;
  std::string iterations = "auto";
  bool what_if = true;  // AddPassOptions declares --what-if; here it is always on
  ImportFlags import;
};

CommandResult RunWhatIf(const WhatIfArgs& a) {
  OVERLAPPROF_ASSIGN_OR_RETURN(ImportOptions io, ImportOptionsOf(a.import));
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<whatif::ScenarioSpec> scenarios, whatif::ParseScenarios(a.scenarios));
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<TraceInput> files,
                               ExpandInputs(a.traces, a.import.cache_dir, TraceNeeds{.host_calls = true}));
  OVERLAPPROF_RETURN_IF_ERROR(CompleteImportOptions(a.import, files, io));
  AnalysisOptions ao;
  ao.step_range = a.step_range;
  ao.iterations = IterationModeNamed(a.iterations);
  ao.what_if = true;
  ao.scenarios = std::move(scenarios);
  OVERLAPPROF_ASSIGN_OR_RETURN(Summary summary, AnalyzeFiles(files, io, ao, DefaultJobs(), {}));
  WriteWhatIfTable(summary, std::cout);
  std::cout.flush();
  return DataQualityOutcome(summary, "data was lost, the predictions above are not trustworthy");
}

class WhatIfCommand : public Subcommand {
 public:
  std::string_view name() const override { return "whatif"; }
  std::string_view description() const override {
    return "Predict what changes would gain (analyze --what-if, only the \"what would help\" table)";
  }
  std::string_view usage() const override { return "whatif [OPTIONS] TRACE... [--scenario SPEC]..."; }
  void AddOptions(CLI::App& app) override {
    app.add_option("TRACE", a_.traces, "trace files or directories of them")->required();
    AddTsUnitOption(app, a_.import, "unit of Chrome-trace ts/dur: us (the format's, default) or ns");
    AddNoVerifyOption(app, a_.import);
    AddStepRangeOption(app, a_.step_range,
                       "host annotation (NVTX or record_function) that marks an iteration, instead of ProfilerStep#N");
    AddPassOptions(app, a_.import, a_.iterations, a_.what_if);
    AddScenarioOption(app, a_.scenarios);
  }
  CommandResult Run(const std::vector<std::string>&) override { return RunWhatIf(a_); }

 private:
  WhatIfArgs a_;
};

}  // namespace

std::unique_ptr<Subcommand> MakeWhatIfCommand() { return std::make_unique<WhatIfCommand>(); }

}  // namespace overlapprof
