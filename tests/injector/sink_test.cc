// The injector's writer side without threads (injector/sink.h): hook records → RankTrace
// batches → the rank's store, over several commits, as the writer thread drives it. The
// store file is read back with SQL (the file format is the contract, docs/schema.md).
#include "injector/sink.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "injector/recorder.h"
#include "src/store/sqlite_util.h"

namespace overlapprof::inject {
namespace {

class SinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/overlapprof_sink_test_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    cfg_.path = dir_ + "/rank.db";
    cfg_.meta.pid = 42;
    cfg_.meta.host = "host";
  }
  void TearDown() override {
    for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((cfg_.path + suffix).c_str());
    ::rmdir(dir_.c_str());
  }

  // One integer or text from the store file.
  std::string Query(const std::string& sql) {
    Db db;
    EXPECT_TRUE(db.Open(cfg_.path, SQLITE_OPEN_READONLY).ok());
    Stmt s;
    EXPECT_TRUE(s.Prepare(db.get(), sql).ok()) << sql;
    auto row = s.Step(sql);
    if (!row.ok() || !*row || s.IsNull(0)) return "null";
    return std::string(s.Text(0));
  }

  static HookRecord Op(uint64_t comm, uint64_t seq, uint64_t count, int8_t dtype = 7 /* float32 */) {
    HookRecord r;
    r.kind = RecKind::kCommOp;
    r.op = static_cast<uint8_t>(Collective::kAllReduce);
    r.datatype = dtype;
    r.comm_id = comm;
    r.comm_rank = 2;
    r.comm_nranks = 4;
    r.seq = seq;
    r.count = count;
    r.tid = 7;
    r.t_enter = 1700000000000000000 + static_cast<int64_t>(seq) * 1000;
    r.t_exit = r.t_enter + 500;
    r.launch_id = seq + 1;
    return r;
  }
  static HookRecord Named(RecKind kind, int32_t tid, int64_t t, const char* name = "", uint64_t id = 0) {
    HookRecord r;
    r.kind = kind;
    r.tid = tid;
    r.t_enter = r.t_exit = t;
    r.stream = id;
    std::snprintf(r.name, sizeof r.name, "%s", name);
    return r;
  }

  std::string dir_;
  SinkConfig cfg_;
};

TEST_F(SinkTest, OpsBecomeCommOpsAndBatchIdsContinueAcrossCommits) {
  Sink sink(cfg_);
  ASSERT_TRUE(sink.Open().ok());
  EXPECT_EQ(Query("SELECT value FROM meta WHERE key='recording_state'"), "recording");
  HookRecord init;
  init.kind = RecKind::kCommInit;
  init.op = static_cast<uint8_t>(CommInitCall::kInitRank);
  init.comm_id = 0xabcdef;
  init.comm_rank = 2;
  init.comm_nranks = 4;
  init.t_exit = 1700000000000000000;
  sink.Take(init);
  for (uint64_t i = 0; i < 3; ++i) sink.Take(Op(0xabcdef, i, 100 + i));
  ASSERT_EQ(sink.Pending(), 3u);
  const CommOp& op = sink.trace().comm_ops[1];
  EXPECT_EQ(op.communicator, "0000000000abcdef");
  EXPECT_EQ(op.op, Collective::kAllReduce);
  EXPECT_EQ(op.datatype, "float32");
  EXPECT_EQ(op.count, 101);
  EXPECT_EQ(op.bytes, 404);
  EXPECT_EQ(op.seq, 1);
  EXPECT_EQ(op.launch_id, 2);
  ASSERT_TRUE(sink.Commit().ok());
  EXPECT_EQ(sink.Pending(), 0u);  // the batch's rows are cleared
  // No launcher variable named the rank: the first multi-rank communicator did.
  EXPECT_EQ(Query("SELECT value FROM meta WHERE key='rank'"), "2");
  EXPECT_NE(Query("SELECT value FROM meta WHERE key='communicators'").find("\"id\":\"0000000000abcdef\""),
            std::string::npos);

  sink.Take(Op(0xabcdef, 3, 1, /*unknown dtype*/ 99));
  sink.Take(Op(0xabcdef, 4, 1));
  ASSERT_TRUE(sink.Commit().ok());
  EXPECT_EQ(Query("SELECT group_concat(first_id || ':' || count) FROM comm_op_chunk"), "0:3,3:2");
  ASSERT_TRUE(sink.Finish().ok());
  EXPECT_EQ(Query("SELECT value FROM meta WHERE key='recording_state'"), "finished");
  EXPECT_EQ(Query("SELECT count(*) FROM comm_op"), "0");  // chunks only (rows are added after the job)
}

TEST_F(SinkTest, NvtxRangesPairPerThreadAndByIdAndUnmatchedOnesAreCounted) {
  Sink sink(cfg_);
  ASSERT_TRUE(sink.Open().ok());
  const int64_t t = 1700000000000000000;
  sink.Take(Named(RecKind::kRangePush, 1, t, "ProfilerStep#7"));
  sink.Take(Named(RecKind::kRangePush, 2, t + 10, "other thread"));
  sink.Take(Named(RecKind::kRangePop, 1, t + 100));   // closes ProfilerStep#7 (thread 1)
  sink.Take(Named(RecKind::kRangePop, 1, t + 110));   // nothing open on thread 1: unmatched
  sink.Take(Named(RecKind::kRangeStart, 3, t + 5, "async", 9));
  sink.Take(Named(RecKind::kRangeEnd, 4, t + 50, "", 9));  // another thread ends it by id
  sink.Take(Named(RecKind::kRangeEnd, 4, t + 60, "", 10));  // unknown id: unmatched
  sink.Take(Named(RecKind::kMark, 1, t + 70, "mark"));
  const auto& ranges = sink.trace().ranges;
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0].kind, RangeKind::kStep);
  EXPECT_EQ(ranges[0].step, 7);
  EXPECT_EQ(ranges[0].end_ns - ranges[0].start_ns, 100);
  EXPECT_EQ(sink.trace().names.Get(ranges[1].name_id), "async");
  EXPECT_EQ(ranges[1].end_ns - ranges[1].start_ns, 45);
  EXPECT_EQ(ranges[2].start_ns, ranges[2].end_ns);  // a marker
  ASSERT_TRUE(sink.Commit().ok());
  // Thread 2's range is still open: it closes in a later batch.
  sink.Take(Named(RecKind::kRangePop, 2, t + 1000));
  ASSERT_TRUE(sink.Commit().ok());
  EXPECT_EQ(Query("SELECT sum(count) FROM trace_range_chunk"), "4");
  ASSERT_TRUE(sink.Finish().ok());
  EXPECT_EQ(Query("SELECT value FROM stats WHERE name='nvtx_ranges_unmatched'"), "2");
}

TEST_F(SinkTest, DrainsTheRingAndStoresTheRecordersCountersAtEveryCommit) {
  Sink sink(cfg_);
  ASSERT_TRUE(sink.Open().ok());
  Ring<HookRecord> ring(1024);
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_TRUE(ring.TryPush(Op(1, i, 1)));
  EXPECT_EQ(sink.DrainRing(&ring), 1000u);
  EXPECT_EQ(sink.DrainRing(&ring), 0u);
  EXPECT_EQ(sink.Pending(), 1000u);
  const int64_t before = g_recorder.stats().Get(Stat::records_dropped_hooks);
  g_recorder.stats().Add(Stat::records_dropped_hooks, 3);
  ASSERT_TRUE(sink.Commit().ok());  // a killed process keeps the counters of its last commit
  EXPECT_EQ(Query("SELECT value FROM stats WHERE name='records_dropped_hooks'"), std::to_string(before + 3));
  EXPECT_EQ(Query("SELECT sum(count) FROM comm_op_chunk"), "1000");
  g_recorder.stats().Add(Stat::records_dropped_hooks, -3);
  sink.Abort();
}

// What a process that ends without its final flush lost is bounded by the file itself: the
// commit period (meta flush_interval_ms, at creation) and when the last commit began (meta
// last_commit_ns, at every commit, with its counters).
TEST_F(SinkTest, EveryCommitSaysWhenItBeganAndTheFileItsFlushInterval) {
  cfg_.flush_ms = 250;
  Sink sink(cfg_);
  ASSERT_TRUE(sink.Open().ok());
  EXPECT_EQ(Query("SELECT typeof(value) || ' ' || value FROM meta WHERE key='flush_interval_ms'"), "integer 250");
  EXPECT_EQ(Query("SELECT value FROM meta WHERE key='last_commit_ns'"), "null");
  sink.Take(Op(1, 0, 1));
  ASSERT_TRUE(sink.Commit(1700000000123456789).ok());
  EXPECT_EQ(Query("SELECT typeof(value) || ' ' || value FROM meta WHERE key='last_commit_ns'"),
            "integer 1700000000123456789");
  ASSERT_TRUE(sink.Commit(1700000001000000000).ok());
  EXPECT_EQ(Query("SELECT value FROM meta WHERE key='last_commit_ns'"), "1700000001000000000");
  sink.Abort();
}

// After a failed write every record is counted once, in what the file would have held: the
// open batch (ops, a communicator event), an NVTX range still open, and everything taken
// after the failure, which is dropped after each drain (memory stays flat).
TEST_F(SinkTest, AfterAFailedWriteEveryRecordIsCountedOnce) {
  Sink sink(cfg_);
  ASSERT_TRUE(sink.Open().ok());
  const int64_t before = g_recorder.stats().Get(Stat::records_lost_write_failed);
  HookRecord init;
  init.kind = RecKind::kCommInit;
  init.comm_id = 1;
  init.comm_rank = 0;
  init.comm_nranks = 2;
  sink.Take(init);
  for (uint64_t i = 0; i < 10; ++i) sink.Take(Op(1, i, 1));
  HookRecord push;
  push.kind = RecKind::kRangePush;
  push.tid = 7;
  std::memcpy(push.name, "step", 5);
  sink.Take(push);
  EXPECT_EQ(sink.BatchRecords(), 11);
  sink.EnterFailed();
  EXPECT_EQ(g_recorder.stats().Get(Stat::records_lost_write_failed) - before, 12);  // 10 ops, the init, the open range
  EXPECT_EQ(sink.Pending(), 0u);
  Ring<HookRecord> ring(1024);
  for (uint64_t i = 10; i < 110; ++i) ASSERT_TRUE(ring.TryPush(Op(1, i, 1)));
  HookRecord pop = push;
  pop.kind = RecKind::kRangePop;
  ASSERT_TRUE(ring.TryPush(pop));  // its push was counted at the failure: not again
  EXPECT_EQ(sink.DrainRing(&ring), 101u);
  EXPECT_EQ(sink.Pending(), 0u);
  EXPECT_EQ(g_recorder.stats().Get(Stat::records_lost_write_failed) - before, 112);
  EXPECT_FALSE(sink.Commit().ok());
  g_recorder.stats().Add(Stat::records_lost_write_failed, before - g_recorder.stats().Get(Stat::records_lost_write_failed));
  sink.Abort();
}

// NCCL profiler plugin records (injector/plugin_sink.h): rows of nccl_profiler_op, the
// communicator of an init NCCL ran elsewhere found by rank and size, the clock offset (the
// smallest host - GPU sample) applied to every row once the file is finished.
TEST_F(SinkTest, PluginOpsBecomeRowsOnTheTraceClock) {
  Sink sink(cfg_);
  ASSERT_TRUE(sink.Open().ok());
  HookRecord init;
  init.kind = RecKind::kCommInit;
  init.op = static_cast<uint8_t>(CommInitCall::kInitRank);
  init.comm_id = 0xabc;
  init.comm_rank = 1;
  init.comm_nranks = 8;
  sink.Take(init);
  HookRecord comm;
  comm.kind = RecKind::kPluginComm;
  comm.op = 5;
  comm.comm_id = 0;  // NCCL initialized it on a thread of its own
  comm.stream = 0x1234;
  comm.comm_rank = 1;
  comm.comm_nranks = 8;
  comm.root_peer = 1;
  std::snprintf(comm.name, sizeof comm.name, "%s", "dp");
  sink.Take(comm);
  const int64_t gpu = 5000000000, host = 1700000000000000000;
  auto op = [&](uint64_t seq, int64_t start, int64_t sample) {
    HookRecord r;
    r.kind = RecKind::kPluginOp;
    r.op = static_cast<uint8_t>(Collective::kAllGather);
    r.datatype = 9;  // bfloat16
    r.count = 256;
    r.seq = seq;
    r.stream = 0x1234;
    r.comm_rank = 1;
    r.comm_nranks = 8;
    r.t_enter = gpu + start;
    r.t_exit = gpu + start + 700;
    r.launch_id = 3;
    r.plugin.clock_sample = host - gpu + sample;
    r.plugin.channels = 2;
    r.plugin.channels_expected = 2;
    r.plugin.abi_version = 5;
    std::snprintf(r.plugin.algo, sizeof r.plugin.algo, "%s", "RING");
    std::snprintf(r.plugin.proto, sizeof r.plugin.proto, "%s", "LL128");
    return r;
  };
  sink.Take(op(0, 0, 900));
  sink.Take(op(1, 1000, 300));  // a smaller sample: the estimate moves
  EXPECT_EQ(sink.Pending(), 2u);
  ASSERT_TRUE(sink.Commit().ok());
  sink.Take(op(2, 2000, 600));
  ASSERT_TRUE(sink.Finish().ok());
  EXPECT_EQ(Query("SELECT count(*) FROM nccl_profiler_op"), "3");
  EXPECT_EQ(Query("SELECT group_concat(communicator) FROM nccl_profiler_op"),
            "0000000000000abc,0000000000000abc,0000000000000abc");
  EXPECT_EQ(Query("SELECT group_concat(op || ':' || datatype || ':' || bytes || ':' || algorithm || ':' || protocol) "
                  "FROM nccl_profiler_op WHERE id=0"),
            "allgather:bfloat16:512:RING:LL128");
  // Every row on the final offset (host - gpu + 300): start_ns - gpu_start_raw is one value.
  EXPECT_EQ(Query("SELECT group_concat(DISTINCT start_ns - gpu_start_raw) FROM nccl_profiler_op"),
            std::to_string(host - gpu + 300));
  EXPECT_EQ(Query("SELECT group_concat(end_ns - start_ns) FROM nccl_profiler_op"), "700,700,700");
  std::string meta = Query("SELECT value FROM meta WHERE key='nccl_profiler'");
  EXPECT_NE(meta.find("\"offset_ns\":" + std::to_string(host - gpu + 300)), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"residual_ns\":300"), std::string::npos) << meta;  // mean of 600, 0, 300
  EXPECT_NE(meta.find("\"name\":\"dp\""), std::string::npos) << meta;
  EXPECT_EQ(Query("SELECT value FROM stats WHERE name='nccl_plugin_clock_residual_high'"), "0");
}

}  // namespace
}  // namespace overlapprof::inject
