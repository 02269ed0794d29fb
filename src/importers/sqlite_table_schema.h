#pragma once
// A table's schema as SqliteTableScan (src/io/sqlite_table_scan.h) needs it, read through SQL
// from an open connection: the scan reads the file's pages and leaves SQL to its caller.
#include <sqlite3.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/status.h"
#include "src/io/sqlite_table_scan.h"

namespace overlapprof {

// Root page (0: no such table), WITHOUT ROWID, the columns (pragma_table_xinfo: generated
// ones too) and the number of indexes on the table.
StatusOr<SqliteTableSchema> ReadSqliteTableSchema(sqlite3* db, std::string_view table);

// ReadSqliteTableSchema, then SqliteTableScan::Open: a direct scan of `table` of the database
// `db` has open at `path`, or nullptr and why not (the caller uses SQL).
StatusOr<std::unique_ptr<SqliteTableScan>> OpenSqliteTableScan(sqlite3* db, const std::string& path,
                                                               std::string_view table,
                                                               const std::vector<std::string>& columns,
                                                               std::string* why_not);

}  // namespace overlapprof
