// RankTraceBuilder (src/trace/rank_builder.h): kernels classified by name with their ops, peer
// copies, and launch linking in memory and streamed.
#include "src/trace/rank_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace overlapprof {
namespace {

Activity Gpu(int64_t start, int64_t correlation, ActivityKind kind = ActivityKind::kKernel) {
  Activity a;
  a.start_ns = start;
  a.end_ns = start + 10;
  a.correlation_id = correlation;
  a.kind = kind;
  return a;
}

HostCall Call(int64_t start, int64_t correlation, int64_t tid = 7) {
  HostCall h;
  h.start_ns = start;
  h.end_ns = start + 5;
  h.correlation_id = correlation;
  h.tid = tid;
  return h;
}

// Appends a kernel named `name` through AddKernel, as an importer does.
void AddKernel(RankTraceBuilder& b, RankTrace& t, std::string_view name, uint32_t stream = 0) {
  Activity a = Gpu(0, kUnknown);
  a.name_id = t.names.Intern(name);
  a.stream = stream;
  b.AddKernel(t, a);
  t.activities.push_back(a);
}

TEST(RankTraceBuilder, ACommunicationKernelGetsItsOwnOpNamedFromTheKernel) {
  RankTrace t;
  RankTraceBuilder b;
  AddKernel(b, t, "ncclDevKernel_AllGather_RING_LL", 3);
  AddKernel(b, t, "volta_sgemm_128x64_nn");
  AddKernel(b, t, "ncclDevKernel_AllGather_RING_LL", 4);
  ASSERT_EQ(t.activities.size(), 3u);
  EXPECT_EQ(t.activities[0].category, Category::kComm);
  EXPECT_EQ(t.activities[1].category, Category::kCompute);
  EXPECT_EQ(t.activities[1].comm_op, kNoIndex);
  EXPECT_EQ(t.activities[2].category, Category::kComm);
  // One op per kernel (not per name), in the order the kernels came.
  ASSERT_EQ(t.comm_ops.size(), 2u);
  EXPECT_EQ(t.activities[0].comm_op, 0u);
  EXPECT_EQ(t.activities[2].comm_op, 1u);
  for (const CommOp& op : t.comm_ops) {
    EXPECT_EQ(op.op, Collective::kAllGather);
    EXPECT_EQ(op.rule, CommRule::kKernelName);
    EXPECT_EQ(op.source, CommSource::kKernelName);
    EXPECT_EQ(op.communicator, "unknown");
  }
  EXPECT_EQ(t.comm_ops[0].stream, 3u);
  EXPECT_EQ(t.comm_ops[1].stream, 4u);
}

TEST(RankTraceBuilder, NamesInternedAfterTheFirstKernelAreClassifiedToo) {
  RankTrace t;
  RankTraceBuilder b;
  AddKernel(b, t, "gemm");  // the memo is sized here
  for (int i = 0; i < 100; ++i) t.names.Intern("name " + std::to_string(i));
  AddKernel(b, t, "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t");
  AddKernel(b, t, "gemm");
  ASSERT_EQ(t.comm_ops.size(), 1u);
  EXPECT_EQ(t.comm_ops[0].op, Collective::kSendRecv);
  EXPECT_EQ(t.activities[1].category, Category::kComm);
  EXPECT_EQ(t.activities[2].category, Category::kCompute);
}

TEST(RankTraceBuilder, APeerCopyIsCommunicationWithAP2pCopyOpOfItsBytes) {
  RankTrace t;
  Activity a = Gpu(0, 1, ActivityKind::kMemcpy);
  a.bytes = 4096;
  a.stream = 2;
  RankTraceBuilder::AddPeerCopy(t, a);
  EXPECT_EQ(a.category, Category::kComm);
  ASSERT_EQ(a.comm_op, 0u);
  const CommOp& op = t.comm_ops[0];
  EXPECT_EQ(op.op, Collective::kPeerCopy);
  EXPECT_EQ(op.bytes, 4096);
  EXPECT_EQ(op.rule, CommRule::kPeerCopy);
  EXPECT_EQ(op.stream, 2u);
  EXPECT_EQ(DeriveCommRule(op), CommRule::kPeerCopy);  // as a store reader finds it again
}

TEST(RankTraceBuilder, NewCommOpMakesTheActivityCommunication) {
  RankTrace t;
  t.comm_ops.resize(2);
  Activity a = Gpu(0, 1, ActivityKind::kMemcpy);
  a.stream = 5;
  CommOp& op = RankTraceBuilder::NewCommOp(t, a, CommRule::kHostOp);
  op.op = Collective::kAllReduce;
  EXPECT_EQ(a.category, Category::kComm);
  EXPECT_EQ(a.comm_op, 2u);
  ASSERT_EQ(t.comm_ops.size(), 3u);
  EXPECT_EQ(t.comm_ops[2].op, Collective::kAllReduce);
  EXPECT_EQ(t.comm_ops[2].rule, CommRule::kHostOp);
  EXPECT_EQ(t.comm_ops[2].stream, 5u);
  EXPECT_EQ(t.comm_ops[2].communicator, "unknown");
}

// The links of a trace whose calls are in `calls` order: (launch_ns, op host enter, op host tid)
// of each activity, and the unmatched count.
struct Links {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> of;
  int64_t unmatched;
  bool operator==(const Links&) const = default;
};
Links LinksOf(const RankTrace& t) {
  Links l{{}, t.stats.Get(Stat::correlations_unmatched)};
  for (const Activity& a : t.activities) {
    const CommOp* op = a.comm_op != kNoIndex ? &t.comm_ops[a.comm_op] : nullptr;
    l.of.emplace_back(a.launch_ns, op ? op->host_enter_ns : kUnknown, op ? op->host_tid : kUnknown);
  }
  return l;
}

// A comm kernel (id 1), a compute kernel (id 3), a sync record (id 2), one without an id and
// one whose id no call has.
RankTrace LaunchTrace(std::vector<HostCall> calls) {
  RankTrace t;
  t.host_calls = std::move(calls);
  t.activities = {Gpu(10, 1), Gpu(20, 3), Gpu(30, 2, ActivityKind::kSync), Gpu(40, kUnknown), Gpu(50, 9)};
  t.comm_ops.resize(1);
  t.activities[0].comm_op = 0;
  return t;
}

TEST(RankTraceBuilder, EachActivityIsLaunchedByTheFirstCallWithItsId) {
  // Sorted by id (the calls are their own index), and not (an index is built): the same links.
  for (const std::vector<HostCall>& calls :
       {std::vector<HostCall>{Call(1, 1, 11), Call(2, 1, 12), Call(3, 2), Call(5, 3)},
        std::vector<HostCall>{Call(5, 3), Call(1, 1, 11), Call(3, 2), Call(2, 1, 12)}}) {
    RankTrace t = LaunchTrace(calls);
    std::vector<std::pair<uint32_t, uint32_t>> seen;
    RankTraceBuilder b;
    b.LinkLaunches(t, t.host_calls, LaunchLink::kImported, [&](uint32_t a, uint32_t c) { seen.emplace_back(a, c); });
    const Links want{{{1, 1, 11}, {5, kUnknown, kUnknown}, {kUnknown, kUnknown, kUnknown},
                      {kUnknown, kUnknown, kUnknown}, {kUnknown, kUnknown, kUnknown}},
                     2};  // no id, id 9; never the sync record
    EXPECT_EQ(LinksOf(t), want);
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(t.host_calls[seen[0].second].start_ns, 1);
    EXPECT_EQ(seen[1].first, 1u);
    EXPECT_EQ(t.host_calls[seen[1].second].start_ns, 5);
    EXPECT_EQ(t.comm_ops[0].host_exit_ns, 6);
  }
}

TEST(RankTraceBuilder, WithoutCallsEveryGpuActivityIsUnmatched) {
  RankTrace t = LaunchTrace({});
  RankTraceBuilder b;
  b.LinkLaunches(t, t.host_calls);
  EXPECT_EQ(t.stats.Get(Stat::correlations_unmatched), 4);
}

TEST(RankTraceBuilder, RecordedLinksSetTheLaunchTimeOnlyAndKeepWhatIsSet) {
  RankTrace t = LaunchTrace({Call(1, 1), Call(3, 2), Call(5, 3)});
  t.activities[1].launch_ns = 99;  // set by whoever wrote the record
  RankTraceBuilder b;
  b.LinkLaunches(t, t.host_calls, LaunchLink::kRecorded);
  EXPECT_EQ(t.activities[0].launch_ns, 1);
  EXPECT_EQ(t.comm_ops[0].host_enter_ns, kUnknown);  // the op keeps its NCCL call's times
  EXPECT_EQ(t.activities[1].launch_ns, 99);
  EXPECT_EQ(t.activities[2].launch_ns, 3);  // a sync record has its synchronizing call
  // Unmatched: id 9 only (an activity without an id is not the recorder's to link).
  EXPECT_EQ(t.stats.Get(Stat::correlations_unmatched), 1);
}

// Streams the calls through ExpectLaunches .. EndLaunches, as nsys does; `skip` calls are read
// but their span is bad (not offered).
void StreamLaunches(RankTrace& t, const std::vector<HostCall>& calls, const std::vector<bool>& bad = {}) {
  RankTraceBuilder b;
  if (b.ExpectLaunches(t)) {
    for (size_t i = 0; i < calls.size(); ++i) {
      const HostCall& h = calls[i];
      if (!b.InRange(h.correlation_id)) continue;
      const size_t w = b.Waiting(h.correlation_id);
      if (w == RankTraceBuilder::kNotWaiting || b.Launched(w)) continue;
      if (i < bad.size() && bad[i]) continue;
      b.Launch(t, w, h);
    }
  }
  b.EndLaunches(t);
}

TEST(RankTraceBuilder, StreamedCallsLinkAsCallsInMemory) {
  const std::vector<HostCall> calls = {Call(5, 3), Call(1, 1, 11), Call(3, 2), Call(2, 1, 12)};
  RankTrace streamed = LaunchTrace(calls), in_memory = LaunchTrace(calls);
  StreamLaunches(streamed, calls);
  RankTraceBuilder().LinkLaunches(in_memory, in_memory.host_calls);
  EXPECT_EQ(LinksOf(streamed), LinksOf(in_memory));
  EXPECT_EQ(streamed.activities[0].launch_ns, 1);
}

TEST(RankTraceBuilder, ACallNotOfferedLeavesItsActivitiesToTheNextWithTheId) {
  RankTrace t = LaunchTrace({});
  t.activities.push_back(Gpu(60, 1));  // a second activity with id 1
  StreamLaunches(t, {Call(1, 1), Call(2, 1), Call(5, 3)}, {true});
  EXPECT_EQ(t.activities[0].launch_ns, 2);
  EXPECT_EQ(t.activities[5].launch_ns, 2);
  EXPECT_EQ(t.stats.Get(Stat::correlations_unmatched), 2);  // no id, id 9
}

TEST(RankTraceBuilder, NothingToExpectCountsEveryGpuActivityUnmatched) {
  RankTrace t;
  t.activities = {Gpu(10, kUnknown), Gpu(20, 5, ActivityKind::kSync), Gpu(30, kUnknown, ActivityKind::kMemcpy)};
  RankTraceBuilder b;
  EXPECT_FALSE(b.ExpectLaunches(t));
  EXPECT_FALSE(b.InRange(5));
  EXPECT_EQ(b.Waiting(5), RankTraceBuilder::kNotWaiting);
  b.EndLaunches(t);
  EXPECT_EQ(t.stats.Get(Stat::correlations_unmatched), 2);
  // Never expected (the importer found no call table): the same count.
  RankTrace u = LaunchTrace({});
  RankTraceBuilder().EndLaunches(u);
  EXPECT_EQ(u.stats.Get(Stat::correlations_unmatched), 4);
}

TEST(RankTraceBuilder, StreamedAndInMemoryAgreeOnRandomTraces) {
  std::mt19937_64 rng(31);
  for (int round = 0; round < 200; ++round) {
    const int ids = 1 + static_cast<int>(rng() % 40);
    std::vector<Activity> activities;
    size_t ops = 0;
    for (int i = 0, n = static_cast<int>(rng() % 60); i < n; ++i) {
      const int64_t id = rng() % 8 == 0 ? kUnknown : static_cast<int64_t>(rng() % ids);
      activities.push_back(Gpu(i, id, rng() % 6 == 0 ? ActivityKind::kSync : ActivityKind::kKernel));
      if (rng() % 3 == 0) activities.back().comm_op = static_cast<uint32_t>(ops++);
    }
    // Calls mostly in id order, some out of it and repeated.
    std::vector<HostCall> calls;
    for (int i = 0, n = static_cast<int>(rng() % 60); i < n; ++i)
      calls.push_back(Call(100 + i, rng() % 4 == 0 ? static_cast<int64_t>(rng() % ids) : i % ids,
                           static_cast<int64_t>(rng() % 3)));
    RankTrace streamed, in_memory;
    for (RankTrace* t : {&streamed, &in_memory}) {
      t->activities = activities;
      t->host_calls = calls;
      t->comm_ops.resize(ops);
    }
    StreamLaunches(streamed, calls);
    RankTraceBuilder().LinkLaunches(in_memory, in_memory.host_calls);
    ASSERT_EQ(LinksOf(streamed), LinksOf(in_memory)) << "round " << round;
    // And both are what "the first call with the id" says.
    for (const Activity& a : in_memory.activities) {
      if (a.kind == ActivityKind::kSync || a.correlation_id == kUnknown) {
        EXPECT_EQ(a.launch_ns, kUnknown);
        continue;
      }
      auto first = std::find_if(calls.begin(), calls.end(),
                                [&](const HostCall& h) { return h.correlation_id == a.correlation_id; });
      EXPECT_EQ(a.launch_ns, first == calls.end() ? kUnknown : first->start_ns);
    }
  }
}

TEST(RankTraceBuilder, GallopLowerBoundIsLowerBoundFromAnyHint) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 500; ++round) {
    std::vector<int64_t> keys(rng() % 50);
    for (int64_t& k : keys) k = static_cast<int64_t>(rng() % 30);
    std::sort(keys.begin(), keys.end());
    size_t hint = rng() % (keys.size() + 3);
    for (int q = 0; q < 20; ++q) {
      const int64_t id = static_cast<int64_t>(rng() % 32) - 1;
      const size_t want = static_cast<size_t>(std::lower_bound(keys.begin(), keys.end(), id) - keys.begin());
      const size_t got = RankTraceBuilder::GallopLowerBound(keys.size(), [&](size_t i) { return keys[i]; }, id, hint);
      ASSERT_EQ(got, want) << "round " << round << " id " << id;
      EXPECT_EQ(hint, got);
    }
  }
}

}  // namespace
}  // namespace overlapprof
