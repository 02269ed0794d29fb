// The step-time split (analyzers/step_breakdown.h): exact on every real trace in tests/data, the
// verdict naming the largest recoverable share first, and findings identical across ranks grouped.
#include <gtest/gtest.h>

#include <filesystem>

#include "analyzers/step_breakdown.h"
#include "src/cli/pipeline.h"
#include "test_util.h"

namespace overlapprof {
namespace {

void ExpectExact(const StepSplit& s, const std::string& where) {
  EXPECT_EQ(s.PartsSum(), s.wall_ns) << where;
  for (int64_t v : {s.compute_only_ns, s.comm_hidden_ns, s.comm_exposed_ns, s.comm_waiting_ns, s.memory_only_ns,
                    s.idle_ns})
    EXPECT_GE(v, 0) << where;
}

// Every real trace (kineto and nsys; the 2-rank nsys runs as one run each, a directory of per-rank
// exports as one run): the parts add up to the wall time to the nanosecond for every iteration,
// rank and the run, and agree with the overlap figures.
TEST(StepBreakdown, ExactOnEveryRealTrace) {
  std::vector<std::vector<TraceInput>> runs;
  for (const char* dir : {"kineto", "nsys"})
    for (const auto& e : std::filesystem::directory_iterator(testing::DataFile(dir))) {
      const std::string p = e.path().string();
      if (!p.ends_with(".json.gz") && !p.ends_with(".sqlite") && !e.is_directory()) continue;
      StatusOr<std::vector<TraceInput>> inputs = ExpandInputs({p});  // an nsys export's ranks
      ASSERT_TRUE(inputs.ok()) << inputs.status().message();
      runs.push_back(*inputs);
    }
  ASSERT_EQ(runs.size(), 14u);  // 9 kineto traces, 4 nsys exports, 1 directory of per-rank nsys exports
  for (const auto& files : runs) {
    SCOPED_TRACE(files[0].name);
    StatusOr<Summary> r = AnalyzeFiles(files, {}, {});
    ASSERT_TRUE(r.ok()) << r.status().message();
    const Summary& s = *r;
    ASSERT_TRUE(s.step_breakdown.has_value());
    const StepBreakdown& b = *s.step_breakdown;
    ASSERT_EQ(b.ranks.size(), s.ranks.size());
    ASSERT_EQ(b.iterations.size(), s.iterations.size());
    StepSplit run;
    for (size_t i = 0; i < b.ranks.size(); ++i) {
      const StepBreakdownRank& br = b.ranks[i];
      ExpectExact(br.split, "rank");
      StepSplit steady;
      int64_t n = 0;
      for (size_t k = 0; k < b.iterations.size(); ++k) {
        const StepBreakdownIteration& it = b.iterations[k];
        const OverlapFigures& f = s.iterations[k].figures;
        ASSERT_EQ(it.rank_index, s.iterations[k].rank_index);
        if (it.rank_index != i) continue;
        ExpectExact(it.split, "iteration");
        EXPECT_EQ(it.split.wall_ns, f.wall_ns);
        EXPECT_EQ(it.split.compute_only_ns + it.split.comm_hidden_ns, f.compute_ns);
        EXPECT_EQ(it.split.comm_hidden_ns, f.overlap_ns);
        EXPECT_EQ(it.split.comm_exposed_ns + it.split.comm_waiting_ns, f.exposed_comm_ns);
        EXPECT_EQ(it.split.idle_ns, f.idle_ns);
        if (!it.warmup) {
          steady.Add(it.split);
          ++n;
        }
      }
      if (n > 0) {
        EXPECT_EQ(br.basis, "steady iterations");
        EXPECT_EQ(br.iterations, n);
        EXPECT_EQ(br.split.wall_ns, steady.wall_ns);
        EXPECT_EQ(br.split.idle_ns, steady.idle_ns);
        EXPECT_EQ(br.split.memory_only_ns, steady.memory_only_ns);
      } else {
        EXPECT_EQ(br.basis, "whole trace");
        EXPECT_EQ(br.split.wall_ns, s.ranks[i].whole.wall_ns);
      }
      run.Add(br.split);
    }
    ExpectExact(b.run, "run");
    EXPECT_EQ(b.run.wall_ns, run.wall_ns);
    EXPECT_EQ(b.run.comm_waiting_ns, run.comm_waiting_ns);
  }
}

// The bundled 2-rank A100 trace idles 76% of each iteration, and the verdict
// says so first (not "overlap is the problem").
TEST(StepBreakdown, A100TwoRankVerdictIsGpuIdle) {
  StatusOr<Summary> r = AnalyzeFiles({testing::DataFile("kineto/a100_2rank_rank0.json.gz")}, {}, {});
  ASSERT_TRUE(r.ok());
  const StepSplit& s = r->step_breakdown->ranks[0].split;
  EXPECT_EQ(r->step_breakdown->ranks[0].iterations, 3);
  EXPECT_GT(s.idle_ns * 100, 75 * s.wall_ns);
  EXPECT_LT(s.idle_ns * 100, 77 * s.wall_ns);
  EXPECT_EQ(r->verdict.rfind("GPU idle 76.", 0), 0u) << r->verdict;
  EXPECT_NE(r->verdict.find("input- or CPU-bound"), std::string::npos);
  // 15.6% of its communication is hidden: hidden communication is not said to be no limit.
  EXPECT_EQ(r->verdict.find("hidden communication is not what limits it"), std::string::npos) << r->verdict;
  EXPECT_EQ(r->verdict, r->ranks[0].verdict);
}

StepSplit Split(int64_t compute_only, int64_t hidden, int64_t exposed, int64_t waiting, int64_t memory,
                int64_t idle) {
  StepSplit s{0, compute_only, hidden, exposed, waiting, memory, idle};
  s.wall_ns = s.PartsSum();
  return s;
}

// Idle leads only from 25% of the step and 1.5x every other share: a GPU busy 89% of the step
// with 11% of gaps is not input-bound; 40% idle against 35% exposed names the exposed share first.
TEST(StepBreakdown, IdleLeadsOnlyWhenLargeAndClearlyTheLargest) {
  const std::string busy = StepVerdict(Split(600, 230, 40, 0, 20, 110), {});
  EXPECT_EQ(busy.find("input- or CPU-bound"), std::string::npos) << busy;
  EXPECT_EQ(busy.rfind("GPU idle 11.0% of the step, in gaps", 0), 0u) << busy;
  const std::string close = StepVerdict(Split(200, 50, 350, 0, 0, 400), {});
  EXPECT_EQ(close.rfind("exposed communication 35.0% of the step", 0), 0u) << close;
  EXPECT_NE(close.find("; GPU idle 40.0% of the step"), std::string::npos) << close;
  const std::string idle = StepVerdict(Split(300, 150, 50, 0, 0, 500), {});
  EXPECT_EQ(idle.rfind("GPU idle 50.0% of the step: the job is input- or CPU-bound; hidden communication is not what "
                       "limits it",
                       0),
            0u)
      << idle;
  const std::string exposed = StepVerdict(Split(300, 10, 150, 0, 0, 540), {});
  EXPECT_EQ(exposed.rfind("GPU idle 54.0% of the step: the job is input- or CPU-bound; then exposed communication", 0),
            0u)
      << exposed;
}

TEST(StepBreakdown, VerdictNamesTheLargestRecoverableShareFirst) {
  // Idle first.
  EXPECT_EQ(StepVerdict(Split(200, 20, 20, 0, 0, 760), {}),
            "GPU idle 76.0% of the step: the job is input- or CPU-bound; hidden communication is not what limits it");
  // Exposed communication, most of it waiting for rank 7.
  const std::string v = StepVerdict(Split(600, 100, 60, 180, 0, 60), {{7, 150}, {3, 30}});
  EXPECT_EQ(v.rfind("exposed communication 24.0% of the step, of which 18.0% is waiting for rank 7: ", 0), 0u) << v;
  // Waiting spread over ranks: no single rank named as the cause.
  const std::string spread = StepVerdict(Split(600, 100, 60, 180, 0, 60), {{7, 50}, {3, 45}, {2, 40}});
  EXPECT_NE(spread.find("waiting for other ranks (most for rank 7)"), std::string::npos) << spread;
  // Nothing recoverable reaches 10%.
  EXPECT_EQ(StepVerdict(Split(500, 420, 40, 0, 10, 30), {}).rfind("well overlapped: 91.3% of communication hidden", 0),
            0u);
  // Nothing recoverable, but communication mostly exposed: not "well overlapped".
  EXPECT_EQ(StepVerdict(Split(900, 0, 50, 0, 10, 40), {}).rfind("no recoverable share reaches 10% of the step (0.0% of", 0),
            0u);
  // No busy time at all.
  EXPECT_EQ(StepVerdict(Split(0, 0, 0, 0, 0, 100), {}), "no GPU activity in the trace: nothing to analyze");
  // Memory first.
  EXPECT_EQ(StepVerdict(Split(500, 0, 0, 0, 300, 200), {}).rfind("memory copies and sets", 0), 0u);
  // No GPU activity at all.
  EXPECT_EQ(StepVerdict(StepSplit{}, {}), "no GPU activity in the trace: nothing to analyze");
}

TEST(StepBreakdown, WaitingIsCappedAtTheExposedCommunication) {
  StepSplit s = Split(10, 5, 20, 0, 3, 7);
  StepSplit w = WithWaiting(s, 50);
  EXPECT_EQ(w.comm_waiting_ns, 20);
  EXPECT_EQ(w.comm_exposed_ns, 0);
  EXPECT_EQ(w.PartsSum(), s.wall_ns);
  EXPECT_EQ(WithWaiting(s, -5).comm_waiting_ns, 0);
  EXPECT_EQ(WithWaiting(s, 8).comm_exposed_ns, 12);
}

TEST(StepBreakdown, IdenticalFindingsAreGroupedWithTheirRanks) {
  std::vector<Finding> f = {{"a", 3, Severity::kWarning, "same"}, {"a", 1, Severity::kWarning, "same"}, {"b", 1, Severity::kWarning, "same"},
                            {"a", kUnknown, Severity::kInfo, "run"}, {"a", 2, Severity::kWarning, "other"}, {"a", 1, Severity::kWarning, "same"}};
  std::vector<GroupedFinding> g = GroupFindings(f);
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[0].first, &f[0]);
  EXPECT_EQ(g[0].ranks, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(g[1].first->analyzer, "b");
  EXPECT_TRUE(g[2].ranks.empty());
  EXPECT_EQ(g[3].ranks, (std::vector<int64_t>{2}));
}

}  // namespace
}  // namespace overlapprof
