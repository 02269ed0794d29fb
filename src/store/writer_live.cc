// StoreWriter's helpers for the injector's live writer (writer.h): each runs in its own
// transaction with its own statement, so they do not interleave with an Append batch.
#include "src/store/writer.h"

#include "src/store/chunks.h"

namespace overlapprof {

Status StoreWriter::UpdateMeta(const RunMeta& meta) {
  if (!open_) return MakeError(StatusCode::kInternal, "StoreWriter::UpdateMeta before Open");
  OVERLAPPROF_RETURN_IF_ERROR(Begin());
  OVERLAPPROF_RETURN_IF_ERROR(WriteMeta(meta));
  return Commit();
}

namespace {
// One meta row, text or integer (the column takes either).
template <typename V>
Status InsertMeta(sqlite3* db, bool open, std::string_view key, V value) {
  if (!open) return MakeError(StatusCode::kInternal, "StoreWriter::PutMeta before Open");
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(db, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)"));
  s.Bind(1, key);
  s.Bind(2, value);
  return s.StepDone("insert meta");
}
}  // namespace

Status StoreWriter::PutMeta(std::string_view key, std::string_view value) { return InsertMeta(db_.get(), open_, key, value); }

Status StoreWriter::PutMeta(std::string_view key, int64_t value) { return InsertMeta(db_.get(), open_, key, value); }

Status StoreWriter::RetimeNcclPluginOps(int64_t offset_ns) {
  if (!open_) return MakeError(StatusCode::kInternal, "StoreWriter::RetimeNcclPluginOps before Open");
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(db_.get(),
                                        "UPDATE nccl_profiler_op SET start_ns = gpu_start_raw + ?1, end_ns = gpu_end_raw + ?1 "
                                        "WHERE (flags & 2) = 0 AND gpu_start_raw IS NOT NULL AND gpu_end_raw IS NOT NULL"));
  s.Bind(1, offset_ns);
  OVERLAPPROF_RETURN_IF_ERROR(Begin());
  OVERLAPPROF_RETURN_IF_ERROR(s.StepDone("update nccl_profiler_op"));
  return Commit();
}

Status StoreWriter::WriteStats(const StatCounters& stats, const std::vector<ExtraStat>& extra,
                               const std::vector<std::pair<std::string_view, int64_t>>& int_meta) {
  if (!open_) return MakeError(StatusCode::kInternal, "StoreWriter::WriteStats before Open");
  Stmt q, m;
  OVERLAPPROF_RETURN_IF_ERROR(q.Prepare(db_.get(), store_detail::kInsertStatSql));
  if (!int_meta.empty())
    OVERLAPPROF_RETURN_IF_ERROR(m.Prepare(db_.get(), "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)"));
  OVERLAPPROF_RETURN_IF_ERROR(Begin());
  for (const auto& [key, value] : int_meta) {
    m.Bind(1, key);
    m.Bind(2, value);
    OVERLAPPROF_RETURN_IF_ERROR(m.StepDone("insert meta"));
  }
  OVERLAPPROF_RETURN_IF_ERROR(store_detail::InsertStats(q, stats, extra));
  return Commit();
}

Status StoreWriter::MarkWriteFailed(const StatCounters& stats, const std::vector<ExtraStat>& extra) {
  if (!open_) return MakeError(StatusCode::kInternal, "StoreWriter::MarkWriteFailed before Open");
  if (!sqlite3_get_autocommit(db_.get())) (void)db_.Exec("ROLLBACK");
  Stmt q, m;
  OVERLAPPROF_RETURN_IF_ERROR(q.Prepare(db_.get(), store_detail::kInsertStatSql));
  OVERLAPPROF_RETURN_IF_ERROR(m.Prepare(db_.get(), "INSERT OR REPLACE INTO meta(key, value) VALUES('recording_state', 'write_failed')"));
  OVERLAPPROF_RETURN_IF_ERROR(Begin());
  Status st = m.StepDone("insert meta");
  if (st.ok()) st = store_detail::InsertStats(q, stats, extra);
  if (st.ok()) st = Commit();
  if (!st.ok() && !sqlite3_get_autocommit(db_.get())) (void)db_.Exec("ROLLBACK");
  return st;
}

StatusOr<bool> StoreRecordsNothing(const std::string& path) {
  Db db;
  OVERLAPPROF_RETURN_IF_ERROR(db.Open(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX));
  static constexpr char kSql[] =
      "SELECT (SELECT count(*) FROM activity_chunk) + (SELECT count(*) FROM host_call_chunk) + "
      "(SELECT count(*) FROM comm_op_chunk) + (SELECT count(*) FROM comm_op) + "
      "(SELECT count(*) FROM trace_range_chunk) + (SELECT count(*) FROM trace_range) + "
      "(SELECT count(*) FROM nccl_profiler_op) + (SELECT count(*) FROM stats WHERE value <> 0) + "
      "(SELECT count(*) FROM meta WHERE key = 'communicators' AND value NOT IN ('', '[]'))";
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(db.get(), kSql));
  OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step("count the store's records"));
  return row && s.Int(0) == 0;
}

Status MaterializeCommOpRows(const std::string& path) {
  Db db;
  OVERLAPPROF_RETURN_IF_ERROR(db.Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX));
  sqlite3* h = db.get();
  auto scalar = [&](const char* sql, int64_t* out) -> Status {
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(h, sql));
    OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step(sql));
    *out = row && !s.IsNull(0) ? s.Int(0) : -1;
    return OkStatus();
  };
  int64_t row_copies = -1, rows = -1, streams = 0, names = 0;
  OVERLAPPROF_RETURN_IF_ERROR(scalar("SELECT value FROM meta WHERE key='row_copies'", &row_copies));
  if (row_copies != 0) return OkStatus();
  OVERLAPPROF_RETURN_IF_ERROR(scalar("SELECT count(*) FROM comm_op", &rows));
  if (rows != 0) return OkStatus();
  OVERLAPPROF_RETURN_IF_ERROR(scalar("SELECT count(*) FROM stream", &streams));
  OVERLAPPROF_RETURN_IF_ERROR(scalar("SELECT count(*) FROM string", &names));
  ChunkLimits limits;
  limits.streams = static_cast<size_t>(streams);
  limits.names = static_cast<size_t>(names);
  Stmt chunks, insert;
  OVERLAPPROF_RETURN_IF_ERROR(chunks.Prepare(h, "SELECT first_id, count, data FROM comm_op_chunk ORDER BY id"));
  OVERLAPPROF_RETURN_IF_ERROR(insert.Prepare(h, store_detail::kInsertCommOpSql));
  OVERLAPPROF_RETURN_IF_ERROR(db.Exec("BEGIN"));
  std::vector<CommOp> ops;
  for (;;) {
    OVERLAPPROF_ASSIGN_OR_RETURN(bool row, chunks.Step("select comm_op_chunk"));
    if (!row) break;
    int64_t first = chunks.Int(0), count = chunks.Int(1);
    if (count <= 0 || count > static_cast<int64_t>(kChunkRows))
      return MakeError(StatusCode::kCorrupt, "comm_op_chunk: bad count {}", count);
    const void* data = sqlite3_column_blob(chunks.get(), 2);
    int bytes = sqlite3_column_bytes(chunks.get(), 2);
    ops.clear();
    OVERLAPPROF_RETURN_IF_ERROR(DecodeCommOps(std::string_view(static_cast<const char*>(data), bytes),
                                              static_cast<size_t>(count), limits, &ops));
    for (size_t j = 0; j < ops.size(); ++j)
      OVERLAPPROF_RETURN_IF_ERROR(store_detail::InsertCommOp(insert, first + static_cast<int64_t>(j), ops[j]));
  }
  return db.Exec("COMMIT");
}

}  // namespace overlapprof
