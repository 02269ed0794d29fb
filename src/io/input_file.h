#pragma once
// Reading an input file whole into memory, decompressing gzip (by magic, not by name).
// The buffer keeps kPadding zero bytes after the data, as simdjson requires.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/status.h"

namespace overlapprof {

inline constexpr size_t kInputPadding = 64;  // >= SIMDJSON_PADDING

// Large input buffers are mmap'ed with MADV_HUGEPAGE (2 MiB pages: ~500 times fewer
// page faults while the document is written); small ones come from the heap.
struct InputBufferFree {
  size_t mapped = 0;  // bytes mapped with mmap, 0 for heap memory
  void operator()(char* p) const;
};

class InputBuffer {
 public:
  InputBuffer() = default;
  const char* data() const { return data_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }  // size() + padding
  std::string_view view() const { return {data_.get(), size_}; }
  bool was_compressed() const { return was_compressed_; }
  size_t compressed_size() const { return compressed_size_; }

  // Makes room for `size` bytes plus padding (zeroed padding) and sets size(). Reuses
  // the current allocation when it is large enough (its pages are already resident),
  // otherwise allocates with 25% headroom. Contents are undefined until written, except
  // that a reuse keeps the first `keep` bytes.
  void Allocate(size_t size, size_t keep = 0);
  char* mutable_data() { return data_.get(); }
  void set_size(size_t size) { size_ = size; }
  void set_compressed(size_t compressed_size) {
    was_compressed_ = true;
    compressed_size_ = compressed_size;
  }

 private:
  std::unique_ptr<char[], InputBufferFree> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
  bool was_compressed_ = false;
  size_t compressed_size_ = 0;
};

// Opens `path` for reading (O_CLOEXEC; a FIFO is refused at once, never waited on) and refuses
// anything but a regular file; *fd gets a descriptor the caller closes, *size the file's size.
// Errors as ReadInputFile's. (src/io/input_stream.cc reads through it.)
Status OpenRegularFile(const std::string& path, int* fd, uint64_t* size);

// First bytes of a file, for format detection without reading it all.
StatusOr<std::string> ReadFileHead(const std::string& path, size_t n);

// Reads `path` whole; gunzips it if it starts with the gzip magic (several gzip members
// are concatenated, as gzip does). Errors: kNotFound, kIo, kCorrupt (truncated or bad
// gzip), kInvalidInput (empty file). Messages do not include the path (callers prefix).
StatusOr<InputBuffer> ReadInputFile(const std::string& path);
// The same into buffers the caller keeps from one file to the next (`compressed` holds
// the gzip bytes meanwhile).
Status ReadInputFileInto(const std::string& path, InputBuffer& out, std::vector<uint8_t>& compressed);

// The largest document overlapprof parses in one piece: simdjson's maximum (4 GiB - 1).
inline constexpr size_t kMaxDocumentBytes = 0xFFFFFFFFu;

// The most bytes gzip input may inflate to: the smaller of kMaxDocumentBytes and half the
// memory available (MemAvailable, or the cgroup v2 limit's room when tighter), lowered further
// by the environment variable OVERLAPPROF_MAX_INFLATED_BYTES. Read when called.
size_t InflateLimit();

// Decompresses gzip data held in memory (exposed for tests and the fuzzer). Inflating past
// `limit` bytes is refused (kInvalidInput) with peak memory bounded: when the gzip trailer's
// size cannot be trusted the members are first inflated without being kept (64 KiB of
// scratch) to learn their size, so a bomb costs its compressed size, not its inflated one.
StatusOr<InputBuffer> GunzipBuffer(const uint8_t* data, size_t size, size_t limit = InflateLimit());
Status GunzipInto(const uint8_t* data, size_t size, InputBuffer& out, size_t limit = InflateLimit());

bool IsGzip(std::string_view head);
bool IsSqlite(std::string_view head);
// PRAGMA application_id of a SQLite file from its header (bytes 68..71, big-endian); 0 when
// `head` is shorter.
uint32_t SqliteApplicationId(std::string_view head);

}  // namespace overlapprof
