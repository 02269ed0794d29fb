// SqliteTableScan (src/io/sqlite_table_scan.*) and RowSpill (src/io/row_spill.*):
//  1. A direct scan returns what SQL returns, row by row and column by column, on tables that
//     exercise the file format: multi-level trees (512-byte pages), rows whose integers lie in
//     overflow pages, every integer width, NULL/REAL/TEXT/BLOB, the rowid alias, columns added
//     by ALTER TABLE (old rows are shorter), absent and empty column names.
//  2. Tables it must leave to SQL say so (nullptr and a reason): a column with a DEFAULT, WITHOUT
//     ROWID, generated columns, a WAL file with frames beside the database.
//  3. Damaged files give kCorrupt, never a read outside a buffer or a loop: a cell offset past
//     the page, a child page past the file, a tree that points back at itself, and random byte
//     damage (run under ASan+UBSan by the sanitizer build).
//  4. RowSpill gives back each key's rows in order, with their kinds and values.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>

#include "src/importers/sqlite_table_schema.h"
#include "src/io/row_spill.h"
#include "src/io/sqlite_table_scan.h"
#include "src/store/sqlite_util.h"
#include "test_util.h"

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

class ScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("overlapprof-scan-test-{}-{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  static StatusOr<std::unique_ptr<SqliteTableScan>> OpenScan(sqlite3* db, const std::string& path,
                                                            std::string_view table,
                                                            const std::vector<std::string>& columns,
                                                            std::string* why_not) {
    return OpenSqliteTableScan(db, path, table, columns, why_not);
  }

  // Runs `sql` on a new database at `path` (512-byte pages unless the script says otherwise).
  static void Exec(sqlite3* db, const std::string& sql) {
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "") << "\n" << sql;
    sqlite3_free(err);
  }
  static void MakeDb(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    Exec(db, "PRAGMA page_size=512; PRAGMA journal_mode=DELETE;");
    Exec(db, sql);
    sqlite3_close(db);
  }

  // A table with every kind of value: 6000 rows over a few hundred 512-byte pages (three
  // levels), one row in 20 with a 2 KB text before the integers (in overflow pages).
  void MakeMixed(const std::string& path) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    Exec(db, "PRAGMA page_size=512; PRAGMA journal_mode=DELETE;");
    // Every column read has INTEGER affinity (others are left to SQL), which keeps reals, text
    // and blobs as they are.
    Exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, big INTEGER, b INTEGER, c INTEGER, d INTEGER); BEGIN;");
    sqlite3_stmt* ins = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "INSERT INTO t(id, a, big, b, c, d) VALUES (?1, ?2, ?3, ?4, ?5, ?6)", -1, &ins,
                                 nullptr),
              SQLITE_OK);
    std::mt19937_64 rng(42);
    // Values of every serial type: 0/1 (types 8, 9), 1-4, 6 and 8 bytes, negative ones.
    const int64_t widths[] = {0,        1,          -1,          127,          -128,          300,
                              -30000,   8000000,    -8000000,    2000000000,   -2000000000,   int64_t{1} << 40,
                              -(int64_t{1} << 47), int64_t{1} << 62, INT64_MIN, INT64_MAX};
    for (int i = 1; i <= 6000; ++i) {
      sqlite3_bind_int64(ins, 1, i * 3);  // gaps in the rowids
      // A width, sometimes moved by a little (wrapping at the ends of the range).
      const uint64_t a = static_cast<uint64_t>(widths[rng() % std::size(widths)]) + (rng() % 2 ? 0 : rng() % 5);
      sqlite3_bind_int64(ins, 2, static_cast<int64_t>(a));
      if (i % 20 == 0) {
        std::string big(2000 + rng() % 3000, 'x');
        sqlite3_bind_text(ins, 3, big.c_str(), static_cast<int>(big.size()), SQLITE_TRANSIENT);
      } else if (i % 7 == 0) {
        sqlite3_bind_null(ins, 3);
      } else {
        sqlite3_bind_text(ins, 3, "short", -1, SQLITE_STATIC);
      }
      sqlite3_bind_int64(ins, 4, static_cast<int64_t>(rng()));
      switch (i % 5) {  // c: any storage class
        case 0: sqlite3_bind_null(ins, 5); break;
        case 1: sqlite3_bind_double(ins, 5, 1.5 * i); break;
        case 2: sqlite3_bind_text(ins, 5, "text", -1, SQLITE_STATIC); break;
        case 3: sqlite3_bind_blob(ins, 5, "\x01\x02", 2, SQLITE_STATIC); break;
        default: sqlite3_bind_int64(ins, 5, -i); break;
      }
      if (i % 11 == 0) sqlite3_bind_null(ins, 6);
      else sqlite3_bind_int64(ins, 6, widths[rng() % std::size(widths)]);
      ASSERT_EQ(sqlite3_step(ins), SQLITE_DONE);
      sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    Exec(db, "COMMIT;");
    sqlite3_close(db);
  }

  // Every row of `table` by a direct scan and by SQL, compared column by column. Returns the
  // number of rows.
  static int64_t ExpectScanEqualsSql(const std::string& path, const std::string& table,
                                     const std::vector<std::string>& columns) {
    Db db;
    EXPECT_TRUE(OpenUntrustedReadOnly(db, path).ok());
    std::string why_not;
    StatusOr<std::unique_ptr<SqliteTableScan>> scan = OpenScan(db.get(), path, table, columns, &why_not);
    EXPECT_TRUE(scan.ok()) << scan.status().message();
    if (!scan.ok() || !*scan) {
      ADD_FAILURE() << "no direct scan: " << why_not;
      return -1;
    }
    std::string sql = "SELECT ";
    for (size_t i = 0; i < columns.size(); ++i) {
      bool real = !columns[i].empty();
      if (real) {
        Stmt probe;
        real = probe.Prepare(db.get(), fmt::format("SELECT {} FROM {}", columns[i], table)).ok();
      }
      sql += (i ? ", " : "") + (real ? columns[i] : std::string("NULL"));
    }
    sql += " FROM " + table;
    Stmt st;
    EXPECT_TRUE(st.Prepare(db.get(), sql).ok()) << sql;
    int64_t rows = 0;
    while (true) {
      StatusOr<bool> want = st.Step("test");
      EXPECT_TRUE(want.ok());
      StatusOr<bool> got = (*scan)->Next();
      EXPECT_TRUE(got.ok()) << got.status().message();
      if (!want.ok() || !got.ok()) return -1;
      EXPECT_EQ(*got, *want) << "row " << rows;
      if (!*want || !*got) break;
      for (size_t i = 0; i < columns.size(); ++i) {
        const int type = sqlite3_column_type(st.get(), static_cast<int>(i));
        const SqliteTableScan::Kind kind = (*scan)->kind(i);
        const SqliteTableScan::Kind expected = type == SQLITE_NULL      ? SqliteTableScan::kNull
                                               : type == SQLITE_INTEGER ? SqliteTableScan::kInt
                                                                        : SqliteTableScan::kOther;
        EXPECT_EQ(kind, expected) << "row " << rows << " column " << columns[i];
        if (expected == SqliteTableScan::kInt) {
          EXPECT_EQ((*scan)->Int(i), sqlite3_column_int64(st.get(), static_cast<int>(i)))
              << "row " << rows << " column " << columns[i];
        }
      }
      ++rows;
    }
    return rows;
  }

  static Status ScanAll(const std::string& path, const std::string& table, const std::vector<std::string>& columns,
                        int64_t* rows = nullptr) {
    Db db;
    OVERLAPPROF_RETURN_IF_ERROR(OpenUntrustedReadOnly(db, path));
    std::string why_not;
    OVERLAPPROF_ASSIGN_OR_RETURN(auto scan, OpenScan(db.get(), path, table, columns, &why_not));
    if (!scan) return MakeError(StatusCode::kInternal, "no direct scan: {}", why_not);
    int64_t n = 0;
    while (true) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, scan->Next());
      if (!row) break;
      ++n;
    }
    if (rows) *rows = n;
    return OkStatus();
  }

  static std::string WhyNot(const std::string& path, const std::string& table, const std::vector<std::string>& columns) {
    Db db;
    EXPECT_TRUE(OpenUntrustedReadOnly(db, path).ok());
    std::string why_not;
    StatusOr<std::unique_ptr<SqliteTableScan>> scan = OpenScan(db.get(), path, table, columns, &why_not);
    EXPECT_TRUE(scan.ok());
    EXPECT_TRUE(scan.ok() && *scan == nullptr);
    return why_not;
  }

  // Page n of the file (1-based), for damaging it.
  static std::vector<uint8_t> ReadFile(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  static void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  static uint32_t RootPage(const std::string& path, const std::string& table) {
    Db db;
    EXPECT_TRUE(OpenUntrustedReadOnly(db, path).ok());
    Stmt st;
    EXPECT_TRUE(st.Prepare(db.get(), "SELECT rootpage FROM sqlite_schema WHERE name = ?1").ok());
    st.Bind(1, table);
    StatusOr<bool> row = st.Step("root");
    EXPECT_TRUE(row.ok() && *row);
    return static_cast<uint32_t>(st.Int(0));
  }


  // SQLite's varint of v (1-9 bytes).
  static std::vector<uint8_t> Varint(uint64_t v) {
    if (v > (uint64_t{1} << 56) - 1) {  // nine bytes: eight groups of 7 bits, then 8 bits whole
      std::vector<uint8_t> out(9);
      out[8] = static_cast<uint8_t>(v);
      v >>= 8;
      for (int i = 7; i >= 0; --i, v >>= 7) out[static_cast<size_t>(i)] = static_cast<uint8_t>((v & 0x7f) | 0x80);
      return out;
    }
    std::vector<uint8_t> out;
    do {
      out.insert(out.begin(), static_cast<uint8_t>((v & 0x7f) | (out.empty() ? 0 : 0x80)));
      v >>= 7;
    } while (v != 0);
    return out;
  }
  static uint32_t Be32At(const std::vector<uint8_t>& b, size_t at) {
    return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) | b[at + 3];
  }
  static void PutBe32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (24 - 8 * i));
  }
  static size_t ReadVarint(const std::vector<uint8_t>& b, size_t at, uint64_t* v) {
    *v = 0;
    for (size_t i = 0; i < 8; ++i) {
      *v = (*v << 7) | (b[at + i] & 0x7f);
      if (!(b[at + i] & 0x80)) return i + 1;
    }
    *v = (*v << 8) | b[at + 8];
    return 9;
  }

  // The cells of a table's leaves, in order (512-byte pages, as MakeDb writes them): where each
  // cell's record starts in the file, its payload size, and for an overflowing one where its
  // first overflow page number is stored and the chain of pages.
  struct Cell {
    size_t record = 0;  // file offset of the record (after the payload and rowid varints)
    uint64_t payload = 0;
    size_t overflow_ptr = 0;  // file offset of the first overflow page number; 0: none
    std::vector<uint32_t> chain;
  };
  static std::vector<Cell> LeafCells(const std::vector<uint8_t>& b, uint32_t root) {
    std::vector<Cell> cells;
    std::vector<uint32_t> pending = {root};
    std::vector<uint32_t> leaves;
    while (!pending.empty()) {  // depth first, left to right
      const uint32_t pg = pending.back();
      pending.pop_back();
      const size_t p = (pg - 1) * size_t{512}, h = p + (pg == 1 ? 100 : 0);
      const uint32_t n = (uint32_t{b[h + 3]} << 8) | b[h + 4];
      if (b[h] == 0x0D) {
        leaves.push_back(pg);
        continue;
      }
      std::vector<uint32_t> kids;
      for (uint32_t i = 0; i < n; ++i) kids.push_back(Be32At(b, p + ((uint32_t{b[h + 12 + 2 * i]} << 8) | b[h + 13 + 2 * i])));
      kids.push_back(Be32At(b, h + 8));
      pending.insert(pending.end(), kids.rbegin(), kids.rend());
    }
    for (uint32_t pg : leaves) {
      const size_t p = (pg - 1) * size_t{512}, h = p + (pg == 1 ? 100 : 0);
      const uint32_t n = (uint32_t{b[h + 3]} << 8) | b[h + 4];
      for (uint32_t i = 0; i < n; ++i) {
        size_t at = p + ((uint32_t{b[h + 8 + 2 * i]} << 8) | b[h + 9 + 2 * i]);
        Cell c;
        uint64_t rowid;
        at += ReadVarint(b, at, &c.payload);
        at += ReadVarint(b, at, &rowid);
        c.record = at;
        const uint64_t x = 512 - 35, m = (512 - 12) * 32 / 255 - 23;
        if (c.payload > x) {
          const uint64_t k = m + (c.payload - m) % (512 - 4);
          c.overflow_ptr = at + (k <= x ? k : m);
          for (uint32_t o = Be32At(b, c.overflow_ptr); o != 0; o = Be32At(b, (o - 1) * size_t{512})) c.chain.push_back(o);
        }
        cells.push_back(c);
      }
    }
    return cells;
  }

  // What SQL says of the table, as the importer reads it through SQL: PRAGMA quick_check of
  // the table, then the rows. Damage is an error status.
  struct Value {
    SqliteTableScan::Kind kind;
    int64_t v;
    bool operator==(const Value&) const = default;
  };
  using Rows = std::vector<std::vector<Value>>;
  static StatusOr<Rows> SqlRows(const std::string& path, const std::string& table,
                                const std::vector<std::string>& columns) {
    Db db;
    OVERLAPPROF_RETURN_IF_ERROR(OpenUntrustedReadOnly(db, path));
    Stmt check;
    OVERLAPPROF_RETURN_IF_ERROR(check.Prepare(db.get(), fmt::format("PRAGMA quick_check({})", table)));
    OVERLAPPROF_ASSIGN_OR_RETURN(bool row, check.Step("quick_check"));
    if (!row || check.Text(0) != "ok") return MakeError(StatusCode::kCorrupt, "quick_check: {}", check.Text(0));
    std::string sql = "SELECT ";
    for (size_t i = 0; i < columns.size(); ++i) sql += fmt::format("{}\"{}\"", i ? ", " : "", columns[i]);
    Stmt st;
    OVERLAPPROF_RETURN_IF_ERROR(st.Prepare(db.get(), sql + " FROM " + table));
    Rows rows;
    while (true) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool more, st.Step("rows"));
      if (!more) break;
      std::vector<Value> r;
      for (size_t i = 0; i < columns.size(); ++i) {
        const int type = sqlite3_column_type(st.get(), static_cast<int>(i));
        r.push_back(type == SQLITE_NULL      ? Value{SqliteTableScan::kNull, 0}
                    : type == SQLITE_INTEGER ? Value{SqliteTableScan::kInt, sqlite3_column_int64(st.get(), static_cast<int>(i))}
                                             : Value{SqliteTableScan::kOther, 0});
      }
      rows.push_back(std::move(r));
    }
    return rows;
  }
  // The direct scan's rows; nullopt when it leaves the table to SQL.
  static StatusOr<std::optional<Rows>> ScanRows(const std::string& path, const std::string& table,
                                                const std::vector<std::string>& columns) {
    Db db;
    OVERLAPPROF_RETURN_IF_ERROR(OpenUntrustedReadOnly(db, path));
    std::string why_not;
    OVERLAPPROF_ASSIGN_OR_RETURN(auto scan, OpenScan(db.get(), path, table, columns, &why_not));
    if (!scan) return std::optional<Rows>();
    Rows rows;
    while (true) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool more, scan->Next());
      if (!more) break;
      std::vector<Value> r;
      for (size_t i = 0; i < columns.size(); ++i) r.push_back({scan->kind(i), scan->IsInt(i) ? scan->Int(i) : 0});
      rows.push_back(std::move(r));
    }
    return std::optional<Rows>(std::move(rows));
  }
  // The contract on one file: where SQL finds damage the scan does too; where SQL reads rows
  // the scan reads the same rows, or finds damage (an error, exit 2), or leaves the table to
  // SQL. Returns the scan's verdict: "rows", "sql" or "error".
  static std::string ExpectSqlOrError(const std::string& path, const std::string& table,
                                      const std::vector<std::string>& columns, const std::string& what) {
    StatusOr<Rows> want = SqlRows(path, table, columns);
    StatusOr<std::optional<Rows>> got = ScanRows(path, table, columns);
    if (!got.ok()) {
      EXPECT_TRUE(got.status().code() == StatusCode::kCorrupt || got.status().code() == StatusCode::kIo)
          << what << ": " << got.status().message();
      return "error";
    }
    if (!got->has_value()) return "sql";
    EXPECT_TRUE(want.ok()) << what << ": SQL finds damage (" << want.status().message()
                           << ") but the direct scan read " << (*got)->size() << " rows";
    if (want.ok()) {
      EXPECT_TRUE(**got == *want) << what << ": the direct scan read other rows than SQL";
    }
    return "rows";
  }

  fs::path dir_;
};

const std::vector<std::string> kMixedColumns = {"a", "big", "b", "c", "d", "id", "", "no_such_column", "a"};

TEST_F(ScanTest, EqualsSqlOnEveryKindOfValueAndPage) {
  const std::string path = Path("mixed.db");
  MakeMixed(path);
  EXPECT_EQ(ExpectScanEqualsSql(path, "t", kMixedColumns), 6000);
  // The tree is deeper than one interior level, and rows overflow: the test covers both.
  std::vector<uint8_t> bytes = ReadFile(path);
  const uint32_t root = RootPage(path, "t");
  EXPECT_EQ(bytes[(root - 1) * 512], 0x05) << "root is an interior page";
  uint32_t child = (uint32_t{bytes[(root - 1) * 512 + 8]} << 24) | (uint32_t{bytes[(root - 1) * 512 + 9]} << 16) |
                   (uint32_t{bytes[(root - 1) * 512 + 10]} << 8) | bytes[(root - 1) * 512 + 11];
  EXPECT_EQ(bytes[(child - 1) * 512], 0x05) << "and so is its right-most child: three levels";
}

TEST_F(ScanTest, RowsWrittenBeforeAColumnWasAddedReadItAsNull) {
  const std::string path = Path("added.db");
  std::string sql = "CREATE TABLE t(a INTEGER, b INTEGER); BEGIN;";
  for (int i = 0; i < 500; ++i) sql += fmt::format("INSERT INTO t VALUES ({}, {});", i, -i);
  sql += "COMMIT; ALTER TABLE t ADD COLUMN c INTEGER; BEGIN;";
  for (int i = 0; i < 500; ++i) sql += fmt::format("INSERT INTO t VALUES ({}, {}, {});", i, -i, i * 1000);
  sql += "COMMIT;";
  MakeDb(path, sql);
  EXPECT_EQ(ExpectScanEqualsSql(path, "t", {"c", "a", "b"}), 1000);
}

TEST_F(ScanTest, TablesItCannotReadLikeSqlAreLeftToSql) {
  const std::string path = Path("fallback.db");
  MakeDb(path,
         "CREATE TABLE d(a INTEGER, b INTEGER DEFAULT 7); INSERT INTO d VALUES (1, 2);"
         "CREATE TABLE w(a INTEGER PRIMARY KEY, b INTEGER) WITHOUT ROWID; INSERT INTO w VALUES (1, 2);"
         "CREATE TABLE g(a INTEGER, b INTEGER GENERATED ALWAYS AS (a * 2) STORED, c INTEGER); INSERT INTO g(a, c) VALUES (1, 3);"
         "CREATE TABLE k(id INTEGER PRIMARY KEY DESC, b INTEGER); INSERT INTO k VALUES (5, 6);"
         "CREATE TABLE c(id INTEGER PRIMARY KEY, -- DESCription, not WITHOUT ROWID\n b INTEGER);"
         "INSERT INTO c VALUES (9, 1), (4, 2);");
  EXPECT_NE(WhyNot(path, "d", {"b"}).find("DEFAULT"), std::string::npos);
  EXPECT_NE(WhyNot(path, "w", {"b"}).find("WITHOUT ROWID"), std::string::npos);
  EXPECT_NE(WhyNot(path, "g", {"c"}).find("generated"), std::string::npos);
  // "INTEGER PRIMARY KEY DESC" is no rowid alias: its index is checked by quick_check, which the
  // scan does not read.
  EXPECT_NE(WhyNot(path, "k", {"id", "b"}).find("index"), std::string::npos);
  // A comment that says DESC or WITHOUT ROWID changes nothing.
  EXPECT_EQ(ExpectScanEqualsSql(path, "c", {"id", "b"}), 2);
  // A DEFAULT on a column not asked for does not matter.
  EXPECT_EQ(ExpectScanEqualsSql(path, "d", {"a"}), 1);
}

// The tables of real nsys exports are read directly (their schema comments, for one, must not
// send them to SQL), and equal SQL.
TEST_F(ScanTest, RealExportsAreReadDirectlyAndEqualSql) {
  // The second through a symbolic link, as users often name files.
  fs::create_symlink(testing::DataFile("nsys/mfu_2gpu_after.sqlite"), dir_ / "link.sqlite");
  for (std::string path : {testing::DataFile("nsys/mfu_2gpu_before.sqlite"), Path("link.sqlite")}) {
    EXPECT_EQ(ExpectScanEqualsSql(path, "CUPTI_ACTIVITY_KIND_KERNEL",
                                  {"start", "end", "streamId", "correlationId", "demangledName", "shortName",
                                   "deviceId", "globalPid", "gridX", "sharedMemoryExecuted"}) > 3000,
              true);
    EXPECT_GT(ExpectScanEqualsSql(path, "CUPTI_ACTIVITY_KIND_RUNTIME",
                                  {"start", "end", "correlationId", "globalTid", "nameId"}),
              1000);
    for (const char* t : {"CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                          "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"})
      EXPECT_GT(ExpectScanEqualsSql(path, t, {"start", "end", "deviceId", "streamId", "correlationId", "globalPid"}), 0)
          << t;
  }
}

TEST_F(ScanTest, AWalFileWithFramesIsLeftToSql) {
  const std::string path = Path("wal.db");
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &writer), SQLITE_OK);
  Exec(writer, "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; CREATE TABLE t(a INTEGER); INSERT INTO t VALUES (1);");
  // The writer stays open: the rows are in the -wal file only.
  ASSERT_GT(fs::file_size(path + "-wal"), 0u);
  EXPECT_NE(WhyNot(path, "t", {"a"}).find("-wal"), std::string::npos);
  sqlite3_close(writer);
}

TEST_F(ScanTest, DamagedPagesAreCorruptNotReadPastOrLooped) {
  const std::string path = Path("damaged.db");
  MakeMixed(path);
  const std::vector<uint8_t> good = ReadFile(path);
  const uint32_t root = RootPage(path, "t");
  const size_t r = (root - 1) * 512;
  // `what`: the expected reason, or reasons separated by '|' (whichever check sees it first).
  auto expect_corrupt = [&](const std::vector<uint8_t>& bytes, const std::string& what) {
    WriteFile(path, bytes);
    Status st = ScanAll(path, "t", {"a", "b", "d"});
    EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.message();
    bool found = false;
    for (size_t from = 0; from <= what.size();) {
      size_t bar = what.find('|', from);
      if (bar == std::string::npos) bar = what.size();
      found |= st.message().find(what.substr(from, bar - from)) != std::string::npos;
      from = bar + 1;
    }
    EXPECT_TRUE(found) << st.message() << " (expected " << what << ")";
  };
  {  // the root's right-most child past the end of the file
    std::vector<uint8_t> b = good;
    b[r + 8] = 0x7f;
    expect_corrupt(b, "page number out of range");
  }
  {  // the root's right-most child is the root: a loop
    std::vector<uint8_t> b = good;
    b[r + 8] = static_cast<uint8_t>(root >> 24);
    b[r + 9] = static_cast<uint8_t>(root >> 16);
    b[r + 10] = static_cast<uint8_t>(root >> 8);
    b[r + 11] = static_cast<uint8_t>(root);
    expect_corrupt(b, "reached twice|rowids out of order");
  }
  {  // the first leaf's first cell offset past the page
    std::vector<uint8_t> b = good;
    uint32_t pg = root;
    while (b[(pg - 1) * 512] == 0x05) {
      const size_t p = (pg - 1) * 512;
      const uint32_t cell = (uint32_t{b[p + 12]} << 8) | b[p + 13];
      pg = (uint32_t{b[p + cell]} << 24) | (uint32_t{b[p + cell + 1]} << 16) | (uint32_t{b[p + cell + 2]} << 8) |
           b[p + cell + 3];
    }
    ASSERT_EQ(b[(pg - 1) * 512], 0x0D);
    b[(pg - 1) * 512 + 8] = 0xff;
    b[(pg - 1) * 512 + 9] = 0xf0;
    expect_corrupt(b, "cell offset past the page");
  }
  {  // a file cut short
    std::vector<uint8_t> b(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2));
    WriteFile(path, b);
    Db db;
    // SQLite itself may refuse the cut file; when it opens it, the scan must not read past it.
    if (OpenUntrustedReadOnly(db, path).ok()) {
      Status st = ScanAll(path, "t", {"a"});
      EXPECT_FALSE(st.ok());
    }
  }
}

TEST_F(ScanTest, RandomDamageIsAnErrorOrRowsNeverACrash) {
  const std::string path = Path("random.db");
  MakeMixed(path);
  const std::vector<uint8_t> good = ReadFile(path);
  const uint32_t root = RootPage(path, "t");
  std::mt19937 rng(7);
  int errors = 0, runs = 0;
  for (int round = 0; round < 150; ++round) {
    std::vector<uint8_t> b = good;
    // Damage past the schema page: bytes of the table's pages.
    for (int k = 0; k < 1 + round % 8; ++k) {
      size_t at = 512 + rng() % (b.size() - 512);
      b[at] = static_cast<uint8_t>(rng());
    }
    if (round % 10 == 0) b[(root - 1) * 512 + 3] = static_cast<uint8_t>(rng());  // the root's cell count
    WriteFile(path, b);
    int64_t rows = 0;
    Status st = ScanAll(path, "t", kMixedColumns, &rows);
    if (st.code() == StatusCode::kInternal && st.message().find("no direct scan") != std::string::npos) continue;
    ++runs;
    if (!st.ok()) {
      ++errors;
      EXPECT_TRUE(st.code() == StatusCode::kCorrupt || st.code() == StatusCode::kInvalidInput) << st.message();
    } else {
      EXPECT_LE(rows, 6000 * 4) << "rows come from cells of real pages: no loop";
    }
  }
  EXPECT_GT(runs, 100);
  EXPECT_GT(errors, 0) << "some damage must be found";
}


// Overwrites the record of cell `cell` of a table's leaves with `record` (the same length).
static void PutRecord(std::vector<uint8_t>& b, size_t at, const std::vector<std::vector<uint8_t>>& parts) {
  for (const auto& part : parts) {
    std::copy(part.begin(), part.end(), b.begin() + static_cast<std::ptrdiff_t>(at));
    at += part.size();
  }
}

// Serial sizes that wrap around 2^64 add up to a length that fits: the scan must see the sum
// overflow (damage), not read a column from the wrong bytes (or 2^63 bytes away).
TEST_F(ScanTest, SerialSizesThatWrapAroundAreDamageNotBytesReadElsewhere) {
  const std::string path = Path("wrap.db");
  MakeDb(path, "CREATE TABLE t(a INTEGER, b INTEGER, c INTEGER, d INTEGER);"
               "INSERT INTO t VALUES (1, 2, 3, zeroblob(60)), (4, 5, 6, zeroblob(60)), (7, 8, 9, zeroblob(60));");
  const std::vector<uint8_t> good = ReadFile(path);
  const std::vector<Cell> cells = LeafCells(good, RootPage(path, "t"));
  ASSERT_EQ(cells.size(), 3u);
  ASSERT_EQ(cells[1].payload, 69u);  // header 6 (two bytes for the blob's type), body 63
  const uint64_t kHugeBlob = ~uint64_t{0} - 1;  // serial type of a blob of 2^63 - 7 bytes
  {
    // a, b: blobs of 2^63 - 7 bytes each (sum 2^64 - 14); c: one byte at "offset -14", in the
    // header; d: a blob of 60, so that the sizes add up to the body's 47 bytes modulo 2^64.
    std::vector<uint8_t> b = good;
    PutRecord(b, cells[1].record, {Varint(22), Varint(kHugeBlob), Varint(kHugeBlob), Varint(1), Varint(12 + 2 * 60),
                                    std::vector<uint8_t>(47, 0x2a)});
    WriteFile(path, b);
    EXPECT_FALSE(SqlRows(path, "t", {"a", "b", "c", "d"}).ok()) << "SQLite calls the record malformed";
    StatusOr<std::optional<Rows>> got = ScanRows(path, "t", {"c", "d"});
    EXPECT_EQ(got.status().code(), StatusCode::kCorrupt) << (got.ok() ? "rows read" : got.status().message());
    ExpectSqlOrError(path, "t", {"a", "b", "c", "d"}, "wrapped sizes");
  }
}

TEST_F(ScanTest, SerialSizesThatWrapAroundNeverReadFarAway) {
  const std::string path = Path("wrap2.db");
  MakeDb(path, "CREATE TABLE t(a INTEGER, b INTEGER, c INTEGER, d INTEGER);"
               "INSERT INTO t VALUES (1, 2, 3, zeroblob(60)), (4, 5, 6, zeroblob(60));");
  std::vector<uint8_t> b = ReadFile(path);
  const std::vector<Cell> cells = LeafCells(b, RootPage(path, "t"));
  ASSERT_EQ(cells.size(), 2u);
  ASSERT_EQ(cells[1].payload, 69u);  // (4, 5, 6, 60 bytes): header 6, body 63 (0 and 1 take no body bytes)
  // a: a blob of 2^63 - 7 bytes; b: an 8-byte integer just after it; c: another such blob;
  // d: a blob of 54, the sum wrapping to the body's 48 bytes. Reading b would read 2^63 away.
  PutRecord(b, cells[1].record, {Varint(21), Varint(~uint64_t{0} - 1), Varint(6), Varint(~uint64_t{0} - 1),
                                 Varint(12 + 2 * 54), std::vector<uint8_t>(48, 0x2a)});
  WriteFile(path, b);
  StatusOr<std::optional<Rows>> got = ScanRows(path, "t", {"b", "d"});
  EXPECT_EQ(got.status().code(), StatusCode::kCorrupt) << (got.ok() ? "rows read" : got.status().message());
}

// A record header that claims fewer bytes than its serial types take (the columns past it
// would read as NULL: a phantom "pid -1") or more, is damage, as SQL says.
TEST_F(ScanTest, ARecordHeaderThatLiesAboutItsLengthIsDamage) {
  const std::string path = Path("header.db");
  MakeDb(path, "CREATE TABLE t(a INTEGER, b INTEGER, c INTEGER); INSERT INTO t VALUES (1, 2, 3), (4, 5, 6), (7, 8, 9);");
  const std::vector<uint8_t> good = ReadFile(path);
  const std::vector<Cell> cells = LeafCells(good, RootPage(path, "t"));
  ASSERT_EQ(cells.size(), 3u);
  ASSERT_EQ(cells[1].payload, 7u);  // [4, 1, 1, 1] [4, 5, 6]
  for (const auto& [name, record] : std::vector<std::pair<std::string, std::vector<uint8_t>>>{
           {"short", {3, 1, 1, 1, 4, 5, 6}},   // two types: c past the header; the body one byte too long
           {"long", {5, 1, 1, 1, 1, 5, 6}},    // four types, of four bytes, in a body of two
           {"long2", {6, 1, 1, 1, 0, 0, 6}}}) {  // five types, of three bytes, in a body of one
    std::vector<uint8_t> b = good;
    PutRecord(b, cells[1].record, {record});
    WriteFile(path, b);
    EXPECT_FALSE(SqlRows(path, "t", {"a", "b", "c"}).ok()) << name << ": SQLite calls the record malformed";
    StatusOr<std::optional<Rows>> got = ScanRows(path, "t", {"a", "b", "c"});
    EXPECT_EQ(got.status().code(), StatusCode::kCorrupt) << name << ": " << (got.ok() ? "rows read" : got.status().message());
  }
}

// Overflow pages: one reached twice (two rows sharing a chain, a chain that loops back) or a
// chain longer than its payload is damage (SQL's quick_check: "2nd reference to page",
// "overflow list length"), never rows read from another row's bytes or a copy without end.
TEST_F(ScanTest, AnOverflowPageReachedTwiceIsDamage) {
  const std::string path = Path("chain.db");
  std::string sql = "CREATE TABLE t(id INTEGER PRIMARY KEY, big INTEGER, a INTEGER); BEGIN;";
  for (int i = 1; i <= 20; ++i) sql += fmt::format("INSERT INTO t VALUES ({}, zeroblob(3000), {});", i, i * 7);
  MakeDb(path, sql + "COMMIT;");
  const std::vector<uint8_t> good = ReadFile(path);
  const std::vector<Cell> cells = LeafCells(good, RootPage(path, "t"));
  ASSERT_EQ(cells.size(), 20u);
  ASSERT_GE(cells[0].chain.size(), 5u);
  ASSERT_EQ(cells[0].chain.size(), cells[1].chain.size());
  ASSERT_EQ(ExpectSqlOrError(path, "t", {"id", "a"}, "undamaged"), "rows");
  auto page_at = [](uint32_t pg) { return (pg - 1) * size_t{512}; };
  struct Damage {
    std::string name;
    std::function<void(std::vector<uint8_t>&)> apply;
  };
  for (const Damage& d : std::vector<Damage>{
           {"two rows share a chain", [&](auto& b) { PutBe32(b, cells[1].overflow_ptr, cells[0].chain[0]); }},
           {"a chain loops back", [&](auto& b) { PutBe32(b, page_at(cells[0].chain[2]), cells[0].chain[1]); }},
           {"a chain goes on past its payload", [&](auto& b) { PutBe32(b, page_at(cells[0].chain.back()), cells[5].chain[0]); }},
           {"a chain runs into the tree", [&](auto& b) { PutBe32(b, page_at(cells[0].chain[1]), RootPage(path, "t")); }},
       }) {
    std::vector<uint8_t> b = good;
    d.apply(b);
    WriteFile(path, b);
    EXPECT_FALSE(SqlRows(path, "t", {"id", "a"}).ok()) << d.name << ": quick_check finds it";
    StatusOr<std::optional<Rows>> got = ScanRows(path, "t", {"id", "a"});
    EXPECT_EQ(got.status().code(), StatusCode::kCorrupt) << d.name << ": " << (got.ok() ? "rows read" : got.status().message());
  }
}

// SQLite reads a column of REAL affinity as a REAL even where the file holds an integer (it
// stores integral reals as integers): a column without INTEGER affinity (SQLite's datatype
// doc, 3.1: a declared type containing "INT") is left to SQL.
TEST_F(ScanTest, ColumnsWithoutIntegerAffinityAreLeftToSql) {
  const std::string path = Path("affinity.db");
  MakeDb(path, "CREATE TABLE k(start REAL, \"end\" DOUBLE, deviceId FLOAT, n NUMERIC, s TEXT, u, "
               "i BIGINT, j UNSIGNED BIG INT, m int8, p INTEGER);"
               "INSERT INTO k VALUES (1, 2, 3, 4, 5, 6, 7, 8, 9, 10), (11, 12, 13, 14, 15, 16, 17, 18, 19, 20);");
  for (const char* col : {"start", "end", "deviceId", "n", "s", "u"}) {
    EXPECT_NE(WhyNot(path, "k", {"i", col}).find("affinity"), std::string::npos) << col;
    EXPECT_EQ(ExpectSqlOrError(path, "k", {"i", col}, col), "sql") << col;
  }
  EXPECT_EQ(ExpectScanEqualsSql(path, "k", {"i", "j", "m", "p"}), 2);
}

// A row's payload is bounded (SqliteTableScan::kMaxRowPayload, the store reader's
// SQLITE_LIMIT_LENGTH): a larger one is an error, not an allocation the file decides.
TEST_F(ScanTest, ARowLargerThanTheBoundIsAnError) {
  const std::string path = Path("big.db");
  MakeDb(path, fmt::format("CREATE TABLE t(a INTEGER, big INTEGER); INSERT INTO t VALUES (1, zeroblob(100));"
                           "INSERT INTO t VALUES (2, zeroblob({}));",
                           SqliteTableScan::kMaxRowPayload + 1));
  StatusOr<std::optional<Rows>> got = ScanRows(path, "t", {"a"});
  EXPECT_EQ(got.status().code(), StatusCode::kCorrupt) << (got.ok() ? "rows read" : got.status().message());
  if (!got.ok()) {
    EXPECT_NE(got.status().message().find("a row of"), std::string::npos) << got.status().message();
  }
}

// The differential test of the contract: a corpus of files, each one mutation (sometimes two)
// of a table's structure away from a good file: page types and cell counts, cell and child
// pointers, payload and rowid varints, record headers (sizes, serial types, one-byte and nine-
// byte ones), values, overflow pointers and chains (to pages of the tree, of another chain,
// to themselves, past the file), and the declared types in the schema. On each, SQL
// (quick_check, then the rows) and the direct scan: the same rows, or an error from the scan.
TEST_F(ScanTest, EveryMutationReadsAsSqlOrIsAnError) {
  const std::string path = Path("corpus.db");
  {
    std::string sql = "CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, big INTEGER, b INTEGER, r INTEGER); BEGIN;";
    for (int i = 1; i <= 400; ++i) {
      sql += fmt::format("INSERT INTO t VALUES ({}, {}, {}, {}, {});", i * 2, (i * 7919) % 100003 - 50000,
                         i % 15 == 0 ? "zeroblob(1500)" : i % 4 == 0 ? "'text'" : "NULL",
                         int64_t{i} << (i % 60), i % 3 == 0 ? fmt::format("{}.5", i) : std::to_string(i % 3));
    }
    MakeDb(path, sql + "COMMIT;");
  }
  const std::vector<std::string> columns = {"id", "a", "big", "b", "r"};
  const std::vector<uint8_t> good = ReadFile(path);
  const uint32_t root = RootPage(path, "t");
  const uint32_t pages = static_cast<uint32_t>(good.size() / 512);
  ASSERT_EQ(ExpectSqlOrError(path, "t", columns, "undamaged"), "rows");

  // Where to damage: bytes (any value) and page numbers (other pages).
  std::vector<size_t> bytes, pointers, type_names;
  std::vector<uint32_t> tree_pages;
  {
    std::vector<uint32_t> pending = {root};
    while (!pending.empty()) {
      const uint32_t pg = pending.back();
      pending.pop_back();
      tree_pages.push_back(pg);
      const size_t p = (pg - 1) * size_t{512};
      const uint32_t n = (uint32_t{good[p + 3]} << 8) | good[p + 4];
      bytes.insert(bytes.end(), {p, p + 3, p + 4});
      const bool interior = good[p] == 0x05;
      const size_t ptrs = p + (interior ? 12 : 8);
      for (uint32_t i = 0; i < n; ++i) {
        bytes.insert(bytes.end(), {ptrs + 2 * i, ptrs + 2 * i + 1});
        const size_t cell = p + ((uint32_t{good[ptrs + 2 * i]} << 8) | good[ptrs + 2 * i + 1]);
        if (interior) {
          pointers.push_back(cell);
          bytes.push_back(cell + 4);  // the key's varint
          pending.push_back(Be32At(good, cell));
        }
      }
      if (interior) {
        pointers.push_back(p + 8);
        pending.push_back(Be32At(good, p + 8));
      }
    }
    for (const Cell& c : LeafCells(good, root)) {
      bytes.push_back(c.record - 1);  // the rowid's last byte
      bytes.push_back(c.record - 2);  // the payload size's (last) byte
      uint64_t hsize;
      ReadVarint(good, c.record, &hsize);
      for (size_t i = 0; i < hsize; ++i) bytes.push_back(c.record + i);  // header size and types
      bytes.push_back(c.record + hsize);                                  // the first value
      if (c.overflow_ptr != 0) {
        pointers.push_back(c.overflow_ptr);
        for (uint32_t o : c.chain) pointers.push_back((o - 1) * size_t{512});
      }
    }
    const std::string text(good.begin(), good.begin() + 512);
    for (size_t at = text.find("INTEGER"); at != std::string::npos; at = text.find("INTEGER", at + 1))
      type_names.push_back(at);
  }
  ASSERT_GT(tree_pages.size(), 10u);
  ASSERT_EQ(type_names.size(), 5u);

  std::mt19937 rng(20261127);
  std::map<std::string, int> verdicts;
  int sql_damage = 0;
  for (int round = 0; round < 600; ++round) {
    std::vector<uint8_t> b = good;
    std::string what;
    for (int m = 0; m < 1 + (round % 5 == 4); ++m) {
      switch (rng() % 8) {
        case 0: case 1: case 2: {  // a byte of the structure: any value, or one off
          const size_t at = bytes[rng() % bytes.size()];
          const uint8_t v = rng() % 2 ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>(b[at] + (rng() % 2 ? 1 : -1));
          what += fmt::format("byte {} {:#x}->{:#x}; ", at, b[at], v);
          b[at] = v;
          break;
        }
        case 3: case 4: case 5: {  // a page number: another page of the tree or a chain, itself, none, past the end
          const size_t at = pointers[rng() % pointers.size()];
          const uint32_t choices[] = {tree_pages[rng() % tree_pages.size()], Be32At(b, pointers[rng() % pointers.size()]),
                                      static_cast<uint32_t>(at / 512 + 1), 0, static_cast<uint32_t>(pages + 1 + rng() % 3),
                                      static_cast<uint32_t>(rng())};
          const uint32_t v = choices[rng() % std::size(choices)];
          what += fmt::format("page number at {} {}->{}; ", at, Be32At(b, at), v);
          PutBe32(b, at, v);
          break;
        }
        case 6: {  // a serial type as a nine-byte varint of a huge size (the header keeps its length)
          const Cell c = LeafCells(good, root)[rng() % 400];
          uint64_t hsize;
          const size_t first = ReadVarint(good, c.record, &hsize);
          if (hsize < first + 9) break;
          const uint64_t huge = (~uint64_t{0} - (rng() % 64)) & ~uint64_t{1};
          const std::vector<uint8_t> v = Varint(huge);
          std::copy(v.begin(), v.end(), b.begin() + static_cast<std::ptrdiff_t>(c.record + first));
          what += fmt::format("nine-byte serial type {} in the record at {}; ", huge, c.record);
          break;
        }
        default: {  // a declared type
          static const char* const kTypes[] = {"REAL   ", "DOUBLE ", "TEXT   ", "BLOB   ", "NUMERIC", "INT    ", "BIGINT "};
          const size_t at = type_names[rng() % type_names.size()];
          const char* t = kTypes[rng() % std::size(kTypes)];
          std::copy(t, t + 7, b.begin() + static_cast<std::ptrdiff_t>(at));
          what += fmt::format("declared type at {} -> '{}'; ", at, t);
          break;
        }
      }
    }
    WriteFile(path, b);
    sql_damage += !SqlRows(path, "t", columns).ok();
    ++verdicts[ExpectSqlOrError(path, "t", columns, what)];
    if (HasFailure()) break;
  }
  // The corpus exercises all three outcomes, and damage SQL sees.
  EXPECT_GT(verdicts["rows"], 50);
  EXPECT_GT(verdicts["error"], 100);
  EXPECT_GT(verdicts["sql"], 10);
  EXPECT_GT(sql_damage, 100);
}

TEST_F(ScanTest, SpilledRowsComeBackByKeyInOrder) {
  const std::string path = Path("spill.db");
  MakeMixed(path);
  const std::vector<std::string> cols = {"id", "a", "c", "d", "big"};
  Db db;
  ASSERT_TRUE(OpenUntrustedReadOnly(db, path).ok());
  std::string why_not;
  auto scan = OpenScan(db.get(), path, "t", cols, &why_not);
  ASSERT_TRUE(scan.ok() && *scan) << why_not;
  auto spill = RowSpill::Create(dir_.string(), static_cast<int>(cols.size()), 3);
  ASSERT_TRUE(spill.ok()) << spill.status().message();
  struct Row {
    std::vector<SqliteTableScan::Kind> kinds;
    std::vector<int64_t> values;
  };
  std::vector<std::vector<Row>> want(3);
  while (true) {
    StatusOr<bool> row = (*scan)->Next();
    ASSERT_TRUE(row.ok());
    if (!*row) break;
    const size_t key = static_cast<size_t>((*scan)->Int(0) / 3 % 3);  // ids are multiples of 3
    Row r;
    for (size_t i = 0; i < cols.size(); ++i) {
      r.kinds.push_back((*scan)->kind(i));
      r.values.push_back((*scan)->IsInt(i) ? (*scan)->Int(i) : 0);
    }
    want[key].push_back(r);
    ASSERT_TRUE((*spill)->Append(key, **scan).ok());
  }
  ASSERT_TRUE((*spill)->Finish().ok());
  EXPECT_GT((*spill)->bytes(), 0u);
  for (size_t key = 0; key < 3; ++key) {
    RowSpill::Reader r = (*spill)->Read(key);
    size_t n = 0;
    while (true) {
      StatusOr<bool> row = r.Next();
      ASSERT_TRUE(row.ok()) << row.status().message();
      if (!*row) break;
      ASSERT_LT(n, want[key].size());
      for (size_t i = 0; i < cols.size(); ++i) {
        EXPECT_EQ(r.kind(i), want[key][n].kinds[i]) << key << " " << n << " " << i;
        if (r.IsInt(i)) {
          EXPECT_EQ(r.Int(i), want[key][n].values[i]) << key << " " << n << " " << i;
        }
      }
      ++n;
    }
    EXPECT_EQ(n, want[key].size());
    EXPECT_GT(n, 1000u);
  }
  // Nothing left in the directory: the file was unlinked from the start.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1u);  // spill.db only
}

}  // namespace
}  // namespace overlapprof
