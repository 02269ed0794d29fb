// Text from the inputs printed on a terminal (src/common/utf8.h: EscapeForTerminal).
#include "src/common/utf8.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace overlapprof
