// SqliteTableScan (src/importers/sqlite_table_scan.*) and RowSpill (src/importers/row_spill.*):
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
#include <random>

#include "src/importers/row_spill.h"
#include "src/importers/sqlite_table_scan.h"
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
    Exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, big TEXT, b INTEGER, c, d INTEGER); BEGIN;");
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
      switch (i % 5) {  // c: untyped, any storage class
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
    StatusOr<std::unique_ptr<SqliteTableScan>> scan = SqliteTableScan::Open(db.get(), path, table, columns, &why_not);
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
    OVERLAPPROF_ASSIGN_OR_RETURN(auto scan, SqliteTableScan::Open(db.get(), path, table, columns, &why_not));
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
    StatusOr<std::unique_ptr<SqliteTableScan>> scan = SqliteTableScan::Open(db.get(), path, table, columns, &why_not);
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
  // "INTEGER PRIMARY KEY DESC" is no rowid alias: the value is in the record, read as such.
  EXPECT_EQ(ExpectScanEqualsSql(path, "k", {"id", "b"}), 1);
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
    expect_corrupt(b, "more pages than the file has|rowids out of order");
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

TEST_F(ScanTest, SpilledRowsComeBackByKeyInOrder) {
  const std::string path = Path("spill.db");
  MakeMixed(path);
  const std::vector<std::string> cols = {"id", "a", "c", "d", "big"};
  Db db;
  ASSERT_TRUE(OpenUntrustedReadOnly(db, path).ok());
  std::string why_not;
  auto scan = SqliteTableScan::Open(db.get(), path, "t", cols, &why_not);
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
