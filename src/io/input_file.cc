#include "src/io/input_file.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace

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
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return OpenError(errno);
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return MakeError(StatusCode::kIo, "stat failed: {}", std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return MakeError(StatusCode::kInvalidInput, "is a directory");
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

Status GunzipInto(const uint8_t* in, size_t in_size, InputBuffer& out) {
  // Size hint: ISIZE (uncompressed size mod 2^32) of the last member. Wrong for members
  // over 4 GiB or for several members; then the buffer grows and the member is retried.
  size_t hint = in_size * 4;  // grows x2 when too small
  if (in_size >= 18) {
    uint32_t isize;
    std::memcpy(&isize, in + in_size - 4, 4);
    // Plausible only between "deflate rarely expands" and deflate's maximum ratio (~1032:1):
    // an input that claims more (a hostile ISIZE) starts small and grows as data arrives.
    if (isize >= in_size / 2 && isize <= in_size * 1032) hint = isize;
  }
  std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> dec(
      libdeflate_alloc_decompressor(), libdeflate_free_decompressor);
  if (!dec) return MakeError(StatusCode::kInternal, "libdeflate_alloc_decompressor failed");

  // Use what the buffer already has when it is larger (a reused buffer).
  size_t cap = std::max(hint + 1, out.capacity() > kInputPadding ? out.capacity() - kInputPadding : 0);
  out.Allocate(cap);
  size_t out_used = 0;
  size_t in_pos = 0;
  while (in_pos < in_size) {
    size_t in_used = 0, produced = 0;
    libdeflate_result r = libdeflate_gzip_decompress_ex(dec.get(), in + in_pos, in_size - in_pos,
                                                        out.mutable_data() + out_used, cap - out_used,
                                                        &in_used, &produced);
    if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
      // Grow (x2) and retry this member from its start.
      size_t new_cap = cap * 2;
      out.set_size(out_used);
      out.Allocate(new_cap, out_used);
      cap = new_cap;
      continue;
    }
    if (r != LIBDEFLATE_SUCCESS) {
      return MakeError(StatusCode::kCorrupt,
                       "truncated or corrupt gzip data (libdeflate: {} at compressed byte {})",
                       r == LIBDEFLATE_BAD_DATA ? "bad data" : "short output", in_pos);
    }
    out_used += produced;
    in_pos += in_used;
    // Tolerate zero padding after the last member (some writers pad to a block size).
    if (in_pos < in_size && !(in_size - in_pos >= 2 && in[in_pos] == 0x1f && in[in_pos + 1] == 0x8b)) {
      bool all_zero = true;
      for (size_t i = in_pos; i < in_size; ++i) all_zero &= in[i] == 0;
      if (all_zero) break;
      return MakeError(StatusCode::kCorrupt, "trailing garbage after gzip data at byte {}", in_pos);
    }
  }
  out.set_size(out_used);
  std::memset(out.mutable_data() + out_used, 0, kInputPadding);
  out.set_compressed(in_size);
  return OkStatus();
}

StatusOr<InputBuffer> GunzipBuffer(const uint8_t* in, size_t in_size) {
  InputBuffer out;
  OVERLAPPROF_RETURN_IF_ERROR(GunzipInto(in, in_size, out));
  return out;
}

Status ReadInputFileInto(const std::string& path, InputBuffer& out, std::vector<uint8_t>& compressed) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return OpenError(errno);
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return MakeError(StatusCode::kIo, "stat failed: {}", std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return MakeError(StatusCode::kInvalidInput, "is a directory");
  if (!S_ISREG(st.st_mode)) return MakeError(StatusCode::kInvalidInput, "not a regular file");
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
