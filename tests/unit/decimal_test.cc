#include <gtest/gtest.h>

#include "src/common/decimal.h"

namespace overlapprof {
namespace {

int64_t Us(std::string_view tok) {
  int64_t v = -999;
  EXPECT_TRUE(ParseScaledDecimal(tok, 3, &v)) << tok;
  return v;
}

TEST(ParseScaledDecimal, MicrosecondsWithNanosecondFractionIsExact) {
  // A double cannot hold 4458676522709.059 exactly; the text parse must.
  EXPECT_EQ(Us("4458676522709.059"), 4458676522709059);
  EXPECT_EQ(Us("1712195495519695.8"), 1712195495519695800);
  EXPECT_EQ(Us("1683564902133354"), 1683564902133354000);
  EXPECT_EQ(Us("0.001"), 1);
  EXPECT_EQ(Us("2636.669"), 2636669);
  EXPECT_EQ(Us("5"), 5000);
  EXPECT_EQ(Us("-3.5"), -3500);
}

TEST(ParseScaledDecimal, RoundsSubNanosecondDigitsHalfAwayFromZero) {
  EXPECT_EQ(Us("1.0004"), 1000);
  EXPECT_EQ(Us("1.0005"), 1001);
  EXPECT_EQ(Us("-1.0005"), -1001);
  EXPECT_EQ(Us("0.0004999"), 0);
}

TEST(ParseScaledDecimal, Exponents) {
  EXPECT_EQ(Us("1.5e3"), 1500000);
  EXPECT_EQ(Us("1E-3"), 1);
  EXPECT_EQ(Us("25e-1"), 2500);
  int64_t v;
  ASSERT_TRUE(ParseScaledDecimal("123", 0, &v));
  EXPECT_EQ(v, 123);
}

// JSON's grammar for number tokens: no leading zeros, an integer digit before any fraction.
TEST(ParseJsonNumber, FollowsJsonGrammarWhereTheScaledParserIsLenient) {
  int64_t v = -1;
  for (const char* ok : {"0", "-0", "0.5", "-0.5", "10", "5", "0e3", "1.5E2", "7 \n"}) {
    EXPECT_TRUE(JsonNumberStart(ok)) << ok;
    EXPECT_TRUE(ParseJsonNumber(ok, 0, &v)) << ok;
  }
  for (const char* bad : {"0005", "00", "-01", ".5", "-.5", "+1", "", "-", "\"5\"", "NaN"}) {
    EXPECT_FALSE(JsonNumberStart(bad)) << bad;
    EXPECT_FALSE(ParseJsonNumber(bad, 0, &v)) << bad;
  }
  EXPECT_TRUE(ParseScaledDecimal("0005", 0, &v));  // the scaled parser itself reads text leniently
  EXPECT_EQ(v, 5);
}

TEST(ParseScaledDecimal, RejectsGarbageAndOverflow) {
  int64_t v;
  for (std::string_view bad : {"", "-", ".", "1.", "abc", "1e", "1.2.3", "\"12\"", "1e400", "99999999999999999999"})
    EXPECT_FALSE(ParseScaledDecimal(bad, 3, &v)) << bad;
  EXPECT_TRUE(ParseScaledDecimal("9223372036854775807", 0, &v));
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_FALSE(ParseScaledDecimal("9223372036854775808", 0, &v));
  EXPECT_TRUE(ParseScaledDecimal("-9223372036854775808", 0, &v));
  EXPECT_EQ(v, INT64_MIN);
  EXPECT_TRUE(ParseScaledDecimal("12  \n", 0, &v));  // trailing whitespace of a raw token
  EXPECT_EQ(v, 12);
}

}  // namespace
}  // namespace overlapprof
