// The Kineto importer's two halves apart: kineto::TraceBuilder fed RawEvents directly (no JSON),
// and the event helpers (kineto_event.h). The reader (tokenizing) is covered through
// ParseKinetoJson in kineto_test.cc and by the golden traces.
#include <gtest/gtest.h>

#include "src/importers/kineto_builder.h"
#include "src/importers/kineto_event.h"

namespace overlapprof::kineto {
namespace {

RawEvent X(std::string_view cat, std::string_view name, std::string_view ts, std::string_view dur) {
  RawEvent ev;
  ev.ph = 'X';
  ev.cat = cat;
  ev.name = name;
  ev.has_name = true;
  ev.pid = 0;
  ev.tid = 7;
  ev.ts = ts;
  ev.dur = dur;
  return ev;
}

RankTrace Build(const std::vector<RawEvent>& events, int64_t rank = 0, const ImportOptions& o = {}) {
  TraceBuilder b(o);
  if (rank != kUnknown) b.SetRank(rank);
  for (const RawEvent& ev : events) b.AddEvent(ev);
  EXPECT_TRUE(b.Finish().ok());
  return b.Take();
}

TEST(KinetoEvent, DecodeCat) {
  EXPECT_EQ(DecodeCat("kernel"), Cat::kKernel);
  EXPECT_EQ(DecodeCat("Kernel"), Cat::kKernel);
  EXPECT_EQ(DecodeCat("gpu_memcpy"), Cat::kMemcpy);
  EXPECT_EQ(DecodeCat("Memset"), Cat::kMemset);
  EXPECT_EQ(DecodeCat("cuda_sync"), Cat::kSync);
  EXPECT_EQ(DecodeCat("cuda_runtime"), Cat::kRuntime);
  EXPECT_EQ(DecodeCat("cuda_driver"), Cat::kRuntime);
  EXPECT_EQ(DecodeCat("user_annotation"), Cat::kUserAnnotation);
  EXPECT_EQ(DecodeCat("gpu_user_annotation"), Cat::kGpuAnnotation);
  EXPECT_EQ(DecodeCat("python_function"), Cat::kOther);
  EXPECT_EQ(DecodeCat(""), Cat::kUnknown);
}

TEST(KinetoEvent, UnescapeAndCopyKind) {
  EXPECT_EQ(Unescape(R"(a\"b\\c\/d\n)"), "a\"b\\c/d\n");
  EXPECT_EQ(Unescape(R"(\u00e9)"), "\xc3\xa9");
  EXPECT_EQ(Unescape(R"(\ud83d\ude00)"), "\xf0\x9f\x98\x80");  // a surrogate pair
  // Escaped lone surrogates: U+FFFD, counted; never invalid UTF-8 (CESU / WTF-8 bytes).
  UnescapeIssues issues;
  EXPECT_EQ(Unescape(R"(a\ud800b)", &issues), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(Unescape(R"(\udc00\ud83d)", &issues), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(Unescape(R"(\ud800\u0041)", &issues), "\xef\xbf\xbd" "A");  // a high one, then no low one
  EXPECT_EQ(issues.replaced, 4u);
  EXPECT_FALSE(issues.invalid);
  // Not JSON: \u without 4 hex digits, a backslash before another character.
  for (const char* bad : {R"(\uzzzz)", R"(\u12)", R"(x\u00g0)", R"(\q)", R"(\x41)", R"(\')"}) {
    UnescapeIssues i;
    Unescape(bad, &i);
    EXPECT_TRUE(i.invalid) << bad;
  }
  EXPECT_EQ(CopyKindFromName("Memcpy HtoD (Pageable -> Device)"), 1);
  EXPECT_EQ(CopyKindFromName("Memcpy DtoD (Device -> Device)"), 8);
  EXPECT_EQ(CopyKindFromName("Memcpy"), 0);
}

TEST(KinetoBuilder, KernelWithNcclArgsIsACommOpLinkedToItsLaunch) {
  RawEvent launch = X("cuda_runtime", "cudaLaunchKernel", "100.000", "5.000");
  launch.correlation = 42;
  launch.tid = 11;
  RawEvent k = X("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "110.000", "20.500");
  k.device = 0;
  k.stream = 20;
  k.correlation = 42;
  k.coll_name = "allreduce";
  k.dtype = "Float";
  k.in_nelems = 1024;
  k.group_size = 4;
  k.seq = 9;
  k.pg_name = "0";
  k.pg_ranks = "[0, 1, 2, 3]";
  RawEvent gemm = X("kernel", "sm80_gemm", "140.000", "10.000");
  gemm.device = 0;
  gemm.stream = 7;
  RankTrace t = Build({launch, k, gemm}, /*rank=*/2);
  ASSERT_EQ(t.activities.size(), 2u);
  ASSERT_EQ(t.comm_ops.size(), 1u);
  const CommOp& op = t.comm_ops[0];
  EXPECT_EQ(op.op, Collective::kAllReduce);
  EXPECT_EQ(op.bytes, 4096);
  EXPECT_EQ(op.comm_nranks, 4);
  EXPECT_EQ(op.seq, 9);
  EXPECT_EQ(op.communicator, "0");
  EXPECT_EQ(op.comm_rank, 2);  // rank 2's position in [0, 1, 2, 3]
  EXPECT_EQ(op.source, CommSource::kKinetoArgs);
  EXPECT_EQ(op.host_enter_ns, 100000);
  EXPECT_EQ(op.host_exit_ns, 105000);
  EXPECT_EQ(op.host_tid, 11);
  const Activity& a = t.activities[0];
  EXPECT_EQ(a.category, Category::kComm);
  EXPECT_EQ(a.start_ns, 110000);
  EXPECT_EQ(a.end_ns, 130500);
  EXPECT_EQ(a.launch_ns, 100000);
  EXPECT_EQ(t.activities[1].category, Category::kCompute);
  EXPECT_EQ(t.stats.Get(Stat::correlations_unmatched), 1);  // the gemm has no correlation
}

// Kernels link to the first runtime call with their correlation id, in file order, whether the
// calls' ids come sorted (the calls are then their own index) or not (a sorted copy), with ids
// missing, repeated, never launched, and kernels in any order.
TEST(KinetoBuilder, LaunchesLinkToTheFirstCallWithTheIdSortedOrNot) {
  for (bool sorted : {true, false}) {
    SCOPED_TRACE(sorted);
    // (id, ts) of the runtime calls; -1: no correlation.
    std::vector<std::pair<int64_t, const char*>> calls =
        sorted ? std::vector<std::pair<int64_t, const char*>>{{-1, "1"}, {3, "2"}, {5, "3"}, {5, "4"}, {9, "5"}, {12, "6"}}
               : std::vector<std::pair<int64_t, const char*>>{{12, "6"}, {5, "3"}, {-1, "1"}, {9, "5"}, {3, "2"}, {5, "4"}};
    std::vector<RawEvent> ev;
    for (const auto& [id, ts] : calls) {
      RawEvent c = X("cuda_runtime", "cudaLaunchKernel", ts, "0.5");
      c.correlation = id;
      ev.push_back(c);
    }
    // (id, kernel ts): launched by the call at ts 2, 3 (the first of the two 5s), 5, 6; 4 and 13: none.
    const std::pair<int64_t, const char*> kernels[] = {{12, "60"}, {3, "20"}, {5, "30"}, {4, "40"}, {9, "50"}, {13, "70"}};
    for (const auto& [id, ts] : kernels) {
      RawEvent k = X("kernel", "gemm", ts, "1");
      k.correlation = id;
      k.device = 0;
      k.stream = 7;
      ev.push_back(k);
    }
    RankTrace t = Build(ev);
    ASSERT_EQ(t.activities.size(), 6u);
    std::vector<int64_t> launch;
    for (const Activity& a : t.activities) launch.push_back(a.launch_ns);  // in start order
    EXPECT_EQ(launch, (std::vector<int64_t>{2000, 3000, kUnknown, 5000, 6000, kUnknown}));
    EXPECT_EQ(t.stats.Get(Stat::correlations_unmatched), 2);
  }
}

// ExpectMore (the reader's estimate of the events still to come) reserves room in the vectors
// that grow with the events, and changes nothing in the trace; too large an estimate (over a
// quarter of the machine's memory) reserves nothing.
TEST(KinetoBuilder, ExpectMoreReservesRoomAndChangesNothing) {
  std::vector<std::string> ts;  // the events' views point into these
  for (int i = 0; i < 200; ++i) ts.push_back(std::to_string(i));
  std::vector<RawEvent> ev;
  for (int i = 0; i < 100; ++i) {
    RawEvent c = X("cuda_runtime", "cudaLaunchKernel", ts[2 * i], "0.5");
    c.correlation = i;
    c.external_id = "7";
    ev.push_back(c);
    RawEvent k = X("kernel", "gemm", ts[2 * i + 1], "0.5");
    k.correlation = i;
    k.external_id = "7";
    k.device = 0;
    k.stream = 7;
    ev.push_back(k);
  }
  const RankTrace want = Build(ev);
  ASSERT_EQ(want.activities.size(), 100u);
  for (double factor : {0.5, 10.0, 1e15}) {
    SCOPED_TRACE(factor);
    TraceBuilder b({});
    b.SetRank(0);
    for (size_t i = 0; i < ev.size(); ++i) {
      if (i == 20) b.ExpectMore(factor);  // after 10 kernels and 10 runtime calls
      b.AddEvent(ev[i]);
    }
    ASSERT_TRUE(b.Finish().ok());
    RankTrace t = b.Take();
    // 10 kernels so far x 10, and a quarter more, where the 100 kernels fit; else grown by
    // doubling (1, 2, 4, ... 128).
    EXPECT_EQ(t.activities.capacity(), factor == 10.0 ? 125u : 128u);
    ASSERT_EQ(t.activities.size(), want.activities.size());
    for (size_t i = 0; i < t.activities.size(); ++i) {
      EXPECT_EQ(t.activities[i].start_ns, want.activities[i].start_ns);
      EXPECT_EQ(t.activities[i].launch_ns, want.activities[i].launch_ns);
    }
    EXPECT_EQ(t.stats.Get(Stat::correlations_unmatched), want.stats.Get(Stat::correlations_unmatched));
  }
}

TEST(KinetoBuilder, CommKernelByNameOnly) {
  RankTrace t = Build({X("kernel", "ncclKernel_AllGather_RING_LL_Sum_int8_t", "1", "1")});
  ASSERT_EQ(t.comm_ops.size(), 1u);
  EXPECT_EQ(t.comm_ops[0].op, Collective::kAllGather);
  EXPECT_EQ(t.comm_ops[0].communicator, "unknown");
  EXPECT_EQ(t.comm_ops[0].source, CommSource::kKernelName);
}

TEST(KinetoBuilder, StepsAnnotationsAndDuplicates) {
  RawEvent step = X("user_annotation", "ProfilerStep#5", "0", "100");
  RawEvent again = X("cpu_op", "ProfilerStep#5", "200", "100");
  RawEvent op = X("cpu_op", "aten::mm", "10", "1");  // cpu ops other than steps are dropped
  RawEvent ann = X("user_annotation", "## backward ##", "50", "20");
  RawEvent gpu = X("gpu_user_annotation", "fwd", "60", "5");
  gpu.device = 0;
  gpu.stream = 7;
  RawEvent nameless = X("user_annotation", "", "1", "1");
  nameless.has_name = false;
  RankTrace t = Build({step, again, op, ann, gpu, nameless});
  ASSERT_EQ(t.ranges.size(), 3u);
  EXPECT_EQ(t.stats.Get(Stat::steps_duplicated), 1);
  EXPECT_EQ(t.stats.Get(Stat::events_malformed), 1);
  EXPECT_EQ(t.ranges[0].kind, RangeKind::kStep);
  EXPECT_EQ(t.ranges[0].step, 5);
  EXPECT_EQ(t.ranges[1].kind, RangeKind::kAnnotation);
  EXPECT_EQ(t.names.Get(t.ranges[1].name_id), "## backward ##");
  EXPECT_EQ(t.ranges[2].kind, RangeKind::kGpuAnnotation);
  EXPECT_NE(t.ranges[2].stream, kNoIndex);
}

TEST(KinetoBuilder, BadTimesAreCountedAndDropped) {
  RawEvent missing = X("kernel", "k", "", "1");
  RawEvent text = X("kernel", "k", "\"abc\"", "1");
  RawEvent negative = X("kernel", "k", "1", "-1");
  RawEvent huge = X("kernel", "k", "99999999999999999999", "1");
  RankTrace t = Build({missing, text, negative, huge, X("kernel", "k", "2", "0")});
  EXPECT_EQ(t.activities.size(), 1u);
  EXPECT_EQ(t.stats.Get(Stat::events_malformed), 2);
  EXPECT_EQ(t.stats.Get(Stat::events_negative_duration), 1);
  EXPECT_EQ(t.stats.Get(Stat::events_timestamp_out_of_range), 1);
  EXPECT_EQ(t.stats.Get(Stat::activities_zero_duration), 1);
}

TEST(KinetoBuilder, BaseTimeShiftsEveryTimeAndOverflowFails) {
  TraceBuilder b({});
  b.SetBaseTime(1000000000);
  b.AddEvent(X("kernel", "k", "1.000", "1.000"));
  ASSERT_TRUE(b.Finish().ok());
  RankTrace t = b.Take();
  EXPECT_EQ(t.activities[0].start_ns, 1000001000);
  EXPECT_EQ(t.meta.clock_source, "kineto: baseTimeNanoseconds + ts");
  EXPECT_EQ(t.stats.Get(Stat::rank_unknown), 1);  // SetRank never called

  TraceBuilder over({});
  over.SetBaseTime(int64_t{1} << 62);
  over.AddEvent(X("kernel", "k", "1.000", "1.000"));
  EXPECT_FALSE(over.Finish().ok());
}

TEST(KinetoBuilder, StreamNamesFromThreadNameMetadata) {
  RawEvent meta;
  meta.ph = 'M';
  meta.name = "thread_name";
  meta.has_name = true;
  meta.pid = 0;
  meta.tid = 7;
  meta.arg_name = "stream 7 compute";
  RawEvent k = X("kernel", "k", "1", "1");
  k.device = 0;
  k.stream = 7;
  RawEvent other = X("kernel", "k", "2", "1");
  other.device = 0;
  other.stream = 9;
  RankTrace t = Build({meta, k, other});
  ASSERT_EQ(t.streams.size(), 2u);
  EXPECT_EQ(t.streams[t.activities[0].stream].name, "stream 7 compute");
  EXPECT_EQ(t.streams[t.activities[1].stream].name, "stream 9");
}

TEST(KinetoBuilder, MalformedElementsAndMetadataFromTheReader) {
  TraceBuilder b({});
  b.AddMalformed();
  b.meta().host = "node3";
  Device d;
  d.name = "A100";
  b.AddDevice(d);
  b.SetRank(5);
  ASSERT_TRUE(b.Finish().ok());
  RankTrace t = b.Take();
  EXPECT_EQ(t.stats.Get(Stat::events_malformed), 1);
  EXPECT_EQ(t.meta.host, "node3");
  EXPECT_EQ(t.meta.rank, 5);
  EXPECT_EQ(t.meta.source_format, "kineto");
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.stats.Get(Stat::rank_unknown), 0);
}

}  // namespace
}  // namespace overlapprof::kineto

namespace overlapprof::kineto {
namespace {

// NCCL runs all-to-all and send/recv as one SendRecv kernel without metadata: the host op names it
// (External id first, else the innermost host op around the launch on the launching thread), and
// "Src Rank"/"Dst Rank" become the peer in the process group.
TEST(KinetoBuilder, SendRecvKernelsAreNamedFromTheirHostOps) {
  auto launch = [](std::string_view ts, int64_t corr) {
    RawEvent l = X("cuda_runtime", "cudaLaunchKernel", ts, "2.000");
    l.correlation = corr;
    return l;
  };
  auto sendrecv = [](std::string_view ts, int64_t corr, std::string_view ext) {
    RawEvent k = X("kernel", "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", ts, "10.000");
    k.device = 0;
    k.stream = 20;
    k.correlation = corr;
    k.external_id = ext;
    return k;
  };
  // 1: all-to-all by External id, with record_param_comms' arguments.
  RawEvent a2a = X("cpu_op", "record_param_comms", "99.000", "8.000");
  a2a.external_id = "5";
  a2a.coll_name = "all_to_allv";
  a2a.dtype = "BFloat16";
  a2a.in_nelems = 1000;
  a2a.group_size = 4;
  a2a.seq = 3;
  a2a.pg_name = "0";
  // 2: no External id: the c10d op around the launch (on tid 7) names it.
  RawEvent ar = X("cpu_op", "c10d::allreduce_", "199.000", "8.000");
  RawEvent other_thread = X("cpu_op", "c10d::alltoall_base_", "199.500", "8.000");
  other_thread.tid = 8;
  // 3: a send to global rank 0, rank 2 being position 1 of [0, 2].
  RawEvent send = X("cpu_op", "record_param_comms", "299.000", "8.000");
  send.external_id = "\"9\"";  // a decimal string, as some writers give ids
  send.coll_name = "send";
  send.pg_name = "pp";
  send.pg_ranks = "[0, 2]";
  send.src_rank = 2;
  send.dst_rank = 0;
  // 4: nothing names it.
  RankTrace t = Build({a2a, launch("100.000", 1), sendrecv("110.000", 1, "5"), ar, other_thread, launch("200.000", 2),
                       sendrecv("210.000", 2, ""), send, launch("300.000", 3), sendrecv("310.000", 3, "9 "),
                       launch("400.000", 4), sendrecv("410.000", 4, "77")},
                      /*rank=*/2);
  ASSERT_EQ(t.comm_ops.size(), 4u);
  EXPECT_EQ(t.comm_ops[0].op, Collective::kAllToAll);
  EXPECT_EQ(t.comm_ops[0].bytes, 2000);
  EXPECT_EQ(t.comm_ops[0].seq, 3);
  EXPECT_EQ(t.comm_ops[0].communicator, "0");
  EXPECT_EQ(t.comm_ops[0].host_enter_ns, 100000);  // the kernel's own launch kept
  EXPECT_EQ(t.comm_ops[0].stream, t.activities[0].stream);
  EXPECT_EQ(t.comm_ops[1].op, Collective::kAllReduce);
  EXPECT_EQ(t.comm_ops[1].source, CommSource::kKernelName);
  EXPECT_EQ(t.comm_ops[2].op, Collective::kSend);
  EXPECT_EQ(t.comm_ops[2].comm_rank, 1);
  EXPECT_EQ(t.comm_ops[2].root_peer, 0);
  EXPECT_EQ(t.comm_ops[3].op, Collective::kSendRecv);
}

}  // namespace
}  // namespace overlapprof::kineto
