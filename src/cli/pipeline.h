#pragma once
// Input expansion and the analysis pipeline shared by the CLI commands: files are
// imported and analyzed one at a time, so memory depends on the largest file, not on
// the number of ranks.
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "analyzers/analyzer.h"
#include "analyzers/summary.h"
#include "reports/report.h"
#include "src/common/status.h"
#include "src/importers/importer.h"

namespace overlapprof {

// One input of a pass: a file, or one rank of a file holding several ("PATH#UNIT"), with the
// import session of its file (Importer::Open) when ExpandInputs opened it, shared by the file's
// ranks: what listing them learned (ranks built while listing, row counts) serves their imports.
// Made from a plain name, it has no session yet: ImportFile opens one for it.
struct TraceInput {
  TraceInput(std::string input);  // NOLINT(google-explicit-constructor): "PATH" or "PATH#UNIT" (SplitUnit)
  TraceInput(const char* input) : TraceInput(std::string(input)) {}  // NOLINT(google-explicit-constructor)
  TraceInput(std::string path, std::string unit, std::shared_ptr<ImportSession> session);
  operator const std::string&() const { return name; }  // NOLINT(google-explicit-constructor)

  std::string name;  // as errors and progress show it: PATH, or PATH#UNIT
  std::string path;  // the file
  std::string unit;  // its rank (ImportSession::Units), "" for the whole file
  std::shared_ptr<ImportSession> session;  // null: not opened yet
};
std::ostream& operator<<(std::ostream& os, const TraceInput& input);  // its name

// Files named on the command line, and the trace files found (recursively, sorted) in
// directories named there; a file holding several ranks becomes one "PATH#UNIT" per rank.
// Each file is opened once (Importer::Open) and its session kept in its inputs.
// In a directory, the files that are no traces are skipped, and one line on stderr per directory
// lists them with the reason: a name no trace has (not .json, .json.gz, .db, .sqlite, .sqlite3),
// a whole JSON document that is no trace (an object without "traceEvents" such as a generator's
// manifest, an overlapprof JSON summary), a name matching an `exclude` glob (fnmatch, against the
// path below the directory and against the file name). overlapprof's own reports are skipped
// without a word. A file that may be a trace (named like one, and not a whole JSON document that
// is clearly something else: too large to tell, or broken) is kept: its import reports what is
// wrong with it (exit 2).
// Errors: a missing path, a directory with no trace files, a multi-rank file that cannot be read.
// An Nsight Systems report (.nsys-rep) becomes its SQLite export, made by `nsys export` into
// `nsys_cache_dir` (empty: $TMPDIR/overlapprof-nsys-UID) and reused while the report is unchanged.
// `needs`: what the imports will ask for (Importer::Open; a hint for reading ahead).
// `options`: the sessions' options but for their store_needs (`needs` instead); the files are
// given their read-ahead budget in turn (ImportOptions::read_ahead_budget_bytes).
StatusOr<std::vector<TraceInput>> ExpandInputs(const std::vector<std::string>& args,
                                               const std::string& nsys_cache_dir = "",
                                               const TraceNeeds& needs = TraceNeeds{},
                                               const ImportOptions& options = ImportOptions{},
                                               const std::vector<std::string>& exclude = {});

// True for names the directory scan picks up (.json, .json.gz, .db, .sqlite, .sqlite3), except
// overlapprof's reports (*.summary.json, *.perfetto.json).
bool LooksLikeTraceFile(const std::string& filename);

// One input names a whole file ("PATH"), or one rank of a file holding several
// ("PATH#UNIT", from ImportSession::Units): ExpandInputs lists each rank of such a file. A name
// that exists as a file is never split.
std::pair<std::string, std::string> SplitUnit(const std::string& input);

// Imports one file (or one unit of it) through its session, opened here with the importer its
// first bytes select when the input has none. Errors carry the input.
StatusOr<RankTrace> ImportFile(const TraceInput& input, const ImportOptions& options);

// --rank-by-gpu (docs/nsys.md, "Ranks"): the ranks of Nsight Systems exports among `inputs`
// (ExpandInputs' "PATH#pidN.gpuM") numbered by their CUDA device, as torchrun's LOCAL_RANK picks
// it on one node. Returns the world size (the number of such ranks) for
// ImportOptions::rank_by_gpu_world; an error (kInvalidInput, one line) when a GPU holds two of
// them (ranks sharing a GPU, or exports of several nodes) or no input is such a rank.
StatusOr<int64_t> CheckRanksByGpu(const std::vector<TraceInput>& inputs);

// The default number of ranks imported at once: the CPUs this process may run on
// (sched_getaffinity: `taskset -c 0` gives 1), at most 256.
int DefaultJobs();

// The one pass: imports and analyzes every file, each read once; ranks ordered by rank
// (unknown last), then by input order. Every writer in `consumers` gets Begin before the first
// rank and ConsumeRank for each rank after the analyzers' AnalyzeRank (reports/report.h); the
// caller calls their Write on the returned summary.
// `jobs` > 1 imports up to `jobs` files at once on other threads, in input order, each thread
// also running the analyzers' PrepareRank on its rank (the per-rank work that needs that rank
// alone, analyzers/analyzer.h), and runs AnalyzeRank here in input order as they complete:
// faster on several cores, and at most `jobs` ranks are in memory at once (the ones being
// imported or prepared, and the one analyzed, which is one of them until it is freed).
// jobs == 1: one file at a time on this thread (memory bounded by the largest single file;
// buffers reused from one file to the next). jobs <= 0: DefaultJobs().
// Results and errors do not depend on `jobs`: an error is the first failing input's in input
// order, as one at a time.
StatusOr<Summary> AnalyzeFiles(const std::vector<TraceInput>& files, const ImportOptions& import_options,
                               const AnalysisOptions& analysis_options, int jobs = 0,
                               const std::vector<ReportWriter*>& consumers = {},
                               const ReportOptions& report_options = {});

}  // namespace overlapprof
