#pragma once
// Writes RankTraces into a store file (src/store/schema.h, docs/schema.md).
//
// Two modes:
//  - kBulk (`overlapprof import`): writes `<path>.partial` with the journal off, in
//    batches, then creates the indexes, switches to journal_mode=DELETE and renames the
//    file into place. A crash leaves no half-written store under the final name.
//  - kLive (the injector's background writer): WAL, synchronous=NORMAL, one
//    transaction per Append batch, so a killed process loses at most the open batch.
// Not thread-safe: one thread owns a StoreWriter.
#include <memory>
#include <string_view>
#include <utility>
#include <string>

#include "src/common/status.h"
#include "src/store/sqlite_util.h"
#include "src/trace/model.h"

namespace overlapprof {

class StoreWriter {
 public:
  enum class Mode { kBulk, kLive };
  struct Options {
    Mode mode = Mode::kBulk;
    bool overwrite = false;       // replace an existing file at `path`
    size_t rows_per_batch = 1 << 16;  // kBulk: commit every this many rows
    // Also write activities, host calls and comm ops as SQL rows (gpu_activity, host_call,
    // comm_op) beside the chunks analysis reads. The injector turns it off: chunks only, for
    // throughput (comm_op rows are added after the job: MaterializeCommOpRows).
    bool row_copies = true;
  };

  StoreWriter();
  ~StoreWriter();
  StoreWriter(const StoreWriter&) = delete;
  StoreWriter& operator=(const StoreWriter&) = delete;

  // Creates the file and its schema, and writes `meta`.
  Status Open(const std::string& path, const RunMeta& meta, const Options& options);
  // Appends `trace` (meta and stats excepted). Contract for repeated calls: the
  // dictionaries (names, devices, streams, comm_ops) are cumulative, and only entries
  // beyond those already written are added; the rows (activities, host_calls, ranges)
  // are a delta, all written. Dictionaries are written before the rows that refer to
  // them. In kLive mode one call is one transaction; kBulk commits every rows_per_batch.
  Status Append(const RankTrace& trace);
  // kLive helpers for the injector (writer_live.cc); each is one transaction.
  // Rewrites the run's meta fields (the injector learns the rank from a communicator).
  Status UpdateMeta(const RunMeta& meta);
  // Sets one meta key to a text value.
  Status PutMeta(std::string_view key, std::string_view value);
  // Sets one meta key to an integer value.
  Status PutMeta(std::string_view key, int64_t value);
  // Sets the trace-clock times of every nccl_profiler_op row from its raw GPU times and
  // `offset_ns` (the rank's measured %globaltimer → trace clock offset; copy-engine rows,
  // flag 2, keep their host times).
  Status RetimeNcclPluginOps(int64_t offset_ns);
  // Writes the stats table now (replacing earlier values), so a killed process leaves the
  // counters of its last flush; `int_meta` keys are set in the same transaction (the
  // injector's meta last_commit_ns).
  Status WriteStats(const StatCounters& stats, const std::vector<ExtraStat>& extra = {},
                    const std::vector<std::pair<std::string_view, int64_t>>& int_meta = {});
  // Writes the stats table (replacing earlier values), the indexes, and closes. In kBulk
  // mode it also renames the partial file into place.
  Status Finish(const StatCounters& stats, const std::vector<ExtraStat>& extra = {});
  // kLive, after a failed write: rolls back what the failed transaction left open, then one
  // small transaction: meta recording_state = "write_failed" and the stats table.
  Status MarkWriteFailed(const StatCounters& stats, const std::vector<ExtraStat>& extra = {});
  // Closes without finishing; a kBulk partial file is removed.
  void Abort();

 private:
  struct Statements;
  Status WriteMeta(const RunMeta& meta);
  Status Begin();
  Status Commit();
  // Append's phases (writer.cc), in the order Append runs them.
  Status AppendDictionaries(const RankTrace& t);
  Status AppendCommOps(const RankTrace& t);
  Status AppendChunks(const RankTrace& t);
  Status AppendExternalCorrelations(const RankTrace& t);
  Status AppendEventLinks(const RankTrace& t);
  Status AppendActivityAndHostCallRows(const RankTrace& t);
  Status AppendRangeRows(const RankTrace& t);
  Status AppendNcclPluginOps(const RankTrace& t);
  template <typename Encode>
  Status WriteChunks(Stmt& q, int64_t& next_chunk, int64_t first_id, size_t n, Encode encode);
  // After each row or chunk: in kBulk mode, commits every rows_per_batch rows.
  Status RowDone();

  Db db_;
  std::unique_ptr<Statements> stmts_;
  Options options_;
  std::string final_path_, write_path_;
  // Ids already written, so repeated Append calls continue from there.
  size_t strings_written_ = 0, streams_written_ = 0, comm_ops_written_ = 0, devices_written_ = 0;
  int64_t next_activity_id_ = 0, next_host_call_id_ = 0, next_range_id_ = 0, next_plugin_op_id_ = 0;
  int64_t next_activity_chunk_ = 0, next_host_call_chunk_ = 0, next_comm_op_chunk_ = 0, next_range_chunk_ = 0;
  size_t rows_in_tx_ = 0;  // rows in the open kBulk transaction
  bool open_ = false;
};

// Shared by the writer's phases and MaterializeCommOpRows (writer.cc), not an API.
namespace store_detail {
extern const char kInsertCommOpSql[];  // INSERT INTO comm_op(...) with 18 parameters
extern const char kInsertStatSql[];    // INSERT OR REPLACE INTO stats(...)
// Binds `c` as the comm_op row `id` and steps `q` (prepared from kInsertCommOpSql).
Status InsertCommOp(Stmt& q, int64_t id, const CommOp& c);
// Every counter of stats.def (zeros too), then `extra`, through `q` (kInsertStatSql).
Status InsertStats(Stmt& q, const StatCounters& stats, const std::vector<ExtraStat>& extra);
}  // namespace store_detail

// For a store written without row copies (the injector's): fills the `comm_op` rows from
// `comm_op_chunk`, in one transaction, so ops are queryable with SQL. `overlapprof run` calls
// it after the job. A no-op when the rows are already there or the store has row copies.
Status MaterializeCommOpRows(const std::string& path);

// True when a store holds no record at all: no GPU activity, host call, range, NCCL call,
// communicator or plugin op, and every counter zero. A process that initialized CUDA with the
// injector in it and did nothing else leaves one (torchrun's agent, a launcher): `overlapprof
// run` removes it rather than show an empty rank.
StatusOr<bool> StoreRecordsNothing(const std::string& path);

// Convenience: import-style write of a whole trace to `path` (kBulk).
Status WriteStore(const RankTrace& trace, const std::string& path, bool overwrite);

}  // namespace overlapprof
