#include "src/store/sqlite_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>

#include <fmt/format.h>

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

namespace {

// The database header (https://www.sqlite.org/fileformat2.html, 1.3): bytes 18 and 19, the
// file format write and read versions, are 2 in WAL mode.
constexpr size_t kFileHeaderBytes = 100;
constexpr size_t kWriteVersionAt = 18, kReadVersionAt = 19;
constexpr uint8_t kWalFormatVersion = 2;
// A -wal file of its 32-byte header alone holds no frames (1.5, "WAL File Format").
constexpr off_t kWalHeaderBytes = 32;

// Whether `path` is a WAL-mode database with no frames to read beside it (and no rollback
// journal): then it reads the same without its -wal and -shm, and may be opened immutable.
bool WalModeWithoutFrames(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uint8_t h[kFileHeaderBytes];
  const bool read = ::pread(fd, h, sizeof h, 0) == static_cast<ssize_t>(sizeof h);
  ::close(fd);
  if (!read || h[kWriteVersionAt] != kWalFormatVersion || h[kReadVersionAt] != kWalFormatVersion) return false;
  struct stat side;
  if (::stat((path + "-journal").c_str(), &side) == 0 && side.st_size > 0) return false;
  return ::stat((path + "-wal").c_str(), &side) != 0 || side.st_size <= kWalHeaderBytes;
}

// "file:PATH?immutable=1", PATH percent-encoded (https://www.sqlite.org/uri.html).
std::string ImmutableUri(const std::string& path) {
  std::string uri = "file:";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') uri += static_cast<char>(c);
    else uri += fmt::format("%{:02X}", c);
  }
  return uri + "?immutable=1";
}

Status ConfigureUntrusted(Db& db, int max_columns) {
  sqlite3* h = db.get();
  OVERLAPPROF_SQLITE(h, sqlite3_db_config(h, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr), "sqlite3_db_config(DEFENSIVE)");
  OVERLAPPROF_SQLITE(h, sqlite3_db_config(h, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr),
                     "sqlite3_db_config(TRUSTED_SCHEMA)");
  OVERLAPPROF_SQLITE(h, sqlite3_db_config(h, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr),
                     "sqlite3_db_config(ENABLE_TRIGGER)");
  OVERLAPPROF_SQLITE(h, sqlite3_db_config(h, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr), "sqlite3_db_config(ENABLE_VIEW)");
  sqlite3_limit(h, SQLITE_LIMIT_LENGTH, kUntrustedMaxLength);
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

}  // namespace

Status OpenUntrustedReadOnly(Db& db, const std::string& path, int max_columns) {
  OVERLAPPROF_RETURN_IF_ERROR(db.Open(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX));
  OVERLAPPROF_RETURN_IF_ERROR(ConfigureUntrusted(db, max_columns));
  // A WAL-mode file needs its -shm, which a read-only connection cannot create in a
  // read-only folder (SQLITE_READONLY_DIRECTORY) or on a read-only medium (SQLITE_CANTOPEN)
  // at the first read. With no -wal frames to read, the file alone is the database: it is
  // opened immutable (no -shm, no locks). Any other outcome of the first read is left for
  // the caller's own first query to report.
  const int rc = sqlite3_exec(db.get(), "PRAGMA schema_version", nullptr, nullptr, nullptr) & 0xff;
  if ((rc != SQLITE_CANTOPEN && rc != SQLITE_READONLY) || !WalModeWithoutFrames(path)) return OkStatus();
  OVERLAPPROF_RETURN_IF_ERROR(db.Open(ImmutableUri(path), SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI));
  return ConfigureUntrusted(db, max_columns);
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
