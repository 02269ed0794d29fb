#include "src/io/input_file.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <zlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

namespace overlapprof {

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Status OpenError(int err) {
  if (err == ENOENT) return MakeError(StatusCode::kNotFound, "no such file");
  if (err == EISDIR) return MakeError(StatusCode::kInvalidInput, "is a directory");
  return MakeError(StatusCode::kIo, "cannot open: {}", std::strerror(err));
}

Status ReadAll(int fd, char* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::read(fd, out + done, n - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return MakeError(StatusCode::kIo, "read failed: {}", std::strerror(errno));
    }
    if (r == 0) return MakeError(StatusCode::kIo, "file shrank while being read");
    done += static_cast<size_t>(r);
  }
  return OkStatus();
}

const char* FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Opens `path` for reading without blocking (a FIFO without a writer would block open(2);
// O_NONBLOCK has no effect on regular files) and refuses anything but a regular file at once.
Status OpenRegular(const std::string& path, Fd& f, struct stat* out = nullptr) {
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) return OpenError(errno);
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return MakeError(StatusCode::kIo, "stat failed: {}", std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return MakeError(StatusCode::kInvalidInput, "is a directory");
  if (!S_ISREG(st.st_mode))
    return MakeError(StatusCode::kInvalidInput, "{}, not a regular file: refused", FileTypeName(st.st_mode));
  if (out) *out = st;
  return OkStatus();
}

}  // namespace

Status OpenRegularFile(const std::string& path, int* fd, uint64_t* size) {
  Fd f;
  struct stat st;
  OVERLAPPROF_RETURN_IF_ERROR(OpenRegular(path, f, &st));
  *size = static_cast<uint64_t>(st.st_size);
  *fd = f.fd;
  f.fd = -1;
  return OkStatus();
}

void InputBufferFree::operator()(char* p) const {
  if (mapped) ::munmap(p, mapped);
  else delete[] p;
}

void InputBuffer::Allocate(size_t size, size_t keep) {
  if (!data_ || capacity_ < size + kInputPadding) {
    size_t cap = size + size / 4 + kInputPadding;
    std::unique_ptr<char[], InputBufferFree> bigger;
    constexpr size_t kHuge = size_t{2} << 20;
    if (cap >= (size_t{64} << 20)) {
      cap = (cap + kHuge - 1) / kHuge * kHuge;
      void* m = ::mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) throw std::bad_alloc();
      ::madvise(m, cap, MADV_HUGEPAGE);  // advice only: no huge pages is fine too
      bigger = std::unique_ptr<char[], InputBufferFree>(static_cast<char*>(m), InputBufferFree{cap});
    } else {
      // new char[] without value-initialization: pages are not touched (no RSS) until written.
      bigger = std::unique_ptr<char[], InputBufferFree>(new char[cap], InputBufferFree{0});
    }
    if (keep > 0 && data_) std::memcpy(bigger.get(), data_.get(), std::min(keep, size_));
    data_ = std::move(bigger);
    capacity_ = cap;
  }
  size_ = size;
  std::memset(data_.get() + size, 0, kInputPadding);
  was_compressed_ = false;
  compressed_size_ = 0;
}

bool IsGzip(std::string_view head) {
  return head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
         static_cast<unsigned char>(head[1]) == 0x8b;
}

bool IsSqlite(std::string_view head) {
  static constexpr char kMagic[] = "SQLite format 3";  // 16 bytes with the NUL
  return head.size() >= 16 && std::memcmp(head.data(), kMagic, 16) == 0;
}

uint32_t SqliteApplicationId(std::string_view head) {
  if (head.size() < 72) return 0;
  uint32_t v = 0;
  for (size_t i = 68; i < 72; ++i) v = (v << 8) | static_cast<uint8_t>(head[i]);
  return v;
}

StatusOr<std::string> ReadFileHead(const std::string& path, size_t n) {
  Fd f;
  OVERLAPPROF_RETURN_IF_ERROR(OpenRegular(path, f));
  std::string head(n, '\0');
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::read(f.fd, head.data() + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return MakeError(StatusCode::kIo, "read failed: {}", std::strerror(errno));
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  head.resize(done);
  return head;
}

namespace {

// Bytes a process may still use: MemAvailable, less where a cgroup (v2) limit is tighter.
// 0 when unknown.
size_t AvailableMemory() {
  size_t avail = 0;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kb = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
        avail = static_cast<size_t>(kb) * 1024;
        break;
      }
    std::fclose(f);
  }
  auto read_u64 = [](const char* path, unsigned long long* v) {
    std::FILE* f = std::fopen(path, "r");
    if (!f) return false;
    bool ok = std::fscanf(f, "%llu", v) == 1;  // "max" (no limit) does not parse
    std::fclose(f);
    return ok;
  };
  unsigned long long max = 0, cur = 0;
  if (read_u64("/sys/fs/cgroup/memory.max", &max) && read_u64("/sys/fs/cgroup/memory.current", &cur)) {
    const size_t room = max > cur ? static_cast<size_t>(max - cur) : 0;
    avail = avail == 0 ? room : std::min(avail, room);
  }
  return avail;
}

Status TooLarge(size_t limit) {
  return MakeError(StatusCode::kInvalidInput,
                   "gzip data inflates to more than {} MiB, the limit on this machine (the smaller of 4 GiB, the JSON "
                   "parser's maximum, and half the available memory, {} MiB; OVERLAPPROF_MAX_INFLATED_BYTES lowers it)",
                   limit >> 20, AvailableMemory() >> 20);
}

// Inflated size of every member (zlib, streaming through 64 KiB, nothing kept), stopping as
// soon as it passes `limit`: what a gzip bomb costs is its compressed size, not its inflated one.
StatusOr<size_t> CountInflated(const uint8_t* in, size_t in_size, size_t limit) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return MakeError(StatusCode::kInternal, "inflateInit2 failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  std::vector<unsigned char> scratch(size_t{1} << 16);
  size_t handed = 0, total = 0;  // bytes of `in` given to zlib so far; bytes inflated
  bool out_full = false;         // the last call filled the scratch: zlib may hold more output
  for (;;) {
    if (z.avail_in == 0 && !out_full) {
      if (handed >= in_size)
        return MakeError(StatusCode::kCorrupt, "truncated gzip data (the stream ends inside a member)");
      z.next_in = const_cast<Bytef*>(in + handed);
      z.avail_in = static_cast<uInt>(std::min<size_t>(in_size - handed, UINT32_MAX));
      handed += z.avail_in;
    }
    z.next_out = scratch.data();
    z.avail_out = static_cast<uInt>(scratch.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    total += scratch.size() - z.avail_out;
    out_full = z.avail_out == 0;
    if (total > limit) return TooLarge(limit);
    if (rc == Z_OK || (rc == Z_BUF_ERROR && z.avail_in == 0)) continue;
    const size_t pos = handed - z.avail_in;  // the first byte not consumed
    if (rc != Z_STREAM_END)
      return MakeError(StatusCode::kCorrupt, "truncated or corrupt gzip data (zlib: {} near compressed byte {})",
                       z.msg ? z.msg : "bad data", pos);
    if (pos == in_size) break;
    // Another member, zero padding, or garbage.
    if (!(in_size - pos >= 2 && in[pos] == 0x1f && in[pos + 1] == 0x8b)) {
      for (size_t i = pos; i < in_size; ++i)
        if (in[i] != 0) return MakeError(StatusCode::kCorrupt, "trailing garbage after gzip data at byte {}", pos);
      break;
    }
    inflateReset(&z);
    out_full = false;
  }
  return total;
}

// libdeflate (one shot per member, fast) into out[0, cap). kInsufficientSpace-like result:
// returns false in *fits when cap was too small.
Status DeflateMembers(libdeflate_decompressor* dec, const uint8_t* in, size_t in_size, InputBuffer& out, size_t cap,
                      size_t* out_used, bool* fits) {
  *out_used = 0;
  *fits = true;
  size_t in_pos = 0;
  while (in_pos < in_size) {
    size_t in_used = 0, produced = 0;
    libdeflate_result r = libdeflate_gzip_decompress_ex(dec, in + in_pos, in_size - in_pos,
                                                        out.mutable_data() + *out_used, cap - *out_used, &in_used,
                                                        &produced);
    if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
      *fits = false;
      return OkStatus();
    }
    if (r != LIBDEFLATE_SUCCESS) {
      return MakeError(StatusCode::kCorrupt,
                       "truncated or corrupt gzip data (libdeflate: {} at compressed byte {})",
                       r == LIBDEFLATE_BAD_DATA ? "bad data" : "short output", in_pos);
    }
    *out_used += produced;
    in_pos += in_used;
    // Tolerate zero padding after the last member (some writers pad to a block size).
    if (in_pos < in_size && !(in_size - in_pos >= 2 && in[in_pos] == 0x1f && in[in_pos + 1] == 0x8b)) {
      bool all_zero = true;
      for (size_t i = in_pos; i < in_size; ++i) all_zero &= in[i] == 0;
      if (all_zero) break;
      return MakeError(StatusCode::kCorrupt, "trailing garbage after gzip data at byte {}", in_pos);
    }
  }
  return OkStatus();
}

}  // namespace

size_t InflateLimit() {
  size_t limit = kMaxDocumentBytes;
  if (size_t avail = AvailableMemory(); avail > 0) limit = std::min(limit, avail / 2);
  if (const char* env = std::getenv("OVERLAPPROF_MAX_INFLATED_BYTES")) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0') limit = std::min<size_t>(limit, static_cast<size_t>(v));
  }
  return limit;
}

Status GunzipInto(const uint8_t* in, size_t in_size, InputBuffer& out, size_t limit) {
  std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> dec(
      libdeflate_alloc_decompressor(), libdeflate_free_decompressor);
  if (!dec) return MakeError(StatusCode::kInternal, "libdeflate_alloc_decompressor failed");
  // Fast path: ISIZE (uncompressed size mod 2^32) of the last member, trusted as the size when
  // it is within the limit and at most kTrustedRatio times the compressed size (trace JSON
  // compresses 10-30:1; deflate's maximum is ~1032:1). It is exact for one member under
  // 4 GiB; a lie, several members or more data fail with "insufficient space", having
  // written at most ISIZE bytes, and take the slow path.
  constexpr size_t kTrustedRatio = 100;
  uint32_t isize = 0;
  if (in_size >= 18) std::memcpy(&isize, in + in_size - 4, 4);
  size_t used = 0;
  bool fits = false;
  if (in_size >= 18 && isize >= in_size / 2 && isize <= in_size * kTrustedRatio && isize <= limit) {
    // Use what the buffer already has when it is larger (a reused buffer).
    const size_t cap = std::max<size_t>(size_t{isize} + 1, out.capacity() > kInputPadding ? out.capacity() - kInputPadding : 0);
    out.Allocate(cap);
    OVERLAPPROF_RETURN_IF_ERROR(DeflateMembers(dec.get(), in, in_size, out, cap, &used, &fits));
    if (fits && used > limit) return TooLarge(limit);  // only with a reused buffer over the limit
  }
  if (!fits) {
    // Slow path: count first (bounded memory), then inflate into exactly that.
    OVERLAPPROF_ASSIGN_OR_RETURN(size_t total, CountInflated(in, in_size, limit));
    const size_t cap = std::max<size_t>(total + 1, out.capacity() > kInputPadding ? out.capacity() - kInputPadding : 0);
    out.Allocate(cap);
    OVERLAPPROF_RETURN_IF_ERROR(DeflateMembers(dec.get(), in, in_size, out, cap, &used, &fits));
    if (!fits || used != total)
      return MakeError(StatusCode::kCorrupt, "corrupt gzip data (inflated size changed between passes)");
  }
  out.set_size(used);
  std::memset(out.mutable_data() + used, 0, kInputPadding);
  out.set_compressed(in_size);
  return OkStatus();
}

StatusOr<InputBuffer> GunzipBuffer(const uint8_t* in, size_t in_size, size_t limit) {
  InputBuffer out;
  OVERLAPPROF_RETURN_IF_ERROR(GunzipInto(in, in_size, out, limit));
  return out;
}

Status ReadInputFileInto(const std::string& path, InputBuffer& out, std::vector<uint8_t>& compressed) {
  Fd f;
  struct stat st;
  OVERLAPPROF_RETURN_IF_ERROR(OpenRegular(path, f, &st));
  size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) return MakeError(StatusCode::kInvalidInput, "empty file");

  char head[2] = {0, 0};
  ssize_t r = ::pread(f.fd, head, 2, 0);
  if (r < 0) return MakeError(StatusCode::kIo, "read failed: {}", std::strerror(errno));
  if (IsGzip(std::string_view(head, static_cast<size_t>(r)))) {
    compressed.resize(size);
    OVERLAPPROF_RETURN_IF_ERROR(ReadAll(f.fd, reinterpret_cast<char*>(compressed.data()), size));
    OVERLAPPROF_RETURN_IF_ERROR(GunzipInto(compressed.data(), size, out));
    if (out.size() == 0) return MakeError(StatusCode::kInvalidInput, "empty file (gzip of nothing)");
    return OkStatus();
  }
  if (size > kMaxDocumentBytes)
    return MakeError(StatusCode::kInvalidInput, "JSON document too large for one parse ({} bytes; the limit is 4 GiB)",
                     size);
  out.Allocate(size);
  return ReadAll(f.fd, out.mutable_data(), size);
}

StatusOr<InputBuffer> ReadInputFile(const std::string& path) {
  InputBuffer out;
  std::vector<uint8_t> compressed;
  OVERLAPPROF_RETURN_IF_ERROR(ReadInputFileInto(path, out, compressed));
  return out;
}

}  // namespace overlapprof
