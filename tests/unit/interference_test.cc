// The interference analyzer (analyzers/interference.{h,cc}): the slowdown estimate on hand-worked
// samples, and the `interference` section on small synthetic timelines through the real importer
// and pipeline (times in µs).
#include "analyzers/interference.h"

#include <gtest/gtest.h>

#include <cmath>

#include "analyzer_trace_util.h"
#include "reports/interference_report.h"

namespace overlapprof {
namespace {

using testing::AllReduceArgs;
using testing::Analyze;
using testing::D;
using testing::Ev;
using testing::Json;
using testing::KinetoJson;
using testing::T;

TEST(Interference, HodgesLehmannWithMannWhitneyInterval) {
  // Pairs: log(u/10) five times for each u in 11..15. The 13th of 25 is log 1.3; K = floor(12.5 -
  // 1.96 * sqrt(25 * 11 / 12)) = 3: the 3rd smallest is log 1.1, the 3rd largest log 1.5.
  auto e = EstimateSlowdown({10, 10, 10, 10, 10}, {11, 12, 13, 14, 15});
  ASSERT_TRUE(e.has_value());
  EXPECT_NEAR(e->slowdown, 0.3, 1e-9);
  EXPECT_NEAR(e->low, 0.1, 1e-9);
  EXPECT_NEAR(e->high, 0.5, 1e-9);
  EXPECT_EQ(e->alone_median_ns, 10);
}

TEST(Interference, ScaledSamplesGiveTheScaleWithAnIntervalAroundIt) {
  std::vector<int64_t> alone = {980, 990, 1000, 1010, 1020, 995};
  std::vector<int64_t> under;
  for (int64_t a : alone) under.push_back(a * 6 / 5);
  auto e = EstimateSlowdown(alone, under);
  ASSERT_TRUE(e.has_value());
  EXPECT_NEAR(e->slowdown, 0.2, 1e-9);
  EXPECT_LT(e->low, 0.2);
  EXPECT_GT(e->high, 0.2);
  EXPECT_EQ(e->alone_median_ns, 997);  // (995 + 1000) / 2, rounded down
}

TEST(Interference, FewerThanFiveOrNonPositiveIsNoEstimate) {
  EXPECT_FALSE(EstimateSlowdown({10, 10, 10, 10}, {12, 12, 12, 12, 12}).has_value());
  EXPECT_FALSE(EstimateSlowdown({10, 10, 10, 10, 10}, {12, 12, 12, 12}).has_value());
  EXPECT_FALSE(EstimateSlowdown({10, 10, 0, 10, 10}, {12, 12, 12, 12, 12}).has_value());
}

TEST(Interference, ManySamplesAreThinnedEvenly) {
  std::vector<int64_t> alone(5000, 1000), under(5000, 1500);
  auto e = EstimateSlowdown(alone, under);
  ASSERT_TRUE(e.has_value());
  EXPECT_NEAR(e->slowdown, 0.5, 1e-9);
}

// Ten steps of 1000 µs (ProfilerStep host ranges, the windows). In each, `gemm` starts at +100;
// in odd steps an all-reduce runs [+100, +350) and the gemm lasts 250 (both slowed by 25%), in
// even steps the gemm lasts 200 and the all-reduce runs alone [+400, +600).
// `overlapped(k)` says which steps overlap; `second` names the overlapped kernel.
std::vector<Ev> Steps(bool (*overlapped)(int), const char* second = "gemm") {
  std::vector<Ev> ev;
  for (int k = 0; k < 10; ++k) {
    const int64_t t = k * 1000;
    ev.push_back({"user_annotation", fmt::format("ProfilerStep#{}", k), T(t), D(1000)});
    if (overlapped(k)) {
      ev.push_back({"kernel", second, T(t + 100), D(250), 7});
      ev.push_back({"kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", T(t + 100), D(250), 20, -1,
                    AllReduceArgs(1 << 20)});
    } else {
      ev.push_back({"kernel", "gemm", T(t + 100), D(200), 7});
      ev.push_back({"kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", T(t + 400), D(200), 20, -1,
                    AllReduceArgs(1 << 20)});
    }
  }
  return ev;
}

TEST(Interference, TaxNetGainAndEfficiencyOfTheSteps) {
  Json j = Analyze(KinetoJson(Steps([](int k) { return k % 2 == 1; })));
  ASSERT_TRUE(j.contains("interference")) << j.dump();
  const Json& r = j["interference"]["ranks"][0];
  EXPECT_EQ(r["iterations"], 10);
  EXPECT_EQ(r["measurable"], true);
  EXPECT_EQ(r["why_not"], nullptr);
  EXPECT_EQ(r["wall_ns"], 10000000);
  EXPECT_EQ(r["compute_tax_ns"], 250000);  // 5 x (250 - 200)
  EXPECT_EQ(r["comm_tax_ns"], 250000);
  EXPECT_EQ(r["measured_compute_ns"], 1250000);
  EXPECT_EQ(r["overlapped_compute_ns"], 1250000);
  EXPECT_EQ(r["measurable_share"], 1.0);
  EXPECT_EQ(r["hidden_comm_ns"], 1250000);
  EXPECT_EQ(r["comm_ns"], 2250000);
  EXPECT_EQ(r["net_gain_ns"], 1000000);
  EXPECT_EQ(r["tax_share_of_step"], 0.025);
  EXPECT_EQ(r["hidden_share"], 0.5556);
  // (1250 - 250 - 250) / (2250 - 250)
  EXPECT_EQ(r["overlap_efficiency"], 0.375);
  const Json& kernels = j["interference"]["kernels"];
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0]["kind"], "compute");
  EXPECT_EQ(kernels[0]["name"], "gemm");
  EXPECT_EQ(kernels[0]["position"], 0);
  EXPECT_EQ(kernels[0]["slowdown"], 0.25);
  EXPECT_EQ(kernels[0]["alone"], 5);
  EXPECT_EQ(kernels[0]["overlapped"], 5);
  EXPECT_EQ(kernels[1]["kind"], "comm");
  EXPECT_EQ(kernels[1]["op"], "allreduce");
  EXPECT_EQ(kernels[1]["bytes"], 4 << 20);
  EXPECT_EQ(kernels[1]["position"], nullptr);
  EXPECT_EQ(kernels[1]["slowdown"], 0.25);
  ASSERT_EQ(j["interference"]["iterations"].size(), 10u);
  EXPECT_EQ(j["interference"]["iterations"][1]["compute_tax_ns"], 50000);
  // A step where nothing overlapped measured nothing: no tax figure, not a zero.
  EXPECT_EQ(j["interference"]["iterations"][0]["compute_tax_ns"], nullptr);
  EXPECT_EQ(j["interference"]["iterations"][0]["overlapped_compute_ns"], 0);
  // The knobs are named once the tax reaches 1% of the step.
  bool knobs = false;
  for (const Json& f : j["findings"])
    if (f["analyzer"] == "interference")
      knobs = f["message"].get<std::string>().find("NCCL_MAX_NCHANNELS") != std::string::npos;
  EXPECT_TRUE(knobs) << j["findings"].dump();
}

TEST(Interference, WorkThatNeverRunsAloneIsNotMeasurable) {
  Json j = Analyze(KinetoJson(Steps([](int) { return true; })));
  const Json& r = j["interference"]["ranks"][0];
  EXPECT_EQ(r["measurable"], false);
  EXPECT_NE(r["why_not"].get<std::string>().find("not measurable in this trace"), std::string::npos);
  EXPECT_EQ(r["compute_tax_ns"], nullptr);
  EXPECT_EQ(r["net_gain_ns"], nullptr);
  EXPECT_EQ(r["overlap_efficiency"], nullptr);
  EXPECT_EQ(r["measurable_share"], 0.0);
  EXPECT_TRUE(j["interference"]["kernels"].empty());
  for (const Json& f : j["findings"]) EXPECT_NE(f["analyzer"], "interference");
}

TEST(Interference, DifferentKernelsAreNeverCompared) {
  // Alone it is `gemm`, overlapped `gemm_big`: no identity runs both ways.
  Json j = Analyze(KinetoJson(Steps([](int k) { return k % 2 == 1; }, "gemm_big")));
  const Json& r = j["interference"]["ranks"][0];
  EXPECT_EQ(r["compute_tax_ns"], nullptr);
  EXPECT_EQ(r["overlapped_compute_ns"], 1250000);
  EXPECT_EQ(r["measured_compute_ns"], 0);
}

TEST(Interference, ThePositionInTheStepIsPartOfTheIdentity) {
  // Every step: gemm #0 alone at +0, gemm #1 under the all-reduce at +300: same name, never the
  // same launch, so nothing is measurable although `gemm` runs alone and overlapped every step.
  std::vector<Ev> ev;
  for (int k = 0; k < 10; ++k) {
    const int64_t t = k * 1000;
    ev.push_back({"user_annotation", fmt::format("ProfilerStep#{}", k), T(t), D(1000)});
    ev.push_back({"kernel", "gemm", T(t), D(200), 7});
    ev.push_back({"kernel", "gemm", T(t + 300), D(300), 7});
    ev.push_back({"kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", T(t + 300), D(300), 20, -1,
                  AllReduceArgs(1 << 20)});
  }
  Json j = Analyze(KinetoJson(ev));
  EXPECT_EQ(j["interference"]["ranks"][0]["compute_tax_ns"], nullptr);
  EXPECT_EQ(j["interference"]["ranks"][0]["measurable"], false);
}

TEST(Interference, PartlyCoveredKernelsCountAsOverlappedButAreNotMeasured) {
  // Odd steps: the all-reduce covers half of a 250 µs gemm (under 90%): overlapped, not measured.
  std::vector<Ev> ev;
  for (int k = 0; k < 10; ++k) {
    const int64_t t = k * 1000;
    ev.push_back({"user_annotation", fmt::format("ProfilerStep#{}", k), T(t), D(1000)});
    ev.push_back({"kernel", "gemm", T(t + 100), D(k % 2 ? 250 : 200), 7});
    ev.push_back({"kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", T(t + (k % 2 ? 225 : 400)), D(200), 20, -1,
                  AllReduceArgs(1 << 20)});
  }
  Json j = Analyze(KinetoJson(ev));
  const Json& r = j["interference"]["ranks"][0];
  EXPECT_EQ(r["overlapped_compute_ns"], 1250000);
  EXPECT_EQ(r["measured_compute_ns"], 0);
  EXPECT_EQ(r["compute_tax_ns"], nullptr);
}

TEST(Interference, TerminalLineOnlyFromOnePercentOfTheStep) {
  Summary s;
  auto r = std::make_shared<InterferenceResult>();
  r->run.wall_ns = 1000000;
  r->run.comm_ns = 400000;
  r->run.hidden_ns = 300000;
  r->run.compute_overlapped_ns = 600000;
  r->run.compute_measured_ns = 600000;
  r->run.compute_tax_ns = 9999;  // under 1%
  r->ranks.push_back({0, 2, "", r->run});  // two steps
  s.interference = r;
  EXPECT_FALSE(InterferenceLine(s).has_value());
  r->run.compute_tax_ns = 100000;  // 10%
  const std::optional<std::string> loud = InterferenceLine(s);
  ASSERT_TRUE(loud.has_value());
  EXPECT_NE(loud->find("overlap tax: overlapped compute 20.0% slower"), std::string::npos) << *loud;
  EXPECT_NE(loud->find("net gain of overlap 100.0 µs per step of 150.0 µs hidden"), std::string::npos) << *loud;
}

}  // namespace
}  // namespace overlapprof
