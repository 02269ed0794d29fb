#include "src/store/writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "overlapprof/version.h"
#include "src/store/chunks.h"
#include "src/store/schema.h"

namespace overlapprof {

namespace {
// StoreWriter::Finish: how long (ms) readers of the live file may delay leaving WAL mode, and
// the retry step.
constexpr int kLeaveWalRetryMs = 1000;
constexpr int kLeaveWalRetryStepMs = 10;
}  // namespace

struct StoreWriter::Statements {
  Stmt string, device, stream, comm_op, activity, host_call, range, stats, meta, activity_chunk, host_call_chunk, ext_corr,
      comm_op_chunk, range_chunk, nccl_profiler_op, cuda_event;
};

StoreWriter::StoreWriter() = default;
StoreWriter::~StoreWriter() { Abort(); }

Status StoreWriter::Open(const std::string& path, const RunMeta& meta, const Options& options) {
  options_ = options;
  final_path_ = path;
  write_path_ = options.mode == Mode::kBulk ? path + ".partial" : path;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!options.overwrite) return MakeError(StatusCode::kInvalidArgument, "output exists (use --force to replace it)");
    if (options.mode == Mode::kLive && ::unlink(path.c_str()) != 0)
      return MakeError(StatusCode::kIo, "cannot replace: {}", std::strerror(errno));
  }
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((write_path_ + suffix).c_str());
  int open_flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (options.mode == Mode::kBulk) {
    // The .partial is created here, exclusively and not through a link (O_EXCL|O_NOFOLLOW): a
    // link planted at that name since the unlink above is refused, not written through.
    int fd = ::open(write_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return MakeError(StatusCode::kIo, "{}: cannot create: {}", write_path_, std::strerror(errno));
    ::close(fd);
    open_flags |= SQLITE_OPEN_NOFOLLOW;
  }

  OVERLAPPROF_RETURN_IF_ERROR(db_.Open(write_path_, open_flags));
  open_ = true;
  std::string pragmas = fmt::format(
      "PRAGMA page_size=16384; PRAGMA application_id={}; PRAGMA user_version={}; "
      "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-65536; ",
      kStoreApplicationId, kSchemaUserVersion);
  if (options.mode == Mode::kBulk)
    pragmas += "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;";
  else
    pragmas += "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;";
  OVERLAPPROF_RETURN_IF_ERROR(db_.Exec(pragmas));
  OVERLAPPROF_RETURN_IF_ERROR(Begin());
  OVERLAPPROF_RETURN_IF_ERROR(db_.Exec(std::string(kSchemaDdl)));

  stmts_ = std::make_unique<Statements>();
  sqlite3* db = db_.get();
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->meta.Prepare(db, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)"));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->string.Prepare(db, "INSERT INTO string(id, value) VALUES(?, ?)"));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->device.Prepare(
      db, "INSERT INTO device(id, name, compute_major, compute_minor, total_memory, sm_count) VALUES(?,?,?,?,?,?)"));
  OVERLAPPROF_RETURN_IF_ERROR(
      stmts_->stream.Prepare(db, "INSERT INTO stream(id, device, native_id, name) VALUES(?,?,?,?)"));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->comm_op.Prepare(db, store_detail::kInsertCommOpSql));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->activity.Prepare(
      db,
      "INSERT INTO gpu_activity(id, start_ns, end_ns, category, kind, stream_id, name_id, correlation_id, "
      "bytes, copy_kind, comm_op_id, launch_ns) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)"));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->ext_corr.Prepare(
      db, "INSERT INTO external_correlation(correlation_id, external_id) VALUES(?,?)"));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->cuda_event.Prepare(
      db, "INSERT INTO cuda_event(kind, correlation_id, sync_id, stream_id) VALUES(?,?,?,?)"));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->activity_chunk.Prepare(
      db, "INSERT INTO activity_chunk(id, first_id, count, data) VALUES(?,?,?,?)"));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->host_call_chunk.Prepare(
      db, "INSERT INTO host_call_chunk(id, first_id, count, data) VALUES(?,?,?,?)"));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->comm_op_chunk.Prepare(
      db, "INSERT INTO comm_op_chunk(id, first_id, count, data) VALUES(?,?,?,?)"));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->range_chunk.Prepare(
      db, "INSERT INTO trace_range_chunk(id, first_id, count, data) VALUES(?,?,?,?)"));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->host_call.Prepare(
      db, "INSERT INTO host_call(id, start_ns, end_ns, correlation_id, tid, name_id) VALUES(?,?,?,?,?,?)"));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->range.Prepare(
      db, "INSERT INTO trace_range(id, kind, start_ns, end_ns, name_id, step, tid, stream_id) VALUES(?,?,?,?,?,?,?,?)"));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->stats.Prepare(db, store_detail::kInsertStatSql));
  OVERLAPPROF_RETURN_IF_ERROR(stmts_->nccl_profiler_op.Prepare(
      db,
      "INSERT INTO nccl_profiler_op(id, communicator, nccl_comm_hash, comm_rank, comm_nranks, op, nccl_seq, datatype, "
      "count, bytes, root_peer, algorithm, protocol, channels_expected, channels, gpu_start_raw, gpu_end_raw, "
      "start_ns, end_ns, host_start_ns, group_id, proxy_ops, proxy_steps, abi_version, flags, host_tid) "
      "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  OVERLAPPROF_RETURN_IF_ERROR(WriteMeta(meta));
  if (!options.row_copies) {
    // Readers then expect empty gpu_activity / host_call tables (docs/schema.md, "Chunks").
    stmts_->meta.Bind(1, std::string_view("row_copies"));
    stmts_->meta.Bind(2, int64_t{0});
    OVERLAPPROF_RETURN_IF_ERROR(stmts_->meta.StepDone("insert meta"));
  }
  return Commit();
}

Status StoreWriter::Begin() { return db_.Exec("BEGIN"); }
Status StoreWriter::Commit() { return db_.Exec("COMMIT"); }

Status StoreWriter::WriteMeta(const RunMeta& m) {
  Stmt& s = stmts_->meta;
  auto put_text = [&](std::string_view key, std::string_view value) -> Status {
    s.Bind(1, key);
    s.Bind(2, value);
    return s.StepDone("insert meta");
  };
  auto put_int = [&](std::string_view key, int64_t value) -> Status {
    s.Bind(1, key);
    s.BindOptional(2, value);
    return s.StepDone("insert meta");
  };
  int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  OVERLAPPROF_RETURN_IF_ERROR(put_text("schema_version", fmt::format("{}.{}", kSchemaMajor, kSchemaMinor)));
  OVERLAPPROF_RETURN_IF_ERROR(put_text("tool_version", kToolVersion));
  OVERLAPPROF_RETURN_IF_ERROR(put_int("created_unix_ns", now_ns));
  OVERLAPPROF_RETURN_IF_ERROR(put_int("rank", m.rank));
  OVERLAPPROF_RETURN_IF_ERROR(put_int("world_size", m.world_size));
  OVERLAPPROF_RETURN_IF_ERROR(put_int("local_rank", m.local_rank));
  OVERLAPPROF_RETURN_IF_ERROR(put_int("pid", m.pid));
  OVERLAPPROF_RETURN_IF_ERROR(put_text("host", m.host));
  OVERLAPPROF_RETURN_IF_ERROR(put_text("clock_source", m.clock_source));
  OVERLAPPROF_RETURN_IF_ERROR(put_text("source_format", m.source_format));
  OVERLAPPROF_RETURN_IF_ERROR(put_text("source_path", m.source_path));
  OVERLAPPROF_RETURN_IF_ERROR(put_text("backend", m.backend));
  OVERLAPPROF_RETURN_IF_ERROR(put_text("nccl_version", m.nccl_version));
  OVERLAPPROF_RETURN_IF_ERROR(put_text("pg_config", m.pg_config_json));
  // Only the recorder knows the job's environment: no key when the source did not say.
  if (!m.overlap_env_json.empty()) OVERLAPPROF_RETURN_IF_ERROR(put_text("overlap_env", m.overlap_env_json));
  return OkStatus();
}

namespace store_detail {

const char kInsertCommOpSql[] =
    "INSERT INTO comm_op(id, communicator, comm_rank, comm_nranks, seq, op, datatype, count, bytes, "
    "root_peer, stream_id, host_enter_ns, host_exit_ns, host_tid, pg_desc, source, launch_id, stream_handle) "
    "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
const char kInsertStatSql[] = "INSERT OR REPLACE INTO stats(name, severity, value, description) VALUES(?,?,?,?)";

Status InsertCommOp(Stmt& q, int64_t id, const CommOp& c) {
  q.Bind(1, id);
  q.Bind(2, c.communicator);
  q.BindOptional(3, c.comm_rank);
  q.BindOptional(4, c.comm_nranks);
  q.BindOptional(5, c.seq);
  q.Bind(6, CollectiveName(c.op));
  q.Bind(7, c.datatype);
  q.BindOptional(8, c.count);
  q.BindOptional(9, c.bytes);
  q.BindOptional(10, c.root_peer);
  if (c.stream == kNoIndex) q.BindNull(11);
  else q.Bind(11, static_cast<int64_t>(c.stream));
  q.BindOptional(12, c.host_enter_ns);
  q.BindOptional(13, c.host_exit_ns);
  q.BindOptional(14, c.host_tid);
  q.Bind(15, c.pg_desc);
  q.Bind(16, static_cast<int64_t>(c.source));
  q.BindOptional(17, c.launch_id);
  q.BindOptional(18, c.stream_handle);
  return q.StepDone("insert comm_op");
}

Status InsertStats(Stmt& q, const StatCounters& stats, const std::vector<ExtraStat>& extra) {
  // Every counter is stored, zeros too: a reader can tell "none happened" from "not counted".
  for (size_t i = 0; i < kStatCount; ++i) {
    const StatInfo& info = GetStatInfo(static_cast<Stat>(i));
    q.Bind(1, info.name);
    q.Bind(2, SeverityName(info.severity));
    q.Bind(3, stats.Get(static_cast<Stat>(i)));
    q.Bind(4, info.description);
    OVERLAPPROF_RETURN_IF_ERROR(q.StepDone("insert stats"));
  }
  for (const ExtraStat& e : extra) {
    q.Bind(1, e.name);
    q.Bind(2, SeverityName(e.severity));
    q.Bind(3, e.value);
    q.Bind(4, e.description);
    OVERLAPPROF_RETURN_IF_ERROR(q.StepDone("insert stats"));
  }
  return OkStatus();
}

}  // namespace store_detail

// Append, in phases: dictionaries, then chunks (what analysis reads), then the row copies,
// in the same transaction(s).
Status StoreWriter::Append(const RankTrace& t) {
  if (!open_ || !stmts_) return MakeError(StatusCode::kInternal, "StoreWriter::Append before Open");
  rows_in_tx_ = 0;
  OVERLAPPROF_RETURN_IF_ERROR(Begin());
  OVERLAPPROF_RETURN_IF_ERROR(AppendDictionaries(t));
  OVERLAPPROF_RETURN_IF_ERROR(AppendCommOps(t));
  OVERLAPPROF_RETURN_IF_ERROR(AppendChunks(t));
  OVERLAPPROF_RETURN_IF_ERROR(AppendExternalCorrelations(t));
  OVERLAPPROF_RETURN_IF_ERROR(AppendEventLinks(t));
  OVERLAPPROF_RETURN_IF_ERROR(AppendActivityAndHostCallRows(t));
  OVERLAPPROF_RETURN_IF_ERROR(AppendRangeRows(t));
  OVERLAPPROF_RETURN_IF_ERROR(AppendNcclPluginOps(t));
  return Commit();
}

// NCCL profiler plugin ops: rows of this batch (a delta), ids continuing.
Status StoreWriter::AppendNcclPluginOps(const RankTrace& t) {
  Stmt& q = stmts_->nccl_profiler_op;
  auto opt_text = [&](int i, const std::string& v) {
    if (v.empty())
      sqlite3_bind_null(q.get(), i);
    else
      q.Bind(i, std::string_view(v));
  };
  for (const NcclPluginOp& o : t.nccl_plugin_ops) {
    q.Bind(1, next_plugin_op_id_++);
    opt_text(2, o.communicator);
    q.Bind(3, o.nccl_comm_hash);
    q.BindOptional(4, o.comm_rank);
    q.BindOptional(5, o.comm_nranks);
    q.Bind(6, CollectiveName(o.op));
    q.BindOptional(7, o.nccl_seq);
    opt_text(8, o.datatype);
    q.BindOptional(9, o.count);
    q.BindOptional(10, o.bytes);
    q.BindOptional(11, o.root_peer);
    opt_text(12, o.algorithm);
    opt_text(13, o.protocol);
    q.BindOptional(14, o.channels_expected);
    q.Bind(15, o.channels);
    q.BindOptional(16, o.gpu_start_raw);
    q.BindOptional(17, o.gpu_end_raw);
    q.BindOptional(18, o.start_ns);
    q.BindOptional(19, o.end_ns);
    q.BindOptional(20, o.host_start_ns);
    q.BindOptional(21, o.group_id);
    q.Bind(22, o.proxy_ops);
    q.Bind(23, o.proxy_steps);
    q.BindOptional(24, o.abi_version);
    q.Bind(25, o.flags);
    q.BindOptional(26, o.host_tid);
    OVERLAPPROF_RETURN_IF_ERROR(q.StepDone("insert nccl_profiler_op"));
    OVERLAPPROF_RETURN_IF_ERROR(RowDone());
  }
  return OkStatus();
}

// In kBulk mode, commit every rows_per_batch rows to bound the page cache's dirty set.
Status StoreWriter::RowDone() {
  if (options_.mode == Mode::kBulk && ++rows_in_tx_ >= options_.rows_per_batch) {
    rows_in_tx_ = 0;
    OVERLAPPROF_RETURN_IF_ERROR(Commit());
    return Begin();
  }
  return OkStatus();
}

// Names, devices and streams beyond those already written (cumulative dictionaries).
Status StoreWriter::AppendDictionaries(const RankTrace& t) {
  Statements& s = *stmts_;
  for (size_t i = strings_written_; i < t.names.size(); ++i) {
    s.string.Bind(1, static_cast<int64_t>(i));
    s.string.Bind(2, t.names.Get(static_cast<uint32_t>(i)));
    OVERLAPPROF_RETURN_IF_ERROR(s.string.StepDone("insert string"));
  }
  strings_written_ = t.names.size();
  for (size_t i = devices_written_; i < t.devices.size(); ++i) {
    const Device& d = t.devices[i];
    s.device.Bind(1, d.id);
    s.device.Bind(2, d.name);
    s.device.BindOptional(3, d.compute_major);
    s.device.BindOptional(4, d.compute_minor);
    s.device.BindOptional(5, d.total_memory);
    s.device.BindOptional(6, d.sm_count);
    OVERLAPPROF_RETURN_IF_ERROR(s.device.StepDone("insert device"));
  }
  devices_written_ = t.devices.size();
  for (size_t i = streams_written_; i < t.streams.size(); ++i) {
    const Stream& st = t.streams[i];
    s.stream.Bind(1, static_cast<int64_t>(i));
    s.stream.BindOptional(2, st.device);
    s.stream.BindOptional(3, st.native_id);
    s.stream.Bind(4, st.name);
    OVERLAPPROF_RETURN_IF_ERROR(s.stream.StepDone("insert stream"));
  }
  streams_written_ = t.streams.size();
  return OkStatus();
}

// `n` records from first_id on, as chunks of up to kChunkRows records and, so that readers
// accept them, at most kMaxChunkBytes (only comm ops, whose strings have no bound, can come
// near it). encode(at, k) returns the blob of records [at, at + k).
template <typename Encode>
Status StoreWriter::WriteChunks(Stmt& q, int64_t& next_chunk, int64_t first_id, size_t n, Encode encode) {
  for (size_t at = 0; at < n;) {
    size_t k = std::min(kChunkRows, n - at);
    std::string blob = encode(at, k);
    while (blob.size() > kMaxChunkBytes && k > 1) {
      k /= 2;
      blob = encode(at, k);
    }
    if (blob.size() > kMaxChunkBytes)
      return MakeError(StatusCode::kInvalidInput, "record {} is too large for a store chunk ({} bytes)",
                       first_id + static_cast<int64_t>(at), blob.size());
    q.Bind(1, next_chunk++);
    q.Bind(2, first_id + static_cast<int64_t>(at));
    q.Bind(3, static_cast<int64_t>(k));
    sqlite3_bind_blob64(q.get(), 4, blob.data(), blob.size(), SQLITE_TRANSIENT);
    OVERLAPPROF_RETURN_IF_ERROR(q.StepDone("insert chunk"));
    OVERLAPPROF_RETURN_IF_ERROR(RowDone());
    at += k;
  }
  return OkStatus();
}

// Comm ops are rows of this batch (a delta): their ids continue from those written before.
// Chunks, then the row copies; without row_copies (the injector) the rows are added after
// the job by MaterializeCommOpRows, off the recording process.
Status StoreWriter::AppendCommOps(const RankTrace& t) {
  Statements& s = *stmts_;
  OVERLAPPROF_RETURN_IF_ERROR(WriteChunks(s.comm_op_chunk, next_comm_op_chunk_, static_cast<int64_t>(comm_ops_written_),
                                          t.comm_ops.size(), [&](size_t at, size_t k) {
                                            return EncodeCommOps(t.comm_ops.data() + at, k);
                                          }));
  for (size_t j = 0; j < (options_.row_copies ? t.comm_ops.size() : 0); ++j) {
    OVERLAPPROF_RETURN_IF_ERROR(
        store_detail::InsertCommOp(s.comm_op, static_cast<int64_t>(comm_ops_written_ + j), t.comm_ops[j]));
    OVERLAPPROF_RETURN_IF_ERROR(RowDone());
  }
  comm_ops_written_ += t.comm_ops.size();
  return OkStatus();
}

// Activities, host calls and ranges as chunks (ids continue from those written before).
Status StoreWriter::AppendChunks(const RankTrace& t) {
  Statements& s = *stmts_;
  OVERLAPPROF_RETURN_IF_ERROR(WriteChunks(s.activity_chunk, next_activity_chunk_, next_activity_id_,
                                          t.activities.size(), [&](size_t at, size_t k) {
                                            return EncodeActivities(t.activities.data() + at, k);
                                          }));
  OVERLAPPROF_RETURN_IF_ERROR(WriteChunks(s.host_call_chunk, next_host_call_chunk_, next_host_call_id_,
                                          t.host_calls.size(), [&](size_t at, size_t k) {
                                            return EncodeHostCalls(t.host_calls.data() + at, k);
                                          }));
  return WriteChunks(s.range_chunk, next_range_chunk_, next_range_id_, t.ranges.size(),
                     [&](size_t at, size_t k) { return EncodeRanges(t.ranges.data() + at, k); });
}

Status StoreWriter::AppendExternalCorrelations(const RankTrace& t) {
  Statements& s = *stmts_;
  for (const auto& [correlation, external] : t.external_correlations) {
    s.ext_corr.Bind(1, correlation);
    s.ext_corr.Bind(2, external);
    OVERLAPPROF_RETURN_IF_ERROR(s.ext_corr.StepDone("insert external_correlation"));
    OVERLAPPROF_RETURN_IF_ERROR(RowDone());
  }
  return OkStatus();
}

Status StoreWriter::AppendEventLinks(const RankTrace& t) {
  Stmt& q = stmts_->cuda_event;
  for (const EventLink& l : t.event_links) {
    q.Bind(1, static_cast<int64_t>(l.kind));
    q.Bind(2, l.correlation_id);
    q.Bind(3, l.sync_id);
    if (l.stream == kNoIndex) q.BindNull(4);
    else q.Bind(4, static_cast<int64_t>(l.stream));
    OVERLAPPROF_RETURN_IF_ERROR(q.StepDone("insert cuda_event"));
    OVERLAPPROF_RETURN_IF_ERROR(RowDone());
  }
  return OkStatus();
}

// The gpu_activity and host_call row copies (with row_copies); without them only the ids
// advance, past the chunks just written.
Status StoreWriter::AppendActivityAndHostCallRows(const RankTrace& t) {
  Statements& s = *stmts_;
  if (!options_.row_copies) {
    next_activity_id_ += static_cast<int64_t>(t.activities.size());
    next_host_call_id_ += static_cast<int64_t>(t.host_calls.size());
    return OkStatus();
  }
  sqlite3_stmt* a = s.activity.get();
  for (const Activity& act : t.activities) {
    // Raw binds on the hot path (millions of rows).
    sqlite3_bind_int64(a, 1, next_activity_id_++);
    sqlite3_bind_int64(a, 2, act.start_ns);
    sqlite3_bind_int64(a, 3, act.end_ns);
    sqlite3_bind_int(a, 4, static_cast<int>(act.category));
    sqlite3_bind_int(a, 5, static_cast<int>(act.kind));
    sqlite3_bind_int64(a, 6, act.stream == kNoIndex ? -1 : static_cast<int64_t>(act.stream));
    sqlite3_bind_int64(a, 7, act.name_id);
    if (act.correlation_id == kUnknown) sqlite3_bind_null(a, 8);
    else sqlite3_bind_int64(a, 8, act.correlation_id);
    if (act.bytes == kUnknown) sqlite3_bind_null(a, 9);
    else sqlite3_bind_int64(a, 9, act.bytes);
    if (act.copy_kind == 0) sqlite3_bind_null(a, 10);
    else sqlite3_bind_int(a, 10, act.copy_kind);
    if (act.comm_op == kNoIndex) sqlite3_bind_null(a, 11);
    else sqlite3_bind_int64(a, 11, act.comm_op);
    if (act.launch_ns == kUnknown) sqlite3_bind_null(a, 12);
    else sqlite3_bind_int64(a, 12, act.launch_ns);
    OVERLAPPROF_RETURN_IF_ERROR(s.activity.StepDone("insert gpu_activity"));
    OVERLAPPROF_RETURN_IF_ERROR(RowDone());
  }
  sqlite3_stmt* h = s.host_call.get();
  for (const HostCall& hc : t.host_calls) {
    sqlite3_bind_int64(h, 1, next_host_call_id_++);
    sqlite3_bind_int64(h, 2, hc.start_ns);
    sqlite3_bind_int64(h, 3, hc.end_ns);
    if (hc.correlation_id == kUnknown) sqlite3_bind_null(h, 4);
    else sqlite3_bind_int64(h, 4, hc.correlation_id);
    if (hc.tid == kUnknown) sqlite3_bind_null(h, 5);
    else sqlite3_bind_int64(h, 5, hc.tid);
    sqlite3_bind_int64(h, 6, hc.name_id);
    OVERLAPPROF_RETURN_IF_ERROR(s.host_call.StepDone("insert host_call"));
    OVERLAPPROF_RETURN_IF_ERROR(RowDone());
  }
  return OkStatus();
}

// Ranges are few: always written as rows too.
Status StoreWriter::AppendRangeRows(const RankTrace& t) {
  Stmt& q = stmts_->range;
  for (const Range& r : t.ranges) {
    q.Bind(1, next_range_id_++);
    q.Bind(2, static_cast<int64_t>(r.kind));
    q.Bind(3, r.start_ns);
    q.Bind(4, r.end_ns);
    q.Bind(5, static_cast<int64_t>(r.name_id));
    q.BindOptional(6, r.step);
    q.BindOptional(7, r.tid);
    if (r.stream == kNoIndex) q.BindNull(8);
    else q.Bind(8, static_cast<int64_t>(r.stream));
    OVERLAPPROF_RETURN_IF_ERROR(q.StepDone("insert trace_range"));
    OVERLAPPROF_RETURN_IF_ERROR(RowDone());
  }
  return OkStatus();
}

Status StoreWriter::Finish(const StatCounters& stats, const std::vector<ExtraStat>& extra) {
  if (!open_ || !stmts_) return MakeError(StatusCode::kInternal, "StoreWriter::Finish before Open");
  OVERLAPPROF_RETURN_IF_ERROR(Begin());
  OVERLAPPROF_RETURN_IF_ERROR(store_detail::InsertStats(stmts_->stats, stats, extra));
  OVERLAPPROF_RETURN_IF_ERROR(Commit());
  OVERLAPPROF_RETURN_IF_ERROR(db_.Exec(std::string(kSchemaIndexes)));
  stmts_.reset();
  // A self-contained file: no -wal beside it, readable from a read-only directory. Leaving WAL
  // needs every other connection gone: a reader of the live file (`run --watch`, docs/watch.md)
  // makes it fail at once (SQLite's busy handler is not called for it), so it is retried for up
  // to kLeaveWalRetryMs; a reader still there then leaves the file in WAL mode, everything
  // committed (`run` checkpoints it when it settles the file; readers read it as it is).
  for (int waited_ms = 0;; waited_ms += kLeaveWalRetryStepMs) {
    Status st = db_.Exec("PRAGMA journal_mode=DELETE");
    if (st.ok()) break;
    if ((sqlite3_extended_errcode(db_.get()) & 0xff) != SQLITE_BUSY) return st;
    if (waited_ms >= kLeaveWalRetryMs) break;
    struct timespec step {0, kLeaveWalRetryStepMs * 1000L * 1000L};
    ::nanosleep(&step, nullptr);
  }
  db_.Close();
  open_ = false;
  if (options_.mode == Mode::kBulk) {
    if (std::rename(write_path_.c_str(), final_path_.c_str()) != 0)
      return MakeError(StatusCode::kIo, "cannot rename {} into place: {}", write_path_, std::strerror(errno));
  }
  return OkStatus();
}

void StoreWriter::Abort() {
  if (!open_) return;
  stmts_.reset();
  db_.Close();
  open_ = false;
  if (options_.mode == Mode::kBulk) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((write_path_ + suffix).c_str());
  }
}

Status WriteStore(const RankTrace& trace, const std::string& path, bool overwrite) {
  StoreWriter w;
  StoreWriter::Options o;
  o.overwrite = overwrite;
  OVERLAPPROF_RETURN_IF_ERROR(w.Open(path, trace.meta, o));
  OVERLAPPROF_RETURN_IF_ERROR(w.Append(trace));
  return w.Finish(trace.stats, trace.extra_stats);
}

}  // namespace overlapprof
