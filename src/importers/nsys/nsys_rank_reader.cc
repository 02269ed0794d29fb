#include "src/importers/nsys/nsys_rank_reader.h"

#include <sys/mman.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "src/common/rank_env.h"

namespace overlapprof::nsys {

namespace {

// The first of `names` set to a non-negative integer in `env` ("NAME=VALUE;..."), else kUnknown.
int64_t EnvIntIn(std::string_view env, const char* const* names) {
  for (const char* const* n = names; *n; ++n) {
    const std::string_view name = *n;
    for (size_t pos = 0; pos <= env.size();) {
      size_t end = env.find(';', pos);
      if (end == std::string_view::npos) end = env.size();
      const std::string_view item = env.substr(pos, end - pos);
      if (item.size() > name.size() && item.substr(0, name.size()) == name && item[name.size()] == '=') {
        int64_t v;
        if (ParseInt(item.substr(name.size() + 1), &v) && v >= 0) return v;
      }
      pos = end + 1;
    }
  }
  return kUnknown;
}

}  // namespace

void Prefault(void* p, size_t bytes) {
  constexpr uintptr_t kPage = 4096;
  uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
  uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kPage - 1);
  if (hi > lo + (kPage << 8)) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_WRITE);
}

void NsysRankReader::ReserveActivities(uint64_t rows) {
  t_.activities.reserve(std::min<uint64_t>(rows, uint64_t{1} << 32));
  Prefault(t_.activities.data(), t_.activities.capacity() * sizeof(Activity));
}

Status NsysRankReader::ReadTables() {
  GpuTable kernel{kKernel, ActivityKind::kKernel};
  OVERLAPPROF_RETURN_IF_ERROR(ReadGpuTable(kernel));
  if (db_.Has(kMemcpy)) OVERLAPPROF_RETURN_IF_ERROR(ReadGpuTable({kMemcpy, ActivityKind::kMemcpy}));
  if (db_.Has(kMemset)) OVERLAPPROF_RETURN_IF_ERROR(ReadGpuTable({kMemset, ActivityKind::kMemset}));
  if (db_.Has(kSync)) OVERLAPPROF_RETURN_IF_ERROR(ReadGpuTable({kSync, ActivityKind::kSync}));
  if (db_.Has(kRuntime)) OVERLAPPROF_RETURN_IF_ERROR(ReadRuntime());
  return OkStatus();
}

// Read's first step: the rank, the clock, the string lookup.
Status NsysRankReader::Begin(const UnitKey& unit, const TraceNeeds& needs, bool sql) {
  unit_ = unit;
  needs_ = needs;
  sql_ = sql;
  OVERLAPPROF_RETURN_IF_ERROR(ReadClock());
  OVERLAPPROF_RETURN_IF_ERROR(db_.Prep(strings_, "SELECT value FROM StringIds WHERE id = ?"));
  int missing = 0;
  for (const char* table : {kMemcpy, kMemset, kSync, kRuntime, kNvtx}) missing += !db_.Has(table);
  t_.stats.Set(Stat::nsys_optional_tables_missing, missing);
  return OkStatus();
}

// Read's last step, after the GPU and runtime tables: NVTX, the device and host, the rank.
StatusOr<RankTrace> NsysRankReader::Finish(const std::function<StatusOr<size_t>()>& units_in_file) {
  // Activities that no runtime call launched (no runtime table, no id, no call with the id)
  // are counted as unmatched correlations; sync records have no launch.
  if (!launches_counted_) builder_.EndLaunches(t_);
  if (db_.Has(kNvtx)) OVERLAPPROF_RETURN_IF_ERROR(ReadNvtx());
  OVERLAPPROF_RETURN_IF_ERROR(ReadDeviceAndHost());

  t_.meta.source_format = "nsys";
  t_.meta.pid = unit_.pid;
  t_.meta.clock_source = clock_source_;
  OVERLAPPROF_RETURN_IF_ERROR(ReadRankFromEnvironment(units_in_file));
  if (t_.meta.rank == kUnknown) t_.stats.Set(Stat::rank_unknown, 1);
  for (Stream& s : t_.streams) s.name = fmt::format("stream {}", s.native_id);
  t_.Finalize();
  return std::move(t_);
}


// Times become UTC ns when the export says when the session started on which clock.
Status NsysRankReader::ReadClock() {
  clock_source_ = "nsys: session timestamps";
  if (!db_.Has(kSession)) return OkStatus();
  OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, db_.Columns(kSession));
  if (!cols.count("utcEpochNs") || !cols.count("systemClockNs")) return OkStatus();
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(db_.Prep(s, "SELECT utcEpochNs, systemClockNs FROM TARGET_INFO_SESSION_START_TIME"));
  StatusOr<bool> row = s.Step("session start");
  if (!row.ok()) return DamagedFile(row.status());
  if (!*row || s.IsNull(0) || s.IsNull(1)) return OkStatus();
  const int64_t utc = s.Int(0), clock = s.Int(1);
  if (!TimeInRange(utc) || !TimeInRange(clock)) return OkStatus();
  offset_ = utc - clock;  // both in [0, 2^62): no overflow
  clock_source_ = "nsys: UTC (TARGET_INFO_SESSION_START_TIME: utcEpochNs - systemClockNs + t)";
  return OkStatus();
}


Status NsysRankReader::ReadGpuTable(GpuTable g) {
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<std::string> columns, db_.GpuColumns(g));
  // The rank's filter is applied here for a direct scan or a spill (SQL's WHERE already did).
  Rows st;
  if (const RowSpill* spill = partition_ ? partition_->Table(g.table) : nullptr) {
    st.OpenSpill(partition_, *spill, partition_->UnitIndex(unit_));
  } else {
    OVERLAPPROF_RETURN_IF_ERROR(DamagedFile(st.Open(
        db_, g.table, columns, fmt::format("deviceId = ?1 AND {} = ?2", g.pid_col.empty() ? "-1" : kPidOfGlobalPid),
        {unit_.device, unit_.pid}, sql_)));
  }
  BeginGpuTable();
  return st.ForEach([&](const auto& row) { return GpuRow(row, g); });
}


// The runtime calls of this process that launched this rank's GPU work give each activity
// its launch_ns (and a comm op its host call), as the Kineto importer does: the first call
// with a correlation id, in table order, wins. Linked while reading (an activity index per
// wanted id), so a call is kept as a HostCall only when the analyzers ask for host calls.
Status NsysRankReader::ReadRuntime() {
  OVERLAPPROF_ASSIGN_OR_RETURN(bool wants, BeginRuntime());
  if (!wants) return OkStatus();
  OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, db_.Columns(kRuntime));
  const bool tid = cols.count("globalTid") > 0;
  Rows st;
  if (const RowSpill* spill = partition_ ? partition_->Table(kRuntime) : nullptr) {
    st.OpenSpill(partition_, *spill, partition_->PidIndex(unit_.pid));
  } else {
    OVERLAPPROF_RETURN_IF_ERROR(DamagedFile(st.Open(db_, kRuntime, NsysDb::RuntimeColumns(cols),
                                                fmt::format("{} = ?1", tid ? kPidOfGlobalTid : "-1"), {unit_.pid}, sql_)));
  }
  OVERLAPPROF_RETURN_IF_ERROR(st.ForEach([&](const auto& row) { return RuntimeRow(row); }));
  EndRuntime();
  return OkStatus();
}

// ReadRuntime in three steps, so that one pass over the runtime table can feed several ranks
// (Builders): true when the table has what linking needs and this rank has ids to look up.
StatusOr<bool> NsysRankReader::BeginRuntime() {
  OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, db_.Columns(kRuntime));
  for (const char* c : {"start", "end", "correlationId"})
    if (!cols.count(c)) return false;  // no launch times (counted as unmatched by EndLaunches)
  for (const Activity& a : t_.activities)
    if (a.kind == ActivityKind::kMemcpy && a.comm_op == kNoIndex && a.correlation_id != kUnknown)
      copy_correlations_.push_back(a.correlation_id);
  std::sort(copy_correlations_.begin(), copy_correlations_.end());
  if (needs_.host_calls) OVERLAPPROF_RETURN_IF_ERROR(ReadEventRecords());
  std::sort(event_calls_.begin(), event_calls_.end());
  event_calls_.erase(std::unique(event_calls_.begin(), event_calls_.end()), event_calls_.end());
  const bool launches = builder_.ExpectLaunches(t_);
  return launches || !event_calls_.empty();
}

void NsysRankReader::AddEventWait(int64_t sync_type, int64_t sync_id, const Activity& a) {
  // CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE (1), _STREAM_WAIT_EVENT (2); an invalid
  // id is CUPTI_SYNCHRONIZATION_INVALID_VALUE (32 or 64 bits of ones), and 0 (records number from 1:
  // a wait with 0 names an event recorded before the capture).
  if ((sync_type != 1 && sync_type != 2) || sync_id <= 0 || sync_id == 0xffffffffll) return;
  EventLink l;
  l.kind = sync_type == 1 ? EventLinkKind::kHostWait : EventLinkKind::kStreamWait;
  l.correlation_id = a.correlation_id;
  l.sync_id = sync_id;
  if (l.kind == EventLinkKind::kStreamWait) l.stream = a.stream;
  t_.event_links.push_back(l);
  event_calls_.push_back(a.correlation_id);
}

// The event records of this rank (CUPTI 12.8+ exports: eventSyncId), where any wait names one.
Status NsysRankReader::ReadEventRecords() {
  if (t_.event_links.empty() || !db_.Has(kCudaEvent)) return OkStatus();
  OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, db_.Columns(kCudaEvent));
  for (const char* c : {"deviceId", "streamId", "correlationId", "eventSyncId", "globalPid"})
    if (!cols.count(c)) return OkStatus();
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(db_.Prep(s, fmt::format("SELECT correlationId, streamId, eventSyncId FROM {} WHERE "
                                                      "deviceId = ?1 AND {} = ?2",
                                                      kCudaEvent, kPidOfGlobalPid)));
  s.Bind(1, unit_.device);
  s.Bind(2, unit_.pid);
  for (;;) {
    StatusOr<bool> row = s.Step(kCudaEvent);
    if (!row.ok()) return DamagedFile(row.status());
    if (!*row) break;
    if (s.IsNull(0) || s.IsNull(1) || s.IsNull(2)) continue;
    const int64_t sync_id = s.Int(2);
    if (sync_id <= 0 || sync_id == 0xffffffffll) continue;
    EventLink l;
    l.kind = EventLinkKind::kRecord;
    l.correlation_id = s.Int(0);
    l.sync_id = sync_id;
    l.stream = t_.StreamIndex(unit_.device, s.Int(1));
    t_.event_links.push_back(l);
    event_calls_.push_back(l.correlation_id);
  }
  return OkStatus();
}

void NsysRankReader::EndRuntime() {
  builder_.EndLaunches(t_);
  launches_counted_ = true;
}

// NVTX push/pop and start/end ranges of this process: ProfilerStep#N ranges are steps;
// the others are annotations (kept when asked for: --step-range, import).
Status NsysRankReader::ReadNvtx() {
  OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, db_.Columns(kNvtx));
  for (const char* c : {"start", "end", "eventType"})
    if (!cols.count(c)) return OkStatus();
  const bool tid = cols.count("globalTid") > 0;
  const bool blobs = cols.count("binaryData") > 0;
  NvtxPayloadSchemas payload_schemas;  // NCCL's (ReadPayloadSchemas)
  if (blobs) {
    OVERLAPPROF_ASSIGN_OR_RETURN(payload_schemas, ReadPayloadSchemas(db_));
  }
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(db_.Prep(s, fmt::format("SELECT start, end, {}, {}, {}, {}, {} FROM {} WHERE eventType IN ({}, {}) AND {} = ?1",
                             cols.count("text") ? "text" : "NULL", cols.count("textId") ? "textId" : "NULL",
                             tid ? "globalTid & 16777215" : "NULL", cols.count("domainId") ? "domainId" : "NULL",
                             blobs ? "binaryData" : "NULL", kNvtx, kNvtxPushPop, kNvtxStartEnd,
                             tid ? kPidOfGlobalTid : "-1")));
  s.Bind(1, unit_.pid);
  sqlite3_stmt* st = s.get();
  constexpr std::string_view kStep = "ProfilerStep#";
  std::set<int64_t> steps_seen;
  while (true) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return DamagedFile(SqliteError(db_.get(), rc, "sqlite3_step(NVTX_EVENTS)"));
    if (sqlite3_column_type(st, 1) != SQLITE_INTEGER) {  // never ended
      t_.stats.Add(Stat::nvtx_ranges_unmatched);
      continue;
    }
    Range r;
    if (!ReadSpan(SqlRow{st}, &r.start_ns, &r.end_ns)) continue;
    std::string_view text;
    uint32_t text_id = kNoIndex;
    if (sqlite3_column_type(st, 2) == SQLITE_TEXT) {
      text = {reinterpret_cast<const char*>(sqlite3_column_text(st, 2)),
              static_cast<size_t>(sqlite3_column_bytes(st, 2))};
    } else if (sqlite3_column_type(st, 3) == SQLITE_INTEGER) {
      OVERLAPPROF_ASSIGN_OR_RETURN(text_id, Name(sqlite3_column_int64(st, 3)));
      text = t_.names.Get(text_id);
    }
    // NCCL's own API ranges (its NVTX domain: any but the default one) name the calls
    // behind the communication kernels this thread launched (NameOpsFromNcclRanges).
    if (text.substr(0, 4) == "nccl" && sqlite3_column_type(st, 4) == SQLITE_INTEGER &&
        sqlite3_column_type(st, 5) == SQLITE_INTEGER && sqlite3_column_int64(st, 5) != 0) {
      NcclRange& n = nccl_ranges_.emplace_back(NcclApiOf(text));
      n.tid = sqlite3_column_int64(st, 4);
      n.start_ns = r.start_ns;
      n.end_ns = r.end_ns;
      if (sqlite3_column_type(st, 6) == SQLITE_BLOB && !payload_schemas.empty()) {
        const auto* b = static_cast<const uint8_t*>(sqlite3_column_blob(st, 6));
        n.payload = payload_schemas.DecodeNccl(sqlite3_column_int64(st, 5),
                                                {b, static_cast<size_t>(sqlite3_column_bytes(st, 6))});
      }
      if (n.api == NcclApi::kCollective || n.api == NcclApi::kSend || n.api == NcclApi::kRecv) {
        // Without its payload, the ops' bytes and communicators are unknown: said, not left
        // silently empty.
        t_.stats.Add(n.payload ? Stat::nsys_nccl_payloads_decoded : Stat::nsys_nccl_payloads_unread);
      }
    }
    const bool is_step = text.substr(0, kStep.size()) == kStep;
    if (is_step) {
      int64_t n;
      if (!ParseInt(text.substr(kStep.size()), &n) || n < 0) {
        r.kind = RangeKind::kAnnotation;
      } else if (!steps_seen.insert(n).second) {
        t_.stats.Add(Stat::steps_duplicated);
        continue;
      } else {
        r.kind = RangeKind::kStep;
        r.step = n;
      }
    } else {
      r.kind = RangeKind::kAnnotation;
    }
    if (r.kind == RangeKind::kAnnotation && !needs_.annotations) continue;
    r.name_id = text_id != kNoIndex ? text_id : t_.names.Intern(text);
    if (sqlite3_column_type(st, 4) == SQLITE_INTEGER) r.tid = sqlite3_column_int64(st, 4);
    t_.ranges.push_back(r);
  }
  NameOpsFromNcclRanges(nccl_ranges_, t_, copy_launches_);
  std::vector<CopyLaunch>().swap(copy_launches_);
  std::vector<int64_t>().swap(copy_correlations_);
  return OkStatus();
}


// The rank's GPU (TARGET_INFO_GPU when present) and the host name.
Status NsysRankReader::ReadDeviceAndHost() {
  Device d;
  d.id = unit_.device;
  if (db_.Has(kGpuInfo)) {
    OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, db_.Columns(kGpuInfo));
    if (cols.count("id")) {
      auto col = [&](const char* c) { return cols.count(c) ? std::string(c) : std::string("NULL"); };
      Stmt s;
      OVERLAPPROF_RETURN_IF_ERROR(db_.Prep(s, fmt::format("SELECT {}, {}, {}, {}, {} FROM {} WHERE id = ?1", col("name"), col("computeMajor"),
                                 col("computeMinor"), col("totalMemory"), col("smCount"), kGpuInfo)));
      s.Bind(1, unit_.device);
      StatusOr<bool> row = s.Step("TARGET_INFO_GPU");
      if (!row.ok()) return DamagedFile(row.status());
      if (*row) {
        d.name = std::string(s.Text(0));
        d.compute_major = s.OptionalInt(1);
        d.compute_minor = s.OptionalInt(2);
        d.total_memory = s.OptionalInt(3);
        d.sm_count = s.OptionalInt(4);
      }
    }
  }
  t_.devices.push_back(std::move(d));
  OVERLAPPROF_ASSIGN_OR_RETURN(std::optional<std::string> host, SystemEnv("Hostname"));
  if (host) t_.meta.host = std::move(*host);
  return OkStatus();
}

// TARGET_INFO_SYSTEM_ENV's value for `name` (the first target's), nullopt when absent.
StatusOr<std::optional<std::string>> NsysRankReader::SystemEnv(std::string_view name) {
  if (!db_.Has(kSystemEnv)) return std::optional<std::string>();
  OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, db_.Columns(kSystemEnv));
  if (!cols.count("name") || !cols.count("value")) return std::optional<std::string>();
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(db_.Prep(s, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = ?1 LIMIT 1"));
  s.Bind(1, name);
  StatusOr<bool> row = s.Step("TARGET_INFO_SYSTEM_ENV");
  if (!row.ok()) return DamagedFile(row.status());
  if (!*row) return std::optional<std::string>();
  return std::optional<std::string>(std::string(s.Text(0)));
}

// nsys records the environment it was started in (TARGET_INFO_SYSTEM_ENV DeviceEnvironment,
// "NAME=VALUE;NAME=VALUE;..."), not the profiled processes'. One nsys per rank under the
// launcher (`torchrun ... --no-python nsys profile ... python train.py`, `srun nsys profile
// ...`) starts in the rank's environment: RANK, WORLD_SIZE, LOCAL_RANK (or MPI's, Slurm's;
// src/common/rank_env.h) are that rank's, and the export holds that one rank. An nsys around
// the launcher starts before any rank exists: no RANK there, and an export of several ranks
// is never given one from it (docs/nsys.md, "Ranks").
Status NsysRankReader::ReadRankFromEnvironment(const std::function<StatusOr<size_t>()>& units_in_file) {
  OVERLAPPROF_ASSIGN_OR_RETURN(std::optional<std::string> env, SystemEnv("DeviceEnvironment"));
  if (!env) return OkStatus();
  const int64_t rank = EnvIntIn(*env, kRankEnv);
  if (rank == kUnknown) return OkStatus();
  OVERLAPPROF_ASSIGN_OR_RETURN(size_t units, units_in_file());
  if (units != 1) return OkStatus();
  t_.meta.rank = rank;
  t_.meta.world_size = EnvIntIn(*env, kWorldSizeEnv);
  t_.meta.local_rank = EnvIntIn(*env, kLocalRankEnv);
  return OkStatus();
}

}  // namespace overlapprof::nsys
