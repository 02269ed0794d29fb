// LinkInjectorRecords (src/trace/link.cc): launch times from host calls, comm ops from external
// correlation records, NCCL groups sharing a launch id, and the two data-quality counters.
#include "src/trace/link.h"

#include <gtest/gtest.h>

namespace overlapprof {
namespace {

Activity Kernel(int64_t start, int64_t correlation, uint32_t stream = 0) {
  Activity a;
  a.start_ns = start;
  a.end_ns = start + 10;
  a.correlation_id = correlation;
  a.stream = stream;
  return a;
}

HostCall Call(int64_t start, int64_t correlation) {
  HostCall h;
  h.start_ns = start;
  h.end_ns = start + 5;
  h.correlation_id = correlation;
  return h;
}

CommOp Op(int64_t launch_id, uint32_t stream = kNoIndex) {
  CommOp c;
  c.op = Collective::kAllReduce;
  c.launch_id = launch_id;
  c.stream = stream;
  return c;
}

TEST(Link, LaunchTimeFromTheHostCallWithTheCorrelationId) {
  RankTrace t;
  t.host_calls = {Call(100, 1), Call(200, 2)};
  t.activities = {Kernel(150, 1), Kernel(250, 2), Kernel(300, 3)};
  LinkInjectorRecords(t);
  EXPECT_EQ(t.activities[0].launch_ns, 100);
  EXPECT_EQ(t.activities[1].launch_ns, 200);
  EXPECT_EQ(t.activities[2].launch_ns, kUnknown);
  EXPECT_EQ(t.stats.Get(Stat::correlations_unmatched), 1);  // correlation 3
}

TEST(Link, KeepsValuesAnImporterAlreadySet) {
  RankTrace t;
  t.host_calls = {Call(100, 1)};
  t.comm_ops = {Op(7), Op(8)};
  t.external_correlations = {{1, 7}};
  Activity a = Kernel(150, 1);
  a.launch_ns = 90;
  a.comm_op = 1;
  t.activities = {a};
  LinkInjectorRecords(t);
  EXPECT_EQ(t.activities[0].launch_ns, 90);
  EXPECT_EQ(t.activities[0].comm_op, 1u);  // not the external correlation's op 0
  EXPECT_EQ(t.stats.Get(Stat::comm_ops_without_gpu_activity), 1);  // op 0
}

TEST(Link, NoHostCallsCountsNoUnmatchedCorrelation) {
  RankTrace t;
  t.activities = {Kernel(150, 1)};
  LinkInjectorRecords(t);
  EXPECT_EQ(t.activities[0].launch_ns, kUnknown);
  EXPECT_EQ(t.stats.Get(Stat::correlations_unmatched), 0);
}

TEST(Link, SyncActivitiesAreNotCountedUnmatched) {
  RankTrace t;
  t.host_calls = {Call(100, 1)};
  Activity sync = Kernel(150, 9);
  sync.kind = ActivityKind::kSync;
  t.activities = {sync};
  LinkInjectorRecords(t);
  EXPECT_EQ(t.stats.Get(Stat::correlations_unmatched), 0);
}

TEST(Link, CommOpFromTheExternalCorrelation) {
  RankTrace t;
  t.comm_ops = {Op(70), Op(80, 5)};
  t.external_correlations = {{1, 70}, {2, 80}, {3, 99}};
  t.activities = {Kernel(100, 1, 3), Kernel(200, 2, 4), Kernel(300, 3, 4), Kernel(400, kUnknown, 4)};
  LinkInjectorRecords(t);
  EXPECT_EQ(t.activities[0].comm_op, 0u);
  EXPECT_EQ(t.activities[0].category, Category::kComm);  // a linked activity is communication
  EXPECT_EQ(t.activities[1].comm_op, 1u);
  EXPECT_EQ(t.activities[2].comm_op, kNoIndex);  // external id 99: no op with that launch id
  EXPECT_EQ(t.activities[2].category, Category::kCompute);
  EXPECT_EQ(t.activities[3].comm_op, kNoIndex);  // no correlation id
  EXPECT_EQ(t.comm_ops[0].stream, 3u);  // an op without a stream gets its activity's
  EXPECT_EQ(t.comm_ops[1].stream, 5u);  // one with a stream keeps it
  EXPECT_EQ(t.stats.Get(Stat::comm_ops_without_gpu_activity), 0);
}

TEST(Link, LinkedSyncActivityStaysItsCategory) {
  RankTrace t;
  t.comm_ops = {Op(70)};
  t.external_correlations = {{1, 70}};
  Activity sync = Kernel(100, 1);
  sync.kind = ActivityKind::kSync;
  sync.category = Category::kOther;
  t.activities = {sync};
  LinkInjectorRecords(t);
  EXPECT_EQ(t.activities[0].comm_op, 0u);
  EXPECT_EQ(t.activities[0].category, Category::kOther);
}

TEST(Link, OpsOfAGroupShareTheFirstOpsKernel) {
  RankTrace t;
  // Three ops of one NCCL group (launch id 70) and one op that no kernel ran.
  t.comm_ops = {Op(70), Op(70), Op(70, 9), Op(80)};
  t.external_correlations = {{1, 70}};
  t.activities = {Kernel(100, 1, 3)};
  LinkInjectorRecords(t);
  EXPECT_EQ(t.activities[0].comm_op, 0u);  // the group's first op
  EXPECT_EQ(t.comm_ops[0].stream, 3u);
  EXPECT_EQ(t.comm_ops[1].stream, 3u);  // from the linked op of its group
  EXPECT_EQ(t.comm_ops[2].stream, 9u);  // kept
  EXPECT_EQ(t.stats.Get(Stat::comm_ops_without_gpu_activity), 1);  // launch id 80
}

TEST(Link, OpsWithoutLaunchIdAreUnlinked) {
  RankTrace t;
  t.comm_ops = {Op(kUnknown), Op(kUnknown)};
  t.external_correlations = {{1, kUnknown}};
  t.activities = {Kernel(100, 1)};
  LinkInjectorRecords(t);
  EXPECT_EQ(t.activities[0].comm_op, kNoIndex);
  EXPECT_EQ(t.stats.Get(Stat::comm_ops_without_gpu_activity), 2);
}

TEST(Link, NoActivitiesCountsNoOpWithoutActivity) {
  // Without CUDA there is nothing to link to: not a data-quality problem.
  RankTrace t;
  t.comm_ops = {Op(70)};
  LinkInjectorRecords(t);
  EXPECT_EQ(t.stats.Get(Stat::comm_ops_without_gpu_activity), 0);
}

TEST(Link, OutOfRangeCommOpIndexIsIgnored) {
  RankTrace t;
  t.comm_ops = {Op(70)};
  Activity a = Kernel(100, kUnknown);
  a.comm_op = 42;  // hostile store
  t.activities = {a};
  LinkInjectorRecords(t);
  EXPECT_EQ(t.activities[0].comm_op, 42u);
  EXPECT_EQ(t.stats.Get(Stat::comm_ops_without_gpu_activity), 1);
}

// A group of sends and recvs to and from every other rank of one communicator is an all-to-all;
// its first op (which carries the kernel) gets the bytes of all its sends.
TEST(Link, GroupOfSendsAndRecvsToEveryPeerIsAnAllToAll) {
  auto p2p = [](std::string op, int64_t launch, int64_t peer, int64_t bytes = 100) {
    CommOp c;
    c.op = ParseCollective(op);
    c.launch_id = launch;
    c.communicator = "w";
    c.comm_rank = 1;
    c.comm_nranks = 3;
    c.root_peer = peer;
    c.bytes = bytes;
    return c;
  };
  RankTrace t;
  t.comm_ops = {p2p("send", 1, 0), p2p("recv", 1, 0), p2p("send", 1, 2, 50), p2p("recv", 1, 2),  // all-to-all
                p2p("send", 2, 0), p2p("recv", 2, 2),                                            // a pipeline step
                p2p("send", 3, 0), p2p("recv", 3, 0), p2p("send", 3, 2)};                        // no recv from 2
  t.comm_ops.push_back(p2p("send", 4, 0, kUnknown));
  t.comm_ops.push_back(p2p("recv", 4, 0));
  t.comm_ops.push_back(p2p("send", 4, 2));
  t.comm_ops.push_back(p2p("recv", 4, 2));  // an all-to-all with a send of unknown size
  NameGroupedAllToAll(t);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(t.comm_ops[i].op, Collective::kAllToAll) << i;
  EXPECT_EQ(t.comm_ops[0].bytes, 150);
  EXPECT_EQ(t.comm_ops[4].op, Collective::kSend);
  EXPECT_EQ(t.comm_ops[5].op, Collective::kRecv);
  EXPECT_EQ(t.comm_ops[6].op, Collective::kSend);
  EXPECT_EQ(t.comm_ops[8].op, Collective::kSend);
  EXPECT_EQ(t.comm_ops[9].op, Collective::kAllToAll);
  EXPECT_EQ(t.comm_ops[9].bytes, kUnknown);
}

// Copy-engine collectives: an NCCL call whose linked GPU work is copies only is rule copy_engine,
// with the other ops of its group; a call with a kernel stays identity, even beside a copy; a
// call NCCL's profiler plugin reported as a copy-engine op (joined to it) is copy_engine; a copy
// no call launched stays memory.
TEST(Link, CallsWhoseGpuWorkIsCopiesOnlyAreCopyEngineCommunication) {
  RankTrace t;
  t.host_calls = {Call(100, 1), Call(110, 2), Call(120, 3), Call(130, 4), Call(140, 5)};
  auto hooked = [](int64_t launch_id) {
    CommOp c = Op(launch_id);
    c.source = CommSource::kNcclHook;
    c.rule = DeriveCommRule(c);
    return c;
  };
  // Ops 0 and 1 one group (launch 7, copies only); op 2 (launch 8) a kernel and a copy; op 3
  // (launch 9) no GPU activity, a copy-engine op by the plugin; op 4 (launch 10) a kernel.
  t.comm_ops = {hooked(7), hooked(7), hooked(8), hooked(9), hooked(10)};
  t.external_correlations = {{1, 7}, {2, 8}, {3, 8}, {5, 10}};
  auto copy = [](int64_t start, int64_t corr) {
    Activity a = Kernel(start, corr);
    a.kind = ActivityKind::kMemcpy;
    a.category = Category::kMemory;
    return a;
  };
  t.activities = {copy(150, 1), Kernel(160, 2), copy(170, 3), copy(180, 4), Kernel(190, 5)};
  NcclPluginOp ce;
  ce.flags = NcclPluginOp::kCopyEngine;
  ce.comm_op = 3;
  NcclPluginOp ce_with_kernel;
  ce_with_kernel.flags = NcclPluginOp::kCopyEngine;
  ce_with_kernel.comm_op = 4;
  t.nccl_plugin_ops = {ce, ce_with_kernel};
  LinkInjectorRecords(t);
  EXPECT_EQ(t.activities[0].category, Category::kComm);
  EXPECT_EQ(t.comm_ops[0].rule, CommRule::kCopyEngine);
  EXPECT_EQ(t.comm_ops[1].rule, CommRule::kCopyEngine);
  EXPECT_EQ(t.comm_ops[2].rule, CommRule::kIdentity);
  EXPECT_EQ(t.activities[2].category, Category::kComm);  // a copy of a call with a kernel: still its op's
  EXPECT_EQ(t.comm_ops[3].rule, CommRule::kCopyEngine);
  EXPECT_EQ(t.comm_ops[4].rule, CommRule::kIdentity);
  EXPECT_EQ(t.activities[3].category, Category::kMemory);  // correlation 4: no NCCL call
  EXPECT_EQ(t.activities[3].comm_op, kNoIndex);
}

}  // namespace
}  // namespace overlapprof
