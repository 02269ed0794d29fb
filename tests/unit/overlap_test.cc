// Synthetic timelines with exact known answers, through the real Kineto importer.
#include "analyzers/overlap.h"

#include <gtest/gtest.h>

#include "analyzers/iterations.h"

#include <algorithm>
#include <tuple>
#include "test_util.h"

namespace overlapprof {
namespace {

using testing::Ev;
using testing::KinetoJson;
using testing::ParseJsonText;

// µs offsets on a large base, as in real traces (1e12 µs = 1e15 ns).
std::string T(const char* us) { return std::string("1000000") + us; }

OverlapFigures Whole(const std::vector<Ev>& evs) {
  StatusOr<RankTrace> t = ParseJsonText(KinetoJson(evs));
  EXPECT_TRUE(t.ok()) << t.status().message();
  return WholeTraceFigures(BuildTimelineSets(*t));
}

TEST(OverlapEngine, NestedTouchingZeroLengthMultiStreamExact) {
  // compute: A [0,100) s7, B [20,50) s8 nested, C [100,150) s7 touching A, Z [160,160) s9 empty
  // comm:    N1 [90,130) s20, N2 [120,170) s21 overlapping N1, N3 [200,250.0005) s20 no compute
  // memory:  M [140,180) s7
  std::vector<Ev> evs = {
      {"kernel", "gemm_A", T("000000.000"), "100.000", 7},
      {"kernel", "gemm_B", T("000020.000"), "30.000", 8},
      {"kernel", "gemm_C", T("000100.000"), "50", 7},
      {"kernel", "elementwise_Z", T("000160.000"), "0", 9},
      {"kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", T("000090.000"), "40.000", 20},
      {"kernel", "ncclKernel_AllGather_RING_LL_Sum_int8_t", T("000120.000"), "50.000", 21},
      {"kernel", "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", T("000200.000"), "50.0005", 20},
      {"gpu_memcpy", "Memcpy DtoD (Device -> Device)", T("000140.000"), "40.000", 7},
  };
  OverlapFigures f = Whole(evs);
  EXPECT_EQ(f.start_ns, 1000000000000000);
  EXPECT_EQ(f.compute_ns, 150000);
  EXPECT_EQ(f.comm_ns, 80000 + 50001);  // 50.0005 µs rounds half away from zero to 50001 ns
  EXPECT_EQ(f.overlap_ns, 60000);
  EXPECT_EQ(f.exposed_comm_ns, 70001);
  EXPECT_EQ(f.memory_ns, 40000);
  EXPECT_EQ(f.wall_ns, 250001);
  EXPECT_EQ(f.busy_ns, 180000 + 50001);
  EXPECT_EQ(f.idle_ns, 20000);
  EXPECT_EQ(f.kernels, 7);
  EXPECT_EQ(f.comm_kernels, 3);
  EXPECT_EQ(f.comm_ops, 3);
  EXPECT_EQ(f.memcpys, 1);
  ASSERT_TRUE(f.overlap_ratio.has_value());
  EXPECT_DOUBLE_EQ(*f.overlap_ratio, 60000.0 / 130001.0);
  EXPECT_DOUBLE_EQ(*f.achievable_ratio, 1.0);
}

TEST(OverlapEngine, CommWithoutComputeIsFullyExposed) {
  OverlapFigures f = Whole({{"kernel", "ncclDevKernel_AllReduce", T("000000.000"), "10.000", 20},
                            {"kernel", "ncclDevKernel_AllReduce", T("000005.000"), "10.000", 21}});
  EXPECT_EQ(f.comm_ns, 15000);
  EXPECT_EQ(f.overlap_ns, 0);
  EXPECT_EQ(f.exposed_comm_ns, 15000);
  EXPECT_DOUBLE_EQ(*f.overlap_ratio, 0.0);
  EXPECT_DOUBLE_EQ(*f.achievable_ratio, 0.0);
  EXPECT_NE(RankVerdict(f).find("volume is the problem"), std::string::npos);
}

TEST(OverlapEngine, NoCommunicationGivesNullRatioWithReason) {
  OverlapFigures f = Whole({{"kernel", "gemm", T("000000.000"), "10.000", 7}});
  EXPECT_EQ(f.compute_ns, 10000);
  EXPECT_FALSE(f.overlap_ratio.has_value());
  EXPECT_FALSE(f.achievable_ratio.has_value());
  EXPECT_EQ(f.ratio_reason, "no communication");
}

TEST(OverlapEngine, FullyHiddenAndPartialBoundVerdicts) {
  OverlapFigures hidden = Whole({{"kernel", "gemm", T("000000.000"), "100.000", 7},
                                 {"kernel", "ncclDevKernel_AllReduce", T("000010.000"), "20.000", 20}});
  EXPECT_DOUBLE_EQ(*hidden.overlap_ratio, 1.0);
  EXPECT_NE(RankVerdict(hidden).find("well hidden"), std::string::npos);
  // compute 30 µs, comm 100 µs, all of compute overlapping: bound 30%, achieved 30%.
  OverlapFigures bound = Whole({{"kernel", "gemm", T("000000.000"), "30.000", 7},
                                {"kernel", "ncclDevKernel_AllReduce", T("000000.000"), "100.000", 20}});
  EXPECT_DOUBLE_EQ(*bound.achievable_ratio, 0.3);
  EXPECT_DOUBLE_EQ(*bound.overlap_ratio, 0.3);
  EXPECT_NE(RankVerdict(bound).find("volume is the problem"), std::string::npos);
  // compute 100 µs, comm 50 µs, no overlap: overlap is the problem.
  OverlapFigures serial = Whole({{"kernel", "gemm", T("000000.000"), "100.000", 7},
                                 {"kernel", "ncclDevKernel_AllReduce", T("000100.000"), "50.000", 20}});
  EXPECT_DOUBLE_EQ(*serial.overlap_ratio, 0.0);
  EXPECT_NE(RankVerdict(serial).find("overlap is the problem"), std::string::npos);
}

// Better overlap could hide only what compute covers: when what no schedule can hide is the
// larger share, the verdict is volume (DDP on an H100, 2 ranks over sockets: 1.4% hidden of 2.5%).
TEST(OverlapEngine, VerdictWeighsWhatScheduleCanRecoverAgainstWhatItCannot) {
  OverlapFigures f;
  f.comm_ns = 1000000;
  f.compute_ns = 25000;
  f.overlap_ns = 14000;
  f.exposed_comm_ns = 986000;
  f.wall_ns = 1100000;
  f.overlap_ratio = 0.014;
  f.achievable_ratio = 0.025;
  const std::string v = RankVerdict(f);
  EXPECT_NE(v.find("volume is the problem"), std::string::npos) << v;
  EXPECT_NE(v.find("hide at most 11.0 µs more (1.1%)"), std::string::npos) << v;
  EXPECT_NE(v.find("975.0 µs stays exposed whatever the schedule"), std::string::npos) << v;
  // Half of it recoverable, a fifth not: the schedule.
  f.compute_ns = 800000;
  f.overlap_ratio = 0.3;
  f.achievable_ratio = 0.8;
  EXPECT_NE(RankVerdict(f).find("overlap is the problem"), std::string::npos);
  // Achievable 60%: 45% recoverable against 40% not is the schedule; 35% against 40% is volume.
  f.achievable_ratio = 0.6;
  f.overlap_ratio = 0.15;
  EXPECT_NE(RankVerdict(f).find("overlap is the problem"), std::string::npos);
  f.overlap_ratio = 0.25;
  EXPECT_NE(RankVerdict(f).find("volume is the problem"), std::string::npos);
}

TEST(OverlapEngine, CommIdentityFromNcclArgsClassifiesAnyKernelName) {
  // A kernel whose name says nothing, but which carries NCCL metadata, is communication.
  std::vector<Ev> evs = {{"kernel", "gemm", T("000000.000"), "100.000", 7},
                         {"kernel", "custom_collective", T("000050.000"), "100.000", 20, -1,
                          R"(, "Collective name": "all_gather_into_tensor", "In msg nelems": 1024, "Out msg nelems": 8192,
                              "Group size": 8, "dtype": "BFloat16", "Process Group Name": "3", "Process Group Description": "fsdp",
                              "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]", "Seq": 42)"}};
  StatusOr<RankTrace> t = ParseJsonText(KinetoJson(evs));
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->comm_ops.size(), 1u);
  const CommOp& op = t->comm_ops[0];
  EXPECT_EQ(op.op, Collective::kAllGather);
  EXPECT_EQ(op.datatype, "BFloat16");
  EXPECT_EQ(op.count, 1024);
  EXPECT_EQ(op.bytes, 2048);
  EXPECT_EQ(op.comm_nranks, 8);
  EXPECT_EQ(op.communicator, "3");
  EXPECT_EQ(op.pg_desc, "fsdp");
  EXPECT_EQ(op.seq, 42);
  EXPECT_EQ(op.comm_rank, 0);  // rank 0 is at index 0 of the group
  EXPECT_EQ(op.source, CommSource::kKinetoArgs);
  OverlapFigures f = WholeTraceFigures(BuildTimelineSets(*t));
  EXPECT_EQ(f.comm_ns, 100000);
  EXPECT_EQ(f.overlap_ns, 50000);
}

// Two ProfilerSteps on the host; GPU work launched in step 5 runs partly after step 5's
// host range ended (the GPU lags), and is still attributed to step 5.
TEST(Iterations, ProjectedOntoGpuByCorrelationAndPartitionTheTimeline) {
  std::vector<Ev> evs = {
      {"user_annotation", "ProfilerStep#5", T("000000.000"), "100.000"},
      {"user_annotation", "ProfilerStep#6", T("000100.000"), "100.000"},
      {"cuda_runtime", "cudaLaunchKernel", T("000010.000"), "5.000", 0, 101},
      {"cuda_runtime", "cudaLaunchKernel", T("000020.000"), "5.000", 0, 102},
      {"cuda_runtime", "cudaLaunchKernel", T("000110.000"), "5.000", 0, 103},
      {"kernel", "gemm", T("000050.000"), "100.000", 7, 101},                   // [50,150) step 5
      {"kernel", "ncclDevKernel_AllReduce", T("000140.000"), "30.000", 20, 102},  // [140,170) step 5
      {"kernel", "gemm", T("000180.000"), "40.000", 7, 103},                    // [180,220) step 6
  };
  StatusOr<RankTrace> t = ParseJsonText(KinetoJson(evs));
  ASSERT_TRUE(t.ok()) << t.status().message();
  StatCounters stats;
  IterationInfo it = FindIterations(*t, stats);
  ASSERT_EQ(it.windows.size(), 2u);
  EXPECT_EQ(it.source, "ProfilerStep");
  const int64_t base = 1000000000000000;
  EXPECT_EQ(it.windows[0].step, 5);
  EXPECT_EQ(it.windows[0].start_ns, base + 50000);
  EXPECT_EQ(it.windows[0].end_ns, base + 180000);  // where step 6's GPU work starts
  EXPECT_EQ(it.windows[1].start_ns, base + 180000);
  EXPECT_EQ(it.windows[1].end_ns, base + 220000);
  TimelineSets sets = BuildTimelineSets(*t);
  OverlapFigures a = FiguresFor(sets, it.windows[0].start_ns, it.windows[0].end_ns);
  OverlapFigures b = FiguresFor(sets, it.windows[1].start_ns, it.windows[1].end_ns);
  OverlapFigures whole = WholeTraceFigures(sets);
  EXPECT_EQ(a.comm_ns, 30000);
  EXPECT_EQ(a.overlap_ns, 10000);
  EXPECT_EQ(a.comm_ops, 1);
  EXPECT_EQ(b.comm_ns, 0);
  EXPECT_FALSE(b.overlap_ratio.has_value());
  EXPECT_EQ(a.compute_ns + b.compute_ns, whole.compute_ns);
  EXPECT_EQ(a.comm_ns + b.comm_ns, whole.comm_ns);
  EXPECT_EQ(a.overlap_ns + b.overlap_ns, whole.overlap_ns);
  EXPECT_EQ(stats.Get(Stat::steps_without_gpu_work), 0);
}

TEST(Iterations, StepWithoutGpuWorkKeepsHostRangeAndIsCounted) {
  std::vector<Ev> evs = {{"user_annotation", "ProfilerStep#1", T("000000.000"), "100.000"}};
  StatusOr<RankTrace> t = ParseJsonText(KinetoJson(evs));
  ASSERT_TRUE(t.ok());
  StatCounters stats;
  IterationInfo it = FindIterations(*t, stats);
  ASSERT_EQ(it.windows.size(), 1u);
  EXPECT_FALSE(it.windows[0].projected);
  EXPECT_EQ(it.windows[0].end_ns - it.windows[0].start_ns, 100000);
  EXPECT_EQ(stats.Get(Stat::steps_without_gpu_work), 1);
}

}  // namespace
}  // namespace overlapprof

namespace overlapprof {
namespace {

// BuildTimelineSets takes activities in any order (a RankTrace not yet finalized).
TEST(OverlapEngine, UnsortedActivitiesGiveTheSameFigures) {
  std::vector<testing::Ev> evs = {
      {"kernel", "gemm_A", "1000000000000.000", "100.000", 7},
      {"kernel", "gemm_B", "1000000000020.000", "30.000", 8},
      {"kernel", "ncclDevKernel_AllReduce", "1000000000090.000", "40.000", 20},
      {"gpu_memcpy", "Memcpy DtoD", "1000000000140.000", "40.000", 7},
      {"kernel", "ncclDevKernel_AllGather", "1000000000120.000", "50.000", 21},
  };
  StatusOr<RankTrace> t = testing::ParseJsonText(testing::KinetoJson(evs));
  ASSERT_TRUE(t.ok());
  OverlapFigures sorted = WholeTraceFigures(BuildTimelineSets(*t));
  std::reverse(t->activities.begin(), t->activities.end());
  OverlapFigures reversed = WholeTraceFigures(BuildTimelineSets(*t));
  EXPECT_EQ(sorted.compute_ns, 100000);
  EXPECT_EQ(sorted.comm_ns, 80000);
  EXPECT_EQ(sorted.overlap_ns, 10000);
  EXPECT_EQ(reversed.compute_ns, sorted.compute_ns);
  EXPECT_EQ(reversed.comm_ns, sorted.comm_ns);
  EXPECT_EQ(reversed.overlap_ns, sorted.overlap_ns);
  EXPECT_EQ(reversed.busy_ns, sorted.busy_ns);
  EXPECT_EQ(reversed.memory_ns, sorted.memory_ns);
  EXPECT_EQ(reversed.wall_ns, sorted.wall_ns);
  EXPECT_EQ(reversed.comm_ops, sorted.comm_ops);
  EXPECT_EQ(reversed.kernels, sorted.kernels);
}

}  // namespace
}  // namespace overlapprof

namespace overlapprof {
namespace {

// NCCL profiler plugin timing (analyzers/comm_ops.h, CommTiming) on a hand-built trace: a GEMM
// [0, 200), a fused launch (ops 0 and 1, launch id 7) whose one kernel [100, 400) is linked to op
// 0, and the plugin's ops [110, 200) and [250, 390).
RankTrace FusedTrace() {
  RankTrace t;
  const uint32_t s = t.StreamIndex(0, 7);
  auto kernel = [&](int64_t a, int64_t b, Category c, uint32_t op) {
    Activity x;
    x.start_ns = a;
    x.end_ns = b;
    x.category = c;
    x.comm_op = op;
    x.stream = s;
    t.activities.push_back(x);
  };
  kernel(0, 200, Category::kCompute, kNoIndex);
  kernel(100, 400, Category::kComm, 0);
  for (int i = 0; i < 2; ++i) {
    CommOp c;
    c.communicator = "c";
    c.op = Collective::kAllReduce;
    c.seq = i;
    c.launch_id = 7;
    c.source = CommSource::kNcclHook;
    t.comm_ops.push_back(c);
  }
  for (auto [a, b, op] : {std::tuple{110, 200, 0u}, std::tuple{250, 390, 1u}}) {
    NcclPluginOp p;
    p.op = Collective::kAllReduce;
    p.start_ns = a;
    p.end_ns = b;
    p.comm_op = op;
    t.nccl_plugin_ops.push_back(p);
  }
  t.meta.nccl_profiler_json = "{}";
  t.Finalize();
  return t;
}

TEST(PluginTiming, EachOpOfAFusedKernelIsItsOwnInterval) {
  RankTrace t = FusedTrace();
  TimelineSets sets = BuildTimelineSets(t);
  EXPECT_TRUE(sets.timing.plugin);
  EXPECT_EQ(sets.timing.source(), "nccl_profiler");
  OverlapFigures f = WholeTraceFigures(sets);
  EXPECT_EQ(f.comm_ns, 90 + 140);
  EXPECT_EQ(f.overlap_ns, 90);
  EXPECT_EQ(f.comm_ops, 2);
  EXPECT_EQ(f.comm_kernels, 1);  // still one kernel
  EXPECT_EQ(f.busy_ns, 200 + 140);  // the kernel outside both ops [200, 250), [390, 400) is idle
  std::vector<OpSpan> spans = CommOpSpans(t, sets.compute, sets.timing);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(std::tie(spans[0].start_ns, spans[0].end_ns, spans[0].busy_ns, spans[0].covered_ns),
            std::make_tuple(int64_t{110}, int64_t{200}, int64_t{90}, int64_t{90}));
  EXPECT_EQ(std::tie(spans[1].start_ns, spans[1].end_ns, spans[1].covered_ns),
            std::make_tuple(int64_t{250}, int64_t{390}, int64_t{0}));
  for (const OpSpan& o : spans) {
    EXPECT_TRUE(o.plugin_timed);
    EXPECT_EQ(std::tie(o.kernel_start_ns, o.kernel_end_ns), std::make_tuple(int64_t{100}, int64_t{400}));
  }
}

TEST(PluginTiming, ALaunchWithAnOpTheCallLacksStaysOnItsKernel) {
  RankTrace t = FusedTrace();
  t.nccl_plugin_ops[1].comm_op = kNoIndex;  // unjoined
  TimelineSets sets = BuildTimelineSets(t);
  EXPECT_FALSE(sets.timing.plugin);
  OverlapFigures f = WholeTraceFigures(sets);
  EXPECT_EQ(f.comm_ns, 300);
  EXPECT_EQ(f.overlap_ns, 100);
  // A copy-engine op (host times) or one without GPU times never times a launch.
  t = FusedTrace();
  t.nccl_plugin_ops[1].flags = NcclPluginOp::kCopyEngine;
  EXPECT_FALSE(BuildTimelineSets(t).timing.plugin);
  t = FusedTrace();
  t.nccl_plugin_ops[0].start_ns = kUnknown;
  EXPECT_FALSE(BuildTimelineSets(t).timing.plugin);
}

TEST(PluginTiming, AGroupedAllToAllStaysOneSpan) {
  RankTrace t = FusedTrace();
  for (CommOp& c : t.comm_ops) c.op = Collective::kAllToAll;  // as NameGroupedAllToAll names grouped sends/recvs
  t.nccl_plugin_ops[1].start_ns = 150;  // concurrent with the first
  TimelineSets sets = BuildTimelineSets(t);
  std::vector<OpSpan> spans = CommOpSpans(t, sets.compute, sets.timing);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(std::tie(spans[0].op, spans[0].start_ns, spans[0].end_ns, spans[0].busy_ns),
            std::make_tuple(0u, int64_t{110}, int64_t{390}, int64_t{280}));
}

}  // namespace
}  // namespace overlapprof
