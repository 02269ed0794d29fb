// `overlapprof import TRACE... -o OUT`: PyTorch-profiler JSON and Nsight Systems exports into overlapprof stores,
// one per rank.
#include <cstdio>
#include <filesystem>

#include "src/cli/command.h"
#include "src/cli/pipeline.h"
#include "src/common/utf8.h"
#include "src/store/writer.h"

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

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

}  // namespace

CommandResult RunImport(const ImportArgs& a) {
  OVERLAPPROF_ASSIGN_OR_RETURN(int exp, ParseTsUnit(a.ts_unit));
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<TraceInput> files, ExpandInputs(a.inputs, a.cache_dir, TraceNeeds::All()));
  std::error_code ec;
  bool to_dir = files.size() > 1 || fs::is_directory(a.output, ec) || (!a.output.empty() && a.output.back() == '/');
  if (to_dir) {
    fs::create_directories(a.output, ec);
    if (ec) return MakeError(StatusCode::kIo, "{}: cannot create directory: {}", a.output, ec.message());
  }
  ImportOptions io;
  io.kineto.time_exp = exp;
  if (a.rank_by_gpu) {
    OVERLAPPROF_ASSIGN_OR_RETURN(io.nsys.rank_by_gpu_world, CheckRanksByGpu(files));
  }
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

}  // namespace overlapprof
