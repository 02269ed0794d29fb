// Text from the inputs (src/common/utf8.h): printed on a terminal (EscapeForTerminal), and
// invalid UTF-8 replaced (SanitizeUtf8), as the importers do with names.
#include "src/common/utf8.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace overlapprof {
namespace {

TEST(EscapeForTerminal, ValidTextStaysByteForByte) {
  for (const char* s : {"", "plain ascii/path.json.gz", "h\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xEF\xBF\xBD",
                        "back\\slash ~ ` ' \"", "\xC2\xA0nbsp"})
    EXPECT_EQ(EscapeForTerminal(s), s);
}

TEST(EscapeForTerminal, ControlCharactersAreEscaped) {
  EXPECT_EQ(EscapeForTerminal("trace\x1b[31mred\x1b[0m.json"), "trace\\x1b[31mred\\x1b[0m.json");
  EXPECT_EQ(EscapeForTerminal("a\nb\rc\td\x7f" "e"), "a\\x0ab\\x0dc\\x09d\\x7fe");
  EXPECT_EQ(EscapeForTerminal(std::string("x\0y", 3)), "x\\x00y");
  EXPECT_EQ(EscapeForTerminal("\x07\x08"), "\\x07\\x08");  // bell, backspace
  // OSC 8 (a hyperlink) and OSC 52 (the clipboard): ESC ] ... BEL/ST.
  EXPECT_EQ(EscapeForTerminal("\x1b]52;c;ZXZpbA==\x07"), "\\x1b]52;c;ZXZpbA==\\x07");
  // C1 controls (CSI is U+009B) as UTF-8, and as raw bytes (invalid UTF-8).
  EXPECT_EQ(EscapeForTerminal("\xC2\x9B" "31m"), "\\u009b31m");
  EXPECT_EQ(EscapeForTerminal("\xC2\x85"), "\\u0085");
  EXPECT_EQ(EscapeForTerminal("\x9B" "31m"), "\\x9b31m");
  EXPECT_EQ(EscapeForTerminal("a\xFF\xE2\x82"), "a\\xff\\xe2\\x82");
  EXPECT_EQ(EscapeForTerminal("\xED\xA0\x80"), "\\xed\\xa0\\x80");  // an encoded surrogate
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

}  // namespace
}  // namespace overlapprof
