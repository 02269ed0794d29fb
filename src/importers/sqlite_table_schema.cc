#include "src/importers/sqlite_table_schema.h"

#include <algorithm>
#include <cctype>

#include "src/store/sqlite_util.h"

namespace overlapprof {

StatusOr<SqliteTableSchema> ReadSqliteTableSchema(sqlite3* db, std::string_view table) {
  SqliteTableSchema s;
  {
    Stmt q;
    OVERLAPPROF_RETURN_IF_ERROR(q.Prepare(db, "SELECT rootpage, sql FROM sqlite_schema WHERE type='table' AND name=?1"));
    q.Bind(1, table);
    OVERLAPPROF_ASSIGN_OR_RETURN(bool row, q.Step("table root page"));
    if (!row || q.IsNull(0)) return s;
    const int64_t root = q.Int(0);
    if (root < 1 || root > UINT32_MAX) return s;
    s.root_page = static_cast<uint32_t>(root);
    std::string sql(q.Text(1));
    std::transform(sql.begin(), sql.end(), sql.begin(), [](unsigned char c) { return std::toupper(c); });
    // pragma_table_list says it (SQLite >= 3.37); else the text, where a comment could only
    // send the table to SQL needlessly.
    s.without_rowid = sql.find("WITHOUT ROWID") != std::string::npos;
    Stmt wr;
    if (wr.Prepare(db, "SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?1").ok()) {
      wr.Bind(1, table);
      StatusOr<bool> r = wr.Step("table list");
      if (r.ok() && *r) s.without_rowid = wr.Int(0) != 0;
    }
  }
  {
    Stmt q;
    // table_xinfo: generated columns too (hidden 2 and 3), whose presence in the record
    // differs by kind.
    OVERLAPPROF_RETURN_IF_ERROR(
        q.Prepare(db, "SELECT name, type, pk, dflt_value IS NOT NULL, hidden FROM pragma_table_xinfo(?1)"));
    q.Bind(1, table);
    while (true) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, q.Step("table columns"));
      if (!row) break;
      s.columns.push_back({std::string(q.Text(0)), std::string(q.Text(1)), q.Int(2) > 0, q.Int(3) != 0, q.Int(4) != 0});
    }
  }
  {
    Stmt q;
    OVERLAPPROF_RETURN_IF_ERROR(q.Prepare(db, "SELECT count(*) FROM pragma_index_list(?1)"));
    q.Bind(1, table);
    OVERLAPPROF_ASSIGN_OR_RETURN(bool row, q.Step("table indexes"));
    s.indexes = row ? static_cast<int>(q.Int(0)) : 0;
  }
  return s;
}

StatusOr<std::unique_ptr<SqliteTableScan>> OpenSqliteTableScan(sqlite3* db, const std::string& path,
                                                               std::string_view table,
                                                               const std::vector<std::string>& columns,
                                                               std::string* why_not) {
  OVERLAPPROF_ASSIGN_OR_RETURN(SqliteTableSchema schema, ReadSqliteTableSchema(db, table));
  return SqliteTableScan::Open(path, table, schema, columns, why_not);
}

}  // namespace overlapprof
