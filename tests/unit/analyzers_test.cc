// The iteration, op-type and DDP-bucket analyzers on small synthetic timelines with answers
// worked out by hand, through the real importer and pipeline (all times in µs below).
#include <gtest/gtest.h>

#include "reports/report.h"
#include "src/cli/pipeline.h"
#include "test_util.h"

namespace overlapprof {
namespace {

using testing::Ev;
using testing::KinetoJson;
using testing::TempDir;
using Json = nlohmann::ordered_json;

// µs on a large base, as in real traces: T(420) = "1000000000420.000".
std::string T(int64_t us) { return fmt::format("1000000{:06d}.000", us); }
std::string D(int64_t us) { return fmt::format("{}.000", us); }
constexpr int64_t kBase = 1000000000000000;  // T(0) in ns

std::string AllReduceArgs(int64_t nelems) {
  return fmt::format(R"(, "Collective name": "allreduce", "In msg nelems": {}, "Out msg nelems": {}, "Group size": 2,
                      "dtype": "Float", "Process Group Name": "0", "Process Group Ranks": "[0, 1]")",
                     nelems, nelems);
}

Json Analyze(const std::string& json, const AnalysisOptions& ao = {}) {
  TempDir dir;
  std::string path = dir.Write("rank0.json", json);
  StatusOr<Summary> s = AnalyzeFiles({path}, ImportOptions{}, ao, 1);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return Json();
  return SummaryToJson(*s);
}

// One DDP step: backward host range [100, 600]; compute kernels launched at 110 and 300 run
// [200, 400) and [400, 500); bucket 0 (4 MiB) launched at 350 runs [420, 520); bucket 1 (4 MiB)
// launched at 510 runs [530, 700); the optimizer kernel launched at 620 runs [710, 750).
std::vector<Ev> DdpStep() {
  std::vector<Ev> ev = {
      {"user_annotation", "ProfilerStep#1", T(0), D(1000)},
      {"user_annotation", "## backward ##", T(100), D(500)},
  };
  auto launch = [&](int64_t host, int64_t corr, const char* kname, int64_t start, int64_t dur, int stream,
                    std::string extra = "") {
    ev.push_back({"cuda_runtime", "cudaLaunchKernel", T(host), D(5), 0, corr});
    ev.push_back({"kernel", kname, T(start), D(dur), stream, corr, extra});
  };
  launch(110, 1, "sm80_gemm_bwd", 200, 200, 7);
  launch(300, 2, "sm80_gemm_bwd2", 400, 100, 7);
  launch(350, 3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 420, 100, 20, AllReduceArgs(1 << 20));
  launch(510, 4, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 530, 170, 20, AllReduceArgs(1 << 20));
  launch(620, 5, "sgd_update_kernel", 710, 40, 7);
  return ev;
}

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

TEST(OpTypes, CountsBytesTimeExposedBandwidth) {
  Json j = Analyze(KinetoJson(DdpStep()));
  ASSERT_EQ(j["op_types"].size(), 1u);
  const Json& r = j["op_types"][0];
  EXPECT_EQ(r["op"], "allreduce");
  EXPECT_EQ(r["count"], 2);
  EXPECT_EQ(r["bytes"], 8 << 20);
  EXPECT_EQ(r["time_ns"], 270000);
  EXPECT_EQ(r["exposed_ns"], 190000);
  EXPECT_EQ(r["algbw_GBps"], 31.069);  // 8 MiB / 270 µs
  EXPECT_EQ(r["ops_under_1MiB"], 0);
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

// Without step markers: a warm-up iteration with one all-reduce C, then 5 iterations of A, B
// (forward [k000, k000+300), A [+400, +450), B [+460, +520), optimizer [+600, +650)).
std::vector<Ev> Unmarked() {
  std::vector<Ev> ev;
  int64_t corr = 1;
  auto k = [&](const char* name, int64_t start, int64_t dur, int stream, std::string extra = "") {
    ev.push_back({"kernel", name, T(start), D(dur), stream, corr++, extra});
  };
  k("fwd_gemm", 0, 300, 7);
  k("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 400, 200, 20, AllReduceArgs(3 << 20));
  k("sgd", 650, 50, 7);
  for (int64_t i = 1; i <= 5; ++i) {
    k("fwd_gemm", i * 1000, 300, 7);
    k("ncclDevKernel_AllReduce_Sum_f32_RING_LL", i * 1000 + 400, 50, 20, AllReduceArgs(1 << 20));
    k("ncclDevKernel_AllReduce_Sum_f32_RING_LL", i * 1000 + 460, 60, 20, AllReduceArgs(2 << 20));
    k("sgd", i * 1000 + 600, 50, 7);
  }
  return ev;
}

// The warm-up's op (C) does not repeat: it and its iteration are in no window (start-up never
// enters the steady figures; docs/analyzers.md "Iterations", whole periods only).
TEST(Iterations, DetectedFromTheRepeatingCommSequenceWithWarmupLeftOut) {
  Json j = Analyze(KinetoJson(Unmarked()));
  const Json& r = j["ranks"][0];
  EXPECT_EQ(r["iteration_source"], "comm pattern");
  ASSERT_EQ(r["iterations"], 5);
  EXPECT_EQ(r["warmup_iterations"], 0);
  ASSERT_EQ(j["iterations"].size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const Json& it = j["iterations"][i];
    EXPECT_EQ(it["warmup"], false) << i;
    EXPECT_EQ(it["start_ns"], kBase + (i + 1) * 1000000) << i;  // cut at the forward kernel
  }
  EXPECT_EQ(j["iterations"][4]["end_ns"], kBase + 5650000);
  // Spread over the 5 steady iterations: each hides nothing (comm never meets compute).
  EXPECT_EQ(r["iteration_spread"]["exposed_comm_ns"]["median"], 110000);
  EXPECT_EQ(r["iteration_spread"]["overlap_ratio"]["n"], 5);
}

TEST(Iterations, TooFewOpsOrNoRepetitionGivesNoneWithANotice) {
  std::vector<Ev> ev = Unmarked();
  ev.resize(6);  // warm-up + one iteration: no two repetitions
  Json j = Analyze(KinetoJson(ev));
  EXPECT_EQ(j["ranks"][0]["iteration_source"], "none");
  EXPECT_EQ(j["ranks"][0]["iterations"], 0);
  EXPECT_EQ(j["ranks"][0]["iteration_spread"], nullptr);
}

TEST(Iterations, StepRangeNamesTheIterationAnnotation) {
  std::vector<Ev> ev;
  for (int64_t i = 0; i < 3; ++i) {
    ev.push_back({"user_annotation", fmt::format("train_step#{}", 7 + i), T(i * 1000), D(900)});
    ev.push_back({"cuda_runtime", "cudaLaunchKernel", T(i * 1000 + 10), D(5), 0, i + 1});
    ev.push_back({"kernel", "gemm", T(i * 1000 + 100), D(500), 7, i + 1});
  }
  AnalysisOptions ao;
  ao.step_range = "train_step";
  Json j = Analyze(KinetoJson(ev), ao);
  EXPECT_EQ(j["ranks"][0]["iteration_source"], "step range");
  ASSERT_EQ(j["iterations"].size(), 3u);
  EXPECT_EQ(j["iterations"][1]["step"], 8);
  EXPECT_EQ(j["iterations"][1]["start_ns"], kBase + 1100000);
  // A name that matches nothing is an error (a typo must not switch the iterations off silently).
  ao.step_range = "no_such_range";
  TempDir dir;
  StatusOr<Summary> s = AnalyzeFiles({dir.Write("rank0.json", KinetoJson(ev))}, ImportOptions{}, ao, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("--step-range 'no_such_range' matches no host range"), std::string::npos)
      << s.status().message();
}

TEST(Iterations, SteadyStepsAtHighStepNumbersAreNotWarmup) {
  // Steps 1009 and 1010 are steady (two all-reduces of different sizes each); the trace ends
  // inside step 1011 (one all-reduce, a shorter window). Whatever the signatures' hash values,
  // the partial last step is not the reference, so nothing is warm-up. Several sizes are tried
  // so that an order-of-hash tie-break would pick the partial step in some of them.
  for (int64_t variant = 0; variant < 6; ++variant) {
    std::vector<Ev> ev;
    int64_t corr = 1;
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t t = i * 1000;
      ev.push_back({"user_annotation", fmt::format("ProfilerStep#{}", 1009 + i), T(t), D(i < 2 ? 1000 : 400)});
      ev.push_back({"cuda_runtime", "cudaLaunchKernel", T(t + 10), D(5), 0, corr});
      ev.push_back({"kernel", "gemm", T(t + 100), D(i < 2 ? 500 : 200), 7, corr++});
      for (int64_t k = 0; k < (i < 2 ? 2 : 1); ++k) {
        ev.push_back({"cuda_runtime", "cudaLaunchKernel", T(t + 20 + k), D(1), 0, corr});
        ev.push_back({"kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", T(t + 610 + 150 * k), D(100), 20, corr++,
                      AllReduceArgs((1 + k) * (1000 + 37 * variant))});
      }
    }
    Json j = Analyze(KinetoJson(ev));
    ASSERT_EQ(j["iterations"].size(), 3u);
    EXPECT_EQ(j["iterations"][0]["step"], 1009);
    EXPECT_EQ(j["ranks"][0]["warmup_iterations"], 0) << "variant " << variant;
  }
}

TEST(Iterations, WarmupByWallTimeAndSignature) {
  // ProfilerStep iterations: the first two take 3x longer (compilation), then 4 steady ones.
  std::vector<Ev> ev;
  int64_t t = 0;
  for (int64_t i = 0; i < 6; ++i) {
    const int64_t len = i < 2 ? 3000 : 1000;
    ev.push_back({"user_annotation", fmt::format("ProfilerStep#{}", i), T(t), D(len)});
    ev.push_back({"cuda_runtime", "cudaLaunchKernel", T(t + 10), D(5), 0, i + 1});
    ev.push_back({"kernel", "gemm", T(t + 100), D(len / 2), 7, i + 1});
    t += len;
  }
  Json j = Analyze(KinetoJson(ev));
  EXPECT_EQ(j["ranks"][0]["warmup_iterations"], 2);
  EXPECT_EQ(j["iterations"][1]["warmup"], true);
  EXPECT_EQ(j["iterations"][2]["warmup"], false);
  EXPECT_EQ(j["ranks"][0]["iteration_spread"]["wall_ns"]["median"], 1000000);
}

std::string CollArgs(const char* name, int64_t nelems) {
  return fmt::format(R"(, "Collective name": "{}", "In msg nelems": {}, "Out msg nelems": {}, "Group size": 4,
                      "dtype": "BFloat16", "Process Group Name": "0", "Process Group Ranks": "[0, 1, 2, 3]")",
                     name, nelems, nelems * 4);
}

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
