#pragma once
// A full scan of one rowid table of a SQLite database file that reads the table's B-tree pages
// directly (https://www.sqlite.org/fileformat2.html) instead of stepping SQLite's virtual
// machine: the Nsight Systems importer's large tables (kernels, runtime calls) at tens of
// millions of rows per second instead of ~3 M (docs/performance.md, docs/nsys.md).
//
// Only integer values are decoded (a column read as REAL, TEXT or BLOB reports kOther, as
// sqlite3_column_type would not say SQLITE_INTEGER); rows come in rowid order, the order of
// SQLite's own full scan of the table.
//
// Contract: the same rows and values as SQL (`SELECT columns FROM table` after PRAGMA
// quick_check(table)), or an error. The file is untrusted, and these checks stand in for
// quick_check on the tables read this way; a damaged file gives kCorrupt naming the page,
// never a read outside a buffer, a loop, a row counted twice or a value from the wrong bytes:
//  - every offset and length read from the file is checked against its page, its cell or its
//    record with overflow-safe arithmetic; page numbers against the file;
//  - every page (interior, leaf, overflow) is reached at most once (a bitmap of the file's
//    pages, as quick_check keeps): a tree or chain that loops or shares a page is damage;
//  - keys are in order (rowids increase from row to row, and sit between their interior
//    keys), every leaf is at the same depth, and the depth is bounded;
//  - each page's cells, free blocks and fragmented bytes fill its cell content area exactly
//    (a damaged cell count or pointer cannot hide a row);
//  - a record's header must end exactly where its serial types end, and their sizes must add
//    up to its payload; an overflow chain must hold exactly its payload's pages;
//  - a row's payload is at most kMaxRowPayload bytes (copied once when it overflows), and each
//    page is reached at most once: the payload bytes copied over a scan are at most the file's
//    size, and the bytes read from it at most one block (below) per page reached.
// The file is read with pread (no mapping: a file truncated under us is an error, not
// SIGBUS) through a 256 KiB block buffer (overflow pages outside it one page at a time), so
// memory is that buffer, one page per tree level, the largest row, and one bit per page.
//
// Open returns nullptr (and why, in *why_not) when the file cannot be read this way with the
// same result as SQL: a WAL file beside it with frames in it, a WITHOUT ROWID table, a table
// with an index (quick_check checks an index against its table; the scan reads no index), a
// generated column, a requested column without INTEGER affinity (SQLite reads an integer in
// a REAL column as a REAL), one with a DEFAULT that older rows would take, or one past the
// 64th: the caller then uses SQL (and quick_check).
//
// This is a format primitive: the table's schema is read by the caller (through SQL,
// src/importers/sqlite_table_schema.h) and passed in.
#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/status.h"

namespace overlapprof {

// A table as its schema declares it (sqlite_schema, pragma_table_xinfo, pragma_index_list).
struct SqliteTableSchema {
  struct Column {
    std::string name;
    std::string declared_type;  // as written ("INTEGER", "BIGINT", "REAL", ""...)
    bool primary_key = false;
    bool has_default = false;
    bool hidden = false;  // a generated or hidden column (pragma_table_xinfo's hidden != 0)
  };
  uint32_t root_page = 0;  // 0: no such table, or none in the schema
  bool without_rowid = false;
  int indexes = 0;              // indexes on the table (pragma_index_list), the primary key's too
  std::vector<Column> columns;  // in declared order (= record order for a rowid table)
};

// SQLite's column affinity of a declared type (https://www.sqlite.org/datatype3.html, 3.1).
enum class SqliteAffinity : uint8_t { kInteger, kText, kBlob, kReal, kNumeric };
SqliteAffinity AffinityOfDeclaredType(std::string_view declared_type);

class SqliteTableScan {
 public:
  enum Kind : uint8_t { kNull = 0, kInt = 1, kOther = 2 };
  // A row's payload larger than this is damage (the store reader's SQLITE_LIMIT_LENGTH too;
  // real rows of the tables read this way are a few hundred bytes).
  static constexpr uint64_t kMaxRowPayload = uint64_t{16} << 20;

  // `path`: the database file; `schema`: its table `table`'s schema. `columns`: the columns
  // wanted, by name; an empty name or one the table lacks is always kNull. Value(i) then
  // refers to columns[i].
  static StatusOr<std::unique_ptr<SqliteTableScan>> Open(const std::string& path, std::string_view table,
                                                         const SqliteTableSchema& schema,
                                                         const std::vector<std::string>& columns,
                                                         std::string* why_not);
  ~SqliteTableScan();
  SqliteTableScan(const SqliteTableScan&) = delete;
  SqliteTableScan& operator=(const SqliteTableScan&) = delete;

  // The next row: true and its values, false at the end, or an error (kCorrupt, kIo).
  StatusOr<bool> Next();
  Kind kind(size_t i) const { return kinds_[i]; }
  int64_t Int(size_t i) const { return values_[i]; }
  bool IsInt(size_t i) const { return kinds_[i] == kInt; }

 private:
  SqliteTableScan() = default;
  struct Frame {
    std::vector<uint8_t> page;  // an interior page, copied
    uint32_t pgno = 0;
    int cell = 0, ncells = 0;
  };
  struct FreeDeleter {
    void operator()(uint64_t* p) const { std::free(p); }
  };
  Status Corrupt(uint32_t pgno, std::string_view what) const;
  Status Reach(uint32_t pgno, std::string_view what);  // marks pgno reached; damage if it was
  StatusOr<const uint8_t*> Page(uint32_t pgno);          // valid until the next call
  StatusOr<const uint8_t*> OverflowPage(uint32_t pgno);  // leaves the block buffer as it is
  Status Descend(uint32_t pgno);                         // from pgno down to its leftmost leaf
  StatusOr<uint32_t> ChildOf(const Frame& f, int cell) const;
  StatusOr<int64_t> KeyOf(const Frame& f, int cell) const;  // an interior cell's rowid key
  Status Key(uint32_t pgno, int64_t key, bool may_equal);   // the next key in order
  // The page's cells (cell_bytes in all), free blocks and fragmented bytes fill its cell
  // content area, as quick_check counts them.
  Status CheckSpace(const uint8_t* page, uint32_t pgno, uint64_t cell_bytes) const;
  Status DecodeCell(const uint8_t* page, uint32_t pgno, int cell);
  Status ParseHeader(const uint8_t* rec, const uint8_t* h, uint64_t hsize, uint64_t payload, uint32_t pgno);
  StatusOr<const uint8_t*> Overflowed(const uint8_t* local, uint64_t local_size, uint64_t payload,
                                      uint32_t first_overflow, uint32_t pgno);

  int fd_ = -1;
  std::string table_;
  uint64_t file_size_ = 0;
  uint32_t page_size_ = 0, usable_ = 0, page_count_ = 0, root_ = 0;
  uint64_t pages_visited_ = 0;
  std::unique_ptr<uint64_t[], FreeDeleter> reached_;  // one bit per page: calloc'd, touched as used
  // The block buffer: file bytes [block_off_, block_off_ + block_.size()).
  std::vector<uint8_t> block_;
  uint64_t block_off_ = 0, block_len_ = 0;
  std::vector<uint8_t> overflow_page_;  // an overflow page outside the block buffer
  std::vector<Frame> stack_;            // interior pages from the root down
  // The current leaf, in the block buffer (overflow pages do not move it).
  const uint8_t* leaf_page_ = nullptr;
  uint32_t leaf_pgno_ = 0;
  int leaf_cell_ = 0, leaf_ncells_ = 0;
  uint32_t leaf_content_ = 0;  // where the leaf's cell content area starts
  uint64_t leaf_bytes_ = 0;    // the sizes of the leaf's cells decoded so far
  size_t leaf_depth_ = 0;      // interior pages above every leaf (0: no leaf yet)
  bool started_ = false, done_ = false;
  bool have_key_ = false;
  int64_t last_key_ = 0;  // the last rowid or interior key, in order
  std::vector<uint8_t> payload_;  // an overflowing payload, assembled
  // The last record header that checked out (its bytes, its payload's size) and its serial
  // types and their offsets in the body: a row with the same header and size has the same.
  std::array<uint8_t, 256> header_{};
  size_t header_bytes_ = SIZE_MAX;
  uint64_t header_payload_ = 0;
  uint64_t types_[64] = {}, offsets_[64] = {};
  int ntypes_ = 0;
  // The serial types past the columns decoded, of the last row whose sizes added up, and
  // their sum (a row with the same bytes there has the same sum).
  std::array<uint8_t, 128> tail_{};
  size_t tail_bytes_ = SIZE_MAX;
  uint64_t tail_sum_ = 0;
  // Requested columns: their index in the record (-1: absent), or rowid alias.
  std::vector<int> col_index_;
  std::vector<uint8_t> col_rowid_;  // 1: the rowid alias (INTEGER PRIMARY KEY)
  int max_index_ = -1;
  std::vector<int64_t> values_;
  std::vector<Kind> kinds_;
};

}  // namespace overlapprof
