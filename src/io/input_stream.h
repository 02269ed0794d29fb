#pragma once
// Reading an input file as a stream of (decompressed) bytes, in memory that does not grow with
// the file. Gzip (recognized by its magic, not by name; several members concatenated
// as gzip writes them, zero padding after the last tolerated) is inflated with ISA-L's igzip
// (zlib where overlapprof is built without ISA-L: InflatesWithIsal) on a second thread into a
// bounded queue of blocks (kStreamBlocks x kStreamBlockBytes = 24 MiB), each checked as UTF-8
// there, that the caller's thread drains: copied out (Read), or lent where they lie (NextBlock);
// plain files are read with read(2) straight into the caller's buffer.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "src/common/status.h"

namespace overlapprof {

inline constexpr size_t kStreamBlockBytes = size_t{4} << 20;  // inflated bytes handed over at once
inline constexpr size_t kStreamBlocks = 6;                     // blocks in flight (the queue's bound, lent ones included)
inline constexpr size_t kStreamBlockFront = size_t{256} << 10;  // room before a lent block (NextBlock)

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Copies the next bytes into out[0, n) (n > 0) and returns how many: at least 1, 0 only at the
  // end of the stream. Errors: kIo, kCorrupt (bad or truncated gzip data, trailing garbage),
  // kInvalidInput (past the inflate limit); a stream that failed keeps failing. Not thread-safe:
  // one caller thread (the inflating thread, when there is one, is the stream's own business).
  virtual StatusOr<size_t> Read(char* out, size_t n) = 0;

  // Reading without a copy, from a stream that fills buffers of its own (the threaded gzip
  // stream; block_front() > 0): the next bytes where they lie, data[0, size), lent to the caller.
  // The caller holds the two blocks lent last: NextBlock takes back the one before the block it
  // lent last (so what points into a block may stay while the caller reads the next), and Read
  // the block lent last. The caller may write the block_front() bytes before data and the
  // kInputPadding + 1 bytes after data + size of the block lent last. size 0: the end of the
  // stream. The bytes are those Read would have returned next, when the last block was read to
  // its end (buffered() is 0); errors as Read's.
  struct Block {
    char* data = nullptr;
    size_t size = 0;
    // Every byte of the stream up to this block's last ASCII byte (a byte below 0x80) is valid
    // UTF-8 (checked by the stream's thread); false: not known.
    bool utf8_valid = false;
  };
  virtual size_t block_front() const { return 0; }  // 0: NextBlock is not offered
  virtual StatusOr<Block> NextBlock() { return MakeError(StatusCode::kInternal, "this stream lends no blocks"); }
  // Bytes of the current block that Read has not returned yet (0 at a block's end).
  virtual size_t buffered() const { return 0; }
  bool was_compressed() const { return compressed_; }
  // The stream's length in bytes when known before reading (a plain file or memory), else 0.
  // A hint for sizing buffers only: readers must not rely on it.
  uint64_t size_hint() const { return size_hint_; }
  // The stream's whole length as estimated from what has been read so far, for sizing buffers
  // only; 0 when unknown. A plain file: its size. The threaded gzip stream: the file's size times
  // the ratio of bytes inflated to bytes consumed up to the end of the block lent or read last.
  virtual uint64_t EstimatedSize() const { return size_hint_; }

 protected:
  bool compressed_ = false;
  uint64_t size_hint_ = 0;
};

struct StreamOptions {
  // Inflated bytes accepted from gzip input: past them the stream fails (kInvalidInput). Reading
  // does not hold the inflated bytes, so the default is no limit unless the environment variable
  // OVERLAPPROF_MAX_INFLATED_BYTES sets one (StreamInflateLimit()).
  uint64_t inflate_limit = UINT64_MAX;
  // A gzip bomb: once more than kInflateRatioFloor bytes are inflated, a stream that has inflated
  // more than this many times the compressed bytes it consumed fails (kInvalidInput). Deflate
  // reaches 1032:1 on one repeated byte; trace JSON compresses 10-30:1. UINT64_MAX: no limit.
  uint64_t inflate_ratio_limit = UINT64_MAX;
  // Inflate on a second thread (false: on the caller's, in Read).
  bool threaded = true;
  // Inflate with zlib even where overlapprof is built with ISA-L (tests compare the two).
  bool zlib_only = false;
};

// Whether gzip is inflated with ISA-L's igzip (found when overlapprof was configured), else zlib.
bool InflatesWithIsal();

// OVERLAPPROF_MAX_INFLATED_BYTES when set to a number, else UINT64_MAX. Read when called.
uint64_t StreamInflateLimit();
// Inflated bytes before the ratio limit applies (a small file of repeated text is no bomb).
inline constexpr uint64_t kInflateRatioFloor = uint64_t{256} << 20;
// OVERLAPPROF_MAX_INFLATE_RATIO when set to a number (0: no limit), else 200. Read when called.
uint64_t StreamInflateRatioLimit();

// Opens `path` (a regular file only: FIFOs and devices are refused at once, as ReadInputFile
// does). Errors: kNotFound, kIo, kInvalidInput (empty file, not a regular file). Messages do not
// include the path.
StatusOr<std::unique_ptr<ByteStream>> OpenInputStream(const std::string& path, const StreamOptions& options);
inline StatusOr<std::unique_ptr<ByteStream>> OpenInputStream(const std::string& path) {
  StreamOptions o;
  o.inflate_limit = StreamInflateLimit();
  o.inflate_ratio_limit = StreamInflateRatioLimit();
  return OpenInputStream(path, o);
}

// A stream of bytes the caller keeps alive while it is read: plain, or gunzipped when they start
// with the gzip magic and `gunzip` is set (synchronously). Each Read returns at most `max_read`
// bytes (tests force reads of a few bytes with it).
// `lend_front` > 0: the stream also lends blocks (NextBlock) of `max_read` bytes with that much room
// before them, as the threaded gzip stream does with its blocks (tests of readers that use both).
std::unique_ptr<ByteStream> MemoryStream(std::string_view data, size_t max_read = SIZE_MAX, bool gunzip = false,
                                         uint64_t inflate_limit = UINT64_MAX, bool zlib_only = false,
                                         size_t lend_front = 0);

}  // namespace overlapprof
