// The what-if model (analyzers/what_if_model.h): on traces made by a small causal generator that
// knows the true dependencies, the replay gives back every measured step exactly, and each
// scenario's prediction equals the generator re-run with that change (within 1%).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "analyzers/what_if_model.h"

namespace overlapprof {
namespace {

using whatif::BuildRankModel;
using whatif::Change;
using whatif::RankModel;
using whatif::RunGraph;

// What the generator is asked to run. Every rank runs the same step, in lock step:
//   main thread: kKernels compute launches (call kApiNs, then host work until the next launch),
//   an all-reduce launched after them (stream 20, waits for the compute launched before it), an
//   optimizer kernel (stream 7, waits for the all-reduce), cudaDeviceSynchronize, a data-loading gap.
//   GPU task start = max(launch call start + launch latency, stream free, what it waits for).
//   All-reduce end on every rank = the last rank's start + transfer.
struct GenConfig {
  int ranks = 4;
  int iterations = 6;
  int kernels = 12;
  double transfer_factor = 1.0;
  int straggler = -1;          // this rank's compute is `straggler_factor` slower
  double straggler_factor = 1.0;
  bool host_free = false;      // launch calls, host work between launches and launch latency take 0
  double host_ratio = 0.85;    // host time per compute launch, as a fraction of the kernel's
  int64_t hidden_wait_ns = 0;  // the optimizer also waits this long after the all-reduce, for nothing the trace records
};

constexpr int64_t kApiNs = 3000, kLaunchLatNs = 4000, kSyncReturnNs = 4000, kGapNs = 150000;

int64_t KernelNs(int r, int k, const GenConfig& c) {
  const int64_t base = 200000 + 15000 * ((k * 7 + r * 3) % 5);
  return c.straggler == r ? static_cast<int64_t>(static_cast<double>(base) * c.straggler_factor) : base;
}

struct GenRank {
  RankTrace trace;
  int64_t h = 1000000;  // host clock of the main thread
  std::map<int, int64_t> stream_free;
  int64_t corr = 0;
  std::vector<IterationWindow> windows;
  int64_t coll_start = 0;
  size_t coll_act = 0;
};

void Launch(GenRank& g, const GenConfig& c, int64_t host_ns) {
  HostCall call;
  call.start_ns = g.h;
  call.end_ns = g.h + (c.host_free ? 0 : kApiNs);
  call.correlation_id = ++g.corr;
  call.tid = 1;
  call.name_id = g.trace.names.Intern("cudaLaunchKernel");
  g.trace.host_calls.push_back(call);
  g.h += c.host_free ? 0 : host_ns;
}

size_t Kernel(GenRank& g, const GenConfig& c, int stream, int64_t dur, int64_t waits_for, Category cat,
              const char* name) {
  Activity a;
  a.correlation_id = g.corr;
  a.launch_ns = g.trace.host_calls.back().start_ns;
  a.start_ns = std::max({a.launch_ns + (c.host_free ? 0 : kLaunchLatNs), g.stream_free[stream], waits_for});
  a.end_ns = a.start_ns + dur;
  a.stream = g.trace.StreamIndex(0, stream);
  a.category = cat;
  a.name_id = g.trace.names.Intern(name);
  g.stream_free[stream] = a.end_ns;
  g.trace.activities.push_back(a);
  return g.trace.activities.size() - 1;
}

// `windows`: each rank's iteration windows (each from its first GPU task to the next one's).
std::vector<RankTrace> Generate(const GenConfig& c, std::vector<std::vector<IterationWindow>>* windows = nullptr) {
  std::vector<GenRank> ranks(c.ranks);
  for (int r = 0; r < c.ranks; ++r) ranks[r].trace.meta.rank = r;
  for (int it = 0; it < c.iterations; ++it) {
    for (int r = 0; r < c.ranks; ++r) {
      GenRank& g = ranks[r];
      int64_t first = -1, last_compute_end = 0;
      for (int k = 0; k < c.kernels; ++k) {
        const int64_t d = KernelNs(r, k, c);
        Launch(g, c, static_cast<int64_t>(c.host_ratio * static_cast<double>(d)));
        const size_t a = Kernel(g, c, 7, d, 0, Category::kCompute, "gemm");
        if (first < 0) first = g.trace.activities[a].start_ns;
        last_compute_end = g.trace.activities[a].end_ns;
      }
      if (it > 0) g.windows.back().end_ns = first;
      g.windows.push_back({first, 0, it, true, false});
      Launch(g, c, 10000);
      g.coll_act = Kernel(g, c, 20, 0, last_compute_end, Category::kComm, "ncclDevKernel_AllReduce");
      g.coll_start = g.trace.activities[g.coll_act].start_ns;
      CommOp op;
      op.communicator = "pg0";
      op.seq = it + 1;
      op.op = Collective::kAllReduce;
      op.stream = g.trace.activities[g.coll_act].stream;
      g.trace.comm_ops.push_back(op);
      g.trace.activities[g.coll_act].comm_op = static_cast<uint32_t>(g.trace.comm_ops.size() - 1);
    }
    int64_t last = 0;
    for (const GenRank& g : ranks) last = std::max(last, g.coll_start);
    const int64_t transfer = static_cast<int64_t>(300000.0 * c.transfer_factor);
    for (int r = 0; r < c.ranks; ++r) {
      GenRank& g = ranks[r];
      Activity& coll = g.trace.activities[g.coll_act];
      coll.end_ns = last + transfer;
      g.stream_free[20] = coll.end_ns;
      Launch(g, c, 5000);
      Kernel(g, c, 7, 50000, coll.end_ns + c.hidden_wait_ns, Category::kCompute, "adam");
      int64_t gpu_done = 0;
      for (const auto& [s, t] : g.stream_free) gpu_done = std::max(gpu_done, t);
      HostCall sync;
      sync.start_ns = g.h;
      sync.end_ns = std::max(g.h, gpu_done) + kSyncReturnNs;
      sync.correlation_id = ++g.corr;
      sync.tid = 1;
      sync.name_id = g.trace.names.Intern("cudaDeviceSynchronize");
      g.trace.host_calls.push_back(sync);
      g.h = sync.end_ns + kGapNs;
    }
  }
  std::vector<RankTrace> out;
  for (GenRank& g : ranks) {
    int64_t end = 0;
    for (const Activity& a : g.trace.activities) end = std::max(end, a.end_ns);
    g.windows.back().end_ns = end;
    g.trace.Finalize();
    out.push_back(std::move(g.trace));
    if (windows) windows->push_back(g.windows);
  }
  return out;
}

std::vector<std::vector<IterationWindow>> Windows(const GenConfig& c) {
  std::vector<std::vector<IterationWindow>> w;
  Generate(c, &w);
  return w;
}

struct Built {
  std::unique_ptr<RunGraph> graph;
  std::vector<std::vector<int64_t>> measured;
};

Built Build(const GenConfig& c) {
  std::vector<std::vector<IterationWindow>> windows;
  std::vector<RankTrace> traces = Generate(c, &windows);
  std::vector<RankModel> models;
  Built b;
  for (size_t r = 0; r < traces.size(); ++r) {
    models.push_back(BuildRankModel(traces[r], windows[r]));
    EXPECT_EQ(models.back().why_not, "");
    b.measured.push_back(models.back().measured_steps);
  }
  b.graph = std::make_unique<RunGraph>(std::move(models), std::vector<int64_t>(traces.size(), 0));
  return b;
}

// The run's step: the slowest rank's mean step.
int64_t RunStep(const std::vector<std::vector<int64_t>>& steps) {
  int64_t run = 0;
  for (const auto& s : steps) {
    if (s.empty()) continue;
    int64_t sum = 0;
    for (int64_t v : s) sum += v;
    run = std::max(run, sum / static_cast<int64_t>(s.size()));
  }
  return run;
}

TEST(WhatIfModel, ReplayGivesBackTheMeasuredStepsExactly) {
  GenConfig c;
  c.straggler = 2;
  c.straggler_factor = 1.1;
  Built b = Build(c);
  EXPECT_EQ(b.graph->matched_collectives(), static_cast<int64_t>(c.iterations));
  EXPECT_EQ(b.graph->negative_transfers(), 0);
  const auto replayed = b.graph->Replay({});
  for (size_t r = 0; r < replayed.size(); ++r) {
    ASSERT_EQ(b.measured[r].size(), static_cast<size_t>(c.iterations - 1));
    EXPECT_EQ(replayed[r], b.measured[r]) << "rank " << r;
  }
  // The collective waits for the compute launched before it and the optimizer for the collective:
  // neither is in the trace, both inferred.
  for (const RankModel& m : b.graph->ranks()) EXPECT_GE(m.dependencies_inferred, 2 * (c.iterations - 1));
}

void ExpectWithinOnePercent(int64_t predicted, int64_t truth) {
  EXPECT_LE(std::fabs(static_cast<double>(predicted - truth)), 0.01 * static_cast<double>(truth))
      << "predicted " << predicted << " truth " << truth;
}

TEST(WhatIfModel, CommunicationFasterMatchesTheGeneratorRerun) {
  GenConfig c;
  Built b = Build(c);
  for (double f : {0.5, 0.0}) {
    Change ch;
    ch.comm_factor = f;
    GenConfig truth_cfg = c;
    truth_cfg.transfer_factor = f;
    Built truth = Build(truth_cfg);
    ExpectWithinOnePercent(RunStep(b.graph->Replay(ch)), RunStep(truth.measured));
  }
  // The change matters: the prediction is not the measured step.
  Change ch;
  ch.comm_factor = 0.0;
  EXPECT_LT(RunStep(b.graph->Replay(ch)), RunStep(b.measured) - 200000);
}

TEST(WhatIfModel, RanksTogetherMatchesTheRerunWithoutStraggler) {
  GenConfig c;
  c.straggler = 1;
  c.straggler_factor = 1.1;
  Built b = Build(c);
  const std::vector<int64_t> compute = b.graph->ComputeTime();
  std::vector<int64_t> sorted = compute;
  std::sort(sorted.begin(), sorted.end());
  Change ch;
  ch.compute_factor.assign(compute.size(), 1.0);
  const double median = (static_cast<double>(sorted[1]) + static_cast<double>(sorted[2])) / 2;
  for (size_t s = 0; s < compute.size(); ++s)
    if (static_cast<double>(compute[s]) > median) ch.compute_factor[s] = median / static_cast<double>(compute[s]);
  GenConfig truth_cfg = c;
  truth_cfg.straggler = -1;
  Built truth = Build(truth_cfg);
  ExpectWithinOnePercent(RunStep(b.graph->Replay(ch)), RunStep(truth.measured));
  EXPECT_GT(RunStep(b.measured) - RunStep(truth.measured), 100000);  // the straggler costs something
}

TEST(WhatIfModel, CriticalPathWaitsForTheStragglerAndAddsUpToTheStep) {
  GenConfig c;
  c.straggler = 1;
  c.straggler_factor = 1.2;
  Built b = Build(c);
  std::vector<std::vector<whatif::PathSplit>> paths;
  const auto steps = b.graph->Replay({}, &paths);
  for (size_t r = 0; r < paths.size(); ++r) {
    ASSERT_EQ(paths[r].size(), steps[r].size());
    for (size_t k = 0; k < paths[r].size(); ++k) {
      const whatif::PathSplit& p = paths[r][k];
      int64_t sum = 0;
      for (int64_t ns : p.part_ns) sum += ns;
      EXPECT_EQ(sum, steps[r][k]) << "rank " << r;  // a chain of non-negative edges back to the step's start
      if (r == 1) {
        EXPECT_EQ(p.part_ns[whatif::kPathWaiting], 0);
        EXPECT_GT(p.part_ns[whatif::kPathCompute], steps[r][k] / 2);
      } else {
        EXPECT_EQ(p.waited_slot, 1);
        EXPECT_GT(p.part_ns[whatif::kPathWaiting], 0);
      }
    }
  }
}

TEST(WhatIfModel, HostOverheadGoneMatchesTheRerunWithoutHostWork) {
  GenConfig c;
  c.kernels = 40;
  c.host_ratio = 1.5;  // host-bound: the GPU waits for launches
  Built b = Build(c);
  Change ch;
  ch.host_free = true;
  GenConfig truth_cfg = c;
  truth_cfg.host_free = true;
  Built truth = Build(truth_cfg);
  ExpectWithinOnePercent(RunStep(b.graph->Replay(ch)), RunStep(truth.measured));
  EXPECT_LT(RunStep(truth.measured), RunStep(b.measured) * 8 / 10);  // the host overhead costs something
}

// A wait the trace does not record (an event on a stream nothing else shows) is not explained by
// the stream, the launch or an inferred edge: it is counted, so that no scenario rests on it.
TEST(WhatIfModel, DelaysNothingExplainsAreCounted) {
  GenConfig c;
  Built clean = Build(c);
  for (const RankModel& m : clean.graph->ranks()) EXPECT_EQ(m.unexplained_ns, 0) << "rank " << m.rank;
  c.hidden_wait_ns = 1000000;
  Built hidden = Build(c);
  for (const RankModel& m : hidden.graph->ranks()) {
    EXPECT_GE(m.unexplained_ns, static_cast<int64_t>(m.Iterations()) * c.hidden_wait_ns) << "rank " << m.rank;
    int64_t measured = 0;
    for (int64_t x : m.measured_steps) measured += x;
    EXPECT_GT(static_cast<double>(m.unexplained_ns), whatif::kMaxUnexplainedShare * static_cast<double>(measured));
  }
  c.hidden_wait_ns = whatif::kEventToleranceNs / 2;  // within the event tolerance: an inferred edge explains it
  Built small = Build(c);
  for (const RankModel& m : small.graph->ranks()) EXPECT_EQ(m.unexplained_ns, 0) << "rank " << m.rank;
}

TEST(WhatIfModel, TooFewSteadyIterationsIsNotModeled) {
  GenConfig c;
  c.ranks = 1;
  std::vector<RankTrace> t = Generate(c);
  std::vector<IterationWindow> w = Windows(c)[0];
  for (size_t i = 1; i < w.size(); ++i) w[i].warmup = i % 2 == 1;  // no two steady ones in a row
  w[0].warmup = true;
  EXPECT_EQ(BuildRankModel(t[0], w).why_not, "fewer than two consecutive steady iterations");
  std::vector<IterationWindow> w2 = Windows(c)[0];
  t[0].host_calls.clear();
  EXPECT_NE(BuildRankModel(t[0], w2).why_not.find("no host runtime calls"), std::string::npos);
}

}  // namespace
}  // namespace overlapprof
