// The FSDP/TP analyzer (analyzers/sharded.cc) on small synthetic timelines, through the real importer and pipeline (times in µs).
#include <gtest/gtest.h>

#include "analyzer_trace_util.h"

namespace overlapprof {
namespace {

using testing::Analyze;
using testing::CollArgs;
using testing::D;
using testing::Ev;
using testing::Json;
using testing::KinetoJson;
using testing::T;

// FSDP forward over 4 layers: layer i computes [1000i+200, 1000i+700) on stream 7. The
// all-gather of layer 0 and 1 run while nothing computes (exposed: stalls); those of layers 2
// and 3 run under the previous layer's compute (prefetched). Backward: two reduce-scatters.
TEST(Sharded, FsdpPrefetchStallsAndTpOnComputeStream) {
  std::vector<Ev> ev = {{"user_annotation", "## forward ##", T(0), D(4000)},
                        {"user_annotation", "## backward ##", T(4000), D(3000)}};
  int64_t corr = 1;
  auto launch = [&](int64_t host, const char* k, int64_t start, int64_t dur, int stream, std::string extra = "") {
    ev.push_back({"cuda_runtime", "cudaLaunchKernel", T(host), D(2), 0, corr});
    ev.push_back({"kernel", k, T(start), D(dur), stream, corr++, extra});
  };
  for (int64_t i = 0; i < 4; ++i) launch(i * 1000 + 10, "gemm_fwd", i * 1000 + 200, 500, 7);
  launch(20, "ncclDevKernel_AllGather_RING_LL", 0, 150, 20, CollArgs("_allgather_base", 1 << 20));
  launch(30, "ncclDevKernel_AllGather_RING_LL", 800, 150, 20, CollArgs("_allgather_base", 1 << 20));
  launch(40, "ncclDevKernel_AllGather_RING_LL", 1300, 150, 20, CollArgs("_allgather_base", 1 << 20));
  launch(50, "ncclDevKernel_AllGather_RING_LL", 2300, 150, 20, CollArgs("_allgather_base", 1 << 20));
  launch(4100, "gemm_bwd", 4200, 1000, 7);
  launch(4200, "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", 4500, 300, 20, CollArgs("reduce_scatter_tensor", 4 << 20));
  launch(4300, "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", 5300, 300, 20, CollArgs("reduce_scatter_tensor", 4 << 20));
  // Two tensor-parallel all-gathers on the compute stream, between matmuls.
  launch(6000, "ncclDevKernel_AllGather_RING_LL", 6000, 100, 7, CollArgs("_allgather_base", 1 << 10));
  launch(6001, "ncclDevKernel_AllGather_RING_LL", 6200, 100, 7, CollArgs("_allgather_base", 1 << 10));
  Json j = Analyze(KinetoJson(ev));
  Json fwd_ag, bwd_rs, tp;
  for (const Json& r : j["fsdp"]) {
    if (r["phase"] == "forward" && r["op"] == "allgather") fwd_ag = r;
    if (r["phase"] == "backward" && r["op"] == "reducescatter") bwd_rs = r;
  }
  ASSERT_FALSE(fwd_ag.is_null()) << j["fsdp"].dump();
  EXPECT_EQ(fwd_ag["count"], 4);
  EXPECT_EQ(fwd_ag["prefetch_stalls"], 2);
  // Layer 0: [0,150) no compute; layer 1: [800,950) after layer 0's compute ended at 700.
  EXPECT_EQ(fwd_ag["prefetch_stall_ns"], 300000);
  EXPECT_EQ(fwd_ag["exposed_ns"], 300000);
  ASSERT_FALSE(bwd_rs.is_null());
  EXPECT_EQ(bwd_rs["count"], 2);
  EXPECT_EQ(bwd_rs["exposed_ns"], 300000);  // [4500,4800) under gemm_bwd; [5300,5600) exposed
  ASSERT_EQ(j["fsdp_allgathers"].size(), 4u);
  EXPECT_EQ(j["fsdp_allgathers"][0]["prefetched"], false);
  EXPECT_EQ(j["fsdp_allgathers"][2]["prefetched"], true);
  EXPECT_EQ(j["fsdp_allgathers"][0]["bytes"], 8 << 20);  // 4 ranks x 1 Mi bf16 elements
  ASSERT_EQ(j["tp"].size(), 1u);
  EXPECT_EQ(j["tp"][0]["count"], 2);
  EXPECT_EQ(j["tp"][0]["exposed_ns"], 200000);
  int stall_findings = 0, tp_findings = 0;
  for (const Json& f : j["findings"]) {
    const std::string m = f["message"];
    stall_findings += m.rfind("2 of 4 parameter all-gathers in forward are exposed", 0) == 0;
    tp_findings += m.find("run on a compute stream") != std::string::npos;
  }
  EXPECT_EQ(stall_findings, 1) << j["findings"].dump();
  EXPECT_EQ(tp_findings, 1);
}

// All-gathers that outlast the compute they could hide behind: 4 layers of 500 us compute,
// all-gathers of 1200 us back to back from t=0, so every microsecond of compute already has an
// all-gather under it. Prefetch cannot help: the finding says bandwidth-bound, not "prefetch".
TEST(Sharded, AllGathersLongerThanTheComputeAreBandwidthBoundNotAPrefetchProblem) {
  std::vector<Ev> ev = {{"user_annotation", "## forward ##", T(0), D(5000)}};
  int64_t corr = 1;
  auto launch = [&](int64_t host, const char* k, int64_t start, int64_t dur, int stream, std::string extra = "") {
    ev.push_back({"cuda_runtime", "cudaLaunchKernel", T(host), D(2), 0, corr});
    ev.push_back({"kernel", k, T(start), D(dur), stream, corr++, extra});
  };
  for (int64_t i = 0; i < 4; ++i) {
    launch(i * 1000 + 10, "gemm_fwd", i * 1000 + 200, 500, 7);
    launch(i * 10 + 20, "ncclDevKernel_AllGather_RING_LL", i * 1200, 1200, 20, CollArgs("_allgather_base", 1 << 20));
  }
  Json j = Analyze(KinetoJson(ev));
  std::vector<std::string> msgs;
  for (const Json& f : j["findings"])
    if (f["analyzer"] == "sharded") msgs.push_back(f["message"]);
  ASSERT_EQ(msgs.size(), 1u) << j["findings"].dump();
  EXPECT_EQ(msgs[0].rfind("2 of 4 parameter all-gathers in forward are exposed (1.80 ms in total), and prefetching "
                          "cannot hide them: the forward all-gathers take 4.80 ms against 2.00 ms of forward compute, "
                          "2.00 ms of them already hidden, so a better prefetch hides at most 0 ns more and 2.80 ms "
                          "stays exposed: the all-gathers are bandwidth-bound",
                          0),
            0u)
      << msgs[0];
  EXPECT_EQ(msgs[0].find("set_modules_to_forward_prefetch"), std::string::npos);
}

}  // namespace
}  // namespace overlapprof
