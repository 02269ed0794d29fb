// Analyzers and reports read each other's typed results (Summary::cross_rank, op_types,
// findings), not JSON: the DDP bucket analyzer's volume finding takes out the wait share the
// cross-rank analyzer found, and the terminal report prints from the structs.
#include <gtest/gtest.h>

#include <sstream>

#include "analyzers/analyzer.h"
#include "reports/report.h"
#include "test_util.h"

namespace overlapprof {

std::unique_ptr<Analyzer> MakeOverlapAnalyzer();     // analyzers/overlap.cc
std::unique_ptr<Analyzer> MakeDdpBucketsAnalyzer();  // analyzers/ddp_buckets.cc
std::unique_ptr<ReportWriter> MakeTerminalReport();  // reports/terminal.cc

namespace {

using testing::Ev;

std::string T(int64_t us) { return fmt::format("1000000{:06d}.000", us); }
std::string D(int64_t us) { return fmt::format("{}.000", us); }

// One DDP step whose buckets (500 µs) exceed backward compute (300 µs): 1.67x (as in
// analyzers_test.cc's VolumeFindingWhenCommunicationExceedsBackwardCompute).
std::string VolumeStep() {
  const std::string args =
      R"(, "Collective name": "allreduce", "In msg nelems": 1048576, "Out msg nelems": 1048576, "Group size": 2,
          "dtype": "Float", "Process Group Name": "0", "Process Group Ranks": "[0, 1]")";
  std::vector<Ev> ev = {{"user_annotation", "ProfilerStep#1", T(0), D(1000)},
                        {"user_annotation", "## backward ##", T(100), D(500)}};
  auto launch = [&](int64_t host, int64_t corr, const char* kname, int64_t start, int64_t dur, int stream,
                    std::string extra = "") {
    ev.push_back({"cuda_runtime", "cudaLaunchKernel", T(host), D(5), 0, corr});
    ev.push_back({"kernel", kname, T(start), D(dur), stream, corr, extra});
  };
  launch(110, 1, "sm80_gemm_bwd", 200, 200, 7);
  launch(300, 2, "sm80_gemm_bwd2", 400, 100, 7);
  launch(350, 3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 420, 100, 20, args);
  launch(510, 4, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 530, 400, 20, args);
  launch(620, 5, "sgd_update_kernel", 940, 40, 7);
  return testing::KinetoJson(ev);
}

// The DDP bucket analyzer's findings, with `cross_rank` (if any) set before its Finish, as the
// cross-rank analyzer's Finish does in the pipeline.
std::vector<std::string> DdpFindings(std::optional<CrossRankResult> cross_rank) {
  StatusOr<RankTrace> t = testing::ParseJsonText(VolumeStep());
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (!t.ok()) return {};
  Summary s;
  AnalysisOptions opts;
  auto overlap = MakeOverlapAnalyzer();
  auto ddp = MakeDdpBucketsAnalyzer();
  EXPECT_TRUE(overlap->AnalyzeRank(*t, 0, opts, s).ok());
  EXPECT_TRUE(ddp->AnalyzeRank(*t, 0, opts, s).ok());
  EXPECT_TRUE(overlap->Finish(opts, s).ok());
  if (cross_rank) s.SetCrossRank(*cross_rank);
  EXPECT_TRUE(ddp->Finish(opts, s).ok());
  std::vector<std::string> out;
  for (const Finding& f : s.findings)
    if (f.message.find("exceeds backward compute") != std::string::npos) out.push_back(f.message);
  return out;
}

CrossRankResult WaitShare(int64_t rank, int64_t wait_ns, int64_t transfer_ns) {
  CrossRankResult r;
  r.any_matched = true;
  r.ranks.push_back({rank, "h", 10, wait_ns, transfer_ns, 0, 0});
  return r;
}

TEST(TypedResults, DdpVolumeFindingTakesOutTheCrossRankWaitShare) {
  std::vector<std::string> alone = DdpFindings(std::nullopt);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0].rfind("gradient communication exceeds backward compute (1.67x): overlap can hide at most 60%", 0),
            0u)
      << alone[0];

  // 20% of the rank's collective time is waiting: 1.67 x 0.8 = 1.33.
  std::vector<std::string> waiting = DdpFindings(WaitShare(0, 20, 80));
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].rfind("gradient communication exceeds backward compute (1.33x, not counting the 20% spent "
                             "waiting for other ranks)",
                             0),
            0u)
      << waiting[0];

  // 40% waiting: 1.67 x 0.6 = 1.0, so volume is not the problem.
  EXPECT_TRUE(DdpFindings(WaitShare(0, 40, 60)).empty());
  // Another rank's wait share does not apply.
  EXPECT_EQ(DdpFindings(WaitShare(1, 40, 60)).size(), 1u);
}

TEST(TypedResults, TerminalPrintsFromTheStructs) {
  Summary s;
  s.verdict = "v";
  s.op_types.emplace();
  OpTypeRow a;
  a.rank = 0;
  a.op = Collective::kAllReduce;
  a.count = 3;
  a.bytes = 3 << 20;
  a.time_ns = 1000000;
  a.exposed_ns = 250000;
  OpTypeRow b = a;
  b.rank = 1;
  b.bytes.reset();  // unknown on one rank: "?" for the sum
  s.op_types->push_back(a);
  s.op_types->push_back(b);
  CrossRankResult cr = WaitShare(0, 2000000, 3000000);
  cr.ranks[0].exposed_wait_ns = 1000000;
  cr.stragglers.push_back({2, 3, 4, 0.75, 5000000, 100000});
  cr.stragglers.push_back({0, 0, 4, 0.0, 0, std::nullopt});  // never last: not printed
  s.SetCrossRank(cr);
  s.AddFinding("x", kUnknown, Severity::kInfo, "an info line");
  s.AddFinding("y", 3, Severity::kWarning, "a warning line");
  std::ostringstream out;
  ReportOptions every_rank;
  every_rank.all_ranks = true;  // the cross-rank table's per-rank rows
  ASSERT_TRUE(MakeTerminalReport()->Write(s, every_rank, out).ok());
  const std::string text = out.str();
  EXPECT_NE(text.find("by op type (all ranks):"), std::string::npos) << text;
  EXPECT_NE(text.find("     allreduce        6           ?     2.00 ms    500.0 µs     25.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("    0           10     2.00 ms     3.00 ms         1.00 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("  straggler rank 2: last at 3 of 4 collectives; the others lost 5.00 ms waiting\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("straggler rank 0"), std::string::npos);
  // Warnings first.
  EXPECT_LT(text.find("  warning rank 3: a warning line"), text.find("  info run: an info line")) << text;
}

}  // namespace
}  // namespace overlapprof
