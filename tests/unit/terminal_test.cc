// The terminal report (reports/terminal.h): the answer first, a ranks table that keeps to the
// ranks that matter whatever the rank count, lines within kTerminalWidth columns, findings seen on
// several ranks as one line, --brief, --top, --ranks, and the sections list others plug into.
#include "reports/terminal.h"

#include <gtest/gtest.h>

#include <sstream>

#include "analyzers/overlap.h"
#include "reports/report.h"

namespace overlapprof {

std::unique_ptr<ReportWriter> MakeTerminalReport();  // reports/terminal.cc

namespace {

constexpr int64_t kMs = 1000000;

// `n` ranks of 3 steady iterations of 60 ms each; rank `slow` takes 66 ms per step and rank
// `exposed` has twice the exposed communication; rank 3 is the cross-rank straggler; every rank
// but the straggler has the same finding with its own figures.
Summary ManyRanks(int n, int slow = 5, int exposed = 9) {
  Summary s;
  s.verdict = "over many ranks: well overlapped: 90.0% of communication hidden";
  StepBreakdown b;
  CrossRankResult cr;
  for (int r = 0; r < n; ++r) {
    RankResult rr;
    rr.rank = r;
    rr.input_index = static_cast<size_t>(r);
    rr.source_path = fmt::format("run/rank{}.json", r);
    rr.whole.wall_ns = 400 * kMs;
    rr.whole.comm_ns = 100 * kMs;
    rr.whole.overlap_ns = 90 * kMs;
    rr.whole.overlap_ratio = 0.9;
    rr.notices = {"1 warm-up iteration(s) left out of the iteration spread"};
    rr.verdict = fmt::format("rank {} verdict", r);
    s.ranks.push_back(rr);
    StepBreakdownRank br;
    br.rank = r;
    br.basis = "steady iterations";
    br.iterations = 3;
    const int64_t step = (r == slow ? 66 : 60) * kMs + r * 1000;  // a little spread
    br.split.wall_ns = 3 * step;
    br.split.comm_exposed_ns = 3 * (r == exposed ? 4 : 2) * kMs;
    br.split.comm_hidden_ns = 3 * 30 * kMs;
    br.split.compute_only_ns = br.split.wall_ns - br.split.comm_exposed_ns - br.split.comm_hidden_ns;
    b.run.Add(br.split);
    b.ranks.push_back(br);
    if (r != 3)
      s.AddFinding("cross_rank", r, Severity::kInfo,
                   fmt::format("of rank {}'s {:.2f} ms exposed communication, {}.{} ms is waiting for other ranks", r,
                               40.0 + r / 10.0, 9, r));
  }
  s.step_breakdown = b;
  cr.stragglers.push_back({3, 59, 59, 1.0, 300 * kMs, 700000});
  s.SetCrossRank(cr);
  return s;
}

std::string Render(const Summary& s, const ReportOptions& o = {}) {
  std::ostringstream out;
  EXPECT_TRUE(MakeTerminalReport()->Write(s, o, out).ok());
  return out.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

TEST(Terminal, VerdictFirstAndLast) {
  const std::vector<std::string> lines = Lines(Render(ManyRanks(8)));
  ASSERT_GT(lines.size(), 3u);
  EXPECT_EQ(lines.front().rfind("verdict: over many ranks", 0), 0u) << lines.front();
  EXPECT_EQ(lines.back(), "verdict: over many ranks: well overlapped: 90.0% of communication hidden");
  EXPECT_EQ(lines[2].rfind("run: 8 ranks, 24 steady iteration(s) of ", 0), 0u) << lines[2];
}

TEST(Terminal, ScalesWithTheRankCount) {
  for (int n : {8, 16, 64, 512}) {
    const std::string text = Render(ManyRanks(n));
    const std::vector<std::string> lines = Lines(text);
    EXPECT_LE(lines.size(), 34u) << n << " ranks:\n" << text;
    for (const std::string& l : lines) EXPECT_LE(TerminalColumns(l), kTerminalWidth) << l;
    // The slowest, the most exposed and the straggler are always in the table.
    EXPECT_NE(text.find("slowest"), std::string::npos) << text;
    EXPECT_NE(text.find("most exposed"), std::string::npos) << text;
    EXPECT_NE(text.find("    3 "), std::string::npos) << text;
    EXPECT_NE(text.find("straggler"), std::string::npos) << text;
    if (n > 8)
      EXPECT_NE(text.find(fmt::format(" more rank(s) folded")), std::string::npos) << text;
    else
      EXPECT_EQ(text.find("folded"), std::string::npos) << text;
  }
}

TEST(Terminal, RanksAllAndList) {
  ReportOptions all;
  all.all_ranks = true;
  const std::string every = Render(ManyRanks(20), all);
  for (int r = 0; r < 20; ++r) EXPECT_NE(every.find(fmt::format("rank {} verdict", r)), std::string::npos) << r;
  EXPECT_EQ(every.find("folded"), std::string::npos);
  ReportOptions list;
  list.ranks = {0, 17};
  const std::string two = Render(ManyRanks(20), list);
  EXPECT_NE(two.find("rank 0 verdict"), std::string::npos);
  EXPECT_NE(two.find("rank 17 verdict"), std::string::npos);
  EXPECT_EQ(two.find("rank 5 verdict"), std::string::npos);
  EXPECT_NE(two.find("... 18 more rank(s) folded"), std::string::npos) << two;
}

TEST(Terminal, BriefIsTheVerdictAndTheHeadline) {
  ReportOptions o;
  o.brief = true;
  const std::string text = Render(ManyRanks(16), o);
  EXPECT_NE(text.find("run: 16 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("straggler rank 3"), std::string::npos) << text;
  EXPECT_EQ(text.find("findings"), std::string::npos) << text;
  EXPECT_EQ(text.find("split:"), std::string::npos) << text;
  EXPECT_LE(Lines(text).size(), 10u) << text;
}

TEST(Terminal, AFindingOnSeveralRanksIsOneLineWithItsRange) {
  const std::string text = Render(ManyRanks(8));
  // Ranks 0-2 and 4-7 alike: one line, the rank list and each figure's range.
  EXPECT_NE(text.find("info ranks 0-2,4-7: of each rank's 40.00 to 40.70 ms exposed communication, 9.0 to 9.7 ms"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("info rank 1:"), std::string::npos) << text;
}

TEST(Terminal, TopBoundsTheFindings) {
  Summary s = ManyRanks(4);
  for (int i = 0; i < 6; ++i) s.AddFinding(fmt::format("a{}", i), kUnknown, Severity::kWarning, "w");
  ReportOptions o;
  o.top_findings = 2;
  const std::string text = Render(s, o);
  size_t warnings = 0;
  for (const std::string& l : Lines(text)) warnings += l.rfind("  warning run: w", 0) == 0;
  EXPECT_EQ(warnings, 2u) << text;
  EXPECT_NE(text.find("... 5 more (--top N shows more"), std::string::npos) << text;
}

TEST(Terminal, BarsInBlocksOnlyWithUtf8) {
  ReportOptions ascii;
  const std::string plain = Render(ManyRanks(4), ascii);
  for (unsigned char c : plain) ASSERT_LT(c, 0x80) << plain;
  EXPECT_NE(plain.find("#######========x"), std::string::npos) << plain;
  ReportOptions utf8;
  utf8.utf8 = true;
  EXPECT_NE(Render(ManyRanks(4), utf8).find("\u2588\u2588\u2588"), std::string::npos);
}

TEST(Terminal, LongTextWrapsAtAColumnAndKeepsUnitsWithNumbers) {
  Summary s = ManyRanks(2);
  std::string msg;
  for (int i = 0; i < 40; ++i) msg += fmt::format("word {}.5 ms ", i);
  s.AddFinding("z", 1, Severity::kWarning, msg);
  s.verdict = std::string(300, 'x');  // one word longer than the line: cut at the width
  const std::string text = Render(s);
  for (const std::string& l : Lines(text)) {
    EXPECT_LE(TerminalColumns(l), kTerminalWidth) << l;
    EXPECT_NE(l.rfind("ms ", 0), 0u) << "a unit starts a line: " << l;
  }
}

TEST(Terminal, RankListJoinsRuns) {
  EXPECT_EQ(RankList({5, 0, 1, 2, 3, 7, 8, 10}), "0-3,5,7,8,10");
  EXPECT_EQ(RankList({}), "");
  EXPECT_EQ(RankList({4}), "4");
}

TEST(Terminal, SectionsInPageOrder) {
  const std::vector<TerminalSection>& s = TerminalSections();
  ASSERT_GE(s.size(), 3u);
  EXPECT_EQ(s.front().name, "verdict_first");
  EXPECT_EQ(s[1].name, "run_figures");
  EXPECT_EQ(s.back().name, "verdict_last");
  for (const TerminalSection& x : s) EXPECT_NE(x.write, nullptr) << x.name;
}

}  // namespace
}  // namespace overlapprof
