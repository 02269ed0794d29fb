#pragma once
// Thin RAII wrappers over the SQLite C API. Every SQLite call that can fail goes through
// OVERLAPPROF_SQLITE, which names the call and carries SQLite's own error string.
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "src/common/status.h"

namespace overlapprof {

// Status for a failed SQLite call: "sqlite3_step(insert activity): database disk image is
// malformed". SQLITE_CORRUPT/NOTADB map to kCorrupt, the rest to kIo.
Status SqliteError(sqlite3* db, int rc, std::string_view call);

#define OVERLAPPROF_SQLITE(db, call_expr, what)                                   \
  do {                                                                            \
    int _rc = (call_expr);                                                        \
    if (_rc != SQLITE_OK && _rc != SQLITE_DONE && _rc != SQLITE_ROW)              \
      return ::overlapprof::SqliteError((db), _rc, what);                         \
  } while (0)

class Db {
 public:
  Db() = default;
  ~Db() { Close(); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  Db(Db&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  Db& operator=(Db&& o) noexcept {
    if (this != &o) {
      Close();
      db_ = o.db_;
      o.db_ = nullptr;
    }
    return *this;
  }

  Status Open(const std::string& path, int flags);
  void Close();
  sqlite3* get() const { return db_; }
  Status Exec(const std::string& sql);

 private:
  sqlite3* db_ = nullptr;
};

// The longest string, blob or row an untrusted database may hold (SQLITE_LIMIT_LENGTH).
inline constexpr int kUntrustedMaxLength = 16 << 20;

// Opens `path` as an untrusted database (https://www.sqlite.org/security.html): read-only,
// SQLITE_DBCONFIG_DEFENSIVE, trusted_schema, triggers and views off, cell_size_check on, no
// mmap, and tight sqlite3_limits (16 MiB strings and rows, `max_columns` per table or
// result, shallow expressions, nothing attached). A WAL-mode file that SQLite cannot open
// because it cannot create its -shm (a read-only folder or medium) is opened immutable when
// no -wal frames or hot journal lie beside it (then the file alone is the whole database).
Status OpenUntrustedReadOnly(Db& db, const std::string& path, int max_columns = 100);

class Stmt {
 public:
  Stmt() = default;
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt(Stmt&& o) noexcept : stmt_(o.stmt_), db_(o.db_) { o.stmt_ = nullptr; }
  Stmt& operator=(Stmt&& o) noexcept {
    if (this != &o) {
      sqlite3_finalize(stmt_);
      stmt_ = o.stmt_;
      db_ = o.db_;
      o.stmt_ = nullptr;
    }
    return *this;
  }

  Status Prepare(sqlite3* db, std::string_view sql);
  sqlite3_stmt* get() const { return stmt_; }

  // Bind helpers; index is 1-based as in SQLite. A value of kUnknown (-1) where the
  // column means "unknown" is bound as NULL by BindOptional.
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void BindOptional(int i, int64_t v) {
    if (v == -1) sqlite3_bind_null(stmt_, i);
    else sqlite3_bind_int64(stmt_, i, v);
  }
  void Bind(int i, std::string_view s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void BindNull(int i) { sqlite3_bind_null(stmt_, i); }
  // Runs a statement that returns no rows, then resets it for reuse.
  Status StepDone(std::string_view what);
  // Steps a query: true on SQLITE_ROW, false on SQLITE_DONE, error otherwise.
  StatusOr<bool> Step(std::string_view what);
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  // -1 (kUnknown) for NULL.
  int64_t OptionalInt(int col) const {
    return sqlite3_column_type(stmt_, col) == SQLITE_NULL ? -1 : sqlite3_column_int64(stmt_, col);
  }
  std::string_view Text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    if (!p) return {};
    return {reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col))};
  }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  sqlite3* db_ = nullptr;
};

}  // namespace overlapprof
