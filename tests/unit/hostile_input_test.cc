// Hostile input to the readers (issue 14 §4): gzip bombs, FIFOs and devices, broken links in a
// directory. Each test reproduces the attack and asserts the refusal and what it cost.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "analyzers/compare.h"
#include "src/cli/pipeline.h"
#include "src/common/utf8.h"
#include "src/io/input_file.h"
#include "src/store/writer.h"
#include "test_util.h"

namespace overlapprof {
namespace {
using testing::Gzip;


StatusOr<InputBuffer> Gunzip(const std::string& gz, size_t limit, InputBuffer* keep = nullptr) {
  InputBuffer local;
  InputBuffer& out = keep ? *keep : local;
  Status st = GunzipInto(reinterpret_cast<const uint8_t*>(gz.data()), gz.size(), out, limit);
  if (!st.ok()) return st;
  return std::move(out);
}

TEST(GzipBomb, RefusedAtTheLimitWithoutAllocatingTheInflatedSize) {
  // 64 MiB of spaces in 64 KiB of gzip (a ratio of ~1000:1, as a bomb has).
  const std::string bomb = Gzip(std::string(size_t{64} << 20, ' '));
  ASSERT_LT(bomb.size(), size_t{200} << 10);
  InputBuffer out;
  StatusOr<InputBuffer> r = Gunzip(bomb, size_t{16} << 20, &out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(r.status().message().find("inflates to more than 16 MiB"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("available memory"), std::string::npos) << r.status().message();
  // The size was learned by streaming: no buffer for the inflated data was ever allocated.
  EXPECT_EQ(out.capacity(), 0u);
}

TEST(GzipBomb, ManyTrustedMembersAreSizedBeforeAllocating) {
  // Ten members of 1 MiB of text that compresses ~3:1, each with an honest ISIZE: the
  // trailer (last member) is trusted, the rest does not fit, and the whole is counted.
  std::string text;
  uint32_t x = 1;
  while (text.size() < (size_t{1} << 20)) {
    x = x * 1103515245 + 12345;
    text += static_cast<char>('a' + (x >> 16) % 16);
  }
  std::string gz;
  for (int i = 0; i < 10; ++i) gz += Gzip(text);
  InputBuffer out;
  StatusOr<InputBuffer> r = Gunzip(gz, size_t{4} << 20, &out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  EXPECT_LT(out.capacity(), size_t{2} << 20) << "only the trusted trailer's size may have been allocated";
  // Under the limit the same input inflates whole.
  StatusOr<InputBuffer> ok = Gunzip(gz, size_t{10} << 20);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->size(), size_t{10} << 20);
  EXPECT_EQ(ok->view().substr(0, 64), text.substr(0, 64));
}

TEST(GzipBomb, TheLimitIsInclusiveOnBothPaths) {
  const std::string data(100000, 'x');  // ratio ~500:1: the slow (counting) path
  const std::string gz = Gzip(data);
  EXPECT_TRUE(Gunzip(gz, data.size()).ok());
  EXPECT_FALSE(Gunzip(gz, data.size() - 1).ok());
  std::string text;
  for (int i = 0; i < 20000; ++i) text += std::to_string(i * 7919 % 10007) + ",";  // ratio < 100: the fast path
  const std::string gz2 = Gzip(text);
  ASSERT_LT(text.size() / gz2.size(), 100u);
  StatusOr<InputBuffer> ok = Gunzip(gz2, text.size());
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->view(), text);
  EXPECT_FALSE(Gunzip(gz2, text.size() - 1).ok());
}

TEST(GzipBomb, LimitScalesWithMemoryAndTheEnvironmentLowersIt) {
  unsetenv("OVERLAPPROF_MAX_INFLATED_BYTES");
  const size_t natural = InflateLimit();
  EXPECT_LE(natural, kMaxDocumentBytes);
  EXPECT_GT(natural, size_t{0});
  setenv("OVERLAPPROF_MAX_INFLATED_BYTES", "12345", 1);
  EXPECT_EQ(InflateLimit(), 12345u);
  setenv("OVERLAPPROF_MAX_INFLATED_BYTES", "99999999999999", 1);  // never raises it
  EXPECT_EQ(InflateLimit(), natural);
  unsetenv("OVERLAPPROF_MAX_INFLATED_BYTES");
}

TEST(SpecialFiles, FifoIsRefusedAtOnceNotWaitedOn) {
  testing::TempDir dir;
  const std::string fifo = dir.File("t.json");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // No writer: a blocking open(2) would never return.
  StatusOr<std::string> head = ReadFileHead(fifo, 16);
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.status().message().find("a FIFO, not a regular file"), std::string::npos) << head.status().message();
  StatusOr<InputBuffer> whole = ReadInputFile(fifo);
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(whole.status().code(), StatusCode::kInvalidInput);
  StatusOr<std::vector<TraceInput>> expanded = ExpandInputs({fifo});
  ASSERT_FALSE(expanded.ok());
  EXPECT_NE(expanded.status().message().find("a FIFO"), std::string::npos);
  // A character device too.
  StatusOr<InputBuffer> dev = ReadInputFile("/dev/zero");
  ASSERT_FALSE(dev.ok());
  EXPECT_NE(dev.status().message().find("a character device"), std::string::npos) << dev.status().message();
}

TEST(SpecialFiles, DirectoryEntriesThatAreNotFilesAreReported) {
  testing::TempDir dir;
  const std::string good = dir.Write("a.json", "{\"traceEvents\": []}");
  // A FIFO named like a trace, in a subdirectory: reported, not waited on nor skipped.
  std::filesystem::create_directory(dir.File("sub"));
  ASSERT_EQ(mkfifo(dir.File("sub/b.json").c_str(), 0600), 0);
  StatusOr<std::vector<TraceInput>> r = ExpandInputs({dir.path()});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sub/b.json: a FIFO"), std::string::npos) << r.status().message();
  std::filesystem::remove(dir.File("sub/b.json"));
  // A broken symbolic link named like a trace.
  std::filesystem::create_symlink(dir.File("gone.json"), dir.File("c.json"));
  r = ExpandInputs({dir.path()});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("c.json: a broken symbolic link"), std::string::npos) << r.status().message();
  std::filesystem::remove(dir.File("c.json"));
  // Entries not named like traces are not inputs, whatever they are.
  ASSERT_EQ(mkfifo(dir.File("notes.txt").c_str(), 0600), 0);
  r = ExpandInputs({dir.path()});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, good);
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(SpecialFiles, UnreadableEntriesAreReportedNotSkipped) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode: permissions cannot be tested";
  testing::TempDir dir;
  dir.Write("a.json", "{\"traceEvents\": []}");
  const std::string locked = dir.Write("b.json", "{}");
  ASSERT_EQ(::chmod(locked.c_str(), 0), 0);
  StatusOr<std::vector<TraceInput>> r = ExpandInputs({dir.path()});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("b.json: cannot read"), std::string::npos) << r.status().message();
  ::chmod(locked.c_str(), 0600);
  std::filesystem::create_directory(dir.File("sub"));
  ASSERT_EQ(::chmod(dir.File("sub").c_str(), 0), 0);
  r = ExpandInputs({dir.path()});
  ::chmod(dir.File("sub").c_str(), 0700);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sub: cannot list directory"), std::string::npos) << r.status().message();
}

TEST(Utf8, InvalidSequencesBecomeOneReplacementEach) {
  size_t n = 0;
  EXPECT_EQ(SanitizeUtf8("plain ascii", &n), "plain ascii");
  EXPECT_EQ(SanitizeUtf8("h\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", &n), "h\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(SanitizeUtf8("a\xFF" "b", &n), "a\xEF\xBF\xBD" "b");  // a byte that never starts anything
  EXPECT_EQ(SanitizeUtf8("\xE2\x82", &n), "\xEF\xBF\xBD");         // truncated: one maximal subpart
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80", &n), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF", &n), "\xEF\xBF\xBD\xEF\xBF\xBD");                 // overlong
  EXPECT_EQ(n, 7u);
  EXPECT_EQ(ValidUtf8Prefix("0123456789abcdef\x80"), 16u);
}

TEST(Utf8, KinetoNamesWithInvalidBytesAreReplacedAndCounted) {
  // Raw bytes in a kernel name (Kineto writes names unescaped): the document is read, not refused.
  std::string json = testing::KinetoJson({{"kernel", "gemm\xFF\xFE", "1", "1"}, {"kernel", "ok", "3", "1"}});
  StatusOr<RankTrace> t = testing::ParseJsonText(json);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->activities.size(), 2u);
  EXPECT_EQ(t->names.Get(t->activities[0].name_id), "gemm\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(t->stats.Get(Stat::invalid_utf8_replaced), 2);
  // Valid input: nothing counted.
  StatusOr<RankTrace> clean = testing::ParseJsonText(testing::KinetoJson({{"kernel", "gemm", "1", "1"}}));
  ASSERT_TRUE(clean.ok());
  EXPECT_EQ(clean->stats.Get(Stat::invalid_utf8_replaced), 0);
}

TEST(JsonLiterals, DuplicateKeysKeepTheFirstValueWithACounter) {
  // ts given twice: the first (1 µs) is used, as the gate's reader does (below).
  std::string json = testing::KinetoJson({{"kernel", "gemm", "1, \"ts\": 500", "2"}});
  StatusOr<RankTrace> t = testing::ParseJsonText(json);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->activities.size(), 1u);
  EXPECT_EQ(t->activities[0].start_ns, 1000);
  EXPECT_EQ(t->activities[0].end_ns, 3000);
  EXPECT_EQ(t->stats.Get(Stat::json_duplicate_keys), 1);
  // A second traceEvents array is skipped, not merged.
  std::string two = json;
  two.insert(two.rfind('}'), ", \"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"x\", \"ts\": 9, \"dur\": 1}]");
  StatusOr<RankTrace> t2 = testing::ParseJsonText(two);
  ASSERT_TRUE(t2.ok()) << t2.status().message();
  EXPECT_EQ(t2->activities.size(), 1u);
  EXPECT_EQ(t2->stats.Get(Stat::json_duplicate_keys), 2);  // the ts above and traceEvents

  std::vector<std::string> dups;
  std::istringstream in(R"({"a": 1, "b": {"c": 2, "c": 3}, "a": 4})");
  StatusOr<nlohmann::json> j = ParseJsonFirstKeyWins(in, "s.json", &dups);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["a"], 1);
  EXPECT_EQ((*j)["b"]["c"], 2);
  EXPECT_EQ(dups, (std::vector<std::string>{"c", "a"}));
}

TEST(JsonLiterals, NanAndInfinityAreInvalidValuesEverywhere) {
  // In a field the importer needs: the event is skipped and counted (events_malformed).
  std::string json = testing::KinetoJson({{"kernel", "a", "NaN", "1"}, {"kernel", "b", "2", "Infinity"},
                                          {"kernel", "c", "3", "-Infinity"}, {"kernel", "d", "4", "1"}});
  StatusOr<RankTrace> t = testing::ParseJsonText(json);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->activities.size(), 1u);
  EXPECT_EQ(t->stats.Get(Stat::events_malformed), 3);
  // In a summary or policy for the gate: not JSON, refused (exit 2) with the parser's position.
  std::vector<std::string> dups;
  std::istringstream in(R"({"schema": "overlapprof.summary/1", "ranks": [{"comm_ns": NaN}]})");
  StatusOr<nlohmann::json> j = ParseJsonFirstKeyWins(in, "s.json", &dups);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(j.status().message().find("s.json: invalid JSON"), std::string::npos) << j.status().message();
}

TEST(PartialFiles, APlantedLinkIsNotWrittenThrough) {
  // (The CLI's own outputs, WriteAtomically: tests/e2e/hostile_input_test.py.)
  testing::TempDir dir;
  const std::string victim = dir.Write("victim.txt", "precious");
  // The store writer's .partial too.
  std::filesystem::create_symlink(victim, dir.File("r.db.partial"));
  StoreWriter w;
  ASSERT_TRUE(w.Open(dir.File("r.db"), RunMeta{}, {}).ok());
  EXPECT_EQ(ReadAll(victim), "precious");
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(dir.File("r.db.partial"))));
}

}  // namespace
}  // namespace overlapprof
