// Iteration detection without markers (analyzers/iterations.h, docs/analyzers.md "Iterations").
#include "analyzers/iterations.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace overlapprof {
namespace {

constexpr int64_t kUs = 1000, kMs = 1000 * kUs;

// One rank's GPU timeline, built in time order: communication ops, other GPU work, optimizer
// clusters (each also GPU work).
struct Timeline {
  std::vector<OpSpan> ops;
  std::vector<Interval> work;
  IterationEvidence evidence;
  int64_t t = 0;

  void Op(int64_t start, int64_t dur, const std::string& name = "allreduce", int64_t bytes = kUnknown) {
    OpSpan o;
    o.start_ns = start;
    o.end_ns = start + dur;
    o.busy_ns = dur;
    o.collective = ParseCollective(name);
    o.bytes = bytes;
    ops.push_back(o);
    work.push_back({start, start + dur});
  }
  void Work(int64_t start, int64_t dur) { work.push_back({start, start + dur}); }
  void Optimizer(int64_t start, int64_t dur) {
    work.push_back({start, start + dur});
    evidence.optimizer.push_back({start, start + dur});
  }
  IntervalSet Busy() const { return IntervalSet::Union(work); }
  int64_t First() const { return IntervalSet::Union(work).intervals().front().start; }
  int64_t Last() const { return IntervalSet::Union(work).intervals().back().end; }
  IterationInfo Detect() const { return DetectIterations(ops, Busy(), First(), Last(), evidence); }
};

// The real FSDP run the issue describes: 12 s of start-up with 10 collectives, then `steps` steps
// of about 48.6 ms with 26 identical, size-less collectives each; the pauses inside backward (a
// layer's compute between its collectives) as long as the one between steps. Returns the steps'
// starts (the first GPU work of each).
std::vector<int64_t> Fsdp(Timeline& tl, int steps, bool optimizer) {
  for (int i = 0; i < 10; ++i) {
    tl.Work(i * kMs * 1000, 200 * kUs);
    tl.Op(i * kMs * 1000 + 250 * kUs, 300 * kUs);
  }
  std::vector<int64_t> starts;
  int64_t t = 12000 * kMs;
  for (int s = 0; s < steps; ++s) {
    starts.push_back(t);
    tl.Work(t, 300 * kUs);  // input copy
    t += 300 * kUs;
    for (int i = 0; i < 10; ++i) {  // forward: all-gather, then the layer's compute
      tl.Op(t, 400 * kUs);
      tl.Work(t + 400 * kUs, 1130 * kUs);
      t += 1530 * kUs;
    }
    for (int i = 0; i < 8; ++i) {  // backward: all-gather, compute, reduce-scatter
      tl.Op(t, 400 * kUs);
      tl.Work(t + 400 * kUs, 2800 * kUs);
      tl.Op(t + 3200 * kUs, 500 * kUs);
      t += 3700 * kUs;
    }
    if (optimizer) {
      tl.Optimizer(t + 100 * kUs, 750 * kUs);
      t += 850 * kUs;
    }
    t += 2000 * kUs - (optimizer ? 850 * kUs : 0) + 1400 * kUs;  // data loading: a pause like backward's
  }
  return starts;
}

TEST(Iterations, PeriodOneIdenticalSizelessOpsAreNoIterationPattern) {
  Timeline tl;
  Fsdp(tl, 50, /*optimizer=*/false);
  ASSERT_EQ(tl.ops.size(), 10u + 50 * 26);
  // Before: 1,310 windows, one per collective.
  const IterationInfo comm = DetectIterationsFromComm(tl.ops, tl.Busy(), tl.First(), tl.Last());
  EXPECT_TRUE(comm.windows.empty()) << comm.windows.size() << " windows";
  EXPECT_NE(comm.notice.find("one identical op repeated"), std::string::npos) << comm.notice;
  const IterationInfo info = tl.Detect();
  EXPECT_TRUE(info.windows.empty());
  EXPECT_EQ(info.source, "none");
  EXPECT_EQ(info.notice.rfind("no reliable iterations", 0), 0u) << info.notice;
  EXPECT_NE(info.notice.find("--step-range"), std::string::npos) << info.notice;
  EXPECT_NE(info.notice.find("ProfilerStep"), std::string::npos) << info.notice;
}

TEST(Iterations, FsdpStepsFromTheOptimizerClustersStartUpLeftOut) {
  Timeline tl;
  const std::vector<int64_t> starts = Fsdp(tl, 50, /*optimizer=*/true);
  const IterationInfo info = tl.Detect();
  EXPECT_EQ(info.source, "optimizer kernels") << info.notice;
  // Steps 2..50: step 1 has no cluster before it (it begins after the start-up).
  ASSERT_EQ(info.windows.size(), 49u) << info.notice;
  for (size_t i = 0; i < info.windows.size(); ++i) {
    EXPECT_EQ(info.windows[i].start_ns, starts[i + 1]) << i;
    EXPECT_GE(info.windows[i].start_ns, 12000 * kMs);  // never the start-up
  }
  const int64_t step = starts[2] - starts[1];
  EXPECT_NEAR(static_cast<double>(step), 48.6 * kMs, 1.0 * kMs);
  EXPECT_NE(info.notice.find("same 26 communication ops"), std::string::npos) << info.notice;
}

// DDP with identical size-less buckets: the pause before a step's first bucket (the forward)
// is clearly longer than those between buckets.
TEST(Iterations, IdenticalOpsWithClearlyLongerBoundaryPausesAreSteps) {
  Timeline tl;
  std::vector<int64_t> starts;
  int64_t t = 0;
  for (int s = 0; s < 6; ++s) {
    starts.push_back(t);
    tl.Work(t, 20 * kMs);  // forward
    t += 20 * kMs;
    for (int b = 0; b < 8; ++b) {
      tl.Work(t, 1800 * kUs);
      tl.Op(t + 1800 * kUs, 1000 * kUs);  // waits 1.8 ms of gradients: inner pauses 0.8 ms
      t += 1800 * kUs;
    }
    t += 1000 * kUs + 500 * kUs;
  }
  const IterationInfo info = tl.Detect();
  EXPECT_EQ(info.source, "comm pattern") << info.notice;
  EXPECT_EQ(info.period_ops, 8);
  ASSERT_EQ(info.windows.size(), 6u) << info.notice;
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(info.windows[i].start_ns, starts[i]) << i;
  EXPECT_NE(info.notice.find("pause"), std::string::npos) << info.notice;
}

// The same with inner pauses as long as the boundary's: refused (1.5x is required).
TEST(Iterations, IdenticalOpsWithoutClearPausesAreRefused) {
  Timeline tl;
  int64_t t = 0;
  for (int s = 0; s < 6; ++s) {
    tl.Work(t, 1 * kMs);  // boundary pauses 3.5 ms, inner 2.5 ms: 1.4x
    t += 1 * kMs;
    for (int b = 0; b < 8; ++b) {
      tl.Work(t, 2500 * kUs);
      tl.Op(t + 2500 * kUs, 1000 * kUs);
      t += 3500 * kUs;
    }
  }
  const IterationInfo info = tl.Detect();
  EXPECT_TRUE(info.windows.empty()) << info.windows.size();
  EXPECT_EQ(info.source, "none");
}

// A DDP step as in a100_2rank_rank0: the step starts with two small broadcasts, then the forward
// (the longest pause), then five all-reduces of different sizes, then the optimizer. The longest
// pause is inside the step; the optimizer cluster says where it starts.
TEST(Iterations, WindowsStartAfterTheOptimizerWhereItEndsEveryStep) {
  Timeline tl;
  std::vector<int64_t> starts;
  int64_t t = 0;
  for (int s = 0; s < 3; ++s) {
    starts.push_back(t);
    tl.Work(t, 10 * kUs);
    tl.Op(t + 400 * kUs, 30 * kUs, "broadcast", 53120);
    tl.Op(t + 2900 * kUs, 10 * kUs, "broadcast", 53);
    tl.Work(t + 18 * kMs, 80 * kMs);  // forward, after an idle GPU gap of 15 ms
    int64_t u = t + 100 * kMs;
    for (int64_t bytes : {2049000, 7875584, 6563840, 6637568, 2431040}) {
      tl.Work(u, 10 * kMs);
      tl.Op(u + 10 * kMs, 2 * kMs, "allreduce", bytes * 4);
      u += 20 * kMs;
    }
    tl.Optimizer(u + 5 * kMs, 10 * kMs);
    t = u + 21 * kMs;
  }
  const IterationInfo info = tl.Detect();
  EXPECT_EQ(info.source, "comm pattern") << info.notice;
  ASSERT_EQ(info.windows.size(), 3u) << info.notice;
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(info.windows[i].start_ns, starts[i]) << i;
  EXPECT_NE(info.notice.find("after the optimizer"), std::string::npos) << info.notice;
}

// The trace starts inside a step whose ops have no sizes (recorded before the profiler's
// arguments, as in mi300x_ddp_resnet_rank0): those ops and the partial step are in no window.
TEST(Iterations, LeadingOpsAndPartialPeriodsAreInNoWindow) {
  Timeline tl;
  std::vector<int64_t> starts;
  int64_t t = 0;
  for (int s = 0; s < 5; ++s) {
    starts.push_back(t + 50 * kUs);  // its first GPU work
    const bool sized = s >= 2;
    tl.Op(t + 50 * kUs, 15 * kUs, "broadcast", sized ? 9600 : kUnknown);
    tl.Op(t + 100 * kUs, 6 * kUs, "broadcast", sized ? 20 : kUnknown);
    tl.Work(t + 200 * kUs, 2600 * kUs);
    tl.Op(t + 2800 * kUs, 6900 * kUs, "allreduce", sized ? 2873320 : kUnknown);
    tl.Op(t + 9800 * kUs, 9000 * kUs, "allreduce", sized ? 8816192 : kUnknown);
    tl.Optimizer(t + 18900 * kUs, 30 * kUs);
    t += 19 * kMs;
  }
  const IterationInfo info = tl.Detect();
  EXPECT_EQ(info.source, "comm pattern") << info.notice;
  EXPECT_EQ(info.leading_ops, 8);
  ASSERT_EQ(info.windows.size(), 3u) << info.notice;
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(info.windows[i].start_ns, starts[i + 2]) << i;
}

// Optimizer clusters that do not end the step (here: twice a step, with different
// communication between them) are no evidence.
TEST(Iterations, OptimizerClustersThatSplitTheCommunicationUnevenlyAreRefused) {
  Timeline tl;
  int64_t t = 0;
  for (int s = 0; s < 6; ++s) {
    tl.Op(t, 1 * kMs, "sendrecv", (s % 3 + 1) * 1000);  // sizes that do not repeat every step
    tl.Optimizer(t + 5 * kMs, 1 * kMs);
    tl.Op(t + 8 * kMs, 1 * kMs, "sendrecv", (s % 2 + 7) * 1000);
    tl.Optimizer(t + 12 * kMs, 1 * kMs);
    t += 16 * kMs;
  }
  const IterationInfo info = tl.Detect();
  EXPECT_TRUE(info.windows.empty()) << info.source << " " << info.windows.size();
  EXPECT_NE(info.notice.find("optimizer"), std::string::npos) << info.notice;
}

TEST(Iterations, TooManyOrTooShortWindowsAreNoReliableIterations) {
  {  // 100,001 periods of two different ops: more windows than allowed.
    Timeline tl;
    int64_t t = 0;
    for (int s = 0; s < 100001; ++s) {
      tl.Op(t, 100 * kUs, "allreduce", 4);
      tl.Op(t + 200 * kUs, 100 * kUs, "allgather", 8);
      t += 1 * kMs;
    }
    const IterationInfo info = tl.Detect();
    EXPECT_TRUE(info.windows.empty());
    EXPECT_NE(info.notice.find("100000 allowed"), std::string::npos) << info.notice;
  }
  {  // Periods of 20 µs.
    Timeline tl;
    int64_t t = 0;
    for (int s = 0; s < 50; ++s) {
      tl.Op(t, 2 * kUs, "allreduce", 4);
      tl.Op(t + 4 * kUs, 2 * kUs, "allgather", 8);
      t += 20 * kUs;
    }
    const IterationInfo info = tl.Detect();
    EXPECT_TRUE(info.windows.empty());
    EXPECT_EQ(info.notice.rfind("no reliable iterations", 0), 0u) << info.notice;
  }
}

TEST(Iterations, ModeNames) {
  EXPECT_EQ(IterationModeNamed("auto"), IterationMode::kAuto);
  EXPECT_EQ(IterationModeNamed("markers"), IterationMode::kMarkers);
  EXPECT_EQ(IterationModeNamed("pattern"), IterationMode::kPattern);
}

}  // namespace
}  // namespace overlapprof
