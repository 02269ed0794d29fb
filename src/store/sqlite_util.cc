#include "src/store/sqlite_util.h"

namespace overlapprof {

Status SqliteError(sqlite3* db, int rc, std::string_view call) {
  const char* msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  int primary = rc & 0xff;
  StatusCode code = (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) ? StatusCode::kCorrupt
                                                                            : StatusCode::kIo;
  return MakeError(code, "{}: {} (SQLite error {})", call, msg ? msg : sqlite3_errstr(rc), rc);
}

Status Db::Open(const std::string& path, int flags) {
  Close();
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    Status st = SqliteError(db_, rc, "sqlite3_open_v2");
    Close();
    return st;
  }
  sqlite3_extended_result_codes(db_, 1);
  return OkStatus();
}

void Db::Close() {
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

Status Db::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string m = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    int primary = rc & 0xff;
    StatusCode code = (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) ? StatusCode::kCorrupt
                                                                              : StatusCode::kIo;
    std::string head = sql.substr(0, sql.find_first_of("(\n"));
    return MakeError(code, "sqlite3_exec({}): {} (SQLite error {})", head, m, rc);
  }
  return OkStatus();
}

Status OpenUntrustedReadOnly(Db& db, const std::string& path, int max_columns) {
  OVERLAPPROF_RETURN_IF_ERROR(db.Open(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX));
  sqlite3* h = db.get();
  OVERLAPPROF_SQLITE(h, sqlite3_db_config(h, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr), "sqlite3_db_config(DEFENSIVE)");
  OVERLAPPROF_SQLITE(h, sqlite3_db_config(h, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr),
                     "sqlite3_db_config(TRUSTED_SCHEMA)");
  OVERLAPPROF_SQLITE(h, sqlite3_db_config(h, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr),
                     "sqlite3_db_config(ENABLE_TRIGGER)");
  OVERLAPPROF_SQLITE(h, sqlite3_db_config(h, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr), "sqlite3_db_config(ENABLE_VIEW)");
  sqlite3_limit(h, SQLITE_LIMIT_LENGTH, 16 << 20);
  sqlite3_limit(h, SQLITE_LIMIT_SQL_LENGTH, 100000);
  sqlite3_limit(h, SQLITE_LIMIT_COLUMN, max_columns);
  sqlite3_limit(h, SQLITE_LIMIT_EXPR_DEPTH, 10);
  sqlite3_limit(h, SQLITE_LIMIT_COMPOUND_SELECT, 3);
  sqlite3_limit(h, SQLITE_LIMIT_VDBE_OP, 25000);
  sqlite3_limit(h, SQLITE_LIMIT_FUNCTION_ARG, 8);
  sqlite3_limit(h, SQLITE_LIMIT_ATTACHED, 0);
  sqlite3_limit(h, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 50);
  sqlite3_limit(h, SQLITE_LIMIT_VARIABLE_NUMBER, 32);
  sqlite3_limit(h, SQLITE_LIMIT_TRIGGER_DEPTH, 10);
  return db.Exec("PRAGMA cell_size_check=ON; PRAGMA mmap_size=0;");
}

Status Stmt::Prepare(sqlite3* db, std::string_view sql) {
  sqlite3_finalize(stmt_);
  stmt_ = nullptr;
  db_ = db;
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                              &stmt_, nullptr);
  if (rc != SQLITE_OK) {
    std::string head(sql.substr(0, std::min<size_t>(sql.size(), 48)));
    return SqliteError(db, rc, "sqlite3_prepare_v3(" + head + ")");
  }
  return OkStatus();
}

Status Stmt::StepDone(std::string_view what) {
  int rc = sqlite3_step(stmt_);
  sqlite3_reset(stmt_);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return SqliteError(db_, rc, std::string("sqlite3_step(") + std::string(what) + ")");
  return OkStatus();
}

StatusOr<bool> Stmt::Step(std::string_view what) {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, std::string("sqlite3_step(") + std::string(what) + ")");
}

}  // namespace overlapprof
