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
