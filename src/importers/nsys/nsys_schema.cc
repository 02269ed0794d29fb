#include "src/importers/nsys/nsys_schema.h"

#include <iterator>

namespace overlapprof::nsys {

namespace {
// Tables only nsys writes: one of them without the kernel table is an export without kernels.
constexpr const char* kMarkers[] = {"META_DATA_EXPORT", "TARGET_INFO_SESSION_START_TIME", "StringIds",
                                    "ENUM_NSYS_EVENT_TYPE"};
}  // namespace

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

Status DamagedFile(const Status& st) {
  if (st.ok()) return st;
  if (st.code() == StatusCode::kCorrupt) return MakeError(StatusCode::kCorrupt, "corrupted SQLite file ({})", st.message());
  return st;
}

Status NsysDb::Open(const std::string& path) {
  path_ = path;
  OVERLAPPROF_RETURN_IF_ERROR(OpenUntrustedReadOnly(db_, path, /*max_columns=*/400));
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(Prep(s, "SELECT name FROM sqlite_schema WHERE type='table'"));
  while (true) {
    StatusOr<bool> row = s.Step("list tables");
    if (!row.ok()) return DamagedFile(row.status());
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

Status NsysDb::MissingColumn(std::string_view table, std::string_view column) {
  return MakeError(StatusCode::kInvalidInput, "Nsight Systems export: table {} lacks column {}", table, column);
}

StatusOr<std::set<std::string>> NsysDb::Columns(std::string_view table) const {
  Stmt s;
  OVERLAPPROF_RETURN_IF_ERROR(Prep(s, "SELECT name FROM pragma_table_info(?)"));
  s.Bind(1, table);
  std::set<std::string> cols;
  while (true) {
    StatusOr<bool> row = s.Step("table columns");
    if (!row.ok()) return DamagedFile(row.status());
    if (!*row) break;
    cols.insert(std::string(s.Text(0)));
  }
  return cols;
}

StatusOr<std::vector<std::string>> NsysDb::GpuColumns(GpuTable& g) const {
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
  if (g.kind == ActivityKind::kSync && cols.count("eventSyncId")) g.bytes_col = "eventSyncId";
  return std::vector<std::string>{"start",         "end",           "streamId", g.corr_col, g.name_col, g.bytes_col,
                                  g.copy_kind_col, g.sync_type_col, "deviceId", g.pid_col};
}

std::vector<std::string> NsysDb::RuntimeColumns(const std::set<std::string>& cols) {
  return {"start", "end", "correlationId", cols.count("globalTid") ? "globalTid" : "",
          cols.count("nameId") ? "nameId" : ""};
}

}  // namespace overlapprof::nsys
