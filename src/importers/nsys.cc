// Importer for Nsight Systems SQLite exports (`nsys export --type sqlite report.nsys-rep`).
// One export holds every process nsys traced: each (process, GPU) with GPU work is one rank
// (Importer::Units: "pid<PID>.gpu<DEVICE>"), read on its own with WHERE clauses, so memory
// holds one rank at a time. Tables and columns are found by name, not position (they differ
// across nsys releases); docs/nsys.md lists what is read and how ranks are assigned.
//
// Files are untrusted: opened like stores (OpenUntrustedReadOnly), every value validated,
// keys from the file kept in ordered containers (no identity-hashed maps).
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <set>
#include <string>
#include <vector>

#include "src/importers/importer.h"
#include "src/io/input_file.h"
#include "src/store/schema.h"
#include "src/store/sqlite_util.h"
#include "src/trace/classify.h"

extern char** environ;

namespace overlapprof {

namespace {

constexpr const char* kKernel = "CUPTI_ACTIVITY_KIND_KERNEL";
constexpr const char* kMemcpy = "CUPTI_ACTIVITY_KIND_MEMCPY";
constexpr const char* kMemset = "CUPTI_ACTIVITY_KIND_MEMSET";
constexpr const char* kSync = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
constexpr const char* kRuntime = "CUPTI_ACTIVITY_KIND_RUNTIME";
constexpr const char* kNvtx = "NVTX_EVENTS";
constexpr const char* kStrings = "StringIds";
constexpr const char* kSession = "TARGET_INFO_SESSION_START_TIME";
constexpr const char* kGpuInfo = "TARGET_INFO_GPU";
constexpr const char* kSystemEnv = "TARGET_INFO_SYSTEM_ENV";
// Tables only nsys writes: one of them without the kernel table is an export without kernels.
constexpr const char* kMarkers[] = {"META_DATA_EXPORT", "TARGET_INFO_SESSION_START_TIME", "StringIds",
                                    "ENUM_NSYS_EVENT_TYPE"};

// A hostile file could list millions of (process, GPU) pairs, each costing a scan.
constexpr size_t kMaxUnits = 4096;
// CUPTI_ACTIVITY_MEMCPY_KIND_PTOP (cupti_activity.h; ENUM_CUDA_MEMCPY_OPER in exports).
constexpr int64_t kCopyKindPeerToPeer = 10;
// ENUM_NSYS_EVENT_TYPE: NvtxPushPopRange, NvtxStartEndRange.
constexpr int64_t kNvtxPushPop = 59, kNvtxStartEnd = 60;

// The process id inside nsys' serialized global ids (hw:8 | vm:8 | pid:24 | tid:24);
// -1 when the column is NULL or absent.
constexpr const char* kPidOfGlobalPid = "ifnull((globalPid >> 24) & 16777215, -1)";
constexpr const char* kPidOfGlobalTid = "ifnull((globalTid >> 24) & 16777215, -1)";

struct UnitKey {
  int64_t pid = -1;
  int64_t device = -1;
  auto operator<=>(const UnitKey&) const = default;
};

std::string KeyString(const UnitKey& k) { return fmt::format("pid{}.gpu{}", k.pid, k.device); }

bool ParseInt(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  bool neg = s[0] == '-';
  if (neg) s.remove_prefix(1);
  if (s.empty()) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = neg ? -v : v;
  return true;
}

bool ParseKey(std::string_view s, UnitKey* k) {
  if (s.substr(0, 3) != "pid") return false;
  size_t dot = s.find(".gpu");
  if (dot == std::string_view::npos) return false;
  return ParseInt(s.substr(3, dot - 3), &k->pid) && ParseInt(s.substr(dot + 4), &k->device);
}

std::string_view CopyKindName(int64_t kind) {
  static constexpr std::string_view kNames[] = {"Memcpy", "Memcpy HtoD", "Memcpy DtoH", "Memcpy HtoA",
                                                "Memcpy AtoH", "Memcpy AtoA", "Memcpy AtoD", "Memcpy DtoA",
                                                "Memcpy DtoD", "Memcpy HtoH", "Memcpy PtoP", "Memcpy UVM HtoD",
                                                "Memcpy UVM DtoH", "Memcpy UVM DtoD"};
  return kind >= 0 && kind < static_cast<int64_t>(std::size(kNames)) ? kNames[kind] : kNames[0];
}

std::string_view SyncTypeName(int64_t type) {
  static constexpr std::string_view kNames[] = {"Sync", "Event sync", "Stream wait sync", "Stream sync",
                                                "Context sync"};
  return type >= 0 && type < static_cast<int64_t>(std::size(kNames)) ? kNames[type] : kNames[0];
}

// A GPU-activity table and the columns this export has, as SELECT expressions (a missing
// optional column reads as NULL).
struct GpuTable {
  const char* table;
  ActivityKind kind;
  std::string name_col = "NULL", corr_col = "NULL", bytes_col = "NULL", copy_kind_col = "NULL",
              sync_type_col = "NULL", pid_expr = "-1";
};

// An NCCL API range (NCCL's NVTX domain) on a host thread: what kind of call it was.
enum class NcclApi : uint8_t { kOther, kGroupEnd, kSend, kRecv, kCollective };
struct NcclRange {
  int64_t tid;
  int64_t start_ns, end_ns;
  NcclApi api;
  std::string op;  // kCollective: the normalized collective (NormalizeCollectiveName)
};

// "ncclAllReduce" -> a collective "allreduce"; ncclSend/ncclRecv; ncclGroupEnd; the rest
// (ncclGroupStart, ncclCommCount, communicator calls) are kOther.
NcclRange NcclApiOf(std::string_view name) {
  NcclRange r{};
  static constexpr std::string_view kCollectives[] = {"allreduce", "broadcast", "reduce", "allgather",
                                                      "reducescatter", "alltoall", "gather", "scatter"};
  if (name == "ncclGroupEnd") {
    r.api = NcclApi::kGroupEnd;
  } else if (name == "ncclSend") {
    r.api = NcclApi::kSend;
  } else if (name == "ncclRecv") {
    r.api = NcclApi::kRecv;
  } else {
    std::string op = NormalizeCollectiveName(name);
    if (std::find(std::begin(kCollectives), std::end(kCollectives), op) != std::end(kCollectives)) {
      r.api = NcclApi::kCollective;
      r.op = std::move(op);
    }
  }
  return r;
}

class Export {
 public:
  Status Open(const std::string& path) {
    path_ = path;
    OVERLAPPROF_RETURN_IF_ERROR(OpenUntrustedReadOnly(db_, path, /*max_columns=*/400));
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(Prep(s, "SELECT name FROM sqlite_schema WHERE type='table'"));
    while (true) {
      StatusOr<bool> row = s.Step("list tables");
      if (!row.ok()) return Damaged(row.status());
      if (!*row) break;
      tables_.insert(std::string(s.Text(0)));
    }
    if (!Has(kKernel)) {
      for (const char* m : kMarkers)
        if (Has(m))
          return MakeError(StatusCode::kInvalidInput,
                           "Nsight Systems export without table {}: no CUDA kernels were traced (nsys profile -t "
                           "cuda)",
                           kKernel);
      Stmt a;
      OVERLAPPROF_RETURN_IF_ERROR(Prep(a, "PRAGMA application_id"));
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, a.Step("PRAGMA application_id"));
      return MakeError(StatusCode::kInvalidInput,
                       "a SQLite database of another schema (application_id {:#x}), neither an overlapprof trace "
                       "store nor an Nsight Systems export",
                       static_cast<uint32_t>(row ? a.Int(0) : 0));
    }
    if (!Has(kStrings))
      return MakeError(StatusCode::kInvalidInput, "Nsight Systems export without table {} (kernel names)", kStrings);
    return OkStatus();
  }

  bool Has(std::string_view table) const { return tables_.count(std::string(table)) > 0; }

  StatusOr<std::vector<UnitKey>> ListUnits() {
    std::set<UnitKey> units;
    for (const char* table : {kKernel, kMemcpy, kMemset}) {
      if (!Has(table)) continue;
      OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(table));
      if (!cols.count("deviceId")) return MissingColumn(table, "deviceId");
      Stmt s;
      OVERLAPPROF_RETURN_IF_ERROR(Prep(s, fmt::format("SELECT DISTINCT {}, deviceId FROM {}", cols.count("globalPid") ? kPidOfGlobalPid : "-1",
                                 table)));
      while (true) {
        StatusOr<bool> row = s.Step("list processes and devices");
        if (!row.ok()) return Damaged(row.status());
        if (!*row) break;
        if (s.IsNull(1)) continue;  // no device: skipped when read (events_malformed)
        units.insert({s.Int(0), s.Int(1)});
        if (units.size() > kMaxUnits)
          return MakeError(StatusCode::kInvalidInput, "more than {} (process, GPU) pairs in one export", kMaxUnits);
      }
    }
    return std::vector<UnitKey>(units.begin(), units.end());
  }

  StatusOr<RankTrace> Read(const UnitKey& unit, const ImportOptions& options) {
    unit_ = unit;
    needs_ = options.store_needs;
    if (options.store_quick_check && !AlreadyChecked()) {
      OVERLAPPROF_RETURN_IF_ERROR(QuickCheck());
      MarkChecked();
    }
    OVERLAPPROF_RETURN_IF_ERROR(ReadClock());
    OVERLAPPROF_RETURN_IF_ERROR(Prep(strings_, "SELECT value FROM StringIds WHERE id = ?"));
    int missing = 0;
    for (const char* table : {kMemcpy, kMemset, kSync, kRuntime, kNvtx}) missing += !Has(table);
    t_.stats.Set(Stat::nsys_optional_tables_missing, missing);

    GpuTable kernel{kKernel, ActivityKind::kKernel};
    OVERLAPPROF_RETURN_IF_ERROR(ReadGpuTable(kernel));
    if (Has(kMemcpy)) OVERLAPPROF_RETURN_IF_ERROR(ReadGpuTable({kMemcpy, ActivityKind::kMemcpy}));
    if (Has(kMemset)) OVERLAPPROF_RETURN_IF_ERROR(ReadGpuTable({kMemset, ActivityKind::kMemset}));
    if (Has(kSync)) OVERLAPPROF_RETURN_IF_ERROR(ReadGpuTable({kSync, ActivityKind::kSync}));
    if (Has(kRuntime)) OVERLAPPROF_RETURN_IF_ERROR(ReadRuntime());
    LinkLaunches();
    if (Has(kNvtx)) OVERLAPPROF_RETURN_IF_ERROR(ReadNvtx());
    OVERLAPPROF_RETURN_IF_ERROR(ReadDeviceAndHost());

    t_.meta.source_format = "nsys";
    t_.meta.pid = unit.pid;
    t_.meta.clock_source = clock_source_;
    t_.stats.Set(Stat::rank_unknown, 1);  // nsys does not record RANK (docs/nsys.md)
    for (Stream& s : t_.streams) s.name = fmt::format("stream {}", s.native_id);
    t_.Finalize();
    return std::move(t_);
  }

 private:
  static Status Damaged(const Status& st) {
    if (st.ok()) return st;
    if (st.code() == StatusCode::kCorrupt)
      return MakeError(StatusCode::kCorrupt, "corrupted SQLite file ({})", st.message());
    return st;
  }
  // Prepares `sql`; a damaged schema reads "corrupted SQLite file (...)" like damaged rows.
  Status Prep(Stmt& s, std::string_view sql) { return Damaged(s.Prepare(db_.get(), sql)); }
  static Status MissingColumn(std::string_view table, std::string_view column) {
    return MakeError(StatusCode::kInvalidInput, "Nsight Systems export: table {} lacks column {}", table, column);
  }

  StatusOr<std::set<std::string>> Columns(std::string_view table) {
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(Prep(s, "SELECT name FROM pragma_table_info(?)"));
    s.Bind(1, table);
    std::set<std::string> cols;
    while (true) {
      StatusOr<bool> row = s.Step("table columns");
      if (!row.ok()) return Damaged(row.status());
      if (!*row) break;
      cols.insert(std::string(s.Text(0)));
    }
    return cols;
  }

  Status QuickCheck() {
    for (const char* table : {kKernel, kMemcpy, kMemset, kSync, kRuntime, kNvtx, kStrings, kSession, kGpuInfo}) {
      if (!Has(table)) continue;
      Stmt s;
      OVERLAPPROF_RETURN_IF_ERROR(Prep(s, fmt::format("PRAGMA quick_check({})", table)));
      StatusOr<bool> row = s.Step("quick_check");
      if (!row.ok()) return Damaged(row.status());
      if (*row && s.Text(0) != "ok")
        return MakeError(StatusCode::kCorrupt, "corrupted SQLite file (quick_check: {})", s.Text(0));
    }
    return OkStatus();
  }

  // Times become UTC ns when the export says when the session started on which clock.
  Status ReadClock() {
    clock_source_ = "nsys: session timestamps";
    if (!Has(kSession)) return OkStatus();
    OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(kSession));
    if (!cols.count("utcEpochNs") || !cols.count("systemClockNs")) return OkStatus();
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(Prep(s, "SELECT utcEpochNs, systemClockNs FROM TARGET_INFO_SESSION_START_TIME"));
    StatusOr<bool> row = s.Step("session start");
    if (!row.ok()) return Damaged(row.status());
    if (!*row || s.IsNull(0) || s.IsNull(1)) return OkStatus();
    const int64_t utc = s.Int(0), clock = s.Int(1);
    if (!TimeInRange(utc) || !TimeInRange(clock)) return OkStatus();
    offset_ = utc - clock;  // both in [0, 2^62): no overflow
    clock_source_ = "nsys: UTC (TARGET_INFO_SESSION_START_TIME: utcEpochNs - systemClockNs + t)";
    return OkStatus();
  }

  // Applies the clock offset; false (and counted) when the time does not fit.
  bool Shift(int64_t* t) {
    int64_t v;
    if (__builtin_add_overflow(*t, offset_, &v) || !TimeInRange(v)) return false;
    *t = v;
    return true;
  }

  // [start, end) from columns 0 and 1 of the current row, moved onto the trace clock; false
  // (and counted: malformed, negative duration, out of range) when the row cannot be used.
  bool ReadSpan(sqlite3_stmt* st, int64_t* start, int64_t* end) {
    if (sqlite3_column_type(st, 0) != SQLITE_INTEGER || sqlite3_column_type(st, 1) != SQLITE_INTEGER) {
      t_.stats.Add(Stat::events_malformed);
      return false;
    }
    *start = sqlite3_column_int64(st, 0);
    *end = sqlite3_column_int64(st, 1);
    if (*end < *start) {
      t_.stats.Add(Stat::events_negative_duration);
      return false;
    }
    if (!Shift(start) || !Shift(end)) {
      t_.stats.Add(Stat::events_timestamp_out_of_range);
      return false;
    }
    return true;
  }

  StatusOr<uint32_t> Name(int64_t string_id) {
    if (string_id == last_string_id_) return last_name_;
    auto it = names_.find(string_id);
    if (it == names_.end()) {
      strings_.Bind(1, string_id);
      StatusOr<bool> row = strings_.Step("StringIds lookup");
      if (!row.ok()) {
        strings_.Reset();
        return Damaged(row.status());
      }
      uint32_t id = *row ? t_.names.Intern(strings_.Text(0)) : 0;
      strings_.Reset();
      it = names_.emplace(string_id, id).first;
    }
    last_string_id_ = string_id;
    last_name_ = it->second;
    return it->second;
  }

  Status ReadGpuTable(GpuTable g) {
    OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(g.table));
    for (const char* c : {"start", "end", "deviceId", "streamId"})
      if (!cols.count(c)) return MissingColumn(g.table, c);
    if (cols.count("correlationId")) g.corr_col = "correlationId";
    if (cols.count("globalPid")) g.pid_expr = kPidOfGlobalPid;
    if (g.kind == ActivityKind::kKernel) {
      if (cols.count("demangledName")) g.name_col = "demangledName";
      else if (cols.count("shortName")) g.name_col = "shortName";
    }
    if (cols.count("bytes") && (g.kind == ActivityKind::kMemcpy || g.kind == ActivityKind::kMemset))
      g.bytes_col = "bytes";
    if (g.kind == ActivityKind::kMemcpy && cols.count("copyKind")) g.copy_kind_col = "copyKind";
    if (g.kind == ActivityKind::kSync && cols.count("syncType")) g.sync_type_col = "syncType";
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(
        Prep(s, fmt::format("SELECT start, end, streamId, {}, {}, {}, {}, {} FROM {} WHERE deviceId = ?1 "
                                         "AND {} = ?2",
                                         g.corr_col, g.name_col, g.bytes_col, g.copy_kind_col, g.sync_type_col,
                                         g.table, g.pid_expr)));
    s.Bind(1, unit_.device);
    s.Bind(2, unit_.pid);
    sqlite3_stmt* st = s.get();
    const uint32_t memset_name = t_.names.Intern("Memset");
    while (true) {
      int rc = sqlite3_step(st);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) return Damaged(SqliteError(db_.get(), rc, fmt::format("sqlite3_step({})", g.table)));
      Activity a;
      if (!ReadSpan(st, &a.start_ns, &a.end_ns)) continue;
      if (a.end_ns == a.start_ns) t_.stats.Add(Stat::activities_zero_duration);
      a.kind = g.kind;
      int64_t stream = kUnknown;
      if (sqlite3_column_type(st, 2) == SQLITE_INTEGER) stream = sqlite3_column_int64(st, 2);
      else t_.stats.Add(Stat::activities_unknown_stream);
      a.stream = t_.StreamIndex(unit_.device, stream);
      if (sqlite3_column_type(st, 3) == SQLITE_INTEGER) a.correlation_id = sqlite3_column_int64(st, 3);
      switch (g.kind) {
        case ActivityKind::kKernel: {
          if (sqlite3_column_type(st, 4) == SQLITE_INTEGER) {
            OVERLAPPROF_ASSIGN_OR_RETURN(a.name_id, Name(sqlite3_column_int64(st, 4)));
          }
          if (a.name_id >= name_is_comm_.size()) name_is_comm_.resize(t_.names.size(), -1);
          int8_t& c = name_is_comm_[a.name_id];
          if (c < 0) c = IsCommKernelName(t_.names.Get(a.name_id)) ? 1 : 0;
          a.category = c ? Category::kComm : Category::kCompute;
          break;
        }
        case ActivityKind::kMemcpy: {
          int64_t kind = sqlite3_column_type(st, 6) == SQLITE_INTEGER ? sqlite3_column_int64(st, 6) : 0;
          if (kind < 0 || kind > 255) kind = 0;
          a.copy_kind = static_cast<uint8_t>(kind);
          a.name_id = t_.names.Intern(CopyKindName(kind));
          // Peer-to-peer copies move data between GPUs: communication (rule 4,
          // docs/classification.md), done by the copy engines.
          a.category = kind == kCopyKindPeerToPeer ? Category::kComm : Classify(a.kind, t_.names.Get(a.name_id), false);
          break;
        }
        case ActivityKind::kMemset:
          a.name_id = memset_name;
          a.category = Classify(a.kind, "Memset", false);
          break;
        case ActivityKind::kSync:
          a.name_id = t_.names.Intern(
              SyncTypeName(sqlite3_column_type(st, 7) == SQLITE_INTEGER ? sqlite3_column_int64(st, 7) : 0));
          a.category = Category::kOther;
          break;
      }
      if (sqlite3_column_type(st, 5) == SQLITE_INTEGER) {
        int64_t b = sqlite3_column_int64(st, 5);
        if (b >= 0) a.bytes = b;
      }
      if (a.category == Category::kComm) {
        CommOp op;
        op.stream = a.stream;
        op.source = CommSource::kKernelName;
        if (a.kind == ActivityKind::kMemcpy) {
          op.rule = CommRule::kPeerCopy;
          op.op = "p2p_copy";
          op.bytes = a.bytes;
        } else {
          op.rule = CommRule::kKernelName;
          op.op = CollectiveFromKernelName(t_.names.Get(a.name_id));
        }
        op.communicator = "unknown";
        a.comm_op = static_cast<uint32_t>(t_.comm_ops.size());
        t_.comm_ops.push_back(std::move(op));
      }
      t_.activities.push_back(a);
    }
    return OkStatus();
  }

  // The runtime calls of this process that launched this rank's GPU work.
  Status ReadRuntime() {
    OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(kRuntime));
    for (const char* c : {"start", "end", "correlationId"})
      if (!cols.count(c)) return OkStatus();  // no launch times (counted as unmatched below)
    std::vector<int64_t> wanted;
    for (const Activity& a : t_.activities)
      if (a.correlation_id != kUnknown && a.kind != ActivityKind::kSync) wanted.push_back(a.correlation_id);
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    if (wanted.empty()) return OkStatus();
    const bool tid = cols.count("globalTid") > 0;
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(Prep(s, fmt::format("SELECT start, end, correlationId, {}, {} FROM {} WHERE {} = ?1",
                               tid ? "globalTid & 16777215" : "NULL", cols.count("nameId") ? "nameId" : "NULL",
                               kRuntime, tid ? kPidOfGlobalTid : "-1")));
    s.Bind(1, unit_.pid);
    sqlite3_stmt* st = s.get();
    while (true) {
      int rc = sqlite3_step(st);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) return Damaged(SqliteError(db_.get(), rc, "sqlite3_step(CUPTI_ACTIVITY_KIND_RUNTIME)"));
      if (sqlite3_column_type(st, 2) != SQLITE_INTEGER) continue;
      const int64_t corr = sqlite3_column_int64(st, 2);
      if (!std::binary_search(wanted.begin(), wanted.end(), corr)) continue;
      HostCall h;
      if (!ReadSpan(st, &h.start_ns, &h.end_ns)) continue;
      h.correlation_id = corr;
      if (sqlite3_column_type(st, 3) == SQLITE_INTEGER) h.tid = sqlite3_column_int64(st, 3);
      if (sqlite3_column_type(st, 4) == SQLITE_INTEGER) {
        OVERLAPPROF_ASSIGN_OR_RETURN(h.name_id, Name(sqlite3_column_int64(st, 4)));
      }
      t_.host_calls.push_back(h);
    }
    return OkStatus();
  }

  // launch_ns (and the comm ops' host call) from the runtime call with the same correlation
  // id, as the Kineto importer does; the first call with an id wins.
  void LinkLaunches() {
    std::vector<std::pair<int64_t, uint32_t>> by_corr;
    by_corr.reserve(t_.host_calls.size());
    for (uint32_t i = 0; i < t_.host_calls.size(); ++i) by_corr.emplace_back(t_.host_calls[i].correlation_id, i);
    std::stable_sort(by_corr.begin(), by_corr.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (Activity& a : t_.activities) {
      if (a.kind == ActivityKind::kSync) continue;
      auto it = std::lower_bound(by_corr.begin(), by_corr.end(), a.correlation_id,
                                 [](const auto& x, int64_t v) { return x.first < v; });
      if (a.correlation_id == kUnknown || it == by_corr.end() || it->first != a.correlation_id) {
        t_.stats.Add(Stat::correlations_unmatched);
        continue;
      }
      const HostCall& h = t_.host_calls[it->second];
      a.launch_ns = h.start_ns;
      if (a.comm_op != kNoIndex) {
        CommOp& op = t_.comm_ops[a.comm_op];
        op.host_enter_ns = h.start_ns;
        op.host_exit_ns = h.end_ns;
        op.host_tid = h.tid;
      }
    }
    if (!needs_.host_calls) std::vector<HostCall>().swap(t_.host_calls);
  }

  // NVTX push/pop and start/end ranges of this process: ProfilerStep#N ranges are steps;
  // the others are annotations (kept when asked for: --step-range, import).
  Status ReadNvtx() {
    OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(kNvtx));
    for (const char* c : {"start", "end", "eventType"})
      if (!cols.count(c)) return OkStatus();
    const bool tid = cols.count("globalTid") > 0;
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(Prep(s, fmt::format("SELECT start, end, {}, {}, {}, {} FROM {} WHERE eventType IN ({}, {}) AND {} = ?1",
                               cols.count("text") ? "text" : "NULL", cols.count("textId") ? "textId" : "NULL",
                               tid ? "globalTid & 16777215" : "NULL", cols.count("domainId") ? "domainId" : "NULL",
                               kNvtx, kNvtxPushPop, kNvtxStartEnd, tid ? kPidOfGlobalTid : "-1")));
    s.Bind(1, unit_.pid);
    sqlite3_stmt* st = s.get();
    constexpr std::string_view kStep = "ProfilerStep#";
    std::set<int64_t> steps_seen;
    while (true) {
      int rc = sqlite3_step(st);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) return Damaged(SqliteError(db_.get(), rc, "sqlite3_step(NVTX_EVENTS)"));
      if (sqlite3_column_type(st, 1) != SQLITE_INTEGER) {  // never ended
        t_.stats.Add(Stat::nvtx_ranges_unmatched);
        continue;
      }
      Range r;
      if (!ReadSpan(st, &r.start_ns, &r.end_ns)) continue;
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
    NameOpsFromNcclRanges();
    return OkStatus();
  }

  // NCCL annotates its API calls with NVTX ranges (domain "NCCL"; exports without the payload
  // still have the names). A communication kernel's launch (its runtime call, LinkLaunches)
  // lies inside the call that launched it: the collective's own range (ncclAllReduce), or the
  // ncclGroupEnd of a group, whose calls are the NCCL ranges of that thread since the previous
  // ncclGroupEnd. The op is named from them when they agree: one collective type, or sends
  // and receives only (send, recv, sendrecv). Otherwise it keeps the kernel's name.
  void NameOpsFromNcclRanges() {
    if (nccl_ranges_.empty()) return;
    std::sort(nccl_ranges_.begin(), nccl_ranges_.end(), [](const NcclRange& a, const NcclRange& b) {
      return std::tie(a.tid, a.start_ns, a.end_ns) < std::tie(b.tid, b.start_ns, b.end_ns);
    });
    for (CommOp& op : t_.comm_ops) {
      if (op.host_tid == kUnknown || op.host_enter_ns == kUnknown) continue;
      const int64_t t = op.host_enter_ns;
      // The ranges of this thread that started at or before the launch; the innermost one
      // holding it is the latest-starting of them that has not ended.
      auto first = std::lower_bound(nccl_ranges_.begin(), nccl_ranges_.end(), op.host_tid,
                                    [](const NcclRange& r, int64_t tid) { return r.tid < tid; });
      auto last = std::upper_bound(first, nccl_ranges_.end(), std::make_pair(op.host_tid, t),
                                   [](const std::pair<int64_t, int64_t>& k, const NcclRange& r) {
                                     return std::tie(k.first, k.second) < std::tie(r.tid, r.start_ns);
                                   });
      auto inner = last;
      for (auto it = last; it != first;) {
        --it;
        if (it->end_ns >= t) {
          inner = it;
          break;
        }
      }
      if (inner == last) continue;
      std::string name;
      if (inner->api == NcclApi::kGroupEnd) {
        // The group's calls: since the previous ncclGroupEnd of this thread.
        auto begin = inner;
        while (begin != first && std::prev(begin)->api != NcclApi::kGroupEnd) --begin;
        bool sends = false, recvs = false, other = false;
        std::string coll;
        for (auto it = begin; it != inner; ++it) {
          if (it->api == NcclApi::kSend) sends = true;
          else if (it->api == NcclApi::kRecv) recvs = true;
          else if (it->api == NcclApi::kCollective) {
            if (coll.empty()) coll = it->op;
            else if (coll != it->op) other = true;
          }
        }
        if (other || (!coll.empty() && (sends || recvs))) continue;  // a mixed group: the kernel's name stays
        if (!coll.empty()) name = coll;
        else if (sends && recvs) name = "sendrecv";
        else if (sends) name = "send";
        else if (recvs) name = "recv";
      } else if (inner->api == NcclApi::kSend) {
        name = "send";
      } else if (inner->api == NcclApi::kRecv) {
        name = "recv";
      } else if (inner->api == NcclApi::kCollective) {
        name = inner->op;
      }
      if (name.empty()) continue;
      op.op = std::move(name);
      t_.stats.Add(Stat::nsys_ops_named_from_nccl_ranges);
    }
    std::vector<NcclRange>().swap(nccl_ranges_);
  }

  // The rank's GPU (TARGET_INFO_GPU when present) and the host name.
  Status ReadDeviceAndHost() {
    Device d;
    d.id = unit_.device;
    if (Has(kGpuInfo)) {
      OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(kGpuInfo));
      if (cols.count("id")) {
        auto col = [&](const char* c) { return cols.count(c) ? std::string(c) : std::string("NULL"); };
        Stmt s;
        OVERLAPPROF_RETURN_IF_ERROR(Prep(s, fmt::format("SELECT {}, {}, {}, {}, {} FROM {} WHERE id = ?1", col("name"), col("computeMajor"),
                                   col("computeMinor"), col("totalMemory"), col("smCount"), kGpuInfo)));
        s.Bind(1, unit_.device);
        StatusOr<bool> row = s.Step("TARGET_INFO_GPU");
        if (!row.ok()) return Damaged(row.status());
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
    if (Has(kSystemEnv)) {
      OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(kSystemEnv));
      if (cols.count("name") && cols.count("value")) {
        Stmt s;
        OVERLAPPROF_RETURN_IF_ERROR(
            Prep(s, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' LIMIT 1"));
        StatusOr<bool> row = s.Step("TARGET_INFO_SYSTEM_ENV");
        if (!row.ok()) return Damaged(row.status());
        if (*row) t_.meta.host = std::string(s.Text(0));
      }
    }
    return OkStatus();
  }

  // The ranks of one export are read one after another, each opening the file again:
  // PRAGMA quick_check runs once per file (same path, size and modification time) and
  // process, not once per rank.
  using FileId = std::tuple<std::string, uintmax_t, int64_t>;
  static std::mutex& CheckedMutex() {
    static std::mutex m;
    return m;
  }
  static std::set<FileId>& Checked() {
    static std::set<FileId> s;
    return s;
  }
  std::optional<FileId> Id() const {
    std::error_code ec;
    uintmax_t size = std::filesystem::file_size(path_, ec);
    if (ec) return std::nullopt;
    auto mtime = std::filesystem::last_write_time(path_, ec);
    if (ec) return std::nullopt;
    return FileId{path_, size, static_cast<int64_t>(mtime.time_since_epoch().count())};
  }
  bool AlreadyChecked() const {
    std::optional<FileId> id = Id();
    std::lock_guard<std::mutex> lock(CheckedMutex());
    return id && Checked().count(*id) > 0;
  }
  void MarkChecked() const {
    std::optional<FileId> id = Id();
    std::lock_guard<std::mutex> lock(CheckedMutex());
    if (id) Checked().insert(*id);
  }

  std::string path_;
  Db db_;
  std::set<std::string> tables_;
  UnitKey unit_;
  TraceNeeds needs_;
  RankTrace t_;
  int64_t offset_ = 0;
  std::string clock_source_;
  Stmt strings_;
  std::map<int64_t, uint32_t> names_;  // StringIds id -> StringTable id (ordered: keys from the file)
  int64_t last_string_id_ = -1;
  uint32_t last_name_ = 0;
  std::vector<int8_t> name_is_comm_;  // by name id: -1 not yet classified, 0 compute, 1 comm
  std::vector<NcclRange> nccl_ranges_;  // NCCL's API ranges of this process (ReadNvtx), ns on the trace clock
};

class NsysImporter : public Importer {
 public:
  std::string_view name() const override { return "nsys"; }
  std::string_view description() const override {
    return "Nsight Systems SQLite export (nsys export --type sqlite), one rank per process and GPU";
  }
  // SQLite files that are not overlapprof stores; Open says what they are when not exports.
  int Probe(std::string_view head) const override {
    return IsSqlite(head) && SqliteApplicationId(head) != static_cast<uint32_t>(kStoreApplicationId) ? 50 : 0;
  }
  StatusOr<std::vector<std::string>> Units(const std::string& path) const override {
    Export e;
    OVERLAPPROF_RETURN_IF_ERROR(e.Open(path));
    OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<UnitKey> units, e.ListUnits());
    std::vector<std::string> keys;
    for (const UnitKey& u : units) keys.push_back(KeyString(u));
    return keys;
  }
  StatusOr<RankTrace> Import(const std::string& path, const ImportOptions& options) const override {
    Export e;
    OVERLAPPROF_RETURN_IF_ERROR(e.Open(path));
    UnitKey unit;
    if (options.unit.empty()) {
      // The whole file: fine when it holds one rank.
      OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<UnitKey> units, e.ListUnits());
      if (units.size() > 1) {
        std::string keys;
        for (const UnitKey& u : units) keys += (keys.empty() ? "" : ", ") + KeyString(u);
        return MakeError(StatusCode::kInvalidInput, "holds {} ranks ({}): name one as FILE#KEY", units.size(), keys);
      }
      if (!units.empty()) unit = units[0];
    } else if (!ParseKey(options.unit, &unit)) {
      return MakeError(StatusCode::kInvalidArgument, "'{}' names no rank of an Nsight Systems export (pidN.gpuN)",
                       options.unit);
    }
    OVERLAPPROF_ASSIGN_OR_RETURN(RankTrace t, e.Read(unit, options));
    t.meta.source_path = options.unit.empty() ? path : path + "#" + options.unit;
    return t;
  }
};

std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "";
  while (!rest.empty()) {
    size_t colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

StatusOr<std::string> ExportNsysReport(const std::string& path, const std::string& cache_dir) {
  namespace fs = std::filesystem;
  std::string stem = fs::path(path).stem().string();
  const std::string nsys = FindOnPath("nsys");
  if (nsys.empty())
    return MakeError(StatusCode::kInvalidInput,
                     "an Nsight Systems report; nsys is not on PATH: export it first with: nsys export --type sqlite "
                     "--output {}.sqlite {}",
                     (fs::path(path).parent_path() / stem).string(), path);
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  const auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
  const char* tmp = std::getenv("TMPDIR");
  fs::path dir = !cache_dir.empty() ? fs::path(cache_dir)
                                    : fs::path(tmp && *tmp ? tmp : "/tmp") / fmt::format("overlapprof-nsys-{}", ::getuid());
  fs::create_directories(dir, ec);
  if (ec) return MakeError(StatusCode::kIo, "{}: cannot create directory: {}", dir.string(), ec.message());
  if (cache_dir.empty()) {
    // The default cache is in a shared /tmp: another user could have created it (or a link
    // by that name) to feed us an export or catch our writes.
    struct stat st;
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 022) != 0)
      return MakeError(StatusCode::kInvalidInput,
                       "{}: not a directory owned by you and writable only by you: refused (--cache-dir DIR picks another)",
                       dir.string());
  }
  const std::string out = (dir / fmt::format("{}-{}-{}.sqlite", stem, size, static_cast<int64_t>(mtime))).string();
  if (fs::exists(out, ec)) return out;  // exported before, report unchanged
  const std::string partial = out + ".partial.sqlite";
  ::unlink(partial.c_str());  // a leftover, or a link planted at that name: nsys must not write through it
  std::vector<std::string> args = {"nsys", "export", "--type", "sqlite", "--force-overwrite", "true",
                                   "--output", partial, path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  if (int rc = ::posix_spawn(&pid, nsys.c_str(), nullptr, nullptr, argv.data(), environ); rc != 0)
    return MakeError(StatusCode::kIo, "cannot run {}: {}", nsys, std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !fs::exists(partial, ec)) {
    fs::remove(partial, ec);
    return MakeError(StatusCode::kInvalidInput, "nsys export --type sqlite failed (exit status {}); run it by hand: "
                     "nsys export --type sqlite --output {}.sqlite {}",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1, stem, path);
  }
  fs::rename(partial, out, ec);
  if (ec) return MakeError(StatusCode::kIo, "{}: cannot rename into place: {}", out, ec.message());
  return out;
}

std::unique_ptr<Importer> MakeNsysImporter() { return std::make_unique<NsysImporter>(); }

}  // namespace overlapprof
