#include "src/io/sqlite_table_scan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace overlapprof {
namespace {

// The file format (https://www.sqlite.org/fileformat2.html), by section.
// 1.3 The database header.
constexpr size_t kFileHeaderBytes = 100;  // page 1's B-tree header follows it
constexpr char kMagic[] = "SQLite format 3";  // 16 bytes with its NUL
constexpr size_t kPageSizeAt = 16;            // 2 bytes; 1 means 65536
constexpr size_t kReservedBytesAt = 20;       // 1 byte: reserved space at the end of each page
constexpr uint32_t kMinPageSize = 512, kMaxPageSize = 65536, kPageSizeCodeFor64K = 1;
constexpr uint32_t kMinUsableSize = 480;
// 1.6 B-tree pages: the page header, then the cell pointer array (2 bytes per cell).
constexpr uint8_t kInteriorTable = 0x05, kLeafTable = 0x0D;
constexpr size_t kFirstFreeblockAt = 1;       // 2 bytes; 0: none
constexpr size_t kCellCountAt = 3;            // 2 bytes
constexpr size_t kContentStartAt = 5;         // 2 bytes; 0 means 65536
constexpr size_t kFragmentedBytesAt = 7;      // 1 byte
constexpr uint32_t kFreeblockHeaderBytes = 4;  // next freeblock (2), its size (2)
constexpr uint32_t kMinCellBytes = 4;          // a smaller cell takes 4 bytes (cellSizePtr)
constexpr size_t kRightMostPointerAt = 8;     // 4 bytes, interior pages only
constexpr uint32_t kLeafHeaderBytes = 8, kInteriorHeaderBytes = 12;
constexpr uint32_t kChildPointerBytes = 4;
// 1.6 Cell payload overflow: the local part of a table leaf cell's payload, and overflow pages
// (a 4-byte next page number, then payload).
constexpr uint32_t kOverflowNextBytes = 4;
// A table leaf's payload stays on the page up to usable - 35 bytes (X); past it, at least
// ((usable - 12) * 32 / 255) - 23 bytes (M) stay, and the rest goes to overflow pages.
constexpr uint64_t MaxLocal(uint64_t usable) { return usable - 35; }
constexpr uint64_t MinLocal(uint64_t usable) { return ((usable - 12) * 32 / 255) - 23; }
// 2.1 Record format: serial types 10 and 11 are reserved.
constexpr uint64_t kReservedSerialType10 = 10, kReservedSerialType11 = 11;
// 1.5 The write-ahead log beside the database.
constexpr const char* kWalSuffix = "-wal";

constexpr size_t kBlockBytes = size_t{256} << 10;  // ~L2-sized: rows are decoded just after the copy
constexpr size_t kMaxDepth = 40;  // a table B-tree of 2^32 pages is < 20 levels deep
constexpr int kMaxColumns = 64;   // columns of a record decoded (the first 64)

uint32_t Be16(const uint8_t* p) { return (uint32_t{p[0]} << 8) | p[1]; }
uint32_t Be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// SQLite's varint (1-9 bytes, big-endian groups of 7 bits, the ninth byte whole). Reads at
// most up to `end`; false when it would run past it.
inline bool Varint(const uint8_t*& p, const uint8_t* end, uint64_t* out) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    if (p >= end) return false;
    uint8_t b = *p++;
    v = (v << 7) | (b & 0x7f);
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  if (p >= end) return false;
  *out = (v << 8) | *p++;
  return true;
}

// Bytes of a value of serial type t (t not reserved).
constexpr uint8_t kFixedSerialSizes[12] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 0, 0};  // types 0-11
constexpr uint64_t kFirstVariableSerialType = 12;  // then blobs (even) and text (odd)
constexpr uint64_t SerialSize(uint64_t t) {
  return t < kFirstVariableSerialType ? kFixedSerialSizes[t] : (t - kFirstVariableSerialType) / 2;
}

// Bytes of a value of a one-byte serial type (< 0x80), for summing a header's sizes without a
// branch per type. The reserved types 10 and 11 count kReservedSize, more than any record
// body: a header with one cannot add up to its body. (A sum of at most kMaxRowPayload types,
// each at most kReservedSize, stays below 2^56.)
constexpr uint64_t kReservedSize = uint64_t{1} << 32;
struct OneByteSizes {
  uint64_t size[0x80];
  constexpr OneByteSizes() : size{} {
    for (uint64_t t = 0; t < 0x80; ++t)
      size[t] = (t == kReservedSerialType10 || t == kReservedSerialType11) ? kReservedSize : SerialSize(t);
  }
};
constexpr OneByteSizes kOneByteSizes;
constexpr uint64_t kHighBits = 0x8080808080808080;  // a varint's continuation bits, 8 bytes at a time

// The big-endian two's-complement integer of serial type t (1-6), sign-extended. Reads
// exactly SerialSize(t) bytes.
inline int64_t IntOfType(const uint8_t* p, uint64_t t) {
  switch (t) {
    case 1:
      return static_cast<int8_t>(p[0]);
    case 2:
      return static_cast<int16_t>((uint16_t{p[0]} << 8) | p[1]);
    case 3:
      return (static_cast<int32_t>((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8))) >> 8;
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<int32_t>(__builtin_bswap32(v));
    }
    case 5: {
      uint64_t v = 0;
      std::memcpy(reinterpret_cast<uint8_t*>(&v) + 2, p, 6);  // 6 bytes into the low end after the swap
      return static_cast<int64_t>(__builtin_bswap64(v) << 16) >> 16;
    }
    default: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<int64_t>(__builtin_bswap64(v));
    }
  }
}

// Whether a[0..n) == b[0..n), in 8-byte words (the last one overlapping), inlined.
inline bool SameBytes(const uint8_t* a, const uint8_t* b, size_t n) {
  if (n < 8) {
    uint8_t diff = 0;
    for (size_t i = 0; i < n; ++i) diff |= a[i] ^ b[i];
    return diff == 0;
  }
  uint64_t diff = 0, x, y;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    diff |= x ^ y;
  }
  std::memcpy(&x, a + n - 8, 8);
  std::memcpy(&y, b + n - 8, 8);
  return (diff | (x ^ y)) == 0;
}

std::string Upper(std::string_view s) {
  std::string u(s);
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return u;
}

}  // namespace

SqliteAffinity AffinityOfDeclaredType(std::string_view declared_type) {
  const std::string t = Upper(declared_type);
  auto has = [&](std::string_view s) { return t.find(s) != std::string::npos; };
  if (has("INT")) return SqliteAffinity::kInteger;
  if (has("CHAR") || has("CLOB") || has("TEXT")) return SqliteAffinity::kText;
  if (has("BLOB") || t.empty()) return SqliteAffinity::kBlob;
  if (has("REAL") || has("FLOA") || has("DOUB")) return SqliteAffinity::kReal;
  return SqliteAffinity::kNumeric;
}

SqliteTableScan::~SqliteTableScan() {
  if (fd_ >= 0) ::close(fd_);
}

Status SqliteTableScan::Corrupt(uint32_t pgno, std::string_view what) const {
  return MakeError(StatusCode::kCorrupt, "table {} page {}: {}", table_, pgno, what);
}

StatusOr<std::unique_ptr<SqliteTableScan>> SqliteTableScan::Open(const std::string& path, std::string_view table,
                                                                  const SqliteTableSchema& schema,
                                                                  const std::vector<std::string>& columns,
                                                                  std::string* why_not) {
  auto use_sql = [&](std::string_view why) -> std::unique_ptr<SqliteTableScan> {
    *why_not = std::string(why);
    return nullptr;
  };
  std::unique_ptr<SqliteTableScan> s(new SqliteTableScan());
  s->table_ = std::string(table);
  // A WAL file with frames: the main file alone may be stale.
  struct stat wal;
  if (::stat((path + kWalSuffix).c_str(), &wal) == 0 && wal.st_size > 0) return use_sql("a -wal file is beside it");
  if (schema.root_page == 0) return use_sql("no root page in the schema");
  if (schema.without_rowid) return use_sql("a WITHOUT ROWID table");
  if (schema.indexes > 0) return use_sql("a table with an index");
  s->root_ = schema.root_page;

  int pk_columns = 0;
  for (const SqliteTableSchema::Column& c : schema.columns) {
    if (c.hidden) return use_sql("a generated or hidden column");
    pk_columns += c.primary_key;
  }
  for (const std::string& want : columns) {
    int idx = -1;
    bool rowid = false;
    for (size_t i = 0; i < schema.columns.size(); ++i) {
      const SqliteTableSchema::Column& c = schema.columns[i];
      if (want.empty() || c.name != want) continue;
      if (c.has_default) return use_sql("column " + want + " has a DEFAULT");
      // SQLite reads an integer stored in a REAL column as a REAL (and the other affinities
      // are no promise of integers): only INTEGER affinity reads as the file says.
      if (AffinityOfDeclaredType(c.declared_type) != SqliteAffinity::kInteger)
        return use_sql(fmt::format("column {} is declared '{}', without INTEGER affinity", want, c.declared_type));
      idx = static_cast<int>(i);
      // INTEGER PRIMARY KEY: the rowid itself ("INTEGER PRIMARY KEY DESC" is not an alias, a
      // quirk SQLite keeps, but it has an index: left to SQL above).
      rowid = c.primary_key && Upper(c.declared_type) == "INTEGER" && pk_columns == 1;
      break;
    }
    s->col_index_.push_back(rowid ? -1 : idx);
    s->col_rowid_.push_back(rowid);
    if (!rowid) s->max_index_ = std::max(s->max_index_, idx);
  }
  if (s->max_index_ >= kMaxColumns) return use_sql(fmt::format("a column past the {}th", kMaxColumns));
  s->values_.assign(columns.size(), 0);
  s->kinds_.assign(columns.size(), kNull);

  s->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // a link to an export is fine: SQLite followed it too
  if (s->fd_ < 0) return MakeError(StatusCode::kIo, "cannot open {}: {}", path, std::strerror(errno));
  struct stat st;
  if (::fstat(s->fd_, &st) != 0 || !S_ISREG(st.st_mode)) return use_sql("not a regular file");
  s->file_size_ = static_cast<uint64_t>(st.st_size);
  uint8_t h[kFileHeaderBytes];
  if (s->file_size_ < sizeof h || ::pread(s->fd_, h, sizeof h, 0) != static_cast<ssize_t>(sizeof h))
    return s->Corrupt(1, "file shorter than its header");
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0) return s->Corrupt(1, "not a SQLite file");
  uint32_t ps = Be16(h + kPageSizeAt);
  if (ps == kPageSizeCodeFor64K) ps = kMaxPageSize;
  if (ps < kMinPageSize || ps > kMaxPageSize || (ps & (ps - 1))) return s->Corrupt(1, "bad page size");
  s->page_size_ = ps;
  s->usable_ = ps - h[kReservedBytesAt];
  if (s->usable_ < kMinUsableSize) return s->Corrupt(1, "bad reserved space");
  uint64_t pages = s->file_size_ / ps;
  if (pages > UINT32_MAX) pages = UINT32_MAX;
  s->page_count_ = static_cast<uint32_t>(pages);
  if (s->root_ > s->page_count_) return s->Corrupt(s->root_, "root page past the end of the file");
  // One bit per page, zeroed by calloc: for a large file the system's fresh pages, which take
  // memory only where pages are reached.
  s->reached_.reset(static_cast<uint64_t*>(std::calloc(s->page_count_ / 64 + 1, sizeof(uint64_t))));
  if (!s->reached_) return use_sql("no memory for the page bitmap");
  s->block_.resize(std::max<size_t>(kBlockBytes, ps));
  return s;
}

Status SqliteTableScan::Reach(uint32_t pgno, std::string_view what) {
  if (pgno < 1 || pgno > page_count_) return Corrupt(pgno, fmt::format("{} page number out of range", what));
  uint64_t& word = reached_[pgno / 64];
  const uint64_t bit = uint64_t{1} << (pgno % 64);
  if (word & bit) return Corrupt(pgno, fmt::format("{} page reached twice (a loop, or a page shared)", what));
  word |= bit;
  return OkStatus();
}

StatusOr<const uint8_t*> SqliteTableScan::Page(uint32_t pgno) {
  if (pgno < 1 || pgno > page_count_) return Corrupt(pgno, "page number out of range");
  uint64_t off = uint64_t{pgno - 1} * page_size_;
  if (off < block_off_ || off + page_size_ > block_off_ + block_len_) {
    // A new block from this page on (leaves of a table written in order are consecutive).
    uint64_t want = std::min<uint64_t>(block_.size(), file_size_ - off);
    want -= want % page_size_;
    size_t got = 0;
    while (got < want) {
      ssize_t n = ::pread(fd_, block_.data() + got, want - got, static_cast<off_t>(off + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return MakeError(StatusCode::kIo, "reading table {}: {}", table_, std::strerror(errno));
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    if (got < page_size_) return Corrupt(pgno, "the file ends inside it (truncated while read?)");
    block_off_ = off;
    block_len_ = got - got % page_size_;
  }
  return block_.data() + (off - block_off_);
}

StatusOr<const uint8_t*> SqliteTableScan::OverflowPage(uint32_t pgno) {
  const uint64_t off = uint64_t{pgno - 1} * page_size_;  // pgno checked by Reach
  if (off >= block_off_ && off + page_size_ <= block_off_ + block_len_) return block_.data() + (off - block_off_);
  overflow_page_.resize(page_size_);
  size_t got = 0;
  while (got < page_size_) {
    ssize_t n = ::pread(fd_, overflow_page_.data() + got, page_size_ - got, static_cast<off_t>(off + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MakeError(StatusCode::kIo, "reading table {}: {}", table_, std::strerror(errno));
    if (n == 0) return Corrupt(pgno, "the file ends inside it (truncated while read?)");
    got += static_cast<size_t>(n);
  }
  return overflow_page_.data();
}

// Child `cell` of an interior page: cell i's left pointer, or the right-most pointer after
// the last cell.
StatusOr<uint32_t> SqliteTableScan::ChildOf(const Frame& f, int cell) const {
  const uint32_t hdr_off = f.pgno == 1 ? kFileHeaderBytes : 0;
  const uint8_t* th = f.page.data() + hdr_off;
  if (cell == f.ncells) return Be32(th + kRightMostPointerAt);
  const uint32_t off = Be16(th + kInteriorHeaderBytes + 2 * static_cast<uint32_t>(cell));
  // A cell lies after the cell pointer array and inside the usable part of the page.
  if (off < hdr_off + kInteriorHeaderBytes + 2 * static_cast<uint32_t>(f.ncells) ||
      off + kChildPointerBytes > usable_)
    return Corrupt(f.pgno, "cell offset past the page");
  return Be32(f.page.data() + off);
}

StatusOr<int64_t> SqliteTableScan::KeyOf(const Frame& f, int cell) const {
  const uint32_t hdr_off = f.pgno == 1 ? kFileHeaderBytes : 0;
  const uint32_t off = Be16(f.page.data() + hdr_off + kInteriorHeaderBytes + 2 * static_cast<uint32_t>(cell));
  const uint8_t* k = f.page.data() + off + kChildPointerBytes;  // off checked when the page was read
  uint64_t key;
  if (!Varint(k, f.page.data() + usable_, &key)) return Corrupt(f.pgno, "cell key past the page");
  return static_cast<int64_t>(key);
}

// As quick_check: in order, a row's rowid is above every key before it; an interior key is
// at least the last rowid of the child before it (below every key after it).
Status SqliteTableScan::Key(uint32_t pgno, int64_t key, bool may_equal) {
  if (have_key_ && (may_equal ? key < last_key_ : key <= last_key_)) return Corrupt(pgno, "rowids out of order");
  have_key_ = true;
  last_key_ = key;
  return OkStatus();
}

Status SqliteTableScan::CheckSpace(const uint8_t* page, uint32_t pgno, uint64_t cell_bytes) const {
  const uint32_t hdr_off = pgno == 1 ? kFileHeaderBytes : 0;
  const uint8_t* hdr = page + hdr_off;
  const uint32_t header = hdr[0] == kInteriorTable ? kInteriorHeaderBytes : kLeafHeaderBytes;
  uint32_t content = Be16(hdr + kContentStartAt);
  if (content == 0) content = kMaxPageSize;
  if (content < hdr_off + header + 2 * Be16(hdr + kCellCountAt) || content > usable_)
    return Corrupt(pgno, "cell content area outside the page");
  // Free blocks: in increasing order, inside the content area, apart.
  uint64_t free_bytes = 0;
  for (uint32_t fb = Be16(hdr + kFirstFreeblockAt), low = content; fb != 0;) {
    if (fb < low || fb + kFreeblockHeaderBytes > usable_) return Corrupt(pgno, "free block outside the page");
    const uint32_t size = Be16(page + fb + 2);
    if (size < kFreeblockHeaderBytes || fb + size > usable_) return Corrupt(pgno, "free block outside the page");
    free_bytes += size;
    low = fb + size;
    fb = Be16(page + fb);
  }
  if (cell_bytes + free_bytes + hdr[kFragmentedBytesAt] != usable_ - content)
    return Corrupt(pgno, fmt::format("cells of {} bytes, free blocks of {} and {} fragmented bytes in a content area "
                                     "of {} (a cell count or pointer damaged?)",
                                     cell_bytes, free_bytes, hdr[kFragmentedBytesAt], usable_ - content));
  return OkStatus();
}

// Pushes the interior pages from pgno down and loads the leftmost leaf below them.
Status SqliteTableScan::Descend(uint32_t pgno) {
  for (;;) {
    OVERLAPPROF_RETURN_IF_ERROR(Reach(pgno, "tree"));
    OVERLAPPROF_ASSIGN_OR_RETURN(const uint8_t* p, Page(pgno));
    const uint32_t hdr_off = pgno == 1 ? kFileHeaderBytes : 0;
    const uint8_t* hdr = p + hdr_off;
    const uint8_t type = hdr[0];
    const int ncells = static_cast<int>(Be16(hdr + kCellCountAt));
    const uint32_t hsize = type == kInteriorTable ? kInteriorHeaderBytes : kLeafHeaderBytes;
    if (type != kInteriorTable && type != kLeafTable) return Corrupt(pgno, fmt::format("page type {:#x} in a table tree", type));
    if (hdr_off + hsize + 2 * static_cast<uint32_t>(ncells) > usable_) return Corrupt(pgno, "cell count past the page");
    if (type == kLeafTable) {
      if (leaf_depth_ == 0) leaf_depth_ = stack_.size() + 1;
      if (stack_.size() + 1 != leaf_depth_) return Corrupt(pgno, "leaves at different depths");
      leaf_page_ = p;  // in the block buffer: valid until the next Page() call
      leaf_pgno_ = pgno;
      leaf_cell_ = 0;
      leaf_ncells_ = ncells;
      leaf_bytes_ = 0;
      leaf_content_ = Be16(hdr + kContentStartAt);
      if (leaf_content_ == 0) leaf_content_ = kMaxPageSize;
      if (ncells == 0) return CheckSpace(p, pgno, 0);
      return OkStatus();
    }
    if (stack_.size() >= kMaxDepth) return Corrupt(pgno, "tree deeper than any real one");
    Frame f;
    f.page.assign(p, p + page_size_);
    f.pgno = pgno;
    f.ncells = ncells;
    // The cells' sizes: a child page number and a key varint each.
    uint64_t cell_bytes = 0;
    for (int i = 0; i < ncells; ++i) {
      const uint32_t off = Be16(hdr + kInteriorHeaderBytes + 2 * static_cast<uint32_t>(i));
      if (off < hdr_off + kInteriorHeaderBytes + 2 * static_cast<uint32_t>(ncells) || off + kChildPointerBytes > usable_)
        return Corrupt(pgno, "cell offset past the page");
      const uint8_t* k = p + off + kChildPointerBytes;
      uint64_t key;
      if (!Varint(k, p + usable_, &key)) return Corrupt(pgno, "cell key past the page");
      cell_bytes += static_cast<uint64_t>(k - (p + off));
    }
    OVERLAPPROF_RETURN_IF_ERROR(CheckSpace(p, pgno, cell_bytes));
    stack_.push_back(std::move(f));
    // The leftmost child: cell 0's left pointer, or the right-most pointer when no cells.
    Frame& top = stack_.back();
    OVERLAPPROF_ASSIGN_OR_RETURN(pgno, ChildOf(top, 0));
    top.cell = 1;  // next: cell 1's child, or the right-most one (none after it when no cells)
  }
}

StatusOr<const uint8_t*> SqliteTableScan::Overflowed(const uint8_t* local, uint64_t local_size, uint64_t payload,
                                                     uint32_t first_overflow, uint32_t pgno) {
  // payload <= kMaxRowPayload (DecodeCell) and local_size < payload: no overflow below.
  const uint64_t per_page = usable_ - kOverflowNextBytes;
  const uint64_t pages = (payload - local_size + per_page - 1) / per_page;
  payload_.resize(payload);
  std::memcpy(payload_.data(), local, local_size);
  uint64_t have = local_size;
  uint32_t next = first_overflow;
  for (uint64_t i = 0; i < pages; ++i) {
    if (next == 0) return Corrupt(pgno, "overflow chain ends before its payload");
    OVERLAPPROF_RETURN_IF_ERROR(Reach(next, "overflow"));
    OVERLAPPROF_ASSIGN_OR_RETURN(const uint8_t* p, OverflowPage(next));
    const uint64_t take = std::min(per_page, payload - have);
    std::memcpy(payload_.data() + have, p + kOverflowNextBytes, take);
    have += take;
    next = Be32(p);
  }
  // As quick_check: a chain holds exactly its payload's pages.
  if (next != 0) return Corrupt(pgno, "overflow chain goes on past its payload");
  return payload_.data();
}

// Reads a record's header (h: past its size varint) into types_, offsets_ and ntypes_: the
// serial types of columns 0..max_index_ (fewer in a row written before a column was added:
// those read as NULL, no DEFAULT here, checked in Open), all of them summed. The header ends
// where its last type ends, and the sizes add up to the body.
Status SqliteTableScan::ParseHeader(const uint8_t* rec, const uint8_t* h, uint64_t hsize, uint64_t payload,
                                    uint32_t pgno) {
  header_bytes_ = SIZE_MAX;  // no row's types until these check out
  // The body is at most kMaxRowPayload bytes: a larger value size is damage at once, so the
  // sum of the sizes (pos) cannot overflow.
  const uint64_t body_bytes = payload - hsize;
  const uint8_t* hend = rec + hsize;
  int n = 0;
  const int want = max_index_ + 1;
  uint64_t pos = 0;
  while (n < want && h < hend) {
    uint64_t t = *h;
    if (t < 0x80) {
      ++h;  // the common one-byte serial type
    } else if (!Varint(h, hend, &t)) {
      return Corrupt(pgno, "a serial type runs past the record header");
    }
    if (t == kReservedSerialType10 || t == kReservedSerialType11) return Corrupt(pgno, "reserved serial type");
    if (SerialSize(t) > body_bytes) return Corrupt(pgno, "a value larger than its record");
    types_[n] = t;
    offsets_[n] = pos;
    pos += SerialSize(t);
    ++n;
  }
  // The other types are only summed: as the row before when they are the same bytes (rows of
  // a table mostly are), else each.
  const size_t tail = static_cast<size_t>(hend - h);
  const bool same_tail = tail == tail_bytes_ && SameBytes(h, tail_.data(), tail);
  if (same_tail) {
    pos += tail_sum_;
  } else {
    const uint8_t* const tail_begin = h;
    uint64_t sum = 0;
    for (;;) {
      uint64_t w;
      while (hend - h >= 8 && (std::memcpy(&w, h, 8), (w & kHighBits) == 0)) {  // eight one-byte types
        sum += kOneByteSizes.size[h[0]] + kOneByteSizes.size[h[1]] + kOneByteSizes.size[h[2]] +
               kOneByteSizes.size[h[3]] + kOneByteSizes.size[h[4]] + kOneByteSizes.size[h[5]] +
               kOneByteSizes.size[h[6]] + kOneByteSizes.size[h[7]];
        h += 8;
      }
      if (h >= hend) break;
      if (*h < 0x80) {
        sum += kOneByteSizes.size[*h++];
        continue;
      }
      uint64_t t;
      if (!Varint(h, hend, &t)) return Corrupt(pgno, "a serial type runs past the record header");
      if (t == kReservedSerialType10 || t == kReservedSerialType11) return Corrupt(pgno, "reserved serial type");
      if (SerialSize(t) > body_bytes) return Corrupt(pgno, "a value larger than its record");
      sum += SerialSize(t);
    }
    pos += sum;
    if (pos == body_bytes && tail <= tail_.size()) {  // a sum that checked out, of at most kMaxRowPayload
      std::memcpy(tail_.data(), tail_begin, tail);
      tail_bytes_ = tail;
      tail_sum_ = sum;
    }
  }
  if (pos != body_bytes)
    return Corrupt(pgno, fmt::format("record of {} header and {} body bytes whose serial types take {}", hsize,
                                     body_bytes, pos));
  ntypes_ = n;
  if (hsize <= header_.size()) {  // the row after with the same header has the same types
    std::memcpy(header_.data(), rec, hsize);
    header_bytes_ = hsize;
    header_payload_ = payload;
  } else {
    header_bytes_ = SIZE_MAX;
  }
  return OkStatus();
}

Status SqliteTableScan::DecodeCell(const uint8_t* page, uint32_t pgno, int cell) {
  const uint32_t hdr_off = pgno == 1 ? kFileHeaderBytes : 0;
  const uint8_t* end = page + usable_;
  const uint32_t off = Be16(page + hdr_off + kLeafHeaderBytes + 2 * static_cast<uint32_t>(cell));
  // A cell lies after the cell pointer array and inside the usable part of the page.
  if (off < leaf_content_ || off >= usable_) return Corrupt(pgno, "cell offset past the page");
  const uint8_t* c = page + off;
  uint64_t payload, rowid;
  if (!Varint(c, end, &payload) || !Varint(c, end, &rowid)) return Corrupt(pgno, "cell header past the page");
  if (payload > kMaxRowPayload)
    return Corrupt(pgno, fmt::format("a row of {} bytes (more than {})", payload, kMaxRowPayload));
  // Local part (fileformat2 "Cell Payload Overflow Pages", table leaf).
  const uint64_t max_local = MaxLocal(usable_);
  const uint8_t* rec = c;
  if (payload > max_local) {
    const uint64_t min_local = MinLocal(usable_);
    const uint64_t k = min_local + ((payload - min_local) % (usable_ - kOverflowNextBytes));
    const uint64_t local = k <= max_local ? k : min_local;
    if (static_cast<uint64_t>(end - c) < local + kOverflowNextBytes) return Corrupt(pgno, "cell past the page");
    leaf_bytes_ += static_cast<uint64_t>(c - (page + off)) + local + kOverflowNextBytes;
    // Overflow pages are read beside the block buffer: the leaf stays where it is.
    OVERLAPPROF_ASSIGN_OR_RETURN(rec, Overflowed(c, local, payload, Be32(c + local), pgno));
  } else if (static_cast<uint64_t>(end - c) < payload) {
    return Corrupt(pgno, "cell past the page");
  } else {
    leaf_bytes_ += std::max<uint64_t>(static_cast<uint64_t>(c - (page + off)) + payload, kMinCellBytes);
  }
  // Rowids strictly increase along the leaves: a page reached twice, or out of order, is
  // damage (what PRAGMA quick_check would say), not rows to count twice.
  OVERLAPPROF_RETURN_IF_ERROR(Key(pgno, static_cast<int64_t>(rowid), /*may_equal=*/false));
  const uint8_t* rend = rec + payload;
  const uint8_t* h = rec;
  uint64_t hsize;
  if (!Varint(h, rend, &hsize) || hsize > payload || hsize < static_cast<uint64_t>(h - rec))
    return Corrupt(pgno, "record header");
  // The serial types: those of columns 0..max_index_ kept (fewer in a row written before a
  // column was added: those read as NULL, no DEFAULT here, checked in Open), all of them
  // summed. The header ends where its last type ends, and the sizes add up to the body. A
  // row whose header and payload size are the row before's has its types and offsets.
  if (!(hsize == header_bytes_ && payload == header_payload_ && SameBytes(rec, header_.data(), hsize))) {
    OVERLAPPROF_RETURN_IF_ERROR(ParseHeader(rec, h, hsize, payload, pgno));
  }
  const uint8_t* body = rec + hsize;
  const uint64_t* types = types_;
  const uint64_t* offsets = offsets_;
  const int n = ntypes_;
  for (size_t i = 0; i < col_index_.size(); ++i) {
    if (col_rowid_[i] != 0) {
      values_[i] = static_cast<int64_t>(rowid);
      kinds_[i] = kInt;
      continue;
    }
    const int ci = col_index_[i];
    if (ci < 0 || ci >= n) {
      kinds_[i] = kNull;
      continue;
    }
    const uint64_t t = types[ci];
    const uint8_t* v = body + offsets[ci];
    switch (t) {
      case 0:
        kinds_[i] = kNull;
        break;
      case 1: case 2: case 3: case 4: case 5: case 6:
        values_[i] = IntOfType(v, t);
        kinds_[i] = kInt;
        break;
      case 8: case 9:
        values_[i] = static_cast<int64_t>(t - 8);
        kinds_[i] = kInt;
        break;
      default:  // 7 (REAL), text, blob
        kinds_[i] = kOther;
        break;
    }
  }
  return OkStatus();
}

StatusOr<bool> SqliteTableScan::Next() {
  if (done_) return false;
  if (!started_) {
    started_ = true;
    OVERLAPPROF_RETURN_IF_ERROR(Descend(root_));
  }
  while (leaf_cell_ >= leaf_ncells_) {
    // Up to the nearest interior page with a child left, then down its leftmost path.
    for (;;) {
      if (stack_.empty()) {
        done_ = true;
        return false;
      }
      Frame& f = stack_.back();
      if (f.cell > f.ncells) {
        stack_.pop_back();
        continue;
      }
      OVERLAPPROF_ASSIGN_OR_RETURN(uint32_t child, ChildOf(f, f.cell));
      if (f.cell > 0) {  // the key between the child before and this one
        OVERLAPPROF_ASSIGN_OR_RETURN(int64_t key, KeyOf(f, f.cell - 1));
        OVERLAPPROF_RETURN_IF_ERROR(Key(f.pgno, key, /*may_equal=*/true));
      }
      ++f.cell;
      OVERLAPPROF_RETURN_IF_ERROR(Descend(child));
      break;
    }
  }
  OVERLAPPROF_RETURN_IF_ERROR(DecodeCell(leaf_page_, leaf_pgno_, leaf_cell_));
  if (++leaf_cell_ == leaf_ncells_) OVERLAPPROF_RETURN_IF_ERROR(CheckSpace(leaf_page_, leaf_pgno_, leaf_bytes_));
  return true;
}

}  // namespace overlapprof
