#include "src/importers/nsys/nsys_rows.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <set>

namespace overlapprof::nsys {

NsysReadMode ReadModeWithTestOverride(NsysReadMode options) {
  auto is = [](const char* var, std::string_view value) {
    const char* v = std::getenv(var);
    return v && std::string_view(v) == value;
  };
  if (is("OVERLAPPROF_NSYS_SQL", "1")) return NsysReadMode::kSql;
  if (is("OVERLAPPROF_NSYS_PARTITION", "0")) return NsysReadMode::kScanPerRank;
  if (is("OVERLAPPROF_NSYS_BUILD", "0")) return NsysReadMode::kSpill;
  return options;
}

Status Rows::Open(const NsysDb& db, const char* table, const std::vector<std::string>& columns,
                  std::string_view sql_where, const std::vector<int64_t>& binds, bool sql) {
  table_ = table;
  if (!sql) {
    std::string why_not;
    OVERLAPPROF_ASSIGN_OR_RETURN(scan_, OpenSqliteTableScan(db.get(), db.path(), table, columns, &why_not));
    if (scan_) return OkStatus();
  }
  std::string query = "SELECT ";
  for (size_t i = 0; i < columns.size(); ++i) query += (i ? ", " : "") + (columns[i].empty() ? "NULL" : columns[i]);
  query += fmt::format(" FROM {}", table);
  if (!sql_where.empty()) query += fmt::format(" WHERE {}", sql_where);
  OVERLAPPROF_RETURN_IF_ERROR(stmt_.Prepare(db.get(), query));
  for (size_t i = 0; i < binds.size(); ++i) stmt_.Bind(static_cast<int>(i + 1), binds[i]);
  return OkStatus();
}

namespace {

// Whether a rank reads `table` by a direct scan, with the columns it reads (a column without
// INTEGER affinity sends the table to SQL, and then to quick_check).
bool DirectlyScanned(const NsysDb& db, const char* table) {
  std::vector<std::string> columns;
  if (std::string_view(table) == kRuntime) {
    StatusOr<std::set<std::string>> cols = db.Columns(kRuntime);
    if (!cols.ok()) return false;
    columns = NsysDb::RuntimeColumns(*cols);
  } else {
    const auto* g = std::find_if(std::begin(kGpuTables), std::end(kGpuTables),
                                 [&](const auto& t) { return std::string_view(t.first) == table; });
    if (g == std::end(kGpuTables)) return false;
    GpuTable gpu{g->first, g->second};
    StatusOr<std::vector<std::string>> c = db.GpuColumns(gpu);
    if (!c.ok()) return false;
    columns = std::move(*c);
  }
  std::string why_not;
  StatusOr<std::unique_ptr<SqliteTableScan>> scan = OpenSqliteTableScan(db.get(), db.path(), table, columns, &why_not);
  return scan.ok() && *scan != nullptr;
}

}  // namespace

Status QuickCheck(const NsysDb& db, bool sql) {
  for (const char* table : {kKernel, kMemcpy, kMemset, kSync, kRuntime, kNvtx, kStrings, kSession, kGpuInfo}) {
    if (!db.Has(table)) continue;
    if (!sql && DirectlyScanned(db, table)) continue;
    Stmt s;
    OVERLAPPROF_RETURN_IF_ERROR(db.Prep(s, fmt::format("PRAGMA quick_check({})", table)));
    StatusOr<bool> row = s.Step("quick_check");
    if (!row.ok()) return DamagedFile(row.status());
    if (*row && s.Text(0) != "ok")
      return MakeError(StatusCode::kCorrupt, "corrupted SQLite file (quick_check: {})", s.Text(0));
  }
  return OkStatus();
}

StatusOr<std::shared_ptr<Partition>> BuildPartition(const NsysDb& db, const std::vector<UnitKey>& units) {
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
    OVERLAPPROF_ASSIGN_OR_RETURN(auto scan, OpenSqliteTableScan(db.get(), db.path(), table, columns, &why_not));
    if (!scan) return false;
    StatusOr<std::unique_ptr<RowSpill>> spill = RowSpill::Create(dir, static_cast<int>(columns.size()), nkeys);
    if (!spill.ok()) return false;
    while (true) {
      StatusOr<bool> row = scan->Next();
      if (!row.ok()) return DamagedFile(row.status());
      if (!*row) break;
      std::optional<size_t> key = key_of(*scan);
      if (key && !(*spill)->Append(*key, *scan).ok()) return false;
    }
    if (!(*spill)->Finish().ok()) return false;
    p->bytes += (*spill)->bytes();
    p->tables[table] = std::move(*spill);
    return true;
  };
  for (const auto& [table, kind] : kGpuTables) {
    if (!db.Has(table)) continue;
    GpuTable g{table, kind};
    OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<std::string> columns, db.GpuColumns(g));
    OVERLAPPROF_ASSIGN_OR_RETURN(
        bool ok, spill_table(g.table, columns, units.size(), [&](const SqliteTableScan& r) -> std::optional<size_t> {
          if (!r.IsInt(8)) return std::nullopt;  // no device: no rank reads it
          const UnitKey u{PidOf(r, 9), r.Int(8)};
          size_t i = p->UnitIndex(u);
          if (i == p->units.size() || p->units[i] != u) return std::nullopt;
          return i;
        }));
    if (!ok) return std::shared_ptr<Partition>();
  }
  if (db.Has(kRuntime)) {
    OVERLAPPROF_ASSIGN_OR_RETURN(auto cols, db.Columns(kRuntime));
    if (cols.count("start") && cols.count("end") && cols.count("correlationId")) {
      OVERLAPPROF_ASSIGN_OR_RETURN(
          bool ok, spill_table(kRuntime, NsysDb::RuntimeColumns(cols), p->pids.size(),
                               [&](const SqliteTableScan& r) -> std::optional<size_t> {
                                 const int64_t pid = PidOf(r, 3);
                                 size_t i = p->PidIndex(pid);
                                 if (i == p->pids.size() || p->pids[i] != pid) return std::nullopt;
                                 return i;
                               }));
      if (!ok) return std::shared_ptr<Partition>();
    }
  }
  return p;
}

}  // namespace overlapprof::nsys
