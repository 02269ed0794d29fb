#pragma once
// What an Nsight Systems SQLite export holds, as this importer reads it: the tables and columns
// (found by name, not position: they differ across nsys releases), the rank keys, and the
// connection that knows which tables the file has (NsysDb). docs/nsys.md lists what is read.
#include <sqlite3.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/status.h"
#include "src/store/sqlite_util.h"
#include "src/trace/model.h"

namespace overlapprof::nsys {

inline constexpr const char* kKernel = "CUPTI_ACTIVITY_KIND_KERNEL";
inline constexpr const char* kMemcpy = "CUPTI_ACTIVITY_KIND_MEMCPY";
inline constexpr const char* kMemset = "CUPTI_ACTIVITY_KIND_MEMSET";
inline constexpr const char* kSync = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
inline constexpr const char* kRuntime = "CUPTI_ACTIVITY_KIND_RUNTIME";
// cudaEventRecord calls (their stream, eventSyncId: CUPTI 12.8+), for the what-if model's recorded edges.
inline constexpr const char* kCudaEvent = "CUPTI_ACTIVITY_KIND_CUDA_EVENT";
inline constexpr const char* kNvtx = "NVTX_EVENTS";
inline constexpr const char* kPayloadSchemas = "NVTX_PAYLOAD_SCHEMAS";
inline constexpr const char* kPayloadEntries = "NVTX_PAYLOAD_SCHEMA_ENTRIES";
inline constexpr const char* kStrings = "StringIds";
inline constexpr const char* kSession = "TARGET_INFO_SESSION_START_TIME";
inline constexpr const char* kGpuInfo = "TARGET_INFO_GPU";
inline constexpr const char* kSystemEnv = "TARGET_INFO_SYSTEM_ENV";

// A hostile file could list millions of (process, GPU) pairs, each costing a scan.
inline constexpr size_t kMaxUnits = 4096;
// CUPTI_ACTIVITY_MEMCPY_KIND_PTOP (cupti_activity.h; ENUM_CUDA_MEMCPY_OPER in exports).
inline constexpr int64_t kCopyKindPeerToPeer = 10;
// ENUM_NSYS_EVENT_TYPE: NvtxPushPopRange, NvtxStartEndRange.
inline constexpr int64_t kNvtxPushPop = 59, kNvtxStartEnd = 60;

// The process id inside nsys' serialized global ids (hw:8 | vm:8 | pid:24 | tid:24);
// -1 when the column is NULL or absent.
inline constexpr const char* kPidOfGlobalPid = "ifnull((globalPid >> 24) & 16777215, -1)";
inline constexpr const char* kPidOfGlobalTid = "ifnull((globalTid >> 24) & 16777215, -1)";

// One rank of an export: a (process, GPU) pair with GPU rows.
struct UnitKey {
  int64_t pid = -1;
  int64_t device = -1;
  auto operator<=>(const UnitKey&) const = default;
};

// "pid<PID>.gpu<DEVICE>": the key of a rank in ImportSession::Units and in "PATH#KEY".
std::string KeyString(const UnitKey& k);
// KeyString's inverse; false for anything else.
bool ParseKey(std::string_view s, UnitKey* k);
// A decimal integer of at most 18 digits, optionally negative; false for anything else.
bool ParseInt(std::string_view s, int64_t* out);

// Activity names of memcpy kinds and synchronization types (CUPTI's enums; unknown: the first).
std::string_view CopyKindName(int64_t kind);
std::string_view SyncTypeName(int64_t type);

// Damage found while reading rows: "corrupted SQLite file (...)", other errors as they are.
Status DamagedFile(const Status& st);

// The process id in a serialized global id column (hw:8 | vm:8 | pid:24 | tid:24) of a row
// (any of Rows' sources); -1 when NULL (kPidOfGlobalPid in SQL).
template <typename Row>
int64_t PidOf(const Row& r, int i) {
  return r.IsInt(i) ? (r.Int(i) >> 24) & 16777215 : -1;
}

// A row of a prepared statement, with Rows' accessors.
struct SqlRow {
  sqlite3_stmt* st;
  bool IsInt(int i) const { return sqlite3_column_type(st, i) == SQLITE_INTEGER; }
  int64_t Int(int i) const { return sqlite3_column_int64(st, i); }
};

// A GPU-activity table and the columns this export has (empty: a missing optional column,
// read as NULL).
struct GpuTable {
  const char* table;
  ActivityKind kind;
  // bytes_col (column 5): bytes of a memcpy or memset; eventSyncId of a synchronization (CUPTI 12.8+).
  std::string name_col = "", corr_col = "", bytes_col = "", copy_kind_col = "", sync_type_col = "", pid_col = "";
};
// The GPU-activity tables in the order a rank reads them.
inline constexpr std::pair<const char*, ActivityKind> kGpuTables[] = {
    {kKernel, ActivityKind::kKernel}, {kMemcpy, ActivityKind::kMemcpy},
    {kMemset, ActivityKind::kMemset}, {kSync, ActivityKind::kSync}};

// One read-only connection to an export (opened like a store: OpenUntrustedReadOnly), with the
// names of its tables. Not shared between threads.
class NsysDb {
 public:
  // Opens `path` and checks that it is an export with kernels: otherwise an error saying what
  // the file is (an export without kernels, another SQLite schema).
  Status Open(const std::string& path);

  bool Has(std::string_view table) const { return tables_.count(std::string(table)) > 0; }
  sqlite3* get() const { return db_.get(); }
  const std::string& path() const { return path_; }

  // Prepares `sql`; a damaged schema reads "corrupted SQLite file (...)" like damaged rows.
  Status Prep(Stmt& s, std::string_view sql) const { return DamagedFile(s.Prepare(db_.get(), sql)); }
  StatusOr<std::set<std::string>> Columns(std::string_view table) const;
  // The columns read from a GPU-activity table, found by name: 0-7 as a rank reads them
  // (start, end, stream, correlation, name, bytes, copy kind, sync type), 8-9 the rank's filter
  // (deviceId, globalPid). Fills g's optional column names.
  StatusOr<std::vector<std::string>> GpuColumns(GpuTable& g) const;
  // The runtime table's columns as a rank reads them (start, end, correlation, thread, name;
  // the pid of column 3 the filter).
  static std::vector<std::string> RuntimeColumns(const std::set<std::string>& cols);
  static Status MissingColumn(std::string_view table, std::string_view column);

 private:
  std::string path_;
  Db db_;
  std::set<std::string> tables_;
};

}  // namespace overlapprof::nsys
