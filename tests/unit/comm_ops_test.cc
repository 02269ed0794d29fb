// Communication op spans (analyzers/comm_ops.h): timed by NCCL's profiler plugin per operation
// where the trace has it, else by their kernels.
#include "analyzers/comm_ops.h"

#include <gtest/gtest.h>

#include <tuple>

#include "analyzers/overlap.h"
#include "test_util.h"

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
