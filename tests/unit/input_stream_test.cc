// Gzip streams (src/io/input_stream.h): ISA-L's igzip, where overlapprof is built with it, inflates
// what zlib inflates and refuses what zlib refuses, with zlib's words (a corrupt stream is inflated
// again by zlib for its message): members, header fields, padding, garbage, every truncation and
// many corruptions of a stream, and input that crosses the 1 MiB reads.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <random>
#include <string>

#include "src/io/input_stream.h"
#include "test_util.h"

namespace overlapprof {
namespace {
using testing::Gzip;

// Everything a stream of `gz` gives, read `max_read` bytes at a time, or its error.
struct Out {
  std::string bytes;
  bool ok = true;
  StatusCode code = StatusCode::kOk;
  std::string message;
};
Out ReadAll(const std::string& gz, bool zlib_only, size_t max_read) {
  std::unique_ptr<ByteStream> in = MemoryStream(gz, max_read, /*gunzip=*/true, UINT64_MAX, zlib_only);
  Out o;
  std::string buf(std::min<size_t>(max_read, size_t{1} << 16), '\0');
  for (;;) {
    StatusOr<size_t> r = in->Read(buf.data(), buf.size());
    if (!r.ok()) {
      o.ok = false;
      o.code = r.status().code();
      o.message = r.status().message();
      return o;
    }
    if (*r == 0) return o;
    o.bytes.append(buf.data(), *r);
  }
}

void ExpectSame(const std::string& gz, size_t max_read, const std::string& what) {
  const Out igzip = ReadAll(gz, false, max_read), zlib = ReadAll(gz, true, max_read);
  ASSERT_EQ(igzip.ok, zlib.ok) << what << ": " << (igzip.ok ? zlib.message : igzip.message);
  EXPECT_EQ(igzip.code, zlib.code) << what;
  EXPECT_EQ(igzip.message, zlib.message) << what;
  if (igzip.ok) {
    EXPECT_TRUE(igzip.bytes == zlib.bytes) << what;
  }
}

// A member with header fields (extra, name, comment, header CRC), written by zlib.
std::string GzipWithHeader(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  gz_header h{};
  std::string extra = "ab\x02\x00xy", name = "trace.json", comment = "a comment";
  h.extra = reinterpret_cast<Bytef*>(extra.data());
  h.extra_len = static_cast<uInt>(extra.size());
  h.name = reinterpret_cast<Bytef*>(name.data());
  h.comment = reinterpret_cast<Bytef*>(comment.data());
  h.hcrc = 1;
  EXPECT_EQ(deflateSetHeader(&z, &h), Z_OK);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string Text(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < n)
    s += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k" + std::to_string(rng() % 1000) + "\", \"ts\": " +
         std::to_string(rng()) + "." + std::to_string(rng() % 1000) + "},\n";
  s.resize(n);
  return s;
}

TEST(GzipStream, IgzipInflatesWhatZlibInflates) {
  if (!InflatesWithIsal()) GTEST_LOG_(INFO) << "built without ISA-L: zlib against itself";
  const std::string a = Text(100000, 1), b = Text(7000, 2);
  const std::string cases[] = {
      Gzip(a, 0), Gzip(a, 1), Gzip(a, 9), Gzip(""), Gzip(a) + Gzip(b), Gzip(a) + Gzip("") + Gzip(b),
      Gzip(b) + std::string(100, '\0'), GzipWithHeader(b), GzipWithHeader(b) + Gzip(a),
      Gzip(b) + "garbage", Gzip(b) + std::string(3, '\0') + "x", Gzip(b) + "\x1f",
  };
  for (size_t i = 0; i < std::size(cases); ++i)
    for (size_t max_read : {size_t{1} << 20, size_t{4096}, size_t{7}})
      ExpectSame(cases[i], max_read, "case " + std::to_string(i) + " read " + std::to_string(max_read));
  EXPECT_TRUE(ReadAll(Gzip(a) + Gzip(b), false, 4096).bytes == a + b);
}

TEST(GzipStream, IgzipRefusesWhatZlibRefusesInZlibsWords) {
  const std::string text = Text(3000, 3);
  const std::string gz = GzipWithHeader(text) + Gzip(text, 1);
  const size_t second = GzipWithHeader(text).size();  // the second member's first byte
  // Every byte in the headers and the last 40 of each member (trailers: CRC-32, ISIZE), every
  // 5th byte elsewhere.
  auto every = [&](size_t i) { return i < 64 || (i >= second - 40 && i < second + 16) || i >= gz.size() - 40 || i % 5 == 0; };
  // Truncations.
  for (size_t n = 1; n < gz.size(); ++n)
    if (every(n)) ExpectSame(gz.substr(0, n), 1 << 20, "truncated at " + std::to_string(n));
  // Bytes corrupted three ways (header fields and flags, deflate blocks, CRC-32, ISIZE).
  for (size_t i = 0; i < gz.size(); ++i) {
    if (!every(i)) continue;
    for (unsigned char x : {0x01, 0x80, 0xff}) {
      std::string bad = gz;
      bad[i] = static_cast<char>(bad[i] ^ x);
      ExpectSame(bad, 1 << 20, "byte " + std::to_string(i) + " ^ " + std::to_string(x));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(GzipStream, MembersLargerThanOneRead) {
  // Compressed input crosses the 1 MiB reads (and ISA-L's internal buffers) at arbitrary points.
  std::mt19937 rng(7);
  std::string noise(3 << 20, '\0');
  for (char& c : noise) c = static_cast<char>(' ' + rng() % 64);  // compresses to ~75%: several reads
  const std::string gz = Gzip(noise, 1) + Gzip(Text(2 << 20, 4), 6);
  ExpectSame(gz, 1 << 20, "large");
  std::string bad = gz;
  bad[gz.size() / 2] ^= 0x55;
  ExpectSame(bad, 1 << 20, "large, corrupt in the middle");
}

}  // namespace
}  // namespace overlapprof

namespace overlapprof {
namespace {

// EstimatedSize: a plain file's size; for the threaded gzip stream, the file's size times the
// inflate ratio up to the block lent last: of the right order after the first block of a file
// several blocks long, exact at its end.
TEST(InputStream, EstimatedSizeOfFilesPlainAndGzip) {
  testing::TempDir dir;
  const std::string text = Text(3 * kStreamBlockBytes + 12345, 7);
  const std::string plain = dir.Write("t.json", text), gz = dir.Write("t.json.gz", Gzip(text, 1));
  StatusOr<std::unique_ptr<ByteStream>> p = OpenInputStream(plain, StreamOptions{});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ((*p)->EstimatedSize(), text.size());
  StatusOr<std::unique_ptr<ByteStream>> g = OpenInputStream(gz, StreamOptions{});
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_GT((*g)->block_front(), 0u);  // the threaded stream
  EXPECT_EQ((*g)->EstimatedSize(), 0u);  // nothing read yet
  StatusOr<ByteStream::Block> b = (*g)->NextBlock();
  ASSERT_TRUE(b.ok() && b->size == kStreamBlockBytes);
  const double first = static_cast<double>((*g)->EstimatedSize()) / static_cast<double>(text.size());
  EXPECT_GT(first, 0.8);
  EXPECT_LT(first, 1.25);
  uint64_t read = b->size;
  for (;;) {
    b = (*g)->NextBlock();
    ASSERT_TRUE(b.ok());
    if (b->size == 0) break;
    read += b->size;
    if (read == text.size()) {
      EXPECT_EQ((*g)->EstimatedSize(), text.size());  // the whole file consumed
    }
  }
  EXPECT_EQ(read, text.size());
}

}  // namespace
}  // namespace overlapprof
