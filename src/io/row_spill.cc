#include "src/io/row_spill.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace overlapprof {
namespace {

// Writes v as LEB128 at p (at most 10 bytes); returns the end.
inline uint8_t* PutVarint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

uint64_t ZigZag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

}  // namespace

StatusOr<std::unique_ptr<RowSpill>> RowSpill::Create(const std::string& dir, int ncols, size_t nkeys) {
  if (ncols < 1 || ncols > 64) return MakeError(StatusCode::kInternal, "RowSpill: {} columns", ncols);
  std::unique_ptr<RowSpill> s(new RowSpill());
  s->ncols_ = ncols;
  s->pending_.resize(nkeys);
  s->chunks_.resize(nkeys);
#ifdef O_TMPFILE
  s->fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
  if (s->fd_ < 0) {  // no O_TMPFILE on this file system: a named file, unlinked at once
    std::string tmpl = dir + "/overlapprof-spill-XXXXXX";
    s->fd_ = ::mkostemp(tmpl.data(), O_CLOEXEC);
    if (s->fd_ < 0) return MakeError(StatusCode::kIo, "cannot create a temporary file in {}: {}", dir, std::strerror(errno));
    ::unlink(tmpl.c_str());
  }
  return s;
}

RowSpill::~RowSpill() {
  if (fd_ >= 0) ::close(fd_);
}

Status RowSpill::Append(size_t key, const SqliteTableScan& scan) {
  if (key >= pending_.size()) return MakeError(StatusCode::kInternal, "RowSpill: key {} of {}", key, pending_.size());
  Pending& out = pending_[key];
  if (!out.data) out.data.reset(new uint8_t[kChunkBytes + MaxRowBytes()]);
  uint8_t* p = out.data.get() + out.len;
  // Kinds, two bits per column.
  for (int c = 0; c < ncols_; c += 4) {
    uint8_t b = 0;
    for (int j = 0; j < 4 && c + j < ncols_; ++j) b |= static_cast<uint8_t>(scan.kind(c + j)) << (2 * j);
    *p++ = b;
  }
  for (int c = 0; c < ncols_; ++c)
    if (scan.IsInt(c)) p = PutVarint(p, ZigZag(scan.Int(c)));
  out.len = static_cast<size_t>(p - out.data.get());
  if (out.len >= kChunkBytes) return Flush(key);
  return OkStatus();
}

Status RowSpill::Flush(size_t key) {
  Pending& out = pending_[key];
  if (out.len == 0) return OkStatus();
  size_t done = 0;
  while (done < out.len) {
    ssize_t n = ::pwrite(fd_, out.data.get() + done, out.len - done, static_cast<off_t>(file_end_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return MakeError(StatusCode::kIo, "writing a temporary file: {}", std::strerror(n < 0 ? errno : ENOSPC));
    done += static_cast<size_t>(n);
  }
  chunks_[key].push_back({file_end_, static_cast<uint32_t>(out.len)});
  file_end_ += out.len;
  out.len = 0;
  return OkStatus();
}

Status RowSpill::Finish() {
  for (size_t k = 0; k < pending_.size(); ++k) {
    OVERLAPPROF_RETURN_IF_ERROR(Flush(k));
    pending_[k].data.reset();
  }
  return OkStatus();
}

RowSpill::Reader RowSpill::Read(size_t key) const {
  Reader r;
  r.spill_ = this;
  r.key_ = key;
  r.kinds_.assign(static_cast<size_t>(ncols_), SqliteTableScan::kNull);
  r.values_.assign(static_cast<size_t>(ncols_), 0);
  return r;
}

StatusOr<bool> RowSpill::Reader::Next() {
  if (key_ >= spill_->chunks_.size()) return false;  // a key never appended to
  const std::vector<Chunk>& chunks = spill_->chunks_[key_];
  if (pos_ >= buf_.size()) {
    if (chunk_ >= chunks.size()) return false;
    const Chunk& c = chunks[chunk_++];
    buf_.resize(c.bytes);
    size_t got = 0;
    while (got < c.bytes) {
      ssize_t n = ::pread(spill_->fd_, buf_.data() + got, c.bytes - got, static_cast<off_t>(c.offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return MakeError(StatusCode::kIo, "reading a temporary file: {}", n < 0 ? std::strerror(errno) : "short read");
      got += static_cast<size_t>(n);
    }
    pos_ = 0;
  }
  // Our own encoding, but still bounds-checked: a short chunk is an error, not a read past it.
  const uint8_t* p = buf_.data() + pos_;
  const uint8_t* end = buf_.data() + buf_.size();
  const int ncols = spill_->ncols_;
  const uint8_t* kinds = p;
  p += (ncols + 3) / 4;
  if (p > end) return MakeError(StatusCode::kInternal, "temporary file: a row past its chunk");
  for (int c = 0; c < ncols; ++c) {
    auto k = static_cast<SqliteTableScan::Kind>((kinds[c / 4] >> (2 * (c % 4))) & 3);
    kinds_[c] = k;
    if (k != SqliteTableScan::kInt) continue;
    if (p < end && *p < 0x80) {  // one byte: small values (ids, streams, kinds)
      values_[c] = UnZigZag(*p++);
      continue;
    }
    uint64_t v = 0;
    int shift = 0;
    for (;;) {
      if (p >= end || shift > 63) return MakeError(StatusCode::kInternal, "temporary file: a value past its chunk");
      uint8_t b = *p++;
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) break;
      shift += 7;
    }
    values_[c] = UnZigZag(v);
  }
  pos_ = static_cast<size_t>(p - buf_.data());
  return true;
}

}  // namespace overlapprof
