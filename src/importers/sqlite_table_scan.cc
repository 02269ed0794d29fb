#include "src/importers/sqlite_table_scan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "src/store/sqlite_util.h"

namespace overlapprof {
namespace {

constexpr size_t kBlockBytes = size_t{256} << 10;  // ~L2-sized: rows are decoded just after the copy
constexpr size_t kMaxDepth = 40;  // a table B-tree of 2^32 pages is < 20 levels deep
constexpr uint8_t kInteriorTable = 0x05, kLeafTable = 0x0D;

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

// Bytes of a value of serial type t.
inline uint64_t SerialSize(uint64_t t) {
  static constexpr uint8_t kFixed[12] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 0, 0};
  return t < 12 ? kFixed[t] : (t - 12) / 2;
}

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

}  // namespace

SqliteTableScan::~SqliteTableScan() {
  if (fd_ >= 0) ::close(fd_);
}

Status SqliteTableScan::Corrupt(uint32_t pgno, std::string_view what) const {
  return MakeError(StatusCode::kCorrupt, "table {} page {}: {}", table_, pgno, what);
}

StatusOr<std::unique_ptr<SqliteTableScan>> SqliteTableScan::Open(sqlite3* db, const std::string& path,
                                                                  std::string_view table,
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
  if (::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0) return use_sql("a -wal file is beside it");

  // Root page, and the columns (declared order = record order for a rowid table).
  {
    Stmt q;
    OVERLAPPROF_RETURN_IF_ERROR(q.Prepare(db, "SELECT rootpage, sql FROM sqlite_schema WHERE type='table' AND name=?1"));
    q.Bind(1, table);
    OVERLAPPROF_ASSIGN_OR_RETURN(bool row, q.Step("table root page"));
    if (!row || q.IsNull(0)) return use_sql("no root page in the schema");
    int64_t root = q.Int(0);
    if (root < 1 || root > UINT32_MAX) return use_sql("root page out of range");
    s->root_ = static_cast<uint32_t>(root);
    std::string sql(q.Text(1));
    std::transform(sql.begin(), sql.end(), sql.begin(), [](unsigned char c) { return std::toupper(c); });
    // pragma_table_list says it (SQLite >= 3.37); else the text, where a comment could only
    // send the table to SQL needlessly.
    Stmt wr;
    bool without_rowid = sql.find("WITHOUT ROWID") != std::string::npos;
    if (wr.Prepare(db, "SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?1").ok()) {
      wr.Bind(1, table);
      StatusOr<bool> r = wr.Step("table list");
      if (r.ok() && *r) without_rowid = wr.Int(0) != 0;
    }
    if (without_rowid) return use_sql("a WITHOUT ROWID table");
  }
  struct Col {
    std::string name;
    bool int_pk;
    bool has_default;
  };
  std::vector<Col> cols;
  int pk_columns = 0;
  {
    Stmt q;
    // table_xinfo: generated columns too (hidden 2 and 3), whose presence in the record
    // differs by kind; such a table is left to SQL.
    OVERLAPPROF_RETURN_IF_ERROR(q.Prepare(
        db, "SELECT name, upper(type), pk, dflt_value IS NOT NULL, hidden FROM pragma_table_xinfo(?1)"));
    q.Bind(1, table);
    while (true) {
      OVERLAPPROF_ASSIGN_OR_RETURN(bool row, q.Step("table columns"));
      if (!row) break;
      if (q.Int(4) != 0) return use_sql("a generated or hidden column");
      bool pk = q.Int(2) > 0;
      pk_columns += pk;
      cols.push_back({std::string(q.Text(0)), pk && q.Text(1) == "INTEGER", q.Int(3) != 0});
    }
  }
  bool pk_index = false;  // the primary key is an index (origin 'pk'), not the rowid
  {
    Stmt q;
    OVERLAPPROF_RETURN_IF_ERROR(q.Prepare(db, "SELECT count(*) FROM pragma_index_list(?1) WHERE origin = 'pk'"));
    q.Bind(1, table);
    OVERLAPPROF_ASSIGN_OR_RETURN(bool row, q.Step("table indexes"));
    pk_index = row && q.Int(0) > 0;
  }
  for (const std::string& want : columns) {
    int idx = -1;
    bool rowid = false;
    for (size_t i = 0; i < cols.size(); ++i) {
      if (want.empty() || cols[i].name != want) continue;
      if (cols[i].has_default) return use_sql("column " + want + " has a DEFAULT");
      idx = static_cast<int>(i);
      // INTEGER PRIMARY KEY: the rowid itself, unless the key has an index of its own
      // ("INTEGER PRIMARY KEY DESC" is not an alias, a quirk SQLite keeps).
      rowid = cols[i].int_pk && pk_columns == 1 && !pk_index;
      break;
    }
    s->col_index_.push_back(rowid ? -1 : idx);
    s->col_rowid_.push_back(rowid);
    if (!rowid) s->max_index_ = std::max(s->max_index_, idx);
  }
  if (s->max_index_ >= 64) return use_sql("a column past the 64th");
  s->values_.assign(columns.size(), 0);
  s->kinds_.assign(columns.size(), kNull);

  s->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // a link to an export is fine: SQLite followed it too
  if (s->fd_ < 0) return MakeError(StatusCode::kIo, "cannot open {}: {}", path, std::strerror(errno));
  struct stat st;
  if (::fstat(s->fd_, &st) != 0 || !S_ISREG(st.st_mode)) return use_sql("not a regular file");
  s->file_size_ = static_cast<uint64_t>(st.st_size);
  uint8_t h[100];
  if (s->file_size_ < sizeof h || ::pread(s->fd_, h, sizeof h, 0) != static_cast<ssize_t>(sizeof h))
    return s->Corrupt(1, "file shorter than its header");
  if (std::memcmp(h, "SQLite format 3", 16) != 0) return s->Corrupt(1, "not a SQLite file");
  uint32_t ps = Be16(h + 16);
  if (ps == 1) ps = 65536;
  if (ps < 512 || ps > 65536 || (ps & (ps - 1))) return s->Corrupt(1, "bad page size");
  s->page_size_ = ps;
  s->usable_ = ps - h[20];
  if (s->usable_ < 480) return s->Corrupt(1, "bad reserved space");
  uint64_t pages = s->file_size_ / ps;
  if (pages > UINT32_MAX) pages = UINT32_MAX;
  s->page_count_ = static_cast<uint32_t>(pages);
  if (s->root_ > s->page_count_) return s->Corrupt(s->root_, "root page past the end of the file");
  s->block_.resize(std::max<size_t>(kBlockBytes, ps));
  return s;
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

// Pushes the interior pages from pgno down and loads the leftmost leaf below them.
Status SqliteTableScan::Descend(uint32_t pgno) {
  for (;;) {
    if (++pages_visited_ > page_count_) return Corrupt(pgno, "the tree visits more pages than the file has (a loop)");
    OVERLAPPROF_ASSIGN_OR_RETURN(const uint8_t* p, Page(pgno));
    const uint8_t* hdr = p + (pgno == 1 ? 100 : 0);
    const uint8_t type = hdr[0];
    const int ncells = static_cast<int>(Be16(hdr + 3));
    const size_t hsize = type == kInteriorTable ? 12 : 8;
    if (type != kInteriorTable && type != kLeafTable) return Corrupt(pgno, fmt::format("page type {:#x} in a table tree", type));
    if (static_cast<size_t>(hdr - p) + hsize + 2 * static_cast<size_t>(ncells) > usable_)
      return Corrupt(pgno, "cell count past the page");
    if (type == kLeafTable) {
      leaf_page_ = p;  // in the block buffer: valid until the next Page() call
      leaf_pgno_ = pgno;
      leaf_cell_ = 0;
      leaf_ncells_ = ncells;
      return OkStatus();
    }
    if (stack_.size() >= kMaxDepth) return Corrupt(pgno, "tree deeper than any real one");
    Frame f;
    f.page.assign(p, p + page_size_);
    f.pgno = pgno;
    f.ncells = ncells;
    f.cell = 0;
    stack_.push_back(std::move(f));
    // The leftmost child: cell 0's left pointer, or the right-most pointer when no cells.
    Frame& top = stack_.back();
    const uint8_t* th = top.page.data() + (pgno == 1 ? 100 : 0);
    uint32_t child;
    if (top.ncells == 0) {
      child = Be32(th + 8);
      top.cell = 1;  // nothing more at this level after the right-most child
    } else {
      uint32_t off = Be16(th + 12);
      if (off + 4 > usable_) return Corrupt(pgno, "cell offset past the page");
      child = Be32(top.page.data() + off);
      top.cell = 1;  // next: cell 1's child (or the right-most one)
    }
    pgno = child;
  }
}

StatusOr<const uint8_t*> SqliteTableScan::Overflowed(const uint8_t* local, uint64_t local_size, uint64_t payload,
                                                     uint32_t first_overflow, uint32_t pgno) {
  if (payload > (uint64_t{1} << 30)) return Corrupt(pgno, "a row of more than 1 GiB");
  payload_.assign(local, local + local_size);
  uint32_t next = first_overflow;
  uint64_t chain = 0;
  while (payload_.size() < payload) {
    if (next == 0 || ++chain > page_count_) return Corrupt(pgno, "overflow chain ends early or loops");
    OVERLAPPROF_ASSIGN_OR_RETURN(const uint8_t* p, Page(next));
    uint64_t take = std::min<uint64_t>(usable_ - 4, payload - payload_.size());
    payload_.insert(payload_.end(), p + 4, p + 4 + take);
    next = Be32(p);
  }
  return payload_.data();
}

Status SqliteTableScan::DecodeCell(const uint8_t* page, uint32_t pgno, int cell) {
  const uint8_t* hdr = page + (pgno == 1 ? 100 : 0);
  const uint8_t* end = page + usable_;
  uint32_t off = Be16(hdr + 8 + 2 * cell);
  // A cell lies after the cell pointer array and inside the usable part of the page.
  if (off < static_cast<uint32_t>(hdr - page) + 8 + 2 * static_cast<uint32_t>(leaf_ncells_) || off >= usable_)
    return Corrupt(pgno, "cell offset past the page");
  const uint8_t* c = page + off;
  uint64_t payload, rowid;
  if (!Varint(c, end, &payload) || !Varint(c, end, &rowid)) return Corrupt(pgno, "cell header past the page");
  // Local part (fileformat2 "Cell Payload Overflow Pages", table leaf).
  const uint64_t x = usable_ - 35;
  uint64_t local = payload;
  const uint8_t* rec = c;
  if (payload > x) {
    const uint64_t m = ((uint64_t{usable_} - 12) * 32 / 255) - 23;
    const uint64_t k = m + ((payload - m) % (usable_ - 4));
    local = k <= x ? k : m;
    if (static_cast<uint64_t>(end - c) < local + 4) return Corrupt(pgno, "cell past the page");
    // Reading the overflow pages moves the block buffer: the leaf is copied first, and its
    // next cells are read from the copy.
    if (page != leaf_copy_.data()) {
      leaf_copy_.assign(page, page + page_size_);
      c = leaf_copy_.data() + (c - page);
      page = leaf_page_ = leaf_copy_.data();
    }
    OVERLAPPROF_ASSIGN_OR_RETURN(rec, Overflowed(c, local, payload, Be32(c + local), pgno));
  } else if (static_cast<uint64_t>(end - c) < payload) {
    return Corrupt(pgno, "cell past the page");
  }
  // Rowids strictly increase along the leaves: a page reached twice, or out of order, is
  // damage (what PRAGMA quick_check would say), not rows to count twice.
  if (have_rowid_ && static_cast<int64_t>(rowid) <= last_rowid_) return Corrupt(pgno, "rowids out of order");
  have_rowid_ = true;
  last_rowid_ = static_cast<int64_t>(rowid);
  const uint8_t* rend = rec + payload;
  const uint8_t* h = rec;
  uint64_t hsize;
  if (!Varint(h, rend, &hsize) || hsize > payload || hsize < static_cast<uint64_t>(h - rec))
    return Corrupt(pgno, "record header");
  const uint8_t* hend = rec + hsize;
  const uint8_t* body = hend;
  // Serial types of columns 0..max_index_ (fewer in a row written before a column was added:
  // those read as NULL, no DEFAULT here, checked in Open).
  uint64_t types[64];
  uint64_t offsets[64];
  int n = 0;
  const int want = std::min(max_index_ + 1, 64);
  uint64_t pos = 0;
  while (n < want && h < hend) {
    uint64_t t = *h;
    if (t < 0x80) {
      ++h;  // the common one-byte serial type
    } else if (!Varint(h, hend, &t)) {
      return Corrupt(pgno, "record header");
    }
    if (t == 10 || t == 11) return Corrupt(pgno, "reserved serial type");
    types[n] = t;
    offsets[n] = pos;
    pos += SerialSize(t);
    ++n;
  }
  if (static_cast<uint64_t>(rend - body) < pos) return Corrupt(pgno, "record body shorter than its header says");
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
      const uint8_t* th = f.page.data() + (f.pgno == 1 ? 100 : 0);
      uint32_t child;
      if (f.cell == f.ncells) {
        child = Be32(th + 8);  // the right-most pointer
      } else {
        uint32_t off = Be16(th + 12 + 2 * f.cell);
        if (off + 4 > usable_) return Corrupt(f.pgno, "cell offset past the page");
        child = Be32(f.page.data() + off);
      }
      ++f.cell;
      OVERLAPPROF_RETURN_IF_ERROR(Descend(child));
      break;
    }
  }
  OVERLAPPROF_RETURN_IF_ERROR(DecodeCell(leaf_page_, leaf_pgno_, leaf_cell_));
  ++leaf_cell_;
  return true;
}

}  // namespace overlapprof
