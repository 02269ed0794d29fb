#pragma once
// The importer interface. An importer opens one input file as a session (Importer::Open), which
// turns it into one RankTrace, or, for a format holding several ranks in one file (an Nsight
// Systems export: one per process and GPU), lists them (ImportSession::Units) and turns each
// into a RankTrace (ImportSession::Import). What an importer learns about a file (its ranks,
// rows read ahead) lives in the session, never in process-wide state.
// A format's own functions and option struct are declared in its folder (kineto/kineto.h,
// nsys/nsys.h, rocprof/rocprof.h), not here.
// To add one: a file in src/importers/ with a factory, and one line in src/cli/registry.inc.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/status.h"
#include "src/importers/kineto/kineto_options.h"
#include "src/importers/nsys/nsys_options.h"
#include "src/io/input_file.h"
#include "src/trace/classify.h"
#include "src/trace/model.h"

namespace overlapprof {

// Buffers kept from one import to the next by a single thread (the analysis pipeline
// with --jobs 1): their pages are already resident, which saves the kernel zeroing a
// GB-sized buffer again for every rank. Peak memory is unchanged (one file at a time).
struct ImportScratch {
  InputBuffer buffer;                 // the decompressed document
  std::vector<uint8_t> compressed;    // gzip bytes while inflating
  std::shared_ptr<void> json_parser;  // simdjson::ondemand::parser, made by the Kineto importer
};

// What tests and benchmarks watch of imports beyond their traces (ImportOptions::observer);
// production passes none. Counted from any thread.
struct ImportObserver {
  // Ranks that sessions read whole while listing their files (ImportSession::Units).
  std::atomic<uint64_t> ranks_built_while_listing{0};
  // Of them, ranks imported from what the listing read (ImportSession::Import).
  std::atomic<uint64_t> ranks_imported_from_listing{0};
  // Events of traceEvents that the Kineto importer's index walker (KinetoImportOptions::
  // index_walk) read, added once per region it indexed: for tests that it is used.
  std::atomic<uint64_t> kineto_index_walked_events{0};
};

// Every importer's options. A format's own knobs are in its struct, declared in its folder.
struct ImportOptions {
  KinetoImportOptions kineto;  // src/importers/kineto/kineto_options.h
  NsysImportOptions nsys;      // src/importers/nsys/nsys_options.h
  // PRAGMA quick_check of the SQLite inputs (stores; Nsight Systems exports: the tables read
  // through SQL): --no-verify turns it off.
  bool store_quick_check = true;
  // What to read beyond activities, comm ops and step ranges (every format). Analysis asks
  // only for what its analyzers need (Analyzer::needs); `import` keeps everything.
  TraceNeeds store_needs = TraceNeeds::All();
  ImportScratch* scratch = nullptr;  // optional; never shared between threads
  // Bytes that sessions may hold read ahead of their imports (ranks built while listing), all
  // the files of one ExpandInputs together: each file is given what the ones before it left.
  uint64_t read_ahead_budget_bytes = uint64_t{1} << 30;
  ImportObserver* observer = nullptr;  // optional, for tests; shared between threads
  // --comm-kernel / --not-comm (src/trace/classify.h), applied after import by ImportFile
  // (src/cli/pipeline.h), to every format; null: none. Shared, read-only.
  std::shared_ptr<const CommPatterns> comm_patterns;
  // --comm-timing kernels: drop NCCL profiler plugin ops after import (ImportFile), so that
  // communication is timed by its kernels as without the plugin (docs/nccl-profiler.md).
  bool kernel_timing_only = false;
};

// One input file opened by its importer, for as long as the pipeline reads it (the pipeline
// holds one per file and hands it to every rank of that file). Units and Import may be called
// from several threads at once (the ranks of one file imported in parallel, each unit once);
// a session guards its own state.
class ImportSession {
 public:
  virtual ~ImportSession() = default;
  // The ranks the file holds when it can hold several, as keys for Import (the pipeline then
  // imports them one at a time, as "PATH#KEY"); empty: the file is one rank. Called at most
  // once, before the imports.
  virtual StatusOr<std::vector<std::string>> Units() { return std::vector<std::string>{}; }
  // One rank: `unit` one of Units(), or "" for the whole file (an error when it holds several).
  virtual StatusOr<RankTrace> Import(const std::string& unit, const ImportOptions& options) = 0;
  // Bytes held now, read ahead of the imports (ImportOptions::read_ahead_budget_bytes).
  virtual uint64_t ReadAheadBytes() const { return 0; }
};

class Importer {
 public:
  virtual ~Importer() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  // How sure this importer is that it reads the file, from its first bytes (raw, not
  // decompressed): 0 = not mine. The highest score wins.
  virtual int Probe(std::string_view head) const = 0;
  // A session over the file at `path`, with the options its imports will have. Their
  // `store_needs` is a hint here: what the imports will ask for, so that the session may read
  // ahead what they take (the Nsight Systems importer builds the ranks while listing them when
  // no host calls are asked for). Errors about the file's content come from Units or Import, as
  // they are reached.
  virtual StatusOr<std::unique_ptr<ImportSession>> Open(const std::string& path, const ImportOptions& options) const = 0;
};

// An importer of a format holding one rank per file and keeping nothing from one import to
// the next: its sessions call Import(path, options) (the unit is ignored).
class OneRankImporter : public Importer {
 public:
  virtual StatusOr<RankTrace> Import(const std::string& path, const ImportOptions& options) const = 0;
  StatusOr<std::unique_ptr<ImportSession>> Open(const std::string& path, const ImportOptions& options) const final;
};

}  // namespace overlapprof
