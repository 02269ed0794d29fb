// Streaming input (src/io/input_stream.h): plain files by read(2), gzip by ISA-L's igzip (zlib
// where overlapprof is built without ISA-L), on a second thread feeding a bounded queue of blocks.
#include "src/io/input_stream.h"

#include <fcntl.h>
#include <simdjson.h>
#include <unistd.h>
#include <zlib.h>
#if defined(OVERLAPPROF_HAVE_ISAL)
#include <isa-l/igzip_lib.h>
#endif

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "src/io/input_file.h"

namespace overlapprof {

uint64_t StreamInflateLimit() {
  if (const char* env = std::getenv("OVERLAPPROF_MAX_INFLATED_BYTES")) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0') return static_cast<uint64_t>(v);
  }
  return UINT64_MAX;
}

uint64_t StreamInflateRatioLimit() {
  if (const char* env = std::getenv("OVERLAPPROF_MAX_INFLATE_RATIO")) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0') return v == 0 ? UINT64_MAX : static_cast<uint64_t>(v);
  }
  return 200;
}

bool InflatesWithIsal() {
#if defined(OVERLAPPROF_HAVE_ISAL)
  return true;
#else
  return false;
#endif
}

namespace {

// The stream's bytes checked as UTF-8 block by block (Block::utf8_valid): each block up to its
// last ASCII byte, with the bytes the block before left after its own (copied: that block may be
// the reader's by then). No sequence spans an ASCII byte, so the pieces are whole.
class Utf8Blocks {
 public:
  // The block that follows those added before: whether everything up to its last ASCII byte is valid.
  bool Add(const char* p, size_t n) {
    if (!ok_) return false;
    size_t last = n;  // just past the last ASCII byte
    while (last > 0 && static_cast<unsigned char>(p[last - 1]) >= 0x80) --last;
    if (last == 0) {  // no ASCII byte: kept for the next block (within bounds)
      tail_.append(p, n);
      if (tail_.size() > (size_t{64} << 10)) ok_ = false;
      return false;
    }
    size_t first = 0;  // the first ASCII byte
    while (static_cast<unsigned char>(p[first]) >= 0x80) ++first;
    if (!tail_.empty() || first > 0) {
      tail_.append(p, first);
      ok_ = simdjson::validate_utf8(tail_.data(), tail_.size());
    }
    ok_ = ok_ && simdjson::validate_utf8(p + first, last - first);
    tail_.assign(p + last, n - last);
    return ok_;
  }

 private:
  bool ok_ = true;
  std::string tail_;  // the bytes after the last block's last ASCII byte
};

// Where compressed (or plain) bytes come from: a file descriptor (owned) or memory.
class Source {
 public:
  explicit Source(int fd) : fd_(fd) {}
  explicit Source(std::string_view mem) : mem_(mem), all_(mem) {}
  // Back to the first byte (to read the data again); false when that fails.
  bool Rewind() {
    if (fd_ < 0) {
      mem_ = all_;
      return true;
    }
    return ::lseek(fd_, 0, SEEK_SET) == 0;
  }
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  ~Source() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Up to n bytes (at least 1, 0 at the end).
  StatusOr<size_t> Read(char* out, size_t n) {
    if (fd_ < 0) {
      const size_t k = std::min(n, mem_.size());
      std::memcpy(out, mem_.data(), k);
      mem_.remove_prefix(k);
      return k;
    }
    for (;;) {
      ssize_t r = ::read(fd_, out, n);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {  // opened O_NONBLOCK (regular files never block; be safe)
        ::usleep(1000);
        continue;
      }
      return MakeError(StatusCode::kIo, "read failed: {}", std::strerror(errno));
    }
  }

 private:
  int fd_ = -1;
  std::string_view mem_, all_;
};

// A plain file or memory, read as it is.
class PlainStream : public ByteStream {
 public:
  PlainStream(std::unique_ptr<Source> src, size_t max_read, uint64_t size)
      : src_(std::move(src)), max_read_(max_read) {
    size_hint_ = size;
  }
  StatusOr<size_t> Read(char* out, size_t n) override { return src_->Read(out, std::min(n, max_read_)); }

 private:
  std::unique_ptr<Source> src_;
  size_t max_read_;
};

// Inflate of concatenated gzip members, pulled in pieces: with ISA-L's igzip (about 2.8 times
// zlib's speed, docs/performance.md) where overlapprof is built with it and `zlib_only` is not
// set, else with zlib. Both check each member's CRC-32 and length (ISIZE). Mirrors CountInflated
// (input_file.cc): the same member, padding and garbage rules, the same messages. Errors in the
// data are worded as zlib words them: where igzip fails (corrupt or truncated data), the stream
// is inflated again from its start with zlib alone, output dropped, to the error zlib reports.
class Inflater {
 public:
  Inflater(std::unique_ptr<Source> src, uint64_t limit, uint64_t ratio_limit, bool zlib_only)
      : owned_(std::move(src)), src_(owned_.get()), limit_(limit), ratio_limit_(ratio_limit), in_(new Bytef[kInBytes]) {
#if defined(OVERLAPPROF_HAVE_ISAL)
    if (!zlib_only) isal_ = std::make_unique<inflate_state>();
#else
    (void)zlib_only;
#endif
  }
  ~Inflater() {
    if (zinit_) inflateEnd(&z_);
  }

  // Fills out[0, n) as far as the data goes: returns n, or less only at the end (0: ended).
  StatusOr<size_t> Inflate(char* out, size_t n) {
    if (!error_.ok()) return error_;
    size_t produced = 0;
    while (produced < n && !ended_) {
      Status st = Step(out + produced, n - produced, &produced);
      if (!st.ok()) {
        error_ = st;
        return st;
      }
    }
    return produced;
  }

 private:
  // A zlib inflater over the same source, borrowed (Diagnose).
  Inflater(Source* src, uint64_t limit, uint64_t ratio_limit)
      : src_(src), limit_(limit), ratio_limit_(ratio_limit), in_(new Bytef[kInBytes]) {}

  Status Refill() {
    OVERLAPPROF_ASSIGN_OR_RETURN(size_t r, src_->Read(reinterpret_cast<char*>(in_.get()), kInBytes));
    if (r == 0) {
      in_eof_ = true;
      return OkStatus();
    }
    next_in_ = in_.get();
    avail_in_ = r;
    handed_ += r;
    return OkStatus();
  }

 public:
  size_t Consumed() const { return handed_ - avail_in_; }  // compressed bytes consumed

 private:

  Status Step(char* out, size_t n, size_t* produced) {
    if (!started_) {
      started_ = true;
      OVERLAPPROF_RETURN_IF_ERROR(StartMember());
    }
    if (avail_in_ == 0 && !in_eof_) OVERLAPPROF_RETURN_IF_ERROR(Refill());
    if (between_members_) {
      // After a member: another member, zero padding to the end, or garbage.
      if (avail_in_ == 0) {
        ended_ = true;  // in_eof_
        return OkStatus();
      }
      const uint8_t b = *next_in_;
      if (b == 0x1f && !in_padding_) {
        // A member's first byte; a wrong second byte is reported by zlib (as corrupt data).
        between_members_ = false;
        return StartMember();
      }
      if (b != 0)
        return MakeError(StatusCode::kCorrupt, "trailing garbage after gzip data at byte {}",
                         in_padding_ ? padding_from_ : Consumed());
      if (!in_padding_) {
        in_padding_ = true;
        padding_from_ = Consumed();
      }
      while (avail_in_ > 0 && *next_in_ == 0) {
        ++next_in_;
        --avail_in_;
      }
      return OkStatus();
    }
#if defined(OVERLAPPROF_HAVE_ISAL)
    if (isal_) return StepIsal(out, n, produced);
#endif
    z_.next_in = const_cast<Bytef*>(next_in_);
    z_.avail_in = static_cast<uInt>(std::min<size_t>(avail_in_, UINT32_MAX));
    z_.next_out = reinterpret_cast<Bytef*>(out);
    z_.avail_out = static_cast<uInt>(std::min<size_t>(n, UINT32_MAX));
    const uInt before = z_.avail_out, before_in = z_.avail_in;
    const int rc = inflate(&z_, Z_NO_FLUSH);
    next_in_ = z_.next_in;
    avail_in_ -= before_in - z_.avail_in;
    OVERLAPPROF_RETURN_IF_ERROR(Produced(before - z_.avail_out, produced));
    if (rc == Z_STREAM_END) {
      between_members_ = true;
      return OkStatus();
    }
    if (rc == Z_OK) return OkStatus();
    if (rc == Z_BUF_ERROR) {
      if (avail_in_ == 0 && in_eof_)
        return MakeError(StatusCode::kCorrupt, "truncated gzip data (the stream ends inside a member)");
      return OkStatus();  // needs more input (refilled on the next step) or more room
    }
    return MakeError(StatusCode::kCorrupt, "truncated or corrupt gzip data (zlib: {} near compressed byte {})",
                     z_.msg ? z_.msg : "bad data", Consumed());
  }

  Status StartMember() {
#if defined(OVERLAPPROF_HAVE_ISAL)
    if (isal_) {
      isal_inflate_init(isal_.get());  // the state is reset whole for each member
      isal_->crc_flag = ISAL_GZIP;      // parse the gzip header, check the trailer's CRC-32 and ISIZE
      flags_at_ = Consumed() + 3;       // the header's FLG byte, checked in StepIsal
      return OkStatus();
    }
#endif
    if (!zinit_) {
      if (inflateInit2(&z_, 15 + 16) != Z_OK) return MakeError(StatusCode::kInternal, "inflateInit2 failed");
      zinit_ = true;
    } else {
      inflateReset(&z_);
    }
    return OkStatus();
  }

  // got more bytes out: counted against the limits (the total, and the ratio past its floor).
  Status Produced(size_t got, size_t* produced) {
    *produced += got;
    total_ += got;
    if (total_ > limit_)
      return MakeError(StatusCode::kInvalidInput,
                       "gzip data inflates to more than {} MiB, the limit set by OVERLAPPROF_MAX_INFLATED_BYTES",
                       limit_ >> 20);
    if (total_ > kInflateRatioFloor && total_ / std::max<uint64_t>(1, Consumed()) >= ratio_limit_)
      return MakeError(StatusCode::kInvalidInput,
                       "gzip data inflates to {} or more times its compressed size ({} MiB from {} KiB so far; trace "
                       "JSON compresses 10-30 times): a gzip bomb? refused (OVERLAPPROF_MAX_INFLATE_RATIO raises the "
                       "limit)",
                       ratio_limit_, total_ >> 20, Consumed() >> 10);
    return OkStatus();
  }

#if defined(OVERLAPPROF_HAVE_ISAL)
  Status StepIsal(char* out, size_t n, size_t* produced) {
    // igzip ignores the reserved bits of a member's FLG byte; zlib refuses them.
    if (flags_at_ != SIZE_MAX && flags_at_ < Consumed() + avail_in_) {
      if (next_in_[flags_at_ - Consumed()] & 0xe0) return Diagnose(ISAL_INVALID_WRAPPER);
      flags_at_ = SIZE_MAX;
    }
    inflate_state& s = *isal_;
    s.next_in = const_cast<uint8_t*>(next_in_);
    s.avail_in = static_cast<uint32_t>(std::min<size_t>(avail_in_, UINT32_MAX));
    s.next_out = reinterpret_cast<uint8_t*>(out);
    s.avail_out = static_cast<uint32_t>(std::min<size_t>(n, UINT32_MAX));
    const uint32_t before = s.avail_out, before_in = s.avail_in;
    const int rc = isal_inflate(&s);
    next_in_ = s.next_in;
    avail_in_ -= before_in - s.avail_in;
    const size_t got = before - s.avail_out;
    OVERLAPPROF_RETURN_IF_ERROR(Produced(got, produced));
    if (rc != ISAL_DECOMP_OK) return Diagnose(rc);
    if (s.block_state == ISAL_BLOCK_FINISH) {
      between_members_ = true;
      return OkStatus();
    }
    if (got == 0 && s.avail_in == before_in) {  // no progress: the data ends inside the member
      if (avail_in_ == 0 && !in_eof_) return OkStatus();
      return Diagnose(rc);
    }
    return OkStatus();
  }

  // igzip failed: the error zlib reports for the whole stream, inflated again from its start
  // (what a build without ISA-L says); igzip's own words where zlib finds nothing wrong.
  Status Diagnose(int rc) {
    if (src_->Rewind()) {
      Inflater z(src_, limit_, ratio_limit_);
      std::vector<char> scratch(size_t{64} << 10);
      for (;;) {
        StatusOr<size_t> got = z.Inflate(scratch.data(), scratch.size());
        if (!got.ok()) return got.status();
        if (*got < scratch.size()) break;
      }
    }
    if (rc == ISAL_DECOMP_OK) return MakeError(StatusCode::kCorrupt, "truncated gzip data (the stream ends inside a member)");
    const char* what = rc == ISAL_INVALID_BLOCK        ? "invalid block"
                       : rc == ISAL_INVALID_SYMBOL     ? "invalid symbol"
                       : rc == ISAL_INVALID_LOOKBACK   ? "invalid distance"
                       : rc == ISAL_INVALID_WRAPPER    ? "invalid gzip header"
                       : rc == ISAL_UNSUPPORTED_METHOD ? "unknown compression method"
                       : rc == ISAL_INCORRECT_CHECKSUM ? "incorrect check"
                                                       : "bad data";
    return MakeError(StatusCode::kCorrupt, "truncated or corrupt gzip data (igzip: {} near compressed byte {})", what,
                     Consumed());
  }

  std::unique_ptr<inflate_state> isal_;  // null: zlib
  size_t flags_at_ = SIZE_MAX;            // compressed offset of the member's FLG byte, until checked
#endif

  static constexpr size_t kInBytes = size_t{1} << 20;  // compressed bytes read at once
  std::unique_ptr<Source> owned_;
  Source* src_;
  uint64_t limit_, ratio_limit_;
  std::unique_ptr<Bytef[]> in_;
  const Bytef* next_in_ = nullptr;
  size_t avail_in_ = 0;
  z_stream z_{};
  bool zinit_ = false, started_ = false, in_eof_ = false, ended_ = false, between_members_ = false,
       in_padding_ = false;
  size_t handed_ = 0, padding_from_ = 0;
  uint64_t total_ = 0;
  Status error_;
};

// Inflates on the caller's thread.
class GzipStream : public ByteStream {
 public:
  GzipStream(std::unique_ptr<Source> src, uint64_t limit, uint64_t ratio_limit, size_t max_read, bool zlib_only)
      : inflater_(std::move(src), limit, ratio_limit, zlib_only), max_read_(max_read) {
    compressed_ = true;
  }
  StatusOr<size_t> Read(char* out, size_t n) override { return inflater_.Inflate(out, std::min(n, max_read_)); }

 private:
  Inflater inflater_;
  size_t max_read_;
};

// Inflates on its own thread into up to kStreamBlocks blocks of kStreamBlockBytes; Read copies
// out of the oldest. Locking: mu_ guards full_, free_, ended_, stop_ and error_; the block being
// filled belongs to the thread, the block being read (cur_) to the caller.
class ThreadedGzipStream : public ByteStream {
 public:
  // file_size: the compressed file's (EstimatedSize).
  ThreadedGzipStream(std::unique_ptr<Source> src, uint64_t limit, uint64_t ratio_limit, bool zlib_only,
                     uint64_t file_size)
      : inflater_(std::move(src), limit, ratio_limit, zlib_only), file_size_(file_size) {
    compressed_ = true;
    for (size_t i = 0; i < kStreamBlocks; ++i) free_.push_back(nullptr);  // allocated when first filled
  }
  // Starts the thread; false when it cannot be started (the caller inflates synchronously).
  bool Start() {
    try {
      thread_ = std::thread([this] { Produce(); });
    } catch (const std::system_error&) {
      return false;
    }
    return true;
  }
  ~ThreadedGzipStream() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  StatusOr<size_t> Read(char* out, size_t n) override {
    if (cur_pos_ == cur_.size) {
      OVERLAPPROF_RETURN_IF_ERROR(Advance(false));
      if (cur_.size == 0) return size_t{0};
    }
    const size_t k = std::min(n, cur_.size - cur_pos_);
    std::memcpy(out, cur_.data.get() + kStreamBlockFront + cur_pos_, k);
    cur_pos_ += k;
    return k;
  }

  size_t block_front() const override { return kStreamBlockFront; }
  StatusOr<ByteStream::Block> NextBlock() override {
    OVERLAPPROF_RETURN_IF_ERROR(Advance(true));
    cur_pos_ = cur_.size;  // Read goes on with the block after it
    if (cur_.size == 0) return ByteStream::Block{};
    return ByteStream::Block{cur_.data.get() + kStreamBlockFront, cur_.size, cur_.utf8_valid};
  }
  size_t buffered() const override { return cur_.size - cur_pos_; }
  uint64_t EstimatedSize() const override {
    if (cur_.in_end == 0) return 0;
    return static_cast<uint64_t>(static_cast<double>(file_size_) * static_cast<double>(cur_.out_end) /
                                 static_cast<double>(cur_.in_end));
  }

 private:
  struct Block {
    std::unique_ptr<char[]> data;  // kStreamBlockFront bytes, the block's, kInputPadding + 1
    size_t size = 0;
    bool utf8_valid = false;
    uint64_t out_end = 0, in_end = 0;  // bytes inflated up to its end, and compressed bytes consumed for them
  };

  // Gives a block back to the thread (the current one, or with keep the one before it, the
  // current one kept as prev_) and waits for the next (size 0: the end).
  Status Advance(bool keep) {
    std::unique_lock<std::mutex> lock(mu_);
    Block& back = keep ? prev_ : cur_;
    if (back.data) {
      free_.push_back(std::move(back.data));
      cv_.notify_all();
    }
    if (keep) prev_ = std::move(cur_);
    cur_ = Block{};
    cur_pos_ = 0;
    cv_.wait(lock, [&] { return !full_.empty() || ended_; });
    if (full_.empty()) return error_;
    cur_ = std::move(full_.front());
    full_.pop_front();
    return OkStatus();
  }

  void Produce() {
    for (;;) {
      std::unique_ptr<char[]> buf;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !free_.empty(); });
        if (stop_) return;
        buf = std::move(free_.back());
        free_.pop_back();
      }
      if (!buf) buf.reset(new char[kStreamBlockFront + kStreamBlockBytes + kInputPadding + 1]);
      StatusOr<size_t> got = inflater_.Inflate(buf.get() + kStreamBlockFront, kStreamBlockBytes);
      // Checked here, off the reader's thread (the reader checks what is not known valid).
      const bool utf8 = got.ok() && *got > 0 && utf8_.Add(buf.get() + kStreamBlockFront, *got);
      std::lock_guard<std::mutex> lock(mu_);
      if (!got.ok() || *got == 0) {
        if (!got.ok()) error_ = got.status();
        ended_ = true;
        cv_.notify_all();
        return;
      }
      out_total_ += *got;
      full_.push_back(Block{std::move(buf), *got, utf8, out_total_, inflater_.Consumed()});
      cv_.notify_all();
      if (*got < kStreamBlockBytes) {  // the end of the data
        ended_ = true;
        return;
      }
    }
  }

  Inflater inflater_;  // used by the thread only
  Utf8Blocks utf8_;    // used by the thread only
  uint64_t out_total_ = 0;  // bytes inflated (the thread's)
  const uint64_t file_size_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Block> full_;
  std::vector<std::unique_ptr<char[]>> free_;
  bool ended_ = false, stop_ = false;
  Status error_;
  Block cur_, prev_;  // the block read or lent last, the one lent before it (NextBlock)
  size_t cur_pos_ = 0;
};

// Another stream's bytes, also lent in blocks of `block` bytes with `front` bytes of room before
// them (MemoryStream's lend_front: tests of readers that take blocks).
class LendingStream : public ByteStream {
 public:
  LendingStream(std::unique_ptr<ByteStream> in, size_t block, size_t front)
      : in_(std::move(in)), block_(std::min<size_t>(block, size_t{1} << 20)), front_(front),
        mem_{std::unique_ptr<char[]>(new char[front + block_ + kInputPadding + 1]),
             std::unique_ptr<char[]>(new char[front + block_ + kInputPadding + 1])} {
    compressed_ = in_->was_compressed();
    size_hint_ = in_->size_hint();
  }
  StatusOr<size_t> Read(char* out, size_t n) override {
    read_since_ = true;  // blocks after bytes read without a check are not known valid
    if (pos_ < size_) {  // what is left of the last block lent
      const size_t k = std::min(n, size_ - pos_);
      std::memcpy(out, mem_[cur_].get() + front_ + pos_, k);
      pos_ += k;
      return k;
    }
    return in_->Read(out, std::min(n, block_));
  }
  size_t block_front() const override { return front_; }
  StatusOr<Block> NextBlock() override {
    cur_ ^= 1;  // the other buffer: the block lent before the last one is taken back
    char* const data = mem_[cur_].get() + front_;
    std::memset(mem_[cur_].get(), 0x55, front_ + block_);  // what was there before is gone
    size_ = pos_ = 0;
    while (size_ < block_) {  // one Read may return less than a block
      OVERLAPPROF_ASSIGN_OR_RETURN(size_t got, in_->Read(data + size_, block_ - size_));
      if (got == 0) break;
      size_ += got;
    }
    std::memset(data + size_, 0x55, kInputPadding + 1);
    pos_ = size_;
    const bool utf8 = size_ > 0 && !read_since_ && utf8_.Add(data, size_);
    return Block{data, size_, utf8};
  }
  size_t buffered() const override { return size_ - pos_; }
  uint64_t EstimatedSize() const override { return in_->EstimatedSize(); }

 private:
  std::unique_ptr<ByteStream> in_;
  size_t block_, front_;
  std::unique_ptr<char[]> mem_[2];  // the two blocks lent last, alternately
  int cur_ = 0;                     // mem_[cur_]: the block lent last
  size_t size_ = 0, pos_ = 0;
  Utf8Blocks utf8_;
  bool read_since_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<ByteStream>> OpenInputStream(const std::string& path, const StreamOptions& options) {
  int fd = -1;
  uint64_t size = 0;
  OVERLAPPROF_RETURN_IF_ERROR(OpenRegularFile(path, &fd, &size));
  auto src = std::make_unique<Source>(fd);
  if (size == 0) return MakeError(StatusCode::kInvalidInput, "empty file");
  // Regular files never block: back to blocking mode (O_NONBLOCK only kept FIFOs from hanging open).
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  char head[2] = {0, 0};
  ssize_t r = ::pread(fd, head, 2, 0);
  if (r < 0) return MakeError(StatusCode::kIo, "read failed: {}", std::strerror(errno));
  if (!IsGzip(std::string_view(head, static_cast<size_t>(r))))
    return std::unique_ptr<ByteStream>(std::make_unique<PlainStream>(std::move(src), SIZE_MAX, size));
  if (options.threaded) {
    auto t = std::make_unique<ThreadedGzipStream>(std::move(src), options.inflate_limit, options.inflate_ratio_limit,
                                                  options.zlib_only, size);
    if (t->Start()) return std::unique_ptr<ByteStream>(std::move(t));
    // No thread: reopen and inflate on the caller's thread.
    OVERLAPPROF_RETURN_IF_ERROR(OpenRegularFile(path, &fd, &size));
    src = std::make_unique<Source>(fd);
  }
  return std::unique_ptr<ByteStream>(
      std::make_unique<GzipStream>(std::move(src), options.inflate_limit, options.inflate_ratio_limit, SIZE_MAX,
                                   options.zlib_only));
}

std::unique_ptr<ByteStream> MemoryStream(std::string_view data, size_t max_read, bool gunzip, uint64_t inflate_limit,
                                         bool zlib_only, size_t lend_front) {
  max_read = std::max<size_t>(max_read, 1);
  auto src = std::make_unique<Source>(data);
  std::unique_ptr<ByteStream> s;
  if (gunzip && IsGzip(data.substr(0, 2)))
    s = std::make_unique<GzipStream>(std::move(src), inflate_limit, UINT64_MAX, max_read, zlib_only);
  else
    s = std::make_unique<PlainStream>(std::move(src), max_read, data.size());
  if (lend_front > 0) s = std::make_unique<LendingStream>(std::move(s), max_read, lend_front);
  return s;
}

}  // namespace overlapprof
