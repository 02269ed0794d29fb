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
  // The waits are recorded (RankTrace::event_links, as the recorder writes them): the all-reduce's
  // stream waits for an event recorded on the compute stream, the optimizer's for one on stream 20.
  bool record_events = false;
  // Iteration i's all-reduce carries (i + 1) * 4 MiB and transfers in 20 µs + bytes / 50 GB/s (else
  // no bytes, 300 µs).
  bool sized = false;
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

// cudaEventRecord on `stream`, then cudaStreamWaitEvent of `waiter` on it (1 µs each), as the
// recorder stores them: the waiting stream as a (no device, native id) entry.
void RecordAndWait(GenRank& g, int stream, int waiter) {
  const int64_t sync_id = g.corr + 1000000;
  for (EventLinkKind kind : {EventLinkKind::kRecord, EventLinkKind::kStreamWait}) {
    HostCall call;
    call.start_ns = g.h;
    call.end_ns = g.h + 1000;
    call.correlation_id = ++g.corr;
    call.tid = 1;
    call.name_id = g.trace.names.Intern(kind == EventLinkKind::kRecord ? "cudaEventRecord" : "cudaStreamWaitEvent");
    g.trace.host_calls.push_back(call);
    g.h += 1000;
    EventLink l;
    l.kind = kind;
    l.correlation_id = call.correlation_id;
    l.sync_id = sync_id;
    l.stream = kind == EventLinkKind::kRecord ? g.trace.StreamIndex(0, stream) : g.trace.StreamIndex(0xffffffffu, waiter);
    g.trace.event_links.push_back(l);
  }
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
      if (c.record_events) RecordAndWait(g, 7, 20);
      Launch(g, c, 10000);
      g.coll_act = Kernel(g, c, 20, 0, last_compute_end, Category::kComm, "ncclDevKernel_AllReduce");
      g.coll_start = g.trace.activities[g.coll_act].start_ns;
      CommOp op;
      op.communicator = "pg0";
      op.seq = it + 1;
      op.op = Collective::kAllReduce;
      if (c.sized) op.bytes = (it + 1) * (int64_t{4} << 20);
      op.stream = g.trace.activities[g.coll_act].stream;
      g.trace.comm_ops.push_back(op);
      g.trace.activities[g.coll_act].comm_op = static_cast<uint32_t>(g.trace.comm_ops.size() - 1);
    }
    int64_t last = 0;
    for (const GenRank& g : ranks) last = std::max(last, g.coll_start);
    const int64_t transfer = static_cast<int64_t>(
        (c.sized ? 20000.0 + static_cast<double>((it + 1) * (int64_t{4} << 20)) / 50.0 : 300000.0) * c.transfer_factor);
    for (int r = 0; r < c.ranks; ++r) {
      GenRank& g = ranks[r];
      Activity& coll = g.trace.activities[g.coll_act];
      coll.end_ns = last + transfer;
      g.stream_free[20] = coll.end_ns;
      if (c.record_events) RecordAndWait(g, 20, 7);
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

// With the waits recorded, the cross-stream edges come from the records (none inferred: the
// all-reduce's wait for the compute and the optimizer's for the all-reduce), the replay is exact and
// the predictions still match the generator's re-run.
TEST(WhatIfModel, RecordedEventsReplaceTheInferredCrossStreamEdges) {
  GenConfig c;
  c.record_events = true;
  Built b = Build(c);
  const auto replayed = b.graph->Replay({});
  for (size_t r = 0; r < replayed.size(); ++r) EXPECT_EQ(replayed[r], b.measured[r]) << "rank " << r;
  for (const RankModel& m : b.graph->ranks()) {
    // Two recorded waits per modeled window (6 windows: 5 steps + the last); the synchronization is
    // still inferred (rule S), nothing else.
    EXPECT_EQ(m.dependencies_recorded, 2 * c.iterations) << "rank " << m.rank;
    for (const whatif::Edge& e : m.edges) {
      if (e.kind == whatif::EdgeKind::kEvent) {
        EXPECT_TRUE(e.recorded) << "rank " << m.rank;
      }
    }
    EXPECT_EQ(m.unexplained_ns, 0);
  }
  Change ch;
  ch.comm_factor = 0.5;
  GenConfig truth_cfg = c;
  truth_cfg.transfer_factor = 0.5;
  ExpectWithinOnePercent(RunStep(b.graph->Replay(ch)), RunStep(Build(truth_cfg).measured));
  // A recorded wait that ends long before the start does not explain it: counted.
  c.hidden_wait_ns = 1000000;
  const Built hidden = Build(c);
  for (const RankModel& m : hidden.graph->ranks())
    EXPECT_GE(m.unexplained_ns, static_cast<int64_t>(m.Iterations()) * c.hidden_wait_ns) << "rank " << m.rank;
}

// One rank, three iterations of: P (compute, stream 7) and K (a communication kernel matched to
// nothing, stream 9) run together, P ends 3 µs before K; C (stream 20) starts when K ends. The
// trace records that C's stream waits for an event recorded after P, and that the host's
// cudaEventSynchronize waits for the same event, returning 4 µs after P ended (1 µs after K
// ended). Rule E would make C wait for K (the task that ended last, at C's start) and rule S the
// synchronization for K (the last task that ended before the return): with communication free,
// both would predict a shorter step. The records say neither waits for K: no saving.
// `early_record`: in that iteration the event is recorded before P is launched (it covers nothing
// modeled).
RankTrace RecordedEdgeTrace(bool with_links, std::vector<IterationWindow>* windows, int early_record = -1) {
  RankTrace t;
  t.meta.rank = 0;
  int64_t corr = 0;
  auto call = [&](const char* name, int64_t start, int64_t end) {
    HostCall h;
    h.start_ns = start;
    h.end_ns = end;
    h.correlation_id = ++corr;
    h.tid = 1;
    h.name_id = t.names.Intern(name);
    t.host_calls.push_back(h);
    return corr;
  };
  auto kernel = [&](int stream, int64_t launch, int64_t start, int64_t end, Category cat, const char* name) {
    const int64_t id = call("cudaLaunchKernel", launch, launch + 2000);
    Activity a;
    a.correlation_id = id;
    a.launch_ns = launch;
    a.start_ns = start;
    a.end_ns = end;
    a.stream = t.StreamIndex(0, stream);
    a.category = cat;
    a.name_id = t.names.Intern(name);
    t.activities.push_back(a);
  };
  auto link = [&](EventLinkKind kind, int64_t id, int64_t sync_id, uint32_t stream) {
    if (!with_links) return;
    EventLink l;
    l.kind = kind;
    l.correlation_id = id;
    l.sync_id = sync_id;
    l.stream = stream;
    t.event_links.push_back(l);
  };
  const int64_t kStep = 1000000;
  for (int it = 0; it < 3; ++it) {
    const int64_t b = it * kStep + 100000;
    kernel(7, b, b + 10000, b + 297000, Category::kCompute, "gemm");                        // P
    kernel(9, b + 3000, b + 13000, b + 300000, Category::kComm, "ncclDevKernel_AllReduce");  // K
    const int64_t rec = it == early_record ? call("cudaEventRecord", b - 5000, b - 4000)
                                           : call("cudaEventRecord", b + 6000, b + 7000);
    link(EventLinkKind::kRecord, rec, it + 1, t.StreamIndex(0, 7));
    const int64_t wait = call("cudaStreamWaitEvent", b + 8000, b + 9000);
    link(EventLinkKind::kStreamWait, wait, it + 1, t.StreamIndex(0xffffffffu, 20));
    kernel(20, b + 20000, b + 300000, b + 400000, Category::kCompute, "elementwise");  // C
    const int64_t sync = call("cudaEventSynchronize", b + 295000, b + 301000);
    link(EventLinkKind::kHostWait, sync, it + 1, kNoIndex);
    windows->push_back({b + 10000, b + kStep + 10000, it, true, false});
  }
  windows->back().end_ns = 3 * kStep + 100000;
  t.Finalize();
  return t;
}

TEST(WhatIfModel, RecordedEdgeWinsOverTheInferredOne) {
  std::vector<IterationWindow> w;
  const RankTrace t = RecordedEdgeTrace(true, &w);
  RankModel m = BuildRankModel(t, w);
  ASSERT_EQ(m.why_not, "");
  EXPECT_EQ(m.dependencies_recorded, 6);  // per window: C waits for P, the synchronization for P
  EXPECT_EQ(m.dependencies_inferred, 0);
  // Every event edge and synchronization edge starts at P's end (P: the GPU tasks on stream 7).
  int checked = 0;
  for (const whatif::Edge& e : m.edges) {
    if (e.kind != whatif::EdgeKind::kEvent && e.kind != whatif::EdgeKind::kSyncWait) continue;
    EXPECT_TRUE(e.recorded);
    const whatif::Task& src = m.tasks[e.src / 2];
    EXPECT_EQ((src.end_ns - 100000) % 1000000, 297000) << "edge from the task ending at " << src.end_ns;
    ++checked;
  }
  EXPECT_EQ(checked, 6);
  const std::vector<int64_t> measured = m.measured_steps;
  RunGraph g({std::move(m)}, {0});
  EXPECT_EQ(g.Replay({})[0], measured);
  Change free_comm;
  free_comm.comm_factor = 0.0;
  EXPECT_EQ(g.Replay(free_comm)[0], measured);  // nothing waits for K

  // Without the records, the rules infer the waits on K, and the same scenario predicts a saving.
  std::vector<IterationWindow> w2;
  RankModel inferred = BuildRankModel(RecordedEdgeTrace(false, &w2), w2);
  ASSERT_EQ(inferred.why_not, "");
  EXPECT_EQ(inferred.dependencies_recorded, 0);
  EXPECT_GE(inferred.dependencies_inferred, 6);
  RunGraph g2({std::move(inferred)}, {0});
  EXPECT_LT(g2.Replay(free_comm)[0][0], measured[0]);
}

// A wait whose record is not in the trace (not joined) leaves the rules in place.
TEST(WhatIfModel, WaitWithoutItsRecordIsInferred) {
  std::vector<IterationWindow> w;
  RankTrace t = RecordedEdgeTrace(true, &w);
  std::erase_if(t.event_links, [](const EventLink& l) { return l.kind == EventLinkKind::kRecord; });
  const RankModel m = BuildRankModel(t, w);
  EXPECT_EQ(m.dependencies_recorded, 0);
  EXPECT_GE(m.dependencies_inferred, 6);
}

// The run's matched transfers are the fit's samples: the generator's latency and bandwidth come back.
TEST(WhatIfModel, TransferSamplesFitTheGeneratorsLatencyAndBandwidth) {
  GenConfig c;
  c.sized = true;
  Built b = Build(c);
  const std::vector<whatif::TransferSample>& s = b.graph->transfer_samples();
  EXPECT_EQ(s.size(), static_cast<size_t>(c.ranks * c.iterations));
  const std::vector<whatif::TransferFit> fits = whatif::FitTransfers(s);
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].op, Collective::kAllReduce);
  EXPECT_FALSE(fits[0].from_kernels);
  EXPECT_NEAR(fits[0].latency_ns, 20000, 2);
  EXPECT_NEAR(fits[0].bytes_per_ns, 50, 0.01);
  // One rank alone: its kernels' durations (waiting for the others included) are the samples.
  std::vector<std::vector<IterationWindow>> windows;
  std::vector<RankTrace> traces = Generate(c, &windows);
  std::vector<RankModel> one;
  one.push_back(BuildRankModel(traces[0], windows[0]));
  const RunGraph alone(std::move(one), {0});
  ASSERT_EQ(alone.transfer_samples().size(), static_cast<size_t>(c.iterations));
  EXPECT_TRUE(alone.transfer_samples()[0].kernel);
}

// A wait whose record covers no modeled task holds nothing: the rules apply to what it would hold.
TEST(WhatIfModel, WaitOnARecordCoveringNothingModeledIsInferred) {
  std::vector<IterationWindow> w;
  const RankModel m = BuildRankModel(RecordedEdgeTrace(true, &w, 0), w);
  ASSERT_EQ(m.why_not, "");
  EXPECT_EQ(m.dependencies_recorded, 4);  // iterations 1 and 2
  EXPECT_EQ(m.dependencies_inferred, 2);  // iteration 0: C waits for K (rule E), the synchronization for K (rule S)
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
