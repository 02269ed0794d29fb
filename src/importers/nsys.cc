// Importer for Nsight Systems SQLite exports (`nsys export --type sqlite report.nsys-rep`).
// One export holds every process nsys traced: each (process, GPU) with GPU work is one rank
// (ImportSession::Units: "pid<PID>.gpu<DEVICE>"). The large tables (GPU activities, runtime calls)
// are read straight from their B-tree pages (SqliteTableScan), once per export: listing the
// ranks builds them (Builders), within a memory budget, and each rank's import finishes its
// own; over the budget, the first rank read spills every rank's rows to a temporary file
// (Partition, RowSpill) and each rank reads its own from there. Where that does not apply
// (a WAL file, an unusual table, OVERLAPPROF_NSYS_SQL=1) the rows come from SQL with WHERE
// clauses, one query per rank. Tables and columns are found by name, not position (they
// differ across nsys releases); docs/nsys.md lists what is read and how ranks are assigned.
//
// Files are untrusted: opened like stores (OpenUntrustedReadOnly), every value validated,
// keys from the file kept in ordered containers (no identity-hashed maps).
#include <spawn.h>
#include <sys/mman.h>
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

#include "src/common/rank_env.h"
#include "src/importers/importer.h"
#include "src/importers/nvtx_payload.h"
#include "src/importers/sqlite_table_schema.h"
#include "src/io/row_spill.h"
#include "src/io/sqlite_table_scan.h"
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
constexpr const char* kPayloadSchemas = "NVTX_PAYLOAD_SCHEMAS";
constexpr const char* kPayloadEntries = "NVTX_PAYLOAD_SCHEMA_ENTRIES";
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

// The rows of one table, as integers: read straight from the table's B-tree pages
// (SqliteTableScan, ~10x faster than stepping SQL) unless that does not apply to this file or
// OVERLAPPROF_NSYS_SQL=1 asks for SQL (tests compare the two); then `SELECT columns FROM table
// [WHERE sql_where]`, whose rows the caller still filters like the direct scan's. Column i of
// a row is columns[i]; an empty name reads as NULL.
// Damage found while reading rows: "corrupted SQLite file (...)", other errors as they are.
Status DamagedFile(const Status& st) {
  if (st.ok()) return st;
  if (st.code() == StatusCode::kCorrupt) return MakeError(StatusCode::kCorrupt, "corrupted SQLite file ({})", st.message());
  return st;
}

// The process id in a serialized global id column (hw:8 | vm:8 | pid:24 | tid:24) of a row
// (any of Rows' sources); -1 when NULL (kPidOfGlobalPid in SQL).
template <typename Row>
int64_t PidOf(const Row& r, int i) {
  return r.IsInt(i) ? (r.Int(i) >> 24) & 16777215 : -1;
}

// A row of a prepared statement, with Rows' accessors (for ReadSpan).
struct SqlRow {
  sqlite3_stmt* st;
  bool IsInt(int i) const { return sqlite3_column_type(st, i) == SQLITE_INTEGER; }
  int64_t Int(int i) const { return sqlite3_column_int64(st, i); }
};

class Rows {
 public:
  Status Open(sqlite3* db, const std::string& path, const char* table, const std::vector<std::string>& columns,
              std::string_view sql_where, const std::vector<int64_t>& binds) {
    table_ = table;
    const char* force_sql = std::getenv("OVERLAPPROF_NSYS_SQL");
    if (!(force_sql && std::string_view(force_sql) == "1")) {
      std::string why_not;
      OVERLAPPROF_ASSIGN_OR_RETURN(scan_, OpenSqliteTableScan(db, path, table, columns, &why_not));
      if (scan_) return OkStatus();
    }
    std::string sql = "SELECT ";
    for (size_t i = 0; i < columns.size(); ++i) sql += (i ? ", " : "") + (columns[i].empty() ? "NULL" : columns[i]);
    sql += fmt::format(" FROM {}", table);
    if (!sql_where.empty()) sql += fmt::format(" WHERE {}", sql_where);
    OVERLAPPROF_RETURN_IF_ERROR(stmt_.Prepare(db, sql));
    for (size_t i = 0; i < binds.size(); ++i) stmt_.Bind(static_cast<int>(i + 1), binds[i]);
    return OkStatus();
  }
  // The rows of one key of a spill (a multi-rank export read once, Partition below); `owner`
  // keeps the spill alive while they are read.
  void OpenSpill(std::shared_ptr<const void> owner, const RowSpill& spill, size_t key) {
    spill_owner_ = std::move(owner);
    spill_.emplace(spill.Read(key));
  }
  // Calls body(row) for every row, where row is the source itself (a SqliteTableScan, a
  // RowSpill::Reader or a SqlRow, all with IsInt(i) and Int(i)): the source is chosen once per
  // table, not once per value, so the accessors inline into the body. Stops at the first
  // error, the body's or the read's (a damaged file reads "corrupted SQLite file (...)").
  template <typename Body>
  Status ForEach(Body&& body) {
    if (scan_) return Loop(*scan_, body);
    if (spill_) return Loop(*spill_, body);
    struct Sql {
      Stmt& stmt;
      const char* table;
      StatusOr<bool> Next() { return stmt.Step(table); }
      bool IsInt(int i) const { return sqlite3_column_type(stmt.get(), i) == SQLITE_INTEGER; }
      int64_t Int(int i) const { return sqlite3_column_int64(stmt.get(), i); }
    } sql{stmt_, table_};
    return Loop(sql, body);
  }
  bool direct() const { return scan_ != nullptr; }

 private:
  template <typename Source, typename Body>
  static Status Loop(Source& source, Body& body) {
    while (true) {
      StatusOr<bool> row = source.Next();
      if (!row.ok()) return DamagedFile(row.status());
      if (!*row) return OkStatus();
      Status st = body(static_cast<const Source&>(source));
      if (!st.ok()) return st;
    }
  }
  const char* table_ = "";
  std::unique_ptr<SqliteTableScan> scan_;
  std::shared_ptr<const void> spill_owner_;
  std::optional<RowSpill::Reader> spill_;
  Stmt stmt_;
};

// An export with several ranks has its large tables read once, not once per rank: the first
// rank read scans each GPU-activity table and the runtime table, spilling every row under its
// rank (GPU tables) or process (runtime calls) to a temporary file (RowSpill), and every rank
// then reads its own rows from there, in table order, through the same code as a direct scan.
// Memory: one RowSpill buffer per key while spilling; disk: ~30 bytes per row.
struct Partition {
  std::vector<UnitKey> units;  // sorted: a GPU table's spill key is the unit's index
  std::vector<int64_t> pids;   // sorted: the runtime table's spill key is the pid's index
  std::map<std::string, std::unique_ptr<RowSpill>, std::less<>> tables;
  uint64_t bytes = 0;
};
// Partitioning pays from two ranks on; above kMaxPartitionUnits the per-key buffers would
// weigh more than the passes saved (each rank scans the tables then).
constexpr size_t kMaxPartitionUnits = 256;
// Ranks built while listing hold an SQLite connection each (Builders): more than this many in
// one export are read as before.
constexpr size_t kMaxBuilders = 64;

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

// A GPU-activity table and the columns this export has (empty: a missing optional column,
// read as NULL).
struct GpuTable {
  const char* table;
  ActivityKind kind;
  std::string name_col = "", corr_col = "", bytes_col = "", copy_kind_col = "", sync_type_col = "", pid_col = "";
};

// An NCCL API range (NCCL's NVTX domain) on a host thread: what kind of call it was.
enum class NcclApi : uint8_t { kOther, kGroupStart, kGroupEnd, kSend, kRecv, kCollective };
struct NcclRange {
  int64_t tid;
  int64_t start_ns, end_ns;
  NcclApi api;
  std::string op;  // kCollective: the normalized collective (NormalizeCollectiveName)
  std::optional<NcclPayload> payload;  // NCCL's NVTX payload, when the export holds it (nvtx_payload.h)
};

// "ncclAllReduce" -> a collective "allreduce"; ncclSend/ncclRecv; ncclGroupStart/End; the rest
// (ncclCommCount, communicator calls such as ncclCommInitRank*) are kOther.
NcclRange NcclApiOf(std::string_view name) {
  NcclRange r{};
  static constexpr std::string_view kCollectives[] = {"allreduce", "broadcast", "reduce", "allgather",
                                                      "reducescatter", "alltoall", "gather", "scatter"};
  if (name == "ncclGroupEnd") {
    r.api = NcclApi::kGroupEnd;
  } else if (name == "ncclGroupStart") {
    r.api = NcclApi::kGroupStart;
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

// Maps the pages of a vector's reserved capacity (1 MiB and more) in one call: one page fault
// per 4 KiB page filled, on this machine's VM ~2 us each, was 15% of a one-rank import.
// Advice only: an older kernel (before 5.14) says EINVAL and the pages fault in as used.
void Prefault(void* p, size_t bytes) {
  constexpr uintptr_t kPage = 4096;
  uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
  uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kPage - 1);
  if (hi > lo + (kPage << 8)) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_WRITE);
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

  // The (process, GPU) pairs with GPU rows, in key order; `build`: and build them (Builders).
  StatusOr<std::vector<UnitKey>> ListUnits(bool build) {
    const std::optional<FileId> id = Id();
    if (id) DropBuilt(*id);  // a new listing starts afresh (below)
    std::map<UnitKey, uint64_t> units;  // GPU rows per unit: Read's reserve hint
    Builders b;
    if (id && build) StartBuilders(b);
    for (GpuTable g : {GpuTable{kKernel, ActivityKind::kKernel}, GpuTable{kMemcpy, ActivityKind::kMemcpy},
                       GpuTable{kMemset, ActivityKind::kMemset}}) {
      if (!Has(g.table)) continue;
      OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(g.table));
      if (!cols.count("deviceId")) return MissingColumn(g.table, "deviceId");
      // Building: every column Read reads (deviceId and globalPid are 8 and 9); listing only:
      // those two.
      std::vector<std::string> columns{cols.count("globalPid") ? "globalPid" : "", "deviceId"};
      int device_col = 1, pid_col = 0;
      if (b.on) {
        StatusOr<std::vector<std::string>> all = GpuColumns(g);
        if (all.ok()) {
          columns = std::move(*all);
          device_col = 8;
          pid_col = 9;
          for (auto& [k, e] : b.by_unit) e->BeginGpuTable();
        } else {
          b.Stop();
        }
      }
      Rows r;
      OVERLAPPROF_RETURN_IF_ERROR(Damaged(r.Open(db_.get(), path_, g.table, columns, "", {})));
      // The units seen last, searched before the maps: rows of a few ranks come interleaved.
      struct Seen {
        UnitKey key;
        uint64_t* count;  // in `units` (map nodes stay put)
        Export* builder;  // null: not building
      };
      std::vector<Seen> seen;
      size_t replace = 0;
      OVERLAPPROF_RETURN_IF_ERROR(r.ForEach([&](const auto& row) -> Status {
        if (!row.IsInt(device_col)) return OkStatus();  // no integer device: no rank reads the row (ReadGpuTable)
        const UnitKey key{PidOf(row, pid_col), row.Int(device_col)};
        Seen* u = nullptr;
        for (Seen& x : seen)
          if (x.key == key) {
            u = &x;
            break;
          }
        if (!u) {
          uint64_t* count = &units[key];
          if (units.size() > kMaxUnits)
            return MakeError(StatusCode::kInvalidInput, "more than {} (process, GPU) pairs in one export", kMaxUnits);
          Seen x{key, count, b.on ? b.For(key, path_) : nullptr};
          if (seen.size() < 16) {
            u = &seen.emplace_back(x);
          } else {
            u = &seen[replace++ % seen.size()];
            *u = x;
          }
        }
        ++*u->count;
        if (b.on && !b.Feed(u->builder, row, g)) u->builder = nullptr;
        return OkStatus();
      }));
    }
    if (b.on) FinishBuilders(b);
    std::vector<UnitKey> keys;
    for (const auto& [k, n] : units) keys.push_back(k);
    if (id) {
      std::lock_guard<std::mutex> lock(CheckedMutex());
      auto& hints = RowHints();
      if (hints.size() > 64) hints.clear();  // a bound: one entry per export listed by this process
      hints[*id] = std::move(units);
      // A new listing starts afresh: a partition built from an earlier listing of a file with
      // the same identity (rewritten within the file system's time granularity) is not used.
      Slots().erase(*id);
      if (b.on && !b.by_unit.empty()) {
        const uint64_t bytes = b.Bytes();
        if (BuiltBytes() + bytes <= BuildBudget()) {
          BuiltBytes() += bytes;
          Built()[*id] = BuiltFile{std::move(b.by_unit), bytes};
        }
      }
    }
    return keys;
  }


  StatusOr<RankTrace> Read(const UnitKey& unit, const ImportOptions& options) {
    if (options.store_quick_check && !AlreadyChecked()) {
      OVERLAPPROF_RETURN_IF_ERROR(QuickCheck());
      MarkChecked();
    }
    // A rank built while this file was listed has its GPU and runtime tables read; it was
    // built without host calls (Builders), so a reader that wants them reads the tables again.
    if (std::unique_ptr<Export> built = TakeBuilt(unit); built && !options.store_needs.host_calls) {
      built->needs_ = options.store_needs;
      return built->Finish();
    }
    OVERLAPPROF_RETURN_IF_ERROR(Begin(unit, options.store_needs));

    // The rows ListUnits counted for this unit (when this process listed this file): the
    // activities vector is sized once instead of growing by copies.
    if (std::optional<FileId> id = Id()) {
      std::lock_guard<std::mutex> lock(CheckedMutex());
      auto it = RowHints().find(*id);
      if (it != RowHints().end()) {
        auto u = it->second.find(unit);
        if (u != it->second.end()) {
          t_.activities.reserve(std::min<uint64_t>(u->second, uint64_t{1} << 32));
          Prefault(t_.activities.data(), t_.activities.capacity() * sizeof(Activity));
        }
      }
    }
    OVERLAPPROF_RETURN_IF_ERROR(UsePartition(unit));
    GpuTable kernel{kKernel, ActivityKind::kKernel};
    OVERLAPPROF_RETURN_IF_ERROR(ReadGpuTable(kernel));
    if (Has(kMemcpy)) OVERLAPPROF_RETURN_IF_ERROR(ReadGpuTable({kMemcpy, ActivityKind::kMemcpy}));
    if (Has(kMemset)) OVERLAPPROF_RETURN_IF_ERROR(ReadGpuTable({kMemset, ActivityKind::kMemset}));
    if (Has(kSync)) OVERLAPPROF_RETURN_IF_ERROR(ReadGpuTable({kSync, ActivityKind::kSync}));
    if (Has(kRuntime)) OVERLAPPROF_RETURN_IF_ERROR(ReadRuntime());
    return Finish();
  }

 private:
  // Read's first step: the rank, the clock, the string lookup.
  Status Begin(const UnitKey& unit, const TraceNeeds& needs) {
    unit_ = unit;
    needs_ = needs;
    OVERLAPPROF_RETURN_IF_ERROR(ReadClock());
    OVERLAPPROF_RETURN_IF_ERROR(Prep(strings_, "SELECT value FROM StringIds WHERE id = ?"));
    int missing = 0;
    for (const char* table : {kMemcpy, kMemset, kSync, kRuntime, kNvtx}) missing += !Has(table);
    t_.stats.Set(Stat::nsys_optional_tables_missing, missing);
    return OkStatus();
  }

  // Read's last step, after the GPU and runtime tables: NVTX, the device and host, the rank.
  StatusOr<RankTrace> Finish() {
    LinkLaunches();
    if (Has(kNvtx)) OVERLAPPROF_RETURN_IF_ERROR(ReadNvtx());
    OVERLAPPROF_RETURN_IF_ERROR(ReadDeviceAndHost());

    t_.meta.source_format = "nsys";
    t_.meta.pid = unit_.pid;
    t_.meta.clock_source = clock_source_;
    OVERLAPPROF_RETURN_IF_ERROR(ReadRankFromEnvironment());
    if (t_.meta.rank == kUnknown) t_.stats.Set(Stat::rank_unknown, 1);
    for (Stream& s : t_.streams) s.name = fmt::format("stream {}", s.native_id);
    t_.Finalize();
    return std::move(t_);
  }

  static Status Damaged(const Status& st) { return DamagedFile(st); }
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

  // PRAGMA quick_check on the tables read through SQL. The large ones read by SqliteTableScan
  // are checked by the scan itself as it reads them (page bounds, tree shape, rowid order):
  // quick_check would read them once more, and took longer than the import.
  Status QuickCheck() {
    for (const char* table : {kKernel, kMemcpy, kMemset, kSync, kRuntime, kNvtx, kStrings, kSession, kGpuInfo}) {
      if (!Has(table)) continue;
      if (DirectlyScanned(table)) continue;
      Stmt s;
      OVERLAPPROF_RETURN_IF_ERROR(Prep(s, fmt::format("PRAGMA quick_check({})", table)));
      StatusOr<bool> row = s.Step("quick_check");
      if (!row.ok()) return Damaged(row.status());
      if (*row && s.Text(0) != "ok")
        return MakeError(StatusCode::kCorrupt, "corrupted SQLite file (quick_check: {})", s.Text(0));
    }
    return OkStatus();
  }

  // Whether Read reads `table` by a direct scan, with the columns it reads (a column without
  // INTEGER affinity sends the table to SQL, and then to quick_check).
  bool DirectlyScanned(const char* table) {
    static constexpr std::pair<const char*, ActivityKind> kGpuTables[] = {
        {kKernel, ActivityKind::kKernel}, {kMemcpy, ActivityKind::kMemcpy},
        {kMemset, ActivityKind::kMemset}, {kSync, ActivityKind::kSync}};
    const char* force_sql = std::getenv("OVERLAPPROF_NSYS_SQL");
    if (force_sql && std::string_view(force_sql) == "1") return false;
    std::vector<std::string> columns;
    if (std::string_view(table) == kRuntime) {
      StatusOr<std::set<std::string>> cols = Columns(kRuntime);
      if (!cols.ok()) return false;
      columns = RuntimeColumns(*cols);
    } else {
      const auto* g = std::find_if(std::begin(kGpuTables), std::end(kGpuTables),
                                   [&](const auto& t) { return std::string_view(t.first) == table; });
      if (g == std::end(kGpuTables)) return false;
      GpuTable gpu{g->first, g->second};
      StatusOr<std::vector<std::string>> c = GpuColumns(gpu);
      if (!c.ok()) return false;
      columns = std::move(*c);
    }
    std::string why_not;
    StatusOr<std::unique_ptr<SqliteTableScan>> scan = OpenSqliteTableScan(db_.get(), path_, table, columns, &why_not);
    return scan.ok() && *scan != nullptr;
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
  template <typename Row>
  bool ReadSpan(const Row& st, int64_t* start, int64_t* end) {
    if (!st.IsInt(0) || !st.IsInt(1)) {
      t_.stats.Add(Stat::events_malformed);
      return false;
    }
    *start = st.Int(0);
    *end = st.Int(1);
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
    // Ids below kDenseNames (nsys numbers its strings densely from 0): a vector lookup.
    constexpr int64_t kDenseNames = int64_t{1} << 20;
    const bool dense = string_id >= 0 && string_id < kDenseNames;
    if (dense && static_cast<size_t>(string_id) < dense_names_.size() && dense_names_[string_id] != kNoName) {
      last_string_id_ = string_id;
      last_name_ = dense_names_[string_id];
      return last_name_;
    }
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
    if (dense) {
      if (static_cast<size_t>(string_id) >= dense_names_.size()) dense_names_.resize(string_id + 1, kNoName);
      dense_names_[string_id] = it->second;
    }
    last_string_id_ = string_id;
    last_name_ = it->second;
    return it->second;
  }

  // The columns read from a GPU-activity table, found by name: 0-7 as ReadGpuTable reads
  // them, 8-9 the rank's filter (deviceId, globalPid). Fills g's optional column names.
  StatusOr<std::vector<std::string>> GpuColumns(GpuTable& g) {
    OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(g.table));
    for (const char* c : {"start", "end", "deviceId", "streamId"})
      if (!cols.count(c)) return MissingColumn(g.table, c);
    if (cols.count("correlationId")) g.corr_col = "correlationId";
    if (cols.count("globalPid")) g.pid_col = "globalPid";
    if (g.kind == ActivityKind::kKernel) {
      if (cols.count("demangledName")) g.name_col = "demangledName";
      else if (cols.count("shortName")) g.name_col = "shortName";
    }
    if (cols.count("bytes") && (g.kind == ActivityKind::kMemcpy || g.kind == ActivityKind::kMemset))
      g.bytes_col = "bytes";
    if (g.kind == ActivityKind::kMemcpy && cols.count("copyKind")) g.copy_kind_col = "copyKind";
    if (g.kind == ActivityKind::kSync && cols.count("syncType")) g.sync_type_col = "syncType";
    return std::vector<std::string>{"start",         "end",           "streamId", g.corr_col, g.name_col, g.bytes_col,
                                    g.copy_kind_col, g.sync_type_col, "deviceId", g.pid_col};
  }

  Status ReadGpuTable(GpuTable g) {
    OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<std::string> columns, GpuColumns(g));
    // The rank's filter is applied here for a direct scan or a spill (SQL's WHERE already did).
    Rows st;
    if (const RowSpill* spill = PartitionTable(g.table)) {
      st.OpenSpill(partition_, *spill, UnitIndex(*partition_, unit_));
    } else {
      OVERLAPPROF_RETURN_IF_ERROR(Damaged(st.Open(
          db_.get(), path_, g.table, columns,
          fmt::format("deviceId = ?1 AND {} = ?2", g.pid_col.empty() ? "-1" : kPidOfGlobalPid),
          {unit_.device, unit_.pid})));
    }
    BeginGpuTable();
    return st.ForEach([&](const auto& row) { return GpuRow(row, g); });
  }

  // Before a GPU table's rows (the name table's order is part of the output).
  void BeginGpuTable() { memset_name_ = t_.names.Intern("Memset"); }

  // One row of a GPU-activity table (GpuColumns), any rank: others are skipped.
  template <typename Row>
  Status GpuRow(const Row& row, const GpuTable& g) {
    if (!row.IsInt(8) || row.Int(8) != unit_.device || PidOf(row, 9) != unit_.pid) return OkStatus();
    Activity a;
    if (!ReadSpan(row, &a.start_ns, &a.end_ns)) return OkStatus();
    if (a.end_ns == a.start_ns) t_.stats.Add(Stat::activities_zero_duration);
    a.kind = g.kind;
    int64_t stream = kUnknown;
    if (row.IsInt(2)) stream = row.Int(2);
    else t_.stats.Add(Stat::activities_unknown_stream);
    a.stream = t_.StreamIndex(unit_.device, stream);
    if (row.IsInt(3)) a.correlation_id = row.Int(3);
    switch (g.kind) {
      case ActivityKind::kKernel: {
        if (row.IsInt(4)) {
          OVERLAPPROF_ASSIGN_OR_RETURN(a.name_id, Name(row.Int(4)));
        }
        if (a.name_id >= name_is_comm_.size()) name_is_comm_.resize(t_.names.size(), -1);
        int8_t& c = name_is_comm_[a.name_id];
        if (c < 0) c = IsCommKernelName(t_.names.Get(a.name_id)) ? 1 : 0;
        a.category = c ? Category::kComm : Category::kCompute;
        break;
      }
      case ActivityKind::kMemcpy: {
        int64_t kind = row.IsInt(6) ? row.Int(6) : 0;
        if (kind < 0 || kind > 255) kind = 0;
        a.copy_kind = static_cast<uint8_t>(kind);
        a.name_id = t_.names.Intern(CopyKindName(kind));
        // Peer-to-peer copies move data between GPUs: communication (rule 4,
        // docs/classification.md), done by the copy engines.
        a.category = kind == kCopyKindPeerToPeer ? Category::kComm : Classify(a.kind, t_.names.Get(a.name_id), false);
        break;
      }
      case ActivityKind::kMemset:
        a.name_id = memset_name_;
        a.category = Classify(a.kind, "Memset", false);
        break;
      case ActivityKind::kSync:
        a.name_id = t_.names.Intern(
            SyncTypeName(row.IsInt(7) ? row.Int(7) : 0));
        a.category = Category::kOther;
        break;
    }
    if (row.IsInt(5)) {
      int64_t b = row.Int(5);
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
        if (a.name_id >= name_op_.size()) name_op_.resize(t_.names.size());
        std::optional<std::string>& name_op = name_op_[a.name_id];
        if (!name_op) name_op = CollectiveFromKernelName(t_.names.Get(a.name_id));
        op.op = *name_op;
      }
      op.communicator = "unknown";
      a.comm_op = static_cast<uint32_t>(t_.comm_ops.size());
      t_.comm_ops.push_back(std::move(op));
    }
    t_.activities.push_back(a);
    return OkStatus();
  }

  // The runtime calls of this process that launched this rank's GPU work give each activity
  // its launch_ns (and a comm op its host call), as the Kineto importer does: the first call
  // with a correlation id, in table order, wins. Linked while reading (an activity index per
  // wanted id), so a call is kept as a HostCall only when the analyzers ask for host calls.
  Status ReadRuntime() {
    OVERLAPPROF_ASSIGN_OR_RETURN(bool wants, BeginRuntime());
    if (!wants) return OkStatus();
    OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(kRuntime));
    const bool tid = cols.count("globalTid") > 0;
    Rows st;
    if (const RowSpill* spill = PartitionTable(kRuntime)) {
      st.OpenSpill(partition_, *spill, PidIndex(*partition_, unit_.pid));
    } else {
      OVERLAPPROF_RETURN_IF_ERROR(Damaged(st.Open(db_.get(), path_, kRuntime, RuntimeColumns(cols),
                                                  fmt::format("{} = ?1", tid ? kPidOfGlobalTid : "-1"), {unit_.pid})));
    }
    OVERLAPPROF_RETURN_IF_ERROR(st.ForEach([&](const auto& row) { return RuntimeRow(row); }));
    EndRuntime();
    return OkStatus();
  }

  // ReadRuntime in three steps, so that one pass over the runtime table can feed several ranks
  // (Builders): true when the table has what linking needs and this rank has ids to look up.
  StatusOr<bool> BeginRuntime() {
    OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(kRuntime));
    for (const char* c : {"start", "end", "correlationId"})
      if (!cols.count(c)) return false;  // no launch times (counted as unmatched in LinkLaunches)
    // (correlation id, activity index), sorted by id then index.
    wanted_.clear();
    wanted_.reserve(t_.activities.size());
    Prefault(wanted_.data(), wanted_.capacity() * sizeof(wanted_[0]));
    for (uint32_t i = 0; i < t_.activities.size(); ++i) {
      const Activity& a = t_.activities[i];
      if (a.correlation_id != kUnknown && a.kind != ActivityKind::kSync) wanted_.emplace_back(a.correlation_id, i);
    }
    if (!std::is_sorted(wanted_.begin(), wanted_.end())) std::sort(wanted_.begin(), wanted_.end());
    if (wanted_.empty()) return false;
    runtime_hint_ = 0;
    linked_.assign(wanted_.size(), 0);
    runtime_lo_ = wanted_.front().first;
    runtime_hi_ = wanted_.back().first;
    return true;
  }

  // One row of the runtime table (RuntimeColumns), any process: others are skipped.
  template <typename Row>
  Status RuntimeRow(const Row& row) {
    if (!row.IsInt(2)) return OkStatus();
    const int64_t corr = row.Int(2);
    if (corr < runtime_lo_ || corr > runtime_hi_ || PidOf(row, 3) != unit_.pid) return OkStatus();
    // Calls come in about the order of their ids: look just past the last match first.
    const std::pair<int64_t, uint32_t> key(corr, 0);
    auto from = wanted_.begin(), to = wanted_.end();
    if (runtime_hint_ < wanted_.size() && wanted_[runtime_hint_].first <= corr) {
      from += static_cast<std::ptrdiff_t>(runtime_hint_);
      if (wanted_.size() - runtime_hint_ > 16 && wanted_[runtime_hint_ + 16].first >= corr) to = from + 17;
    }
    auto it = std::lower_bound(from, to, key);
    if (it == wanted_.end() || it->first != corr) return OkStatus();
    size_t w = static_cast<size_t>(it - wanted_.begin());
    runtime_hint_ = w;
    if (linked_[w] && !needs_.host_calls) return OkStatus();  // a later call with the same id: the first won
    HostCall h;
    if (!ReadSpan(row, &h.start_ns, &h.end_ns)) return OkStatus();
    h.correlation_id = corr;
    if (row.IsInt(3)) h.tid = row.Int(3) & 16777215;
    if (row.IsInt(4)) {
      OVERLAPPROF_ASSIGN_OR_RETURN(h.name_id, Name(row.Int(4)));
    }
    if (needs_.host_calls) t_.host_calls.push_back(h);
    if (linked_[w]) return OkStatus();
    for (; w < wanted_.size() && wanted_[w].first == corr; ++w) {
      linked_[w] = 1;
      t_.LinkLaunch(t_.activities[wanted_[w].second], h);
    }
    return OkStatus();
  }

  void EndRuntime() {
    for (size_t w = 0; w < wanted_.size(); ++w) t_.stats.Add(Stat::correlations_unmatched, linked_[w] ? 0 : 1);
    runtime_linked_ = true;
    std::vector<std::pair<int64_t, uint32_t>>().swap(wanted_);
    std::vector<uint8_t>().swap(linked_);
  }

  // The runtime table's columns as ReadRuntime reads them (pid of column 3 the filter).
  static std::vector<std::string> RuntimeColumns(const std::set<std::string>& cols) {
    return {"start", "end", "correlationId", cols.count("globalTid") ? "globalTid" : "",
            cols.count("nameId") ? "nameId" : ""};
  }

  // Activities that ReadRuntime could not link (no runtime table, no id, no call with the id)
  // are counted as unmatched correlations; sync records have no launch.
  void LinkLaunches() {
    if (runtime_linked_) {
      for (const Activity& a : t_.activities)
        if (a.kind != ActivityKind::kSync && a.correlation_id == kUnknown) t_.stats.Add(Stat::correlations_unmatched);
      return;
    }
    for (const Activity& a : t_.activities)
      if (a.kind != ActivityKind::kSync) t_.stats.Add(Stat::correlations_unmatched);
  }

  // NVTX push/pop and start/end ranges of this process: ProfilerStep#N ranges are steps;
  // the others are annotations (kept when asked for: --step-range, import).
  Status ReadNvtx() {
    OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(kNvtx));
    for (const char* c : {"start", "end", "eventType"})
      if (!cols.count(c)) return OkStatus();
    const bool tid = cols.count("globalTid") > 0;
    const bool blobs = cols.count("binaryData") > 0;
    if (blobs) OVERLAPPROF_RETURN_IF_ERROR(ReadPayloadSchemas());
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(Prep(s, fmt::format("SELECT start, end, {}, {}, {}, {}, {} FROM {} WHERE eventType IN ({}, {}) AND {} = ?1",
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
      if (rc != SQLITE_ROW) return Damaged(SqliteError(db_.get(), rc, "sqlite3_step(NVTX_EVENTS)"));
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
        if (sqlite3_column_type(st, 6) == SQLITE_BLOB && !payload_schemas_.empty()) {
          const auto* b = static_cast<const uint8_t*>(sqlite3_column_blob(st, 6));
          n.payload = payload_schemas_.DecodeNccl(sqlite3_column_int64(st, 5),
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
    NameOpsFromNcclRanges();
    return OkStatus();
  }

  // NCCL annotates its API calls with NVTX ranges (domain "NCCL"; exports without the payload
  // still have the names). A communication kernel's launch (its runtime call, LinkLaunches)
  // lies inside the call that launched it: the collective's own range (ncclAllReduce), or the
  // ncclGroupEnd of a group, whose calls are the NCCL ranges of that thread since its
  // ncclGroupStart (else since the previous ncclGroupEnd). The op is named from them when they
  // agree: one collective type, or sends and receives only (send, recv, sendrecv). Otherwise it
  // keeps the kernel's name. With their payloads (ApplyPayloads), the op also gets its bytes,
  // communicator, the rank's place in it (from the communicator's ncclCommInitRank* payload) and
  // its root or peer. Linear in the ranges plus, per op, a binary search and its group's calls.
  void NameOpsFromNcclRanges() {
    if (nccl_ranges_.empty()) return;
    std::sort(nccl_ranges_.begin(), nccl_ranges_.end(), [](const NcclRange& a, const NcclRange& b) {
      return std::tie(a.tid, a.start_ns, a.end_ns) < std::tie(b.tid, b.start_ns, b.end_ns);
    });
    // Each ncclGroupEnd's ncclGroupStart, matched per thread in call order (groups nest; -1: none),
    // and the latest end of a thread's ranges up to each (the search below stops where it is
    // before the launch: no earlier range holds it).
    std::vector<int64_t> group_start(nccl_ranges_.size(), -1), max_end(nccl_ranges_.size());
    {
      std::vector<int64_t> open;
      for (size_t i = 0; i < nccl_ranges_.size(); ++i) {
        const bool new_thread = i == 0 || nccl_ranges_[i].tid != nccl_ranges_[i - 1].tid;
        if (new_thread) open.clear();
        max_end[i] = new_thread ? nccl_ranges_[i].end_ns : std::max(max_end[i - 1], nccl_ranges_[i].end_ns);
        if (nccl_ranges_[i].api == NcclApi::kGroupStart) {
          open.push_back(static_cast<int64_t>(i));
        } else if (nccl_ranges_[i].api == NcclApi::kGroupEnd && !open.empty()) {
          group_start[i] = open.back();
          open.pop_back();
        }
      }
    }
    // This process's rank and size in each communicator it initialized.
    std::map<uint64_t, std::pair<int64_t, int64_t>> members;
    for (const NcclRange& r : nccl_ranges_)
      if (r.payload && r.payload->communicator && r.payload->rank && r.payload->nranks)
        members[*r.payload->communicator] = {*r.payload->rank, *r.payload->nranks};
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
      // Bounded: NCCL's ranges do not nest (but for groups), so the one holding a launch is among
      // the last few; a file whose ranges all overlap costs at most kMaxBack steps per op.
      constexpr int kMaxBack = 4096;
      auto inner = last;
      int steps = 0;
      for (auto it = last; it != first && steps < kMaxBack; ++steps) {
        --it;
        if (max_end[static_cast<size_t>(it - nccl_ranges_.begin())] < t) break;
        if (it->end_ns >= t) {
          inner = it;
          break;
        }
      }
      if (inner == last) continue;
      std::string name;
      auto calls_begin = inner, calls_end = std::next(inner);  // the calls behind the op
      if (inner->api == NcclApi::kGroupEnd) {
        // The group's calls: since its ncclGroupStart (groups nest: the launch is in the
        // outermost ncclGroupEnd), else, without ncclGroupStart ranges, since the previous
        // ncclGroupEnd of this thread.
        auto begin = inner;
        const int64_t start = group_start[static_cast<size_t>(inner - nccl_ranges_.begin())];
        if (start >= first - nccl_ranges_.begin()) {
          begin = nccl_ranges_.begin() + start + 1;
        } else {
          while (begin != first && std::prev(begin)->api != NcclApi::kGroupEnd) --begin;
        }
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
        calls_begin = begin;
        calls_end = inner;
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
      ApplyPayloads(op, calls_begin, calls_end, members);
    }
    std::vector<NcclRange>().swap(nccl_ranges_);
  }

  // The payloads of the calls [begin, end) behind one op (its collective, send or receive, or the
  // calls of its group): every call must have one, all of one communicator; the op's bytes are
  // their sum (a group's calls run in the op's one kernel) when each says its size; the root or
  // peer only for a single call. Anything short of that leaves the op as it was.
  template <typename It>
  static void ApplyPayloads(CommOp& op, It begin, It end,
                            const std::map<uint64_t, std::pair<int64_t, int64_t>>& members) {
    std::optional<uint64_t> comm;
    int64_t bytes = 0, calls = 0;
    bool all_bytes = true;
    for (It it = begin; it != end; ++it) {
      if (it->api != NcclApi::kCollective && it->api != NcclApi::kSend && it->api != NcclApi::kRecv) continue;
      if (!it->payload || !it->payload->communicator) return;
      if (comm && *comm != *it->payload->communicator) return;
      comm = it->payload->communicator;
      ++calls;
      if (it->payload->bytes && *it->payload->bytes <= (int64_t{1} << 50) - bytes) bytes += *it->payload->bytes;
      else all_bytes = false;
    }
    if (!comm || calls == 0) return;
    op.communicator = fmt::format("{:016x}", *comm);  // as the injector names NCCL communicators
    if (all_bytes) op.bytes = bytes;
    if (auto m = members.find(*comm); m != members.end()) {
      op.comm_rank = m->second.first;
      op.comm_nranks = m->second.second;
    }
    if (calls == 1) {
      const NcclPayload& p = *std::find_if(begin, end, [](const NcclRange& r) {
        return r.api == NcclApi::kCollective || r.api == NcclApi::kSend || r.api == NcclApi::kRecv;
      })->payload;
      if (p.peer) op.root_peer = *p.peer;
      else if (p.root) op.root_peer = *p.root;
    }
  }

  // NCCL's payload schemas (nvtx_payload.h), read once per export: small tables (NCCL 2.28
  // registers 6 schemas of 34 entries). A file listing more than kMaxRows in either is not
  // NCCL's: nothing is decoded from it rather than memory spent on it.
  Status ReadPayloadSchemas() {
    if (payload_schemas_read_) return OkStatus();
    payload_schemas_read_ = true;
    if (!Has(kPayloadSchemas) || !Has(kPayloadEntries)) return OkStatus();
    OVERLAPPROF_ASSIGN_OR_RETURN(auto sc, Columns(kPayloadSchemas));
    OVERLAPPROF_ASSIGN_OR_RETURN(auto ec, Columns(kPayloadEntries));
    for (const char* c : {"schemaId", "payloadSize"})
      if (!sc.count(c)) return OkStatus();
    for (const char* c : {"schemaId", "idx", "type", "name"})
      if (!ec.count(c)) return OkStatus();
    // Each row of `sql` to `row`; false when the table has more than kMaxRows.
    auto each = [&](const char* table, const std::string& sql, auto&& row) -> StatusOr<bool> {
      constexpr int64_t kMaxRows = 65536;
      Stmt s;
      OVERLAPPROF_RETURN_IF_ERROR(Prep(s, sql));
      for (int64_t n = 0;; ++n) {
        StatusOr<bool> more = s.Step(table);
        if (!more.ok()) return Damaged(more.status());
        if (!*more) return true;
        if (n == kMaxRows) return false;
        row(s, SqlRow{s.get()});
      }
    };
    OVERLAPPROF_ASSIGN_OR_RETURN(
        bool fits, each(kPayloadSchemas,
                        fmt::format("SELECT {}, schemaId, payloadSize FROM {}", sc.count("domainId") ? "domainId" : "0",
                                    kPayloadSchemas),
                        [&](Stmt&, SqlRow r) {
                          if (r.IsInt(1) && r.IsInt(2)) payload_schemas_.AddSchema(r.Int(0), r.Int(1), r.Int(2));
                        }));
    if (fits) {
      OVERLAPPROF_ASSIGN_OR_RETURN(
          fits, each(kPayloadEntries,
                     fmt::format("SELECT {}, schemaId, idx, type, name, {} FROM {}",
                                 ec.count("domainId") ? "domainId" : "0", ec.count("offset") ? "\"offset\"" : "NULL",
                                 kPayloadEntries),
                     [&](Stmt& s, SqlRow r) {
                       if (!r.IsInt(1) || !r.IsInt(2) || !r.IsInt(3)) return;
                       // A NULL offset is the first entry's 0 (as exported); any other non-integer: not decodable.
                       const int64_t offset =
                           r.IsInt(5) ? r.Int(5) : sqlite3_column_type(r.st, 5) == SQLITE_NULL ? 0 : -1;
                       payload_schemas_.AddEntry(r.Int(0), r.Int(1), r.Int(2), r.Int(3), s.Text(4), offset);
                     }));
    }
    if (!fits) payload_schemas_ = NvtxPayloadSchemas();
    return OkStatus();
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
    OVERLAPPROF_ASSIGN_OR_RETURN(std::optional<std::string> host, SystemEnv("Hostname"));
    if (host) t_.meta.host = std::move(*host);
    return OkStatus();
  }

  // TARGET_INFO_SYSTEM_ENV's value for `name` (the first target's), nullopt when absent.
  StatusOr<std::optional<std::string>> SystemEnv(std::string_view name) {
    if (!Has(kSystemEnv)) return std::optional<std::string>();
    OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(kSystemEnv));
    if (!cols.count("name") || !cols.count("value")) return std::optional<std::string>();
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(Prep(s, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = ?1 LIMIT 1"));
    s.Bind(1, name);
    StatusOr<bool> row = s.Step("TARGET_INFO_SYSTEM_ENV");
    if (!row.ok()) return Damaged(row.status());
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
  Status ReadRankFromEnvironment() {
    OVERLAPPROF_ASSIGN_OR_RETURN(std::optional<std::string> env, SystemEnv("DeviceEnvironment"));
    if (!env) return OkStatus();
    const int64_t rank = EnvIntIn(*env, kRankEnv);
    if (rank == kUnknown) return OkStatus();
    OVERLAPPROF_ASSIGN_OR_RETURN(size_t units, UnitsInFile());
    if (units != 1) return OkStatus();
    t_.meta.rank = rank;
    t_.meta.world_size = EnvIntIn(*env, kWorldSizeEnv);
    t_.meta.local_rank = EnvIntIn(*env, kLocalRankEnv);
    return OkStatus();
  }

  // The first of `names` set to a non-negative integer in `env` ("NAME=VALUE;..."), else kUnknown.
  static int64_t EnvIntIn(std::string_view env, const char* const* names) {
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

  // How many ranks ((process, GPU) pairs) this export holds: ListUnits' count when this
  // process listed the file, else counted here (a file#pidN.gpuN named without a listing).
  StatusOr<size_t> UnitsInFile() {
    if (std::optional<FileId> id = Id()) {
      std::lock_guard<std::mutex> lock(CheckedMutex());
      auto it = RowHints().find(*id);
      if (it != RowHints().end()) return it->second.size();
    }
    std::string sql;
    for (const char* table : {kKernel, kMemcpy, kMemset}) {
      if (!Has(table)) continue;
      OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(table));
      if (!cols.count("deviceId")) continue;
      sql += fmt::format("{}SELECT DISTINCT {}, deviceId FROM {} WHERE typeof(deviceId) = 'integer'", sql.empty() ? "" : " UNION ",
                         cols.count("globalPid") ? kPidOfGlobalPid : "-1", table);
    }
    if (sql.empty()) return size_t{0};
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(Prep(s, fmt::format("SELECT COUNT(*) FROM ({})", sql)));
    StatusOr<bool> row = s.Step("units");
    if (!row.ok()) return Damaged(row.status());
    return *row ? static_cast<size_t>(s.Int(0)) : size_t{0};
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
  // Partitions (above) by file: built by the first rank read, dropped once every rank of the
  // file has been read from it (a rank read again scans the tables itself).
  struct PartitionSlot {
    std::mutex mu;  // held while the partition is built: the file's other ranks wait for it
    bool tried = false;
    std::shared_ptr<Partition> partition;  // null: not partitioned (one rank, SQL, no temp space)
    std::set<UnitKey> served;
  };
  static std::map<FileId, std::shared_ptr<PartitionSlot>>& Slots() {
    static std::map<FileId, std::shared_ptr<PartitionSlot>> m;
    return m;
  }
  static size_t UnitIndex(const Partition& p, const UnitKey& u) {
    return static_cast<size_t>(std::lower_bound(p.units.begin(), p.units.end(), u) - p.units.begin());
  }
  static size_t PidIndex(const Partition& p, int64_t pid) {
    return static_cast<size_t>(std::lower_bound(p.pids.begin(), p.pids.end(), pid) - p.pids.begin());
  }
  const RowSpill* PartitionTable(std::string_view table) const {
    if (!partition_) return nullptr;
    auto it = partition_->tables.find(table);
    return it == partition_->tables.end() ? nullptr : it->second.get();
  }

  // Sets partition_ when this file has several ranks (as listed by this process) and its
  // tables can be scanned directly; the first rank of the file builds it.
  Status UsePartition(const UnitKey& unit) {
    const char* force_sql = std::getenv("OVERLAPPROF_NSYS_SQL");
    if (force_sql && std::string_view(force_sql) == "1") return OkStatus();
    // OVERLAPPROF_NSYS_PARTITION=0: each rank scans the tables (tests and bench compare).
    const char* partition = std::getenv("OVERLAPPROF_NSYS_PARTITION");
    if (partition && std::string_view(partition) == "0") return OkStatus();
    std::optional<FileId> id = Id();
    if (!id) return OkStatus();
    std::vector<UnitKey> units;
    std::shared_ptr<PartitionSlot> slot;
    {
      std::lock_guard<std::mutex> lock(CheckedMutex());
      auto it = RowHints().find(*id);
      if (it == RowHints().end() || it->second.size() < 2 || it->second.size() > kMaxPartitionUnits ||
          !it->second.count(unit))
        return OkStatus();
      for (const auto& [k, n] : it->second) units.push_back(k);
      auto s = Slots().find(*id);
      if (s == Slots().end()) {
        if (Slots().size() >= 64) return OkStatus();  // a bound, as RowHints
        s = Slots().emplace(*id, std::make_shared<PartitionSlot>()).first;
      }
      slot = s->second;
    }
    std::lock_guard<std::mutex> build(slot->mu);
    if (!slot->tried) {
      slot->tried = true;
      StatusOr<std::shared_ptr<Partition>> p = BuildPartition(units);
      if (!p.ok()) {
        std::lock_guard<std::mutex> lock(CheckedMutex());
        Slots().erase(*id);
        return p.status();
      }
      slot->partition = std::move(*p);
    }
    if (!slot->partition || slot->partition->units != units || slot->served.count(unit)) return OkStatus();
    slot->served.insert(unit);
    partition_ = slot->partition;
    if (slot->served.size() == units.size()) {
      std::lock_guard<std::mutex> lock(CheckedMutex());
      Slots().erase(*id);  // the spill goes with the last reader
    }
    return OkStatus();
  }

  // One scan of each GPU table and the runtime table, rows spilled by rank and by process.
  // Null (per-rank scans instead) when a table cannot be scanned directly or no temporary file
  // can be written; a damaged table is the same error a per-rank scan gives.
  StatusOr<std::shared_ptr<Partition>> BuildPartition(const std::vector<UnitKey>& units) {
    auto p = std::make_shared<Partition>();
    p->units = units;
    for (const UnitKey& u : units) p->pids.push_back(u.pid);
    std::sort(p->pids.begin(), p->pids.end());
    p->pids.erase(std::unique(p->pids.begin(), p->pids.end()), p->pids.end());
    std::error_code ec;
    const std::string dir = std::filesystem::temp_directory_path(ec).string();
    if (ec) return std::shared_ptr<Partition>();
    auto spill_table = [&](const char* table, const std::vector<std::string>& columns, size_t nkeys,
                           auto key_of) -> StatusOr<bool> {
      std::string why_not;
      OVERLAPPROF_ASSIGN_OR_RETURN(auto scan,
                                   OpenSqliteTableScan(db_.get(), path_, table, columns, &why_not));
      if (!scan) return false;
      StatusOr<std::unique_ptr<RowSpill>> spill =
          RowSpill::Create(dir, static_cast<int>(columns.size()), nkeys);
      if (!spill.ok()) return false;
      while (true) {
        StatusOr<bool> row = scan->Next();
        if (!row.ok()) return Damaged(row.status());
        if (!*row) break;
        std::optional<size_t> key = key_of(*scan);
        if (key && !(*spill)->Append(*key, *scan).ok()) return false;
      }
      if (!(*spill)->Finish().ok()) return false;
      p->bytes += (*spill)->bytes();
      p->tables[table] = std::move(*spill);
      return true;
    };
    auto pid_of = [](const SqliteTableScan& r, size_t i) -> int64_t {
      return r.IsInt(i) ? (r.Int(i) >> 24) & 16777215 : -1;
    };
    for (GpuTable g : {GpuTable{kKernel, ActivityKind::kKernel}, GpuTable{kMemcpy, ActivityKind::kMemcpy},
                       GpuTable{kMemset, ActivityKind::kMemset}, GpuTable{kSync, ActivityKind::kSync}}) {
      if (!Has(g.table)) continue;
      OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<std::string> columns, GpuColumns(g));
      OVERLAPPROF_ASSIGN_OR_RETURN(
          bool ok, spill_table(g.table, columns, units.size(), [&](const SqliteTableScan& r) -> std::optional<size_t> {
            if (!r.IsInt(8)) return std::nullopt;  // no device: no rank reads it
            const UnitKey u{pid_of(r, 9), r.Int(8)};
            size_t i = UnitIndex(*p, u);
            if (i == p->units.size() || p->units[i] != u) return std::nullopt;
            return i;
          }));
      if (!ok) return std::shared_ptr<Partition>();
    }
    if (Has(kRuntime)) {
      OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, Columns(kRuntime));
      if (cols.count("start") && cols.count("end") && cols.count("correlationId")) {
        OVERLAPPROF_ASSIGN_OR_RETURN(
            bool ok, spill_table(kRuntime, RuntimeColumns(cols), p->pids.size(),
                                 [&](const SqliteTableScan& r) -> std::optional<size_t> {
                                   const int64_t pid = pid_of(r, 3);
                                   size_t i = PidIndex(*p, pid);
                                   if (i == p->pids.size() || p->pids[i] != pid) return std::nullopt;
                                   return i;
                                 }));
        if (!ok) return std::shared_ptr<Partition>();
      }
    }
    return p;
  }

  // Ranks built while listing. ListUnits reads every column that Read reads and hands each
  // row to the Export of its (process, GPU), then does the same with the synchronization and
  // runtime tables, so a file is read once instead of listed and then read (a one-rank export)
  // or listed, partitioned and read from the spill (several ranks). The built ranks wait in
  // Built() for the Import of each, within BuildBudget() bytes over all files listed by this
  // process: a file whose ranks would not fit is listed only (building stops when the
  // estimate passes the budget left) and read as before. Not done under OVERLAPPROF_NSYS_SQL=1
  // or OVERLAPPROF_NSYS_PARTITION=0 (the paths tests and the bench compare), nor with
  // OVERLAPPROF_NSYS_BUILD=0.
  struct Builders {
    bool on = false;
    std::map<UnitKey, std::unique_ptr<Export>> by_unit;
    uint64_t rows = 0;          // GPU rows fed
    uint64_t budget = 0;        // bytes the built ranks may take
    uint64_t table_rows = 0;    // the GPU tables' largest rowids: about their rows
    std::vector<std::string> why;

    void Stop() {
      on = false;
      by_unit.clear();
    }
    uint64_t Bytes() const {
      uint64_t n = 0;
      for (const auto& [k, e] : by_unit)
        n += e->t_.activities.capacity() * sizeof(Activity) + e->t_.comm_ops.capacity() * sizeof(CommOp);
      return n;
    }
    // The builder of a unit, made at its first row; null (building stopped) when it cannot be.
    Export* For(const UnitKey& key, const std::string& path) {
      auto it = by_unit.find(key);
      if (it != by_unit.end()) return it->second.get();
      if (by_unit.size() >= kMaxBuilders) {
        Stop();
        return nullptr;
      }
      auto e = std::make_unique<Export>();
      if (!e->Open(path).ok() || !e->Begin(key, TraceNeeds{}).ok()) {
        Stop();
        return nullptr;
      }
      e->BeginGpuTable();
      return by_unit.emplace(key, std::move(e)).first->second.get();
    }
    // One GPU row to its builder; false when building stopped. Every 64 Ki rows the estimate
    // is checked against the budget; at the first check each builder's activities are sized
    // for its share of the tables' rows (one allocation instead of doublings).
    template <typename Row>
    bool Feed(Export* e, const Row& row, const GpuTable& g) {
      if (!on || !e) return false;
      if (!e->GpuRow(row, g).ok()) {  // Read reports it
        Stop();
        return false;
      }
      if ((++rows & 0xffff) != 0) return true;
      if (rows == 0x10000 && table_rows > rows) {
        for (auto& [k, b] : by_unit) {
          const double share = static_cast<double>(b->t_.activities.size()) / static_cast<double>(rows);
          const uint64_t want = static_cast<uint64_t>(share * static_cast<double>(table_rows) * 1.02) + 1024;
          if (want * sizeof(Activity) > budget) {
            Stop();
            return false;
          }
          b->t_.activities.reserve(want);
          Prefault(b->t_.activities.data(), b->t_.activities.capacity() * sizeof(Activity));
        }
      }
      if (Bytes() > budget) {
        Stop();
        return false;
      }
      return true;
    }
  };

  // Whether ListUnits builds the ranks (Builders, b.on), with which budget, and about how many
  // GPU rows there are (each table's largest rowid: rows are only appended to an export).
  void StartBuilders(Builders& b) {
    for (const auto& [var, off] : {std::pair<const char*, const char*>{"OVERLAPPROF_NSYS_SQL", "1"},
                                   {"OVERLAPPROF_NSYS_PARTITION", "0"}, {"OVERLAPPROF_NSYS_BUILD", "0"}}) {
      const char* v = std::getenv(var);
      if (v && std::string_view(v) == off) return;
    }
    const uint64_t budget = BuildBudget();
    {
      std::lock_guard<std::mutex> lock(CheckedMutex());
      if (BuiltBytes() >= budget) return;
      b.budget = budget - BuiltBytes();
    }
    for (const char* table : {kKernel, kMemcpy, kMemset}) {
      if (!Has(table)) continue;
      Stmt st;
      if (!st.Prepare(db_.get(), fmt::format("SELECT max(rowid) FROM {}", table)).ok()) continue;
      StatusOr<bool> row = st.Step("largest rowid");
      if (row.ok() && *row && !st.IsNull(0) && st.Int(0) > 0)
        b.table_rows = std::min<uint64_t>(b.table_rows + static_cast<uint64_t>(st.Int(0)), uint64_t{1} << 40);
    }
    b.on = true;
  }

  // The synchronization and runtime tables, once for all built ranks.
  void FinishBuilders(Builders& b) {
    if (Has(kSync)) {
      GpuTable g{kSync, ActivityKind::kSync};
      StatusOr<std::vector<std::string>> columns = GpuColumns(g);
      Rows r;
      if (!columns.ok() || !r.Open(db_.get(), path_, g.table, *columns, "", {}).ok()) return b.Stop();
      for (auto& [k, e] : b.by_unit) e->BeginGpuTable();
      Status st = r.ForEach([&](const auto& row) -> Status {
        if (!row.IsInt(8)) return OkStatus();
        auto it = b.by_unit.find(UnitKey{PidOf(row, 9), row.Int(8)});
        if (it == b.by_unit.end()) return OkStatus();
        return it->second->GpuRow(row, g);
      });
      if (!st.ok()) return b.Stop();
    }
    if (!Has(kRuntime)) return;
    // Builders by process: the runtime table's rows are a process's calls.
    std::map<int64_t, std::vector<Export*>> by_pid;
    for (auto& [k, e] : b.by_unit) {
      StatusOr<bool> wants = e->BeginRuntime();
      if (!wants.ok()) return b.Stop();
      if (*wants) by_pid[k.pid].push_back(e.get());
    }
    if (by_pid.empty()) return;
    StatusOr<std::set<std::string>> cols = Columns(kRuntime);
    if (!cols.ok()) return b.Stop();
    Rows r;
    if (!r.Open(db_.get(), path_, kRuntime, RuntimeColumns(*cols), "", {}).ok()) return b.Stop();
    // The processes seen last, searched before the map: calls of a few processes come
    // interleaved. Null: a process without builders.
    std::vector<std::pair<int64_t, const std::vector<Export*>*>> seen;
    size_t replace = 0;
    Status st = r.ForEach([&](const auto& row) -> Status {
      const int64_t pid = PidOf(row, 3);
      const std::vector<Export*>* es = nullptr;
      bool found = false;
      for (const auto& [p, v] : seen)
        if (p == pid) {
          es = v;
          found = true;
          break;
        }
      if (!found) {
        auto it = by_pid.find(pid);
        es = it == by_pid.end() ? nullptr : &it->second;
        if (seen.size() < 16) seen.emplace_back(pid, es);
        else seen[replace++ % seen.size()] = {pid, es};
      }
      if (es)
        for (Export* e : *es) OVERLAPPROF_RETURN_IF_ERROR(e->RuntimeRow(row));
      return OkStatus();
    });
    if (!st.ok()) return b.Stop();
    for (auto& [pid, es] : by_pid)
      for (Export* e : es) e->EndRuntime();
  }

  struct BuiltFile {
    std::map<UnitKey, std::unique_ptr<Export>> ranks;
    uint64_t bytes = 0;
  };
  // Ranks built while listing, by file; guarded by CheckedMutex(), as BuiltBytes().
  static std::map<FileId, BuiltFile>& Built() {
    static std::map<FileId, BuiltFile> m;
    return m;
  }
  static uint64_t& BuiltBytes() {
    static uint64_t n = 0;
    return n;
  }
  // 1 GiB of records (~15 M GPU activities), OVERLAPPROF_NSYS_BUILD_BUDGET_MB to change it.
  static uint64_t BuildBudget() {
    const char* mb = std::getenv("OVERLAPPROF_NSYS_BUILD_BUDGET_MB");
    int64_t v;
    if (mb && ParseInt(mb, &v) && v >= 0 && v < (int64_t{1} << 30)) return static_cast<uint64_t>(v) << 20;
    return uint64_t{1} << 30;
  }
  static void DropBuilt(const FileId& id) {
    std::map<UnitKey, std::unique_ptr<Export>> drop;  // freed outside the lock
    std::lock_guard<std::mutex> lock(CheckedMutex());
    auto it = Built().find(id);
    if (it == Built().end()) return;
    BuiltBytes() -= it->second.bytes;
    drop = std::move(it->second.ranks);
    Built().erase(it);
  }
 public:
  // Ranks in Built(), all files.
  static size_t BuiltRanks() {
    std::lock_guard<std::mutex> lock(CheckedMutex());
    size_t n = 0;
    for (const auto& [id, f] : Built()) n += f.ranks.size();
    return n;
  }

 private:
  // The rank built for `unit` of this file while it was listed, taken out; null when none.
  std::unique_ptr<Export> TakeBuilt(const UnitKey& unit) {
    std::optional<FileId> id = Id();
    if (!id) return nullptr;
    std::lock_guard<std::mutex> lock(CheckedMutex());
    auto it = Built().find(*id);
    if (it == Built().end()) return nullptr;
    auto r = it->second.ranks.find(unit);
    if (r == it->second.ranks.end()) return nullptr;
    std::unique_ptr<Export> e = std::move(r->second);
    it->second.ranks.erase(r);
    if (it->second.ranks.empty()) {
      BuiltBytes() -= it->second.bytes;
      Built().erase(it);
    }
    return e;
  }

  // ListUnits' row counts per file and unit (a hint only: a sync table's rows are not in it).
  static std::map<FileId, std::map<UnitKey, uint64_t>>& RowHints() {
    static std::map<FileId, std::map<UnitKey, uint64_t>> m;
    return m;
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
  static constexpr uint32_t kNoName = UINT32_MAX;
  std::vector<uint32_t> dense_names_;  // StringIds id -> StringTable id, kNoName: not looked up yet
  int64_t last_string_id_ = -1;
  uint32_t last_name_ = 0;
  std::vector<int8_t> name_is_comm_;  // by name id: -1 not yet classified, 0 compute, 1 comm
  std::vector<std::optional<std::string>> name_op_;  // by name id: CollectiveFromKernelName, once
  std::shared_ptr<Partition> partition_;  // this rank's rows, spilled (null: scan the tables)
  std::vector<std::pair<int64_t, uint32_t>> wanted_;  // ReadRuntime: (correlation id, activity index)
  bool runtime_linked_ = false;
  uint32_t memset_name_ = 0;  // BeginGpuTable
  // BeginRuntime .. EndRuntime: the ids' range, where the last match was, per wanted_ entry
  // whether a call was found.
  int64_t runtime_lo_ = 0, runtime_hi_ = 0;
  size_t runtime_hint_ = 0;
  std::vector<uint8_t> linked_;
  std::vector<NcclRange> nccl_ranges_;  // NCCL's API ranges of this process (ReadNvtx), ns on the trace clock
  NvtxPayloadSchemas payload_schemas_;   // NCCL's payload schemas (ReadPayloadSchemas)
  bool payload_schemas_read_ = false;
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
  StatusOr<std::unique_ptr<ImportSession>> Open(const std::string& path, const ImportOptions& options) const override;
};

// One export, its ranks listed (and built, when they fit) once and imported each.
class NsysSession final : public ImportSession {
 public:
  NsysSession(std::string path, const TraceNeeds& needs) : path_(std::move(path)), needs_(needs) {}

  StatusOr<std::vector<std::string>> Units() override {
    Export e;
    OVERLAPPROF_RETURN_IF_ERROR(e.Open(path_));
    OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<UnitKey> units, e.ListUnits(/*build=*/!needs_.host_calls));
    std::vector<std::string> keys;
    for (const UnitKey& u : units) keys.push_back(KeyString(u));
    return keys;
  }

  StatusOr<RankTrace> Import(const std::string& unit_key, const ImportOptions& options) override {
    Export e;
    OVERLAPPROF_RETURN_IF_ERROR(e.Open(path_));
    UnitKey unit;
    if (unit_key.empty()) {
      // The whole file: fine when it holds one rank.
      OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<UnitKey> units, e.ListUnits(/*build=*/!options.store_needs.host_calls));
      if (units.size() > 1) {
        std::string keys;
        for (const UnitKey& u : units) keys += (keys.empty() ? "" : ", ") + KeyString(u);
        return MakeError(StatusCode::kInvalidInput, "holds {} ranks ({}): name one as FILE#KEY", units.size(), keys);
      }
      if (!units.empty()) unit = units[0];
    } else if (!ParseKey(unit_key, &unit)) {
      return MakeError(StatusCode::kInvalidArgument, "'{}' names no rank of an Nsight Systems export (pidN.gpuN)",
                       unit_key);
    }
    OVERLAPPROF_ASSIGN_OR_RETURN(RankTrace t, e.Read(unit, options));
    t.meta.source_path = unit_key.empty() ? path_ : path_ + "#" + unit_key;
    return t;
  }

 private:
  const std::string path_;
  const TraceNeeds needs_;
};

StatusOr<std::unique_ptr<ImportSession>> NsysImporter::Open(const std::string& path, const ImportOptions& options) const {
  return std::unique_ptr<ImportSession>(std::make_unique<NsysSession>(path, options.store_needs));
}

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

size_t NsysRanksBuiltWhileListing() { return Export::BuiltRanks(); }

std::optional<int64_t> NsysUnitDevice(std::string_view key) {
  UnitKey k;
  if (!ParseKey(key, &k)) return std::nullopt;
  return k.device;
}

std::unique_ptr<Importer> MakeNsysImporter() { return std::make_unique<NsysImporter>(); }

}  // namespace overlapprof
