// The DDP-bucket analyzer (analyzers/ddp_buckets.cc) on small synthetic timelines, through the real importer and pipeline (times in µs).
#include <gtest/gtest.h>

#include "analyzer_trace_util.h"

namespace overlapprof {
namespace {

using testing::AllReduceArgs;
using testing::Analyze;
using testing::D;
using testing::DdpStep;
using testing::Ev;
using testing::Json;
using testing::KinetoJson;
using testing::T;

TEST(DdpBuckets, LaunchQueueOverlapTailAndCompute) {
  Json j = Analyze(KinetoJson(DdpStep()));
  ASSERT_TRUE(j["buckets"].is_array());
  ASSERT_EQ(j["buckets"].size(), 2u);
  const Json& b0 = j["buckets"][0];
  EXPECT_EQ(b0["bytes"], 4 << 20);
  EXPECT_EQ(b0["launch_offset_ns"], 250000);
  EXPECT_EQ(b0["launch_fraction"], 0.5);
  EXPECT_EQ(b0["queue_ns"], 70000);
  EXPECT_EQ(b0["duration_ns"], 100000);
  EXPECT_EQ(b0["overlap_fraction"], 0.8);
  EXPECT_EQ(b0["exposed_ns"], 20000);
  EXPECT_EQ(b0["busbw_GBps"], 41.943);  // 4 MiB / 100 µs, factor 2(n-1)/n = 1 for n = 2
  const Json& b1 = j["buckets"][1];
  EXPECT_EQ(b1["launch_offset_ns"], 410000);
  EXPECT_EQ(b1["queue_ns"], 20000);
  EXPECT_EQ(b1["exposed_ns"], 170000);
  EXPECT_EQ(b1["overlap_fraction"], 0.0);
  ASSERT_EQ(j["bucket_stalls"].size(), 1u);
  const Json& st = j["bucket_stalls"][0];
  EXPECT_EQ(st["buckets"], 2);
  EXPECT_EQ(st["bucket_comm_ns"], 270000);
  EXPECT_EQ(st["backward_host_ns"], 500000);
  EXPECT_EQ(st["backward_compute_ns"], 300000);
  EXPECT_EQ(st["tail_ns"], 200000);          // last bucket ends at 700, backward compute at 500
  EXPECT_EQ(st["compute_wait_ns"], 190000);  // comm in [500, 710): [500,520) + [530,700)
  // The tail is 74% of the bucket communication: a finding says so, with the numbers.
  bool tail_finding = false;
  for (const Json& f : j["findings"])
    tail_finding |= f["message"].get<std::string>().find("200.0 µs of gradient communication per iteration (74%)") == 0;
  EXPECT_TRUE(tail_finding) << j["findings"].dump();
}

TEST(DdpBuckets, VolumeFindingWhenCommunicationExceedsBackwardCompute) {
  std::vector<Ev> ev = DdpStep();
  ev[9].dur = D(400);  // bucket 1 runs [530, 930): 500 µs of buckets against 300 µs of backward compute
  ev[11].ts = T(940);  // the optimizer after it
  Json j = Analyze(KinetoJson(ev));
  bool volume = false;
  for (const Json& f : j["findings"])
    volume |= f["message"].get<std::string>().rfind("gradient communication exceeds backward compute (1.67x): overlap "
                                                    "can hide at most 60% of it",
                                                    0) == 0;
  EXPECT_TRUE(volume) << j["findings"].dump();
  // And not in the original step (270 µs of buckets, 300 µs of compute).
  const Json step = Analyze(KinetoJson(DdpStep()));  // (a range-for over a temporary's member dangles)
  for (const Json& f : step["findings"])
    EXPECT_EQ(f["message"].get<std::string>().find("exceeds backward compute"), std::string::npos);
}

TEST(DdpBuckets, AllReducesOutsideBackwardAreNotBuckets) {
  std::vector<Ev> ev = DdpStep();
  ev.push_back({"cuda_runtime", "cudaLaunchKernel", T(20), D(5), 0, 9});  // before backward
  ev.push_back({"kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", T(30), D(10), 20, 9, AllReduceArgs(16)});
  Json j = Analyze(KinetoJson(ev));
  EXPECT_EQ(j["buckets"].size(), 2u);
  EXPECT_EQ(j["op_types"][0]["count"], 3);
  EXPECT_EQ(j["op_types"][0]["ops_under_1MiB"], 1);
}

}  // namespace
}  // namespace overlapprof
