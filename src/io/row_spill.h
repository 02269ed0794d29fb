#pragma once
// Rows of a table scan, grouped by a key and spilled to an unlinked temporary file, to be read
// back key by key: the Nsight Systems importer reads an export that holds several ranks in one
// pass over each large table (instead of one pass per rank), with memory bounded by one
// buffer per key, not by the rows (docs/nsys.md).
//
// A row is the `ncols` values of a SqliteTableScan row (kNull, kInt with its value, or
// kOther); a key's rows come back in the order they were appended. Encoding: one kinds byte
// per four columns, then each kInt value as a zigzag LEB128 varint (a kernel row of nsys'
// export takes ~30 bytes).
//
// Memory: kChunkBytes per key while appending (flushed as a chunk when full, all flushed by
// Finish), one chunk per reader. Disk: the encoded rows; the file is unlinked from the start,
// so it goes when the RowSpill does, whatever happens.
//
// Threads: Append and Finish on one thread; after Finish, any number of Readers may run
// concurrently (pread).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/common/status.h"
#include "src/io/sqlite_table_scan.h"

namespace overlapprof {

class RowSpill {
 public:
  static constexpr size_t kChunkBytes = size_t{32} << 10;

  // A spill of rows of `ncols` columns (1-64) for keys 0..nkeys-1, in a temporary file in
  // `dir` (an error when it cannot be created there).
  static StatusOr<std::unique_ptr<RowSpill>> Create(const std::string& dir, int ncols, size_t nkeys);
  ~RowSpill();
  RowSpill(const RowSpill&) = delete;
  RowSpill& operator=(const RowSpill&) = delete;

  // The current row of `scan` (its first ncols columns) under `key`.
  Status Append(size_t key, const SqliteTableScan& scan);
  Status Finish();
  uint64_t bytes() const { return file_end_; }

  // A key's rows, with SqliteTableScan's accessors.
  class Reader {
   public:
    StatusOr<bool> Next();
    SqliteTableScan::Kind kind(size_t i) const { return kinds_[i]; }
    bool IsInt(size_t i) const { return kinds_[i] == SqliteTableScan::kInt; }
    int64_t Int(size_t i) const { return values_[i]; }

   private:
    friend class RowSpill;
    const RowSpill* spill_ = nullptr;
    size_t key_ = 0, chunk_ = 0;
    std::vector<uint8_t> buf_;
    size_t pos_ = 0;
    std::vector<SqliteTableScan::Kind> kinds_;
    std::vector<int64_t> values_;
  };
  Reader Read(size_t key) const;

 private:
  RowSpill() = default;
  Status Flush(size_t key);
  struct Chunk {
    uint64_t offset;
    uint32_t bytes;
  };
  int fd_ = -1;
  int ncols_ = 0;
  uint64_t file_end_ = 0;
  // The most one row takes: its kinds bytes and a 10-byte varint per column.
  size_t MaxRowBytes() const { return static_cast<size_t>((ncols_ + 3) / 4 + 10 * ncols_); }
  struct Pending {
    std::unique_ptr<uint8_t[]> data;  // kChunkBytes + MaxRowBytes(), allocated at the key's first row
    size_t len = 0;
  };
  std::vector<Pending> pending_;               // per key: encoded rows not yet written
  std::vector<std::vector<Chunk>> chunks_;     // per key: written chunks, in order
};

}  // namespace overlapprof
