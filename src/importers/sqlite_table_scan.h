#pragma once
// A full scan of one rowid table of a SQLite database file that reads the table's B-tree pages
// directly (https://www.sqlite.org/fileformat2.html) instead of stepping SQLite's virtual
// machine: the Nsight Systems importer's large tables (kernels, runtime calls) at tens of
// millions of rows per second instead of ~3 M (docs/performance.md, issue 13).
//
// Only integer values are decoded (a column read as REAL, TEXT or BLOB reports kOther, as
// sqlite3_column_type would not say SQLITE_INTEGER); rows come in rowid order, the order of
// SQLite's own full scan of the table.
//
// Contract: the file is untrusted. Every offset is checked against its page, the page number
// against the file, and the tree's depth and page count are bounded; rowids must increase
// from row to row (a leaf reached twice is damage): a damaged file gives kCorrupt with the
// page, never a read outside a buffer, a loop or a row counted twice. These checks stand in
// for PRAGMA quick_check on the tables read this way. The file is read with
// pread (no mapping: a file truncated under us is an error, not SIGBUS) through a 1 MiB
// block buffer, so memory stays at that buffer plus one page per tree level.
//
// Open returns nullptr (and why, in *why_not) when the file cannot be read this way with the
// same result as SQL (a WAL file beside it with frames in it, a WITHOUT ROWID table, a
// requested column with a DEFAULT that older rows would take, or past the 64th): the caller
// then uses SQL.
#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/status.h"

namespace overlapprof {

class SqliteTableScan {
 public:
  enum Kind : uint8_t { kNull = 0, kInt = 1, kOther = 2 };

  // `db`: a connection to `path` (its schema gives the table's root page and columns).
  // `columns`: the columns wanted, by name; an empty name or one the table lacks is always
  // kNull. Value(i) then refers to columns[i].
  static StatusOr<std::unique_ptr<SqliteTableScan>> Open(sqlite3* db, const std::string& path, std::string_view table,
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
  Status Corrupt(uint32_t pgno, std::string_view what) const;
  StatusOr<const uint8_t*> Page(uint32_t pgno);  // valid until the next call
  Status Descend(uint32_t pgno);                  // from pgno down to its leftmost leaf
  Status DecodeCell(const uint8_t* page, uint32_t pgno, int cell);
  StatusOr<const uint8_t*> Overflowed(const uint8_t* local, uint64_t local_size, uint64_t payload,
                                      uint32_t first_overflow, uint32_t pgno);

  int fd_ = -1;
  std::string table_;
  uint64_t file_size_ = 0;
  uint32_t page_size_ = 0, usable_ = 0, page_count_ = 0, root_ = 0;
  uint64_t pages_visited_ = 0;
  // The block buffer: file bytes [block_off_, block_off_ + block_.size()).
  std::vector<uint8_t> block_;
  uint64_t block_off_ = 0, block_len_ = 0;
  std::vector<Frame> stack_;  // interior pages from the root down
  // The current leaf: in the block buffer (valid until the next Page() call), or in
  // leaf_copy_ once one of its rows needed overflow pages.
  const uint8_t* leaf_page_ = nullptr;
  std::vector<uint8_t> leaf_copy_;
  uint32_t leaf_pgno_ = 0;
  int leaf_cell_ = 0, leaf_ncells_ = 0;
  bool started_ = false, done_ = false;
  bool have_rowid_ = false;
  int64_t last_rowid_ = 0;
  std::vector<uint8_t> payload_;  // an overflowing payload, assembled
  // Requested columns: their index in the record (-1: absent), or rowid alias.
  std::vector<int> col_index_;
  std::vector<uint8_t> col_rowid_;  // 1: the rowid alias (INTEGER PRIMARY KEY)
  int max_index_ = -1;
  std::vector<int64_t> values_;
  std::vector<Kind> kinds_;
};

}  // namespace overlapprof
