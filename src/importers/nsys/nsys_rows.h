#pragma once
// The rows of an export's large tables, as integers, from whichever source the file's read
// strategy (NsysReadMode, chosen once per file) and the table allow: its B-tree pages read
// directly (SqliteTableScan, ~10x faster than stepping SQL), a rank's rows spilled by an
// earlier pass over the table (Partition, RowSpill), or SQL with a WHERE clause (a WAL file,
// an unusual table, NsysReadMode::kSql).
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/importers/importer.h"
#include "src/importers/nsys/nsys_schema.h"
#include "src/importers/sqlite_table_schema.h"
#include "src/io/row_spill.h"
#include "src/io/sqlite_table_scan.h"
#include "src/store/sqlite_util.h"

namespace overlapprof::nsys {

// The read strategy `options` ask for, unless a test override in the environment names
// another (parsed here only): OVERLAPPROF_NSYS_SQL=1 kSql, OVERLAPPROF_NSYS_PARTITION=0
// kScanPerRank, OVERLAPPROF_NSYS_BUILD=0 kSpill (the paths tests and the bench compare).
NsysReadMode ReadModeWithTestOverride(NsysReadMode options);

// The rows of one table: read directly unless that does not apply to this file or `sql` asks
// for SQL; then `SELECT columns FROM table [WHERE sql_where]`, whose rows the caller still
// filters like the direct scan's. Column i of a row is columns[i]; an empty name reads as NULL.
class Rows {
 public:
  Status Open(const NsysDb& db, const char* table, const std::vector<std::string>& columns,
              std::string_view sql_where, const std::vector<int64_t>& binds, bool sql);
  // The rows of one key of a spill (Partition below); `owner` keeps the spill alive while they
  // are read.
  void OpenSpill(std::shared_ptr<const void> owner, const RowSpill& spill, size_t key) {
    spill_owner_ = std::move(owner);
    spill_.emplace(spill.Read(key));
  }
  // Calls body(row) for every row, where row is the source itself (a SqliteTableScan, a
  // RowSpill::Reader or the SQL statement, all with IsInt(i) and Int(i)): the source is chosen
  // once per table, not once per value, so the accessors inline into the body. Stops at the
  // first error, the body's or the read's (a damaged file reads "corrupted SQLite file (...)").
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

  size_t UnitIndex(const UnitKey& u) const {
    return static_cast<size_t>(std::lower_bound(units.begin(), units.end(), u) - units.begin());
  }
  size_t PidIndex(int64_t pid) const {
    return static_cast<size_t>(std::lower_bound(pids.begin(), pids.end(), pid) - pids.begin());
  }
  // The spill of `table`; null when it was not spilled.
  const RowSpill* Table(std::string_view table) const {
    auto it = tables.find(table);
    return it == tables.end() ? nullptr : it->second.get();
  }
};

// PRAGMA quick_check on the tables read through SQL (all of them when `sql`). The large ones
// read by SqliteTableScan are checked by the scan itself as it reads them (page bounds, tree
// shape, rowid order): quick_check would read them once more, and took longer than the import.
Status QuickCheck(const NsysDb& db, bool sql);

// One scan of each GPU table and the runtime table of `db`, rows spilled by rank (of `units`,
// sorted) and by process. Null (per-rank scans instead) when a table cannot be scanned directly
// or no temporary file can be written; a damaged table is the same error a per-rank scan gives.
StatusOr<std::shared_ptr<Partition>> BuildPartition(const NsysDb& db, const std::vector<UnitKey>& units);

}  // namespace overlapprof::nsys
