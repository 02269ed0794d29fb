#include <gtest/gtest.h>
#include <map>
#include <algorithm>
#include <tuple>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/cli/pipeline.h"
#include "src/importers/importer.h"
#include "src/io/input_file.h"
#include "test_util.h"

namespace overlapprof {
namespace {

using testing::Ev;
using testing::KinetoJson;
using testing::ParseJsonText;

TEST(KinetoImport, ReadsDistributedInfoDevicesAndBaseTime) {
  std::string json = R"J({"schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85000000000, "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
    "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8, "nccl_version": "2.21.5",
                        "pg_config": [{"pg_name": "0", "pg_size": 8, "ranks": [0,1,2,3,4,5,6,7]}]},
    "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2.25, "args": {"device": 0, "stream": 7, "correlation": 1}},
      {"name": "thread_name", "ph": "M", "pid": 0, "tid": 7, "args": {"name": "stream 7 (compute)"}}
    ],
    "baseTimeNanoseconds": 1700000000000000000})J";
  StatusOr<RankTrace> t = ParseJsonText(json);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->meta.rank, 3);
  EXPECT_EQ(t->meta.world_size, 8);
  EXPECT_EQ(t->meta.backend, "nccl");
  EXPECT_EQ(t->meta.nccl_version, "2.21.5");
  EXPECT_NE(t->meta.pg_config_json.find("pg_size"), std::string::npos);
  ASSERT_EQ(t->devices.size(), 1u);
  EXPECT_EQ(t->devices[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t->devices[0].compute_major, 9);
  EXPECT_EQ(t->devices[0].sm_count, 132);
  ASSERT_EQ(t->activities.size(), 1u);
  // baseTimeNanoseconds came after traceEvents in the file and still applies.
  EXPECT_EQ(t->activities[0].start_ns, 1700000000000010500);
  EXPECT_EQ(t->activities[0].end_ns, 1700000000000012750);
  ASSERT_EQ(t->streams.size(), 1u);
  EXPECT_EQ(t->streams[0].name, "stream 7 (compute)");
  EXPECT_EQ(t->stats.Get(Stat::rank_unknown), 0);
}

TEST(KinetoImport, MissingDistributedInfoMarksRankUnknown) {
  StatusOr<RankTrace> t = ParseJsonText(KinetoJson({{"kernel", "gemm", "1", "1"}}, ""));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->meta.rank, kUnknown);
  EXPECT_EQ(t->stats.Get(Stat::rank_unknown), 1);
}

TEST(KinetoImport, TopLevelArrayFormatAndEscapedNames) {
  std::string json = R"J([
    {"ph": "X", "cat": "kernel", "name": "k\"quoted\"\u00e9\ud83d\ude00", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {}},
    {"ph": "X", "cat": "kernel", "name": "k\"quoted\"\u00e9\ud83d\ude00", "pid": 0, "tid": 7, "ts": 3, "dur": 1}
  ])J";
  StatusOr<RankTrace> t = ParseJsonText(json);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->activities.size(), 2u);
  EXPECT_EQ(t->activities[0].name_id, t->activities[1].name_id);
  EXPECT_EQ(t->names.Get(t->activities[0].name_id), "k\"quoted\"\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(t->activities[0].stream, t->activities[1].stream);  // from pid/tid when args lack them
}

TEST(KinetoImport, FieldOrderDoesNotMatter) {
  // args before cat, name last.
  std::string json = R"J({"traceEvents": [
    {"args": {"stream": 9, "device": 1, "correlation": 5}, "dur": 2, "ts": 1, "tid": 9, "pid": 1, "cat": "kernel", "ph": "X", "name": "ncclDevKernel_Broadcast"}]})J";
  StatusOr<RankTrace> t = ParseJsonText(json);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->activities.size(), 1u);
  EXPECT_EQ(t->activities[0].category, Category::kComm);
  EXPECT_EQ(t->streams[t->activities[0].stream].device, 1);
  EXPECT_EQ(t->streams[t->activities[0].stream].native_id, 9);
  ASSERT_EQ(t->comm_ops.size(), 1u);
  EXPECT_EQ(t->comm_ops[0].op, Collective::kBroadcast);
  EXPECT_EQ(t->comm_ops[0].source, CommSource::kKernelName);
}

// docs/classification.md rule 2: a kernel launched by a communication host op (External id) is
// communication, whichever comes first in the file; a compute op's kernel is not. Rule 4: a
// peer-to-peer memcpy is communication (p2p_copy). Capitalised 2021 categories are read.
TEST(KinetoImport, HostOpAndPeerCopyRules) {
  std::string json = R"J({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "rs_lamport_kernel<bf16>", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"External id": 41, "correlation": 2}},
    {"ph": "X", "cat": "Kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 5, "args": {"External id": 42, "correlation": 3}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "pid": 0, "tid": 9, "ts": 30, "dur": 4, "args": {"External id": 43, "correlation": 4, "bytes": 4096}},
    {"ph": "X", "cat": "Memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 9, "ts": 40, "dur": 4, "args": {"correlation": 5, "bytes": 64}},
    {"ph": "X", "cat": "cpu_op", "name": "symm_mem::reduce_scatter_out", "pid": 1, "tid": 1, "ts": 5, "dur": 3, "args": {"External id": 41}},
    {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 15, "dur": 3, "args": {"External id": 42}},
    {"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 1, "dur": 60}
  ]})J";
  StatusOr<RankTrace> t = ParseJsonText(json);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->activities.size(), 4u);
  EXPECT_EQ(t->activities[0].category, Category::kComm);
  ASSERT_NE(t->activities[0].comm_op, kNoIndex);
  EXPECT_EQ(t->comm_ops[t->activities[0].comm_op].rule, CommRule::kHostOp);
  EXPECT_EQ(t->comm_ops[t->activities[0].comm_op].op, Collective::kReduceScatter);
  EXPECT_EQ(t->activities[1].category, Category::kCompute);
  EXPECT_EQ(t->activities[2].category, Category::kComm);
  EXPECT_EQ(t->comm_ops[t->activities[2].comm_op].rule, CommRule::kPeerCopy);
  EXPECT_EQ(t->comm_ops[t->activities[2].comm_op].op, Collective::kPeerCopy);
  EXPECT_EQ(t->comm_ops[t->activities[2].comm_op].bytes, 4096);
  EXPECT_EQ(t->activities[3].category, Category::kMemory);  // DtoD on one device
  ASSERT_EQ(t->ranges.size(), 1u);
  EXPECT_EQ(t->ranges[0].kind, RangeKind::kStep);
  EXPECT_EQ(t->ranges[0].step, 3);
}

// Kineto writes CUPTI's MEMCPY2 records (copies between two GPUs) with "fromDevice",
// "inDevice" and "toDevice" instead of "device": a DtoD copy between two devices is a peer copy
// (communication), on the stream of the device that ran it; a DtoD copy within one is memory.
TEST(KinetoImport, DeviceToDeviceAcrossDevicesIsAPeerCopy) {
  std::string json = R"J({"traceEvents": [
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 1, "tid": 9, "ts": 30, "dur": 4, "args": {"fromDevice": 1, "inDevice": 1, "toDevice": 3, "stream": 9, "correlation": 4, "bytes": 4096}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 1, "tid": 9, "ts": 40, "dur": 4, "args": {"fromDevice": 1, "inDevice": 1, "toDevice": 1, "stream": 9, "correlation": 5, "bytes": 64}}
  ]})J";
  StatusOr<RankTrace> t = ParseJsonText(json);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->activities.size(), 2u);
  const Activity& peer = t->activities[0];
  EXPECT_EQ(peer.copy_kind, kCopyKindPeer);
  EXPECT_EQ(peer.category, Category::kComm);
  ASSERT_NE(peer.comm_op, kNoIndex);
  EXPECT_EQ(t->comm_ops[peer.comm_op].op, Collective::kPeerCopy);
  EXPECT_EQ(t->comm_ops[peer.comm_op].rule, CommRule::kPeerCopy);
  EXPECT_EQ(t->streams[peer.stream].device, 1);
  EXPECT_EQ(t->activities[1].category, Category::kMemory);
  EXPECT_EQ(t->activities[1].copy_kind, 8);
}

TEST(KinetoImport, BadEventsAreCountedNotFatal) {
  std::string json = R"J({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "no_ts", "dur": 1},
    {"ph": "X", "cat": "kernel", "name": "neg", "ts": 5, "dur": -1},
    {"ph": "X", "cat": "kernel", "name": "str_ts", "ts": "5", "dur": 1},
    {"ph": "X", "cat": "kernel", "name": "huge", "ts": 1e30, "dur": 1},
    {"ph": "X", "cat": "kernel", "name": "before_epoch", "ts": -5, "dur": 1},
    {"ph": "X", "cat": "kernel", "name": "past_2116", "ts": 4611686018427387.904, "dur": 1},
    42, "text", null,
    {"ph": "X", "cat": "kernel", "name": "good", "ts": 5, "dur": 1}
  ]})J";
  StatusOr<RankTrace> t = ParseJsonText(json);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->activities.size(), 1u);
  EXPECT_EQ(t->stats.Get(Stat::events_malformed), 2 + 3);
  EXPECT_EQ(t->stats.Get(Stat::events_negative_duration), 1);
  EXPECT_EQ(t->stats.Get(Stat::events_timestamp_out_of_range), 3);
}

// Host calls link launches in every import, and are handed over only to readers that ask for them
// (ImportOptions::store_needs, as `analyze` sets it from its analyzers and reports): the rest of
// the trace, launch times included, is the same either way.
TEST(KinetoImport, HostCallsOnlyForReadersThatAskForThem) {
  for (const char* file : {"kineto/a100_2rank_rank0.json.gz", "kineto/mi300x_ddp_resnet_rank0.json.gz"}) {
    const std::string path = testing::DataFile(file);
    ImportOptions lean;
    lean.store_needs = TraceNeeds{};
    StatusOr<RankTrace> all = ImportFile(path, ImportOptions{}), without = ImportFile(path, lean);
    ASSERT_TRUE(all.ok()) << all.status().message();
    ASSERT_TRUE(without.ok()) << without.status().message();
    EXPECT_GT(all->host_calls.size(), 1000u) << file;
    EXPECT_TRUE(without->host_calls.empty()) << file;
    ASSERT_EQ(all->activities.size(), without->activities.size()) << file;
    size_t launched = 0;
    for (size_t i = 0; i < all->activities.size(); ++i) {
      const Activity &a = all->activities[i], &b = without->activities[i];
      EXPECT_EQ(std::tie(a.start_ns, a.end_ns, a.launch_ns, a.comm_op, a.stream),
                std::tie(b.start_ns, b.end_ns, b.launch_ns, b.comm_op, b.stream))
          << file << ", activity " << i;
      launched += a.launch_ns != kUnknown;
    }
    EXPECT_GT(launched, all->activities.size() / 2) << file;
    ASSERT_EQ(all->comm_ops.size(), without->comm_ops.size()) << file;
    for (size_t i = 0; i < all->comm_ops.size(); ++i)
      EXPECT_EQ(all->comm_ops[i].host_enter_ns, without->comm_ops[i].host_enter_ns) << file << ", op " << i;
    for (size_t i = 0; i < static_cast<size_t>(Stat::kCount); ++i)
      EXPECT_EQ(all->stats.Get(static_cast<Stat>(i)), without->stats.Get(static_cast<Stat>(i))) << file << ", stat " << i;
  }
}

TEST(KinetoImport, NanosecondUnitOption) {
  ImportOptions o;
  o.kineto.time_exp = 0;
  StatusOr<RankTrace> t = ParseJsonText(KinetoJson({{"kernel", "gemm", "1712195495505582988", "4928"}}), o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->activities[0].start_ns, 1712195495505582988);
  EXPECT_EQ(t->activities[0].end_ns, 1712195495505587916);
}

TEST(KinetoImport, DuplicateStepsCountedAndFirstKept) {
  StatusOr<RankTrace> t = ParseJsonText(KinetoJson({{"user_annotation", "ProfilerStep#3", "0", "10"},
                                                    {"user_annotation", "ProfilerStep#3", "20", "10"},
                                                    {"user_annotation", "ProfilerStep#4", "40", "10"}}));
  ASSERT_TRUE(t.ok());
  int steps = 0;
  for (const Range& r : t->ranges) steps += r.kind == RangeKind::kStep;
  EXPECT_EQ(steps, 2);
  EXPECT_EQ(t->stats.Get(Stat::steps_duplicated), 1);
}

TEST(KinetoImport, RejectsDocumentsThatAreNotTraces) {
  struct Case {
    std::string text, expect;
  } cases[] = {
      {R"J({"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1)J", "truncated JSON"},
      {R"J({"traceEvents": [ {"ph": "X"} ] )J", "truncated JSON"},
      {R"J({"traceEvents": [ {"ph": "X"} )J", "truncated JSON"},
      {R"J({"traceEvents": "nope"})J", "not an array"},
      {R"J({"other": 1})J", "no \"traceEvents\""},
      {R"J(42)J", "not an object or array"},
      {R"J({"traceEvents": []} {"x": 1})J", "invalid JSON"},
      {R"J({"traceEvents": [}])J", "JSON"},
      {"\xff\xfe{}", "JSON"},
  };
  for (const Case& c : cases) {
    StatusOr<RankTrace> t = ParseJsonText(c.text);
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidInput) << c.text;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << c.text << " -> " << t.status().message();
  }
}

// Copy-engine collectives: a memcpy whose External id is a communication host op's is communication
// by rule copy_engine (a kernel under the same kind of op stays host_op); a memcpy tied to no such
// op stays memory.
TEST(KinetoImport, CopiesLaunchedByACommunicationOpAreCopyEngineCommunication) {
  std::string json = R"J({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "nccl:all_gather", "pid": 0, "tid": 3, "ts": 10, "dur": 20, "args": {"External id": 5}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 20, "ts": 12, "dur": 5, "args": {"device": 0, "stream": 20, "correlation": 1, "External id": 5, "bytes": 4096}},
    {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 0, "tid": 3, "ts": 40, "dur": 20, "args": {"External id": 6}},
    {"ph": "X", "cat": "kernel", "name": "my_reduce_kernel", "pid": 0, "tid": 20, "ts": 42, "dur": 5, "args": {"device": 0, "stream": 20, "correlation": 2, "External id": 6}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 0, "tid": 3, "ts": 70, "dur": 20, "args": {"External id": 7}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 7, "ts": 72, "dur": 5, "args": {"device": 0, "stream": 7, "correlation": 3, "External id": 7, "bytes": 4096}}
  ]})J";
  StatusOr<RankTrace> t = ParseJsonText(json);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->activities.size(), 3u);
  std::map<int64_t, const Activity*> by_corr;
  for (const Activity& a : t->activities) by_corr[a.correlation_id] = &a;
  ASSERT_EQ(t->comm_ops.size(), 2u);
  ASSERT_EQ(by_corr[1]->category, Category::kComm);
  EXPECT_EQ(t->comm_ops[by_corr[1]->comm_op].rule, CommRule::kCopyEngine);
  EXPECT_EQ(t->comm_ops[by_corr[1]->comm_op].op, Collective::kAllGather);
  ASSERT_EQ(by_corr[2]->category, Category::kComm);
  EXPECT_EQ(t->comm_ops[by_corr[2]->comm_op].rule, CommRule::kHostOp);
  EXPECT_EQ(by_corr[3]->category, Category::kMemory);
  EXPECT_EQ(by_corr[3]->comm_op, kNoIndex);
  EXPECT_EQ(CommRuleName(CommRule::kCopyEngine), "copy_engine");
}

}  // namespace
}  // namespace overlapprof

namespace overlapprof {
namespace {

// PyTorch's cuda_sync events (enable_cuda_sync_events) become the recorded dependencies
// (RankTrace::event_links), as the recorder's: a stream wait and a host wait on the record whose
// call's correlation id they name (its stream from wait_on_stream), and a cuda_event record. Read
// only where host calls are (the what-if model's input).
TEST(KinetoImport, CudaSyncEventsBecomeEventLinks) {
  const std::string json = R"J({"traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "pid": 1, "tid": 2, "ts": 10, "dur": 1, "args": {"correlation": 10}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": 1, "tid": 2, "ts": 12, "dur": 1, "args": {"correlation": 11}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventSynchronize", "pid": 1, "tid": 2, "ts": 14, "dur": 5, "args": {"correlation": 12}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "pid": 1, "tid": 2, "ts": 20, "dur": 1, "args": {"correlation": 13}},
    {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 20, "ts": 12, "dur": 0,
     "args": {"cuda_sync_kind": "Stream Wait Event", "stream": 20, "correlation": 11, "device": 0, "context": 1,
              "wait_on_stream": 7, "wait_on_cuda_event_record_corr_id": 10, "wait_on_cuda_event_id": 3}},
    {"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": -1, "ts": 14, "dur": 5,
     "args": {"cuda_sync_kind": "Event Sync", "stream": -1, "correlation": 12, "device": 0, "context": 1,
              "wait_on_stream": 7, "wait_on_cuda_event_record_corr_id": 10, "wait_on_cuda_event_id": 3}},
    {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 30, "dur": 5,
     "args": {"cuda_sync_kind": "Stream Sync", "stream": 7, "correlation": 14, "device": 0, "context": 1}},
    {"ph": "X", "cat": "cuda_event", "name": "cudaEventRecord", "pid": 0, "tid": 9, "ts": 20, "dur": 0,
     "args": {"stream": 9, "correlation": 13, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 5, "dur": 10, "args": {"stream": 7, "device": 0, "correlation": 1}}
  ]})J";
  StatusOr<RankTrace> t = testing::ParseJsonText(json);
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::vector<std::tuple<int, int64_t, int64_t, int64_t>> links;  // kind, correlation, sync id, native stream
  for (const EventLink& l : t->event_links)
    links.emplace_back(static_cast<int>(l.kind), l.correlation_id, l.sync_id,
                       l.stream == kNoIndex ? -2 : t->streams[l.stream].native_id);
  std::sort(links.begin(), links.end());
  const std::vector<std::tuple<int, int64_t, int64_t, int64_t>> want = {
      {1, 10, 10, 7}, {1, 13, 13, 9}, {2, 11, 10, 20}, {3, 12, 10, -2}};
  EXPECT_EQ(links, want);
  ImportOptions lean;
  lean.store_needs = TraceNeeds{};
  StatusOr<RankTrace> without = testing::ParseJsonText(json, lean);
  ASSERT_TRUE(without.ok());
  EXPECT_TRUE(without->event_links.empty());
  EXPECT_EQ(without->streams.size(), t->streams.size() - 1);  // stream 9 only named by the record
}

}  // namespace
}  // namespace overlapprof
