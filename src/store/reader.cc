#include "src/store/reader.h"
#include "src/trace/link.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <unordered_map>

#include "overlapprof/version.h"
#include "src/common/memory.h"
#include "src/store/chunks.h"
#include "src/store/recording_state.h"
#include "src/store/schema.h"
#include "src/store/sqlite_util.h"

namespace overlapprof {

namespace {

StatusOr<int64_t> PragmaInt(Db& db, const char* pragma) {
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(db.get(), std::string("PRAGMA ") + pragma));
  OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step(pragma));
  if (!row) return MakeError(StatusCode::kInvalidInput, "PRAGMA {} returned nothing", pragma);
  return s.Int(0);
}

Status Invalid(std::string_view table, int64_t row, std::string_view what) {
  return MakeError(StatusCode::kCorrupt, "{} row {}: {}", table, row, what);
}

// Where the optional chunked copies are (docs/schema.md, "Chunks").
struct Layout {
  bool comm_op_chunks = false;  // comm ops from comm_op_chunk, else from the comm_op rows
  bool range_chunks = false;    // ranges from trace_range_chunk, else from the trace_range rows
  bool injector = false;        // written by the injector: raw records, linked after reading (link.h)
  bool row_copies = true;       // gpu_activity / host_call rows copy the chunks (meta row_copies = 0: empty)
  bool nccl_profiler_ops = false;  // table nccl_profiler_op (schema 1.2; older stores lack it)
  bool cuda_events = false;        // table cuda_event (schema 1.3; older stores lack it)
};

// Reads chunk blobs with sqlite3_blob_read into one buffer reused for every chunk (no
// per-chunk allocation, and SQLite reads overflow pages straight into it).
class BlobReader {
 public:
  BlobReader() = default;
  BlobReader(const BlobReader&) = delete;
  BlobReader& operator=(const BlobReader&) = delete;
  ~BlobReader() { Close(); }
  void Close() {
    if (blob_) sqlite3_blob_close(blob_);
    blob_ = nullptr;
  }
  // The `data` of row `rowid` of `table`; valid until the next Read.
  StatusOr<std::string_view> Read(sqlite3* db, std::string_view table, int64_t rowid) {
    int rc;
    if (!blob_ || table != table_) {
      Close();
      table_ = std::string(table);
      rc = sqlite3_blob_open(db, "main", table_.c_str(), "data", rowid, 0, &blob_);
    } else {
      rc = sqlite3_blob_reopen(blob_, rowid);
    }
    if (rc != SQLITE_OK) {
      Status st = SqliteError(db, rc, fmt::format("sqlite3_blob_open({})", table));
      Close();  // after a failed reopen the handle is unusable
      return st;
    }
    const int n = sqlite3_blob_bytes(blob_);
    if (n < 0 || static_cast<size_t>(n) > kMaxChunkBytes)
      return MakeError(StatusCode::kCorrupt, "{} row {}: chunk larger than {} bytes", table, rowid, kMaxChunkBytes);
    if (buffer_.size() < static_cast<size_t>(n)) buffer_.resize(static_cast<size_t>(n));
    if (n > 0) OVERLAPPROF_SQLITE(db, sqlite3_blob_read(blob_, buffer_.data(), n, 0), "sqlite3_blob_read");
    return std::string_view(buffer_.data(), static_cast<size_t>(n));
  }

 private:
  sqlite3_blob* blob_ = nullptr;
  std::string table_;
  std::string buffer_;
};

class Reader {
 public:
  Reader(Db& db, TraceNeeds needs, Layout layout) : db_(db), needs_(needs), layout_(layout) {}

  Status ReadAll(RankTrace& t) {
    OVERLAPPROF_RETURN_IF_ERROR(ReadMeta(t));
    OVERLAPPROF_RETURN_IF_ERROR(ReadStrings(t));
    OVERLAPPROF_RETURN_IF_ERROR(ReadDevices(t));
    OVERLAPPROF_RETURN_IF_ERROR(ReadStreams(t));
    OVERLAPPROF_RETURN_IF_ERROR(layout_.comm_op_chunks ? ReadCommOpChunks(t) : ReadCommOps(t));
    OVERLAPPROF_RETURN_IF_ERROR(ReadActivities(t));
    if (needs_.host_calls) OVERLAPPROF_RETURN_IF_ERROR(ReadHostCalls(t));
    OVERLAPPROF_RETURN_IF_ERROR(layout_.range_chunks ? ReadRangeChunks(t) : ReadRanges(t));
    OVERLAPPROF_RETURN_IF_ERROR(ReadStats(t));
    if (layout_.injector) OVERLAPPROF_RETURN_IF_ERROR(ReadExternalCorrelations(t));
    if (layout_.nccl_profiler_ops) OVERLAPPROF_RETURN_IF_ERROR(ReadNcclProfilerOps(t));
    if (layout_.cuda_events && needs_.host_calls) OVERLAPPROF_RETURN_IF_ERROR(ReadEventLinks(t));
    return OkStatus();
  }

  // CUDA event records and waits (schema 1.3): read with the host calls they refer to.
  Status ReadEventLinks(RankTrace& t) {
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(
        s.Prepare(db_.get(), "SELECT rowid, kind, correlation_id, sync_id, stream_id FROM cuda_event ORDER BY rowid"));
    for (;;) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step("select cuda_event"));
      if (!row) break;
      const int64_t kind = s.Int(1);
      if (kind < static_cast<int64_t>(EventLinkKind::kRecord) || kind > static_cast<int64_t>(EventLinkKind::kHostWait))
        return Invalid("cuda_event", s.Int(0), "unknown kind");
      EventLink l;
      l.kind = static_cast<EventLinkKind>(kind);
      l.correlation_id = s.Int(2);
      l.sync_id = s.Int(3);
      if (!s.IsNull(4)) {
        const int64_t stream = s.Int(4);
        if (stream < 0 || static_cast<size_t>(stream) >= t.streams.size())
          return Invalid("cuda_event", s.Int(0), "stream_id out of range");
        l.stream = static_cast<uint32_t>(stream);
      }
      t.event_links.push_back(l);
    }
    return OkStatus();
  }

 private:
  uint32_t Name(int64_t stored_id, bool* ok) const {
    if (stored_id < 0 || static_cast<size_t>(stored_id) >= name_map_.size()) {
      *ok = false;
      return 0;
    }
    return name_map_[static_cast<size_t>(stored_id)];
  }

  Status ReadMeta(RankTrace& t) {
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(db_.get(), "SELECT key, value FROM meta"));
    RunMeta& m = t.meta;
    std::unordered_map<std::string, std::string> text;
    std::unordered_map<std::string, int64_t> ints;
    for (;;) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step("select meta"));
      if (!row) break;
      std::string key(s.Text(0));
      if (sqlite3_column_type(s.get(), 1) == SQLITE_INTEGER) ints[key] = s.Int(1);
      else if (!s.IsNull(1)) text[key] = std::string(s.Text(1));
    }
    auto get_int = [&](const char* k) { auto it = ints.find(k); return it == ints.end() ? kUnknown : it->second; };
    auto get_text = [&](const char* k) { auto it = text.find(k); return it == text.end() ? std::string() : it->second; };
    m.rank = get_int("rank");
    m.world_size = get_int("world_size");
    m.local_rank = get_int("local_rank");
    m.pid = get_int("pid");
    m.host = get_text("host");
    m.clock_source = get_text("clock_source");
    m.tool_version = get_text("tool_version");
    m.source_format = get_text("source_format");
    m.backend = get_text("backend");
    m.nccl_version = get_text("nccl_version");
    m.pg_config_json = get_text("pg_config");
    m.nccl_profiler_json = get_text("nccl_profiler");
    m.timing_source = get_text("timing_source");
    m.overlap_env_json = get_text("overlap_env");
    return OkStatus();
  }

  Status ReadStrings(RankTrace& t) {
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(db_.get(), "SELECT id, value FROM string ORDER BY id"));
    for (int64_t expect = 0;; ++expect) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step("select string"));
      if (!row) break;
      if (s.Int(0) != expect) return Invalid("string", s.Int(0), "ids are not dense from 0");
      name_map_.push_back(t.names.Intern(s.Text(1)));
    }
    if (name_map_.empty()) name_map_.push_back(0);
    return OkStatus();
  }

  Status ReadDevices(RankTrace& t) {
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(
        db_.get(), "SELECT id, name, compute_major, compute_minor, total_memory, sm_count FROM device ORDER BY id"));
    for (;;) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step("select device"));
      if (!row) break;
      t.devices.push_back(Device{s.Int(0), std::string(s.Text(1)), s.OptionalInt(2), s.OptionalInt(3),
                                 s.OptionalInt(4), s.OptionalInt(5)});
    }
    return OkStatus();
  }

  Status ReadStreams(RankTrace& t) {
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(db_.get(), "SELECT id, device, native_id, name FROM stream ORDER BY id"));
    for (int64_t expect = 0;; ++expect) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step("select stream"));
      if (!row) break;
      if (s.Int(0) != expect) return Invalid("stream", s.Int(0), "ids are not dense from 0");
      uint32_t idx = t.StreamIndex(s.OptionalInt(1), s.OptionalInt(2));
      if (idx != static_cast<uint32_t>(expect)) return Invalid("stream", expect, "duplicate (device, stream)");
      t.streams[idx].name = std::string(s.Text(3));
    }
    return OkStatus();
  }

  // Comm ops from the rows (stores written before comm_op_chunk existed).
  Status ReadCommOps(RankTrace& t) {
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(
        db_.get(),
        "SELECT id, communicator, comm_rank, comm_nranks, seq, op, datatype, count, bytes, root_peer, stream_id, "
        "host_enter_ns, host_exit_ns, host_tid, pg_desc, source FROM comm_op ORDER BY id"));
    for (int64_t expect = 0;; ++expect) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step("select comm_op"));
      if (!row) break;
      if (s.Int(0) != expect) return Invalid("comm_op", s.Int(0), "ids are not dense from 0");
      CommOp c;
      c.communicator = std::string(s.Text(1));
      c.comm_rank = s.OptionalInt(2);
      c.comm_nranks = s.OptionalInt(3);
      c.seq = s.OptionalInt(4);
      c.op = ParseCollective(s.Text(5));
      c.datatype = std::string(s.Text(6));
      c.count = s.OptionalInt(7);
      c.bytes = s.OptionalInt(8);
      c.root_peer = s.OptionalInt(9);
      int64_t stream = s.OptionalInt(10);
      if (stream != kUnknown) {
        if (stream < 0 || static_cast<size_t>(stream) >= t.streams.size())
          return Invalid("comm_op", expect, "stream_id out of range");
        c.stream = static_cast<uint32_t>(stream);
      }
      c.host_enter_ns = s.OptionalInt(11);
      c.host_exit_ns = s.OptionalInt(12);
      c.host_tid = s.OptionalInt(13);
      c.pg_desc = std::string(s.Text(14));
      int64_t src = s.Int(15);
      if (src < 1 || src > 3) return Invalid("comm_op", expect, "unknown source");
      c.source = static_cast<CommSource>(src);
      c.rule = DeriveCommRule(c);
      t.comm_ops.push_back(std::move(c));
    }
    return OkStatus();
  }

  // Activities and host calls come from their chunk tables (src/store/chunks.h). The
  // chunks must be dense, contiguous, and cover exactly the rows of the queryable table.
  // The number of records in a chunk table (to reserve once: per-chunk growth would copy
  // the whole vector again for every chunk).
  StatusOr<size_t> ChunkRecords(std::string_view chunk_table) {
    // A sane reservation only (the decode still checks every count): counts as the rows
    // claim them, but no more records than a quarter of the blob bytes (no record is
    // shorter than 4 bytes), so a small crafted file cannot make it reserve gigabytes.
    // total() never overflows; length() of a blob comes from the record header.
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(
        db_.get(), fmt::format("SELECT total(min(max(count, 0), {})), total(length(data)) FROM {}", kChunkRows,
                               chunk_table)));
    OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step(chunk_table));
    if (!row) return size_t{0};
    const double n = std::min(sqlite3_column_double(s.get(), 0), sqlite3_column_double(s.get(), 1) / 4);
    return static_cast<size_t>(std::clamp(n, 0.0, 4294967296.0));
  }

  template <typename Decode>
  Status ReadChunks(std::string_view chunk_table, std::string_view row_table, const ChunkLimits& limits,
                    Decode decode) {
    // typeof() of a blob comes from the record header: the data is not loaded here but by
    // BlobReader, straight into its buffer. rowid is what sqlite3_blob_open takes (the
    // same as id in a store, but the file is not trusted to say so).
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(
        db_.get(), fmt::format("SELECT id, first_id, count, typeof(data), rowid FROM {} ORDER BY id", chunk_table)));
    int64_t next_first = 0;
    for (int64_t expect = 0;; ++expect) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step(chunk_table));
      if (!row) break;
      if (s.Int(0) != expect) return Invalid(chunk_table, s.Int(0), "ids are not dense from 0");
      if (s.Int(1) != next_first) return Invalid(chunk_table, expect, "first_id does not continue the previous chunk");
      int64_t count = s.Int(2);
      if (count <= 0 || count > static_cast<int64_t>(kChunkRows)) return Invalid(chunk_table, expect, "bad count");
      // Its bytes as they are (as sqlite3_column_blob would give them): text too, so that
      // a hand-edited chunk (x || y makes text) is judged by its content.
      if (s.Text(3) != "blob" && s.Text(3) != "text") return Invalid(chunk_table, expect, "data is not a blob");
      StatusOr<std::string_view> blob = blobs_.Read(db_.get(), chunk_table, s.Int(4));
      if (!blob.ok()) return blob.status().WithPrefix(fmt::format("{} {}", chunk_table, expect));
      Status st = decode(*blob, static_cast<size_t>(count), limits);
      if (!st.ok()) return st.WithPrefix(fmt::format("{} {}", chunk_table, expect));
      next_first += count;
    }
    blobs_.Close();
    // O(log n): the rows have dense ids too, so max(id) + 1 is their number.
    Stmt m;
    OVERLAPPROF_RETURN_IF_ERROR(m.Prepare(db_.get(), fmt::format("SELECT coalesce(max(id) + 1, 0) FROM {}", row_table)));
    OVERLAPPROF_ASSIGN_OR_RETURN(bool got, m.Step(row_table));
    // Without row copies (meta row_copies = 0, injector stores) the row tables are empty, or
    // (comm_op, filled after the job by MaterializeCommOpRows) complete.
    const bool chunks_only = !layout_.row_copies && (row_table == std::string_view("gpu_activity") ||
                                                     row_table == std::string_view("host_call") ||
                                                     row_table == std::string_view("comm_op"));
    if (chunks_only) {
      if (!got || (m.Int(0) != 0 && m.Int(0) != next_first))
        return MakeError(StatusCode::kCorrupt, "{} holds {} records but {} has {} rows (meta row_copies = 0)",
                         chunk_table, next_first, row_table, got ? m.Int(0) : -1);
    } else if (!got || m.Int(0) != next_first)
      return MakeError(StatusCode::kCorrupt, "{} holds {} records but {} has {} rows", chunk_table, next_first,
                       row_table, got ? m.Int(0) : -1);
    return OkStatus();
  }

  // Reads one chunk table into `out` (reserved once), then maps stored name ids.
  template <typename Record, typename DecodeFn>
  Status ReadChunkTable(std::string_view chunk_table, std::string_view row_table, const RankTrace& t,
                        std::vector<Record>& out, DecodeFn decode) {
    ChunkLimits lim{name_map_.size(), t.streams.size(), t.comm_ops.size()};
    OVERLAPPROF_ASSIGN_OR_RETURN(size_t total, ChunkRecords(chunk_table));
    ReserveHuge(out, total);
    OVERLAPPROF_RETURN_IF_ERROR(ReadChunks(chunk_table, row_table, lim,
                                           [&](std::string_view blob, size_t n, const ChunkLimits& l) {
                                             return decode(blob, n, l, &out);
                                           }));
    if constexpr (!std::is_same_v<Record, CommOp>) {
      if (!IdentityNameMap())
        for (Record& r : out) r.name_id = name_map_[r.name_id];
    }
    return OkStatus();
  }

  Status ReadCommOpChunks(RankTrace& t) {
    return ReadChunkTable(kCommOpChunks.chunks, kCommOpChunks.rows, t, t.comm_ops, DecodeCommOps);
  }
  // All ranges are decoded (a few bytes each); those analysis does not need are dropped.
  Status ReadRangeChunks(RankTrace& t) {
    OVERLAPPROF_RETURN_IF_ERROR(
        ReadChunkTable(kRangeChunks.chunks, kRangeChunks.rows, t, t.ranges,
                       [&](std::string_view blob, size_t n, const ChunkLimits& l, std::vector<Range>* out) {
                         return DecodeRanges(blob, n, l, out, &range_order_);
                       }));
    if (!needs_.annotations)
      t.ranges.erase(std::remove_if(t.ranges.begin(), t.ranges.end(),
                                    [](const Range& r) { return r.kind != RangeKind::kStep; }),
                     t.ranges.end());
    return OkStatus();
  }
  Status ReadActivities(RankTrace& t) {
    return ReadChunkTable("activity_chunk", "gpu_activity", t, t.activities,
                          [&](std::string_view blob, size_t n, const ChunkLimits& l, std::vector<Activity>* out) {
                            return DecodeActivities(blob, n, l, out, &activity_order_);
                          });
  }
  Status ReadHostCalls(RankTrace& t) {
    return ReadChunkTable("host_call_chunk", "host_call", t, t.host_calls,
                          [&](std::string_view blob, size_t n, const ChunkLimits& l, std::vector<HostCall>* out) {
                            return DecodeHostCalls(blob, n, l, out, &host_call_order_);
                          });
  }

 public:
  // What RankTrace::Finalize does (sort by start, then end, stably), without its is-sorted
  // passes over records the decoder already saw in order.
  void Finalize(RankTrace& t) const {
    SortByTime(t.activities, activity_order_.sorted);
    SortByTime(t.host_calls, host_call_order_.sorted);
    SortByTime(t.ranges, layout_.range_chunks && range_order_.sorted);
  }

 private:
  template <typename T>
  static void SortByTime(std::vector<T>& v, bool known_sorted) {
    if (known_sorted) return;
    auto by_time = [](const T& a, const T& b) {  // RankTrace::Finalize's order
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns < b.end_ns;
    };
    if (!std::is_sorted(v.begin(), v.end(), by_time)) std::stable_sort(v.begin(), v.end(), by_time);
  }

  // Stored string ids map to themselves unless the file held duplicate strings.
  bool IdentityNameMap() const {
    for (size_t i = 0; i < name_map_.size(); ++i)
      if (name_map_[i] != i) return false;
    return true;
  }

  // Ranges from the rows (stores written before trace_range_chunk existed).
  Status ReadRanges(RankTrace& t) {
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(
        db_.get(), needs_.annotations ? "SELECT kind, start_ns, end_ns, name_id, step, tid, stream_id FROM trace_range ORDER BY id"
                           : "SELECT kind, start_ns, end_ns, name_id, step, tid, stream_id FROM trace_range "
                             "WHERE kind = 1 ORDER BY id"));
    for (int64_t row = 0;; ++row) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool more, s.Step("select trace_range"));
      if (!more) break;
      Range r;
      int64_t kind = s.Int(0);
      if (kind < 1 || kind > 3) return Invalid("trace_range", row, "unknown kind");
      r.kind = static_cast<RangeKind>(kind);
      r.start_ns = s.Int(1);
      r.end_ns = s.Int(2);
      if (!TimeInRange(r.start_ns) || !TimeInRange(r.end_ns)) return Invalid("trace_range", row, "time out of range");
      if (r.end_ns < r.start_ns) return Invalid("trace_range", row, "end_ns before start_ns");
      bool ok = true;
      r.name_id = Name(s.Int(3), &ok);
      if (!ok) return Invalid("trace_range", row, "name_id out of range");
      r.step = s.OptionalInt(4);
      r.tid = s.OptionalInt(5);
      int64_t stream = s.OptionalInt(6);
      if (stream != kUnknown) {
        if (stream < 0 || static_cast<size_t>(stream) >= t.streams.size())
          return Invalid("trace_range", row, "stream_id out of range");
        r.stream = static_cast<uint32_t>(stream);
      }
      t.ranges.push_back(r);
    }
    return OkStatus();
  }

  Status ReadExternalCorrelations(RankTrace& t) {
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(
        s.Prepare(db_.get(), "SELECT correlation_id, external_id FROM external_correlation"));
    for (;;) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step("select external_correlation"));
      if (!row) break;
      t.external_correlations.emplace_back(s.Int(0), s.Int(1));
    }
    return OkStatus();
  }

  // Operations timed by NCCL's profiler plugin (schema 1.2). Times are checked as every other
  // time (in range, end not before start); comm_op_id must name a comm op.
  Status ReadNcclProfilerOps(RankTrace& t) {
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(
        db_.get(),
        "SELECT communicator, nccl_comm_hash, comm_rank, comm_nranks, op, nccl_seq, datatype, count, bytes, root_peer, "
        "algorithm, protocol, channels_expected, channels, gpu_start_raw, gpu_end_raw, start_ns, end_ns, host_start_ns, "
        "group_id, proxy_ops, proxy_steps, abi_version, flags, host_tid, comm_op_id FROM nccl_profiler_op ORDER BY id"));
    for (int64_t row = 0;; ++row) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool more, s.Step("select nccl_profiler_op"));
      if (!more) break;
      NcclPluginOp o;
      o.communicator = std::string(s.Text(0));
      o.nccl_comm_hash = s.OptionalInt(1);
      o.comm_rank = s.OptionalInt(2);
      o.comm_nranks = s.OptionalInt(3);
      o.op = ParseCollective(s.Text(4));
      o.nccl_seq = s.OptionalInt(5);
      o.datatype = std::string(s.Text(6));
      o.count = s.OptionalInt(7);
      o.bytes = s.OptionalInt(8);
      o.root_peer = s.OptionalInt(9);
      o.algorithm = std::string(s.Text(10));
      o.protocol = std::string(s.Text(11));
      o.channels_expected = s.OptionalInt(12);
      o.channels = s.OptionalInt(13) == kUnknown ? 0 : s.Int(13);
      o.gpu_start_raw = s.OptionalInt(14);
      o.gpu_end_raw = s.OptionalInt(15);
      o.start_ns = s.OptionalInt(16);
      o.end_ns = s.OptionalInt(17);
      o.host_start_ns = s.OptionalInt(18);
      o.group_id = s.OptionalInt(19);
      o.proxy_ops = s.OptionalInt(20) == kUnknown ? 0 : s.Int(20);
      o.proxy_steps = s.OptionalInt(21) == kUnknown ? 0 : s.Int(21);
      o.abi_version = s.OptionalInt(22);
      o.flags = s.Int(23);
      o.host_tid = s.OptionalInt(24);
      for (int64_t v : {o.start_ns, o.end_ns, o.host_start_ns})
        if (v != kUnknown && !TimeInRange(v)) return Invalid("nccl_profiler_op", row, "time out of range");
      if (o.start_ns != kUnknown && o.end_ns != kUnknown && o.end_ns < o.start_ns)
        return Invalid("nccl_profiler_op", row, "end_ns before start_ns");
      const int64_t call = s.OptionalInt(25);
      if (call != kUnknown) {
        if (call < 0 || static_cast<size_t>(call) >= t.comm_ops.size())
          return Invalid("nccl_profiler_op", row, "comm_op_id out of range");
        o.comm_op = static_cast<uint32_t>(call);
      }
      t.nccl_plugin_ops.push_back(std::move(o));
    }
    return OkStatus();
  }

  Status ReadStats(RankTrace& t) {
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(db_.get(), "SELECT name, severity, value, description FROM stats"));
    for (;;) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, s.Step("select stats"));
      if (!row) break;
      std::string_view name = s.Text(0);
      if (auto stat = FindStat(name)) {
        t.stats.Set(*stat, s.Int(2));
      } else {
        // A counter from a newer minor version: keep it with the severity the file gives.
        ExtraStat e;
        e.name = std::string(name);
        e.severity = ParseSeverity(s.Text(1)).value_or(Severity::kWarning);
        e.value = s.Int(2);
        e.description = std::string(s.Text(3));
        t.extra_stats.push_back(std::move(e));
      }
    }
    return OkStatus();
  }

  Db& db_;
  TraceNeeds needs_;
  Layout layout_;
  BlobReader blobs_;
  TimeOrder activity_order_, host_call_order_, range_order_;  // as decoded
  std::vector<uint32_t> name_map_;  // stored string id -> StringTable id
};

// The store's schema version: PRAGMA user_version = major * 1000 + minor.
struct SchemaVersion {
  int64_t user_version = 0, major = 0, minor = 0;
};

// An overlapprof store (application_id) of a schema major this build reads.
StatusOr<SchemaVersion> CheckIdentity(Db& db) {
  StatusOr<int64_t> app_id = PragmaInt(db, "application_id");
  if (!app_id.ok()) {
    if (app_id.status().code() == StatusCode::kCorrupt)
      return MakeError(StatusCode::kCorrupt, "corrupted SQLite file ({})", app_id.status().message());
    return app_id.status();
  }
  if (*app_id != kStoreApplicationId)
    return MakeError(StatusCode::kInvalidInput,
                     "a SQLite database of another schema (application_id {:#x}), not an overlapprof trace store",
                     static_cast<uint32_t>(*app_id));
  SchemaVersion v;
  OVERLAPPROF_ASSIGN_OR_RETURN(v.user_version, PragmaInt(db, "user_version"));
  v.major = v.user_version / 1000;
  v.minor = v.user_version % 1000;
  if (v.major > kSchemaMajor)
    return MakeError(StatusCode::kUnsupportedVersion,
                     "written with trace schema {}.{}, but this overlapprof ({}) reads schema {}.x and older: "
                     "upgrade overlapprof to one that reads schema {}",
                     v.major, v.minor, kToolVersion, kSchemaMajor, v.major);
  if (v.major < 1) return MakeError(StatusCode::kInvalidInput, "invalid trace schema version {}", v.user_version);
  return v;
}

// Which tables the store has: every required one (else an error), and the optional ones.
// `injector` is provisional until ReadLayoutMeta confirms it from meta.
StatusOr<Layout> FindTables(sqlite3* h, const SchemaVersion& version) {
  Layout layout;
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(h, "SELECT 1 FROM sqlite_schema WHERE type='table' AND name=?"));
  auto has_table = [&](std::string_view table) -> StatusOr<bool> {
    s.Bind(1, table);
    StatusOr<bool> present = s.Step("check table");
    s.Reset();
    return present;
  };
  for (std::string_view table : kRequiredTables) {
    OVERLAPPROF_ASSIGN_OR_RETURN(bool present, has_table(table));
    if (!present)
      return MakeError(StatusCode::kInvalidInput, "trace store lacks table '{}' (schema {}.{})", table, version.major,
                       version.minor);
  }
  OVERLAPPROF_ASSIGN_OR_RETURN(layout.comm_op_chunks, has_table(kCommOpChunks.chunks));
  OVERLAPPROF_ASSIGN_OR_RETURN(layout.range_chunks, has_table(kRangeChunks.chunks));
  OVERLAPPROF_ASSIGN_OR_RETURN(bool ext_table, has_table("external_correlation"));
  layout.injector = ext_table;
  OVERLAPPROF_ASSIGN_OR_RETURN(layout.nccl_profiler_ops, has_table(kNcclProfilerOpTable));
  OVERLAPPROF_ASSIGN_OR_RETURN(layout.cuda_events, has_table(kCudaEventTable));
  return layout;
}

// Structure check of exactly the tables read (the row copies of chunked records are not read,
// so not checked: that keeps the check proportional to the data used; the chunks' own contents
// are validated record by record when decoded).
Status QuickCheckTablesRead(sqlite3* h, const Layout& layout, const TraceNeeds& needs) {
  std::vector<std::string_view> read_tables = {"meta", "string", "device", "stream"};
  read_tables.push_back(layout.comm_op_chunks ? kCommOpChunks.chunks : kCommOpChunks.rows);
  read_tables.push_back("activity_chunk");
  if (needs.host_calls) read_tables.push_back("host_call_chunk");
  if (layout.injector) read_tables.push_back("external_correlation");
  read_tables.push_back(layout.range_chunks ? kRangeChunks.chunks : kRangeChunks.rows);
  read_tables.push_back("stats");
  if (layout.nccl_profiler_ops) read_tables.push_back(kNcclProfilerOpTable);
  if (layout.cuda_events && needs.host_calls) read_tables.push_back(kCudaEventTable);
  for (std::string_view table : read_tables) {
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(s.Prepare(h, fmt::format("PRAGMA quick_check({})", table)));
    StatusOr<bool> row = s.Step("quick_check");
    if (!row.ok()) return MakeError(StatusCode::kCorrupt, "corrupted SQLite file ({})", row.status().message());
    std::string verdict(*row ? s.Text(0) : "no result");
    if (verdict != "ok") {
      for (char& c : verdict)
        if (c == '\n' || c == '\r') c = ' ';
      return MakeError(StatusCode::kCorrupt, "corrupted SQLite file (quick_check: {})", verdict);
    }
  }
  return OkStatus();
}

// What meta says about the layout: the schema version it repeats (must agree with
// user_version), whether the injector wrote it (source_format), and whether the row tables copy
// the chunks (row_copies).
Status ReadLayoutMeta(sqlite3* h, const SchemaVersion& version, Layout& layout) {
  // meta('schema_version') repeats user_version as "major.minor" (schema.h): a store where
  // the two disagree is damaged or forged, and is read as neither.
  Stmt v;
  OVERLAPPROF_RETURN_IF_ERROR(v.Prepare(h, "SELECT value FROM meta WHERE key='schema_version'"));
  OVERLAPPROF_ASSIGN_OR_RETURN(bool has_version, v.Step("select meta"));
  const std::string said = fmt::format("{}.{}", version.major, version.minor);
  if (has_version && (sqlite3_column_type(v.get(), 0) != SQLITE_TEXT || v.Text(0) != said))
    return MakeError(StatusCode::kInvalidInput,
                     "the store's two schema versions disagree: PRAGMA user_version {} ({}) but meta.schema_version "
                     "'{}'",
                     version.user_version, said, v.Text(0));
  if (layout.injector) {
    Stmt m;
    OVERLAPPROF_RETURN_IF_ERROR(m.Prepare(h, "SELECT value FROM meta WHERE key='source_format'"));
    OVERLAPPROF_ASSIGN_OR_RETURN(bool row, m.Step("select meta"));
    layout.injector = row && m.Text(0) == "overlapprof";
  }
  Stmt rc;
  OVERLAPPROF_RETURN_IF_ERROR(rc.Prepare(h, "SELECT value FROM meta WHERE key='row_copies'"));
  OVERLAPPROF_ASSIGN_OR_RETURN(bool has_rc, rc.Step("select meta"));
  layout.row_copies = !(has_rc && sqlite3_column_type(rc.get(), 0) == SQLITE_INTEGER && rc.Int(0) == 0);
  return OkStatus();
}

}  // namespace

// How long a read waits for a writer's exclusive lock (ms).
constexpr int kReadBusyTimeoutMs = 2000;

StatusOr<RankTrace> ReadStore(const std::string& path, const StoreReadOptions& options) {
  Db db;
  // Defensive mode, no triggers or views, tight limits, cell_size_check, no mmap (sqlite_util.h).
  OVERLAPPROF_RETURN_IF_ERROR(OpenUntrustedReadOnly(db, path, /*max_columns=*/100));
  sqlite3* h = db.get();
  // A store still being written (`run --watch-*`, docs/watch.md) is read from one snapshot: every
  // statement below in one read transaction (a chunk committed between two statements would name
  // strings the first did not read), waiting a while for the writer's short exclusive moments
  // (its switch out of WAL when it finishes). Closing the connection ends the transaction.
  sqlite3_busy_timeout(h, kReadBusyTimeoutMs);
  OVERLAPPROF_RETURN_IF_ERROR(db.Exec("BEGIN"));
  OVERLAPPROF_ASSIGN_OR_RETURN(SchemaVersion version, CheckIdentity(db));
  OVERLAPPROF_ASSIGN_OR_RETURN(Layout layout, FindTables(h, version));
  // Injector stores link activities to launches and comm ops through host calls.
  StoreReadOptions opts = options;
  if (layout.injector) opts.needs.host_calls = true;
  if (opts.quick_check) OVERLAPPROF_RETURN_IF_ERROR(QuickCheckTablesRead(h, layout, opts.needs));
  OVERLAPPROF_RETURN_IF_ERROR(ReadLayoutMeta(h, version, layout));
  // A schema-1.1 store written by `import` has the (empty) external_correlation table too; only
  // an injector store (meta says so) needs its host calls decoded for linking.
  opts.needs.host_calls = options.needs.host_calls || layout.injector;
  RankTrace t;
  Reader reader(db, opts.needs, layout);
  Status st = reader.ReadAll(t);
  if (!st.ok()) {
    if (st.code() == StatusCode::kCorrupt && st.message().rfind("corrupted", 0) != 0)
      return MakeError(StatusCode::kCorrupt, "corrupted trace store ({})", st.message());
    return st;
  }
  t.meta.source_path = path;
  reader.Finalize(t);
  // A recording that did not finish: a counter and a notice saying what it may miss.
  OVERLAPPROF_ASSIGN_OR_RETURN(RecordingEnd end, ReadRecordingEnd(h));
  NoteRecordingEnd(end, t);
  if (layout.injector) LinkInjectorRecords(t);
  return t;
}

}  // namespace overlapprof
