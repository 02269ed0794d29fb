// The renderings of a comparison (reports/comparison.h).
#include "reports/comparison.h"

#include <gtest/gtest.h>

#include <sstream>

#include "compare_util.h"

namespace overlapprof {
namespace {

using testing::View;

TEST(Compare, MarkdownEscapesPathsAndNames) {
  RunView b = View({75, 76, 74, 75, 77, 73, 75, 76}), n = View({75, 76, 74, 75, 77, 73, 75, 76});
  b.source = "base|x](http://evil)\n# injected <img src=x>`code`";
  n.source = "new*bold*";
  n.op_time_exposed_ns["a|b"] = {1, 1};
  const std::string md = RenderComparisonMarkdown(Compare(b, n, Policy{}), b, n, "check");
  EXPECT_EQ(md.find("\n# injected"), std::string::npos) << md;
  EXPECT_NE(md.find("base\\|x\\]\\(http://evil\\) # injected \\<img src=x\\>\\`code\\`"), std::string::npos) << md;
  EXPECT_NE(md.find("new\\*bold\\*"), std::string::npos) << md;
  EXPECT_NE(md.find("| exposed_a\\|b_per_iter (ms) |"), std::string::npos) << md;
  // Every table row has the header's 8 cell separators.
  std::istringstream lines(md);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| ", 0) != 0) continue;
    size_t bars = 0;
    for (size_t i = 0; i < line.size(); ++i) bars += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    EXPECT_EQ(bars, 8u) << line;
  }
}

}  // namespace
}  // namespace overlapprof
