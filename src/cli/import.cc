// `overlapprof import TRACE... -o OUT`: PyTorch-profiler JSON and Nsight Systems exports into overlapprof stores,
// one per rank.
#include <cstdio>
#include <filesystem>

#include "src/cli/command.h"
#include "src/cli/options.h"
#include "src/cli/pipeline.h"
#include "src/cli/subcommand.h"
#include "src/common/utf8.h"
#include "src/store/writer.h"

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

struct ImportArgs {
  std::vector<std::string> inputs;
  std::string output;
  bool force = false;
  ImportFlags import;
};

// "dir/a.json.gz" -> "a"; one rank of a multi-rank file, "dir/r.sqlite#pid7.gpu1" -> "r.pid7.gpu1".
std::string StemOf(const TraceInput& input) {
  const std::string& unit = input.unit;
  std::string name = fs::path(input.path).filename().string();
  for (std::string_view ext : {".json.gz", ".json", ".db", ".sqlite3", ".sqlite", ".gz"}) {
    if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0) {
      name.resize(name.size() - ext.size());
      break;
    }
  }
  return unit.empty() ? name : name + "." + unit;
}

CommandResult RunImport(const ImportArgs& a) {
  OVERLAPPROF_ASSIGN_OR_RETURN(ImportOptions io, ImportOptionsOf(a.import));
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<TraceInput> files,
                               ExpandInputs(a.inputs, a.import.cache_dir, TraceNeeds::All(), {}, a.import.exclude));
  std::error_code ec;
  if (files.size() > 1 && !fs::is_directory(a.output, ec) &&
      (a.output.ends_with(".db") || a.output.ends_with(".sqlite") || a.output.ends_with(".sqlite3")))
    return MakeError(StatusCode::kInvalidArgument,
                     "-o {}: {} ranks make {} stores, and this names one file: give a directory (-o DIR/)", a.output,
                     files.size(), files.size());
  bool to_dir = files.size() > 1 || fs::is_directory(a.output, ec) || (!a.output.empty() && a.output.back() == '/');
  if (to_dir) {
    fs::create_directories(a.output, ec);
    if (ec) return MakeError(StatusCode::kIo, "{}: cannot create directory: {}", a.output, ec.message());
  }
  OVERLAPPROF_RETURN_IF_ERROR(CompleteImportOptions(a.import, files, io));
  ImportScratch scratch;  // the document buffer and JSON parser, reused for every file
  io.scratch = &scratch;
  for (const TraceInput& in : files) {
    OVERLAPPROF_ASSIGN_OR_RETURN(RankTrace t, ImportFile(in, io));
    std::string out = to_dir ? (fs::path(a.output) / (StemOf(in) + ".db")).string() : a.output;
    OVERLAPPROF_RETURN_IF_ERROR(WriteStore(t, out, a.force).WithPrefix(out));
    std::printf("%s -> %s (%zu GPU activities, %zu communication ops)\n", EscapeForTerminal(in.name).c_str(),
                EscapeForTerminal(out).c_str(), t.activities.size(), t.comm_ops.size());
  }
  return Outcome::Ok();
}

class ImportCommand : public Subcommand {
 public:
  std::string_view name() const override { return "import"; }
  std::string_view description() const override {
    return "Convert PyTorch-profiler JSON traces and Nsight Systems exports into overlapprof stores";
  }
  std::string_view usage() const override { return "import [OPTIONS] INPUT... -o OUTPUT"; }
  void AddOptions(CLI::App& app) override {
    app.add_option("INPUT", a_.inputs, "trace files or directories")->required();
    app.add_option("-o,--output", a_.output, "output file (one input) or directory")->required();
    app.add_flag("--force", a_.force, "replace existing output files");
    AddTsUnitOption(app, a_.import, "unit of Chrome-trace ts/dur: us (default) or ns");
    AddCacheDirOption(app, a_.import);
    AddRankByGpuOption(app, a_.import);
    AddExcludeOption(app, a_.import);
  }
  CommandResult Run(const std::vector<std::string>&) override { return RunImport(a_); }

 private:
  ImportArgs a_;
};

}  // namespace

std::unique_ptr<Subcommand> MakeImportCommand() { return std::make_unique<ImportCommand>(); }

}  // namespace overlapprof
