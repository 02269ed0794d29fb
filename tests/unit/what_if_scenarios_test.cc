// The custom what-if scenarios' grammar (analyzers/what_if_scenarios.h, docs/what-if.md): every
// form parses into its typed spec, and every wrong spec is one line naming the part that is wrong.
#include "analyzers/what_if_scenarios.h"

#include <gtest/gtest.h>

#include <string>

namespace overlapprof::whatif {
namespace {

ScenarioSpec Parsed(const std::string& text) {
  StatusOr<ScenarioSpec> s = ParseScenario(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().message();
  return s.ok() ? *s : ScenarioSpec{};
}

TEST(WhatIfScenarios, EveryFormParsesIntoItsKind) {
  ScenarioSpec s = Parsed("comm*0.5");
  EXPECT_EQ(s.kind, ScenarioKind::kCommScale);
  EXPECT_DOUBLE_EQ(s.factor, 0.5);
  EXPECT_EQ(s.text, "comm*0.5");
  s = Parsed("host*0");
  EXPECT_EQ(s.kind, ScenarioKind::kHostScale);
  EXPECT_DOUBLE_EQ(s.factor, 0);
  s = Parsed("kernel~gemm|sm90_.*x*0.8");  // the last '*' separates the factor
  EXPECT_EQ(s.kind, ScenarioKind::kKernelScale);
  EXPECT_EQ(s.pattern, "gemm|sm90_.*x");
  EXPECT_DOUBLE_EQ(s.factor, 0.8);
  s = Parsed("rank=7:median");
  EXPECT_EQ(s.kind, ScenarioKind::kRankMedian);
  EXPECT_EQ(s.rank, 7);
  s = Parsed("ddp.bucket_cap_mb=100");
  EXPECT_EQ(s.kind, ScenarioKind::kDdpBucketCap);
  EXPECT_DOUBLE_EQ(s.bucket_cap_mb, 100);
  s = Parsed("ddp.bucket_cap_mb=2.5");
  EXPECT_DOUBLE_EQ(s.bucket_cap_mb, 2.5);
  s = Parsed("ddp.compress=bf16");
  EXPECT_EQ(s.kind, ScenarioKind::kDdpCompress);
  EXPECT_EQ(s.compress, CompressType::kBf16);
  EXPECT_EQ(Parsed("ddp.compress=fp16").compress, CompressType::kFp16);
  s = Parsed("ddp.accumulate=4");
  EXPECT_EQ(s.kind, ScenarioKind::kDdpAccumulate);
  EXPECT_EQ(s.accumulate, 4);
  s = Parsed("fsdp.prefetch=+1");
  EXPECT_EQ(s.kind, ScenarioKind::kFsdpPrefetch);
  EXPECT_EQ(s.prefetch_deeper, 1);
  EXPECT_EQ(Parsed("pp.slowest=median").kind, ScenarioKind::kPpSlowest);
}

// Each wrong spec: an invalid-argument error (exit 2), one line, quoting the spec and naming the
// wrong part.
TEST(WhatIfScenarios, AWrongSpecNamesTheWrongPart) {
  const std::pair<const char*, const char*> cases[] = {
      {"comm*", "'' is not a factor"},
      {"comm*-1", "'-1' is not a factor"},
      {"comm*x", "'x' is not a factor"},
      {"comm*nan", "'nan' is not a factor"},
      {"host*2x", "'2x' is not a factor"},
      {"kernel~gemm", "no '*K' after the regex"},
      {"kernel~*0.5", "empty REGEX"},
      {"kernel~gemm(*0.5", "'gemm(' is not a valid regex"},
      {"rank=x:median", "'x' is not a rank"},
      {"rank=-1:median", "'-1' is not a rank"},
      {"rank=3", "missing ':median'"},
      {"rank=3:fastest", "'fastest' is not a pace"},
      {"ddp.bucket_cap_mb=0", "'0' is not a bucket size"},
      {"ddp.bucket_cap_mb=big", "'big' is not a bucket size"},
      {"ddp.compress=int8", "'int8' is not a compression"},
      {"ddp.accumulate=0", "'0' is not a number of micro-steps"},
      {"ddp.accumulate=2.5", "'2.5' is not a number of micro-steps"},
      {"fsdp.prefetch=+2", "'+2' is not a prefetch change"},
      {"pp.slowest=mean", "'mean' is not a pace"},
      {"ddp.bucket_size=25", "unknown knob 'ddp.bucket_size'"},
      {"nccl.algo=ring", "unknown knob 'nccl.algo'"},
      {"faster", "not a scenario"},
      {"comm *0.5", "spaces are not allowed"},
  };
  for (const auto& [spec, part] : cases) {
    StatusOr<ScenarioSpec> s = ParseScenario(spec);
    ASSERT_FALSE(s.ok()) << spec;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << spec;
    const std::string m = s.status().message();
    EXPECT_NE(m.find(std::string("--scenario '") + spec + "'"), std::string::npos) << m;
    EXPECT_NE(m.find(part), std::string::npos) << spec << ": " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  StatusOr<ScenarioSpec> empty = ParseScenario("");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty SPEC"), std::string::npos);
}

TEST(WhatIfScenarios, ParseScenariosStopsAtTheFirstWrongOne) {
  StatusOr<std::vector<ScenarioSpec>> ok = ParseScenarios({"comm*0.5", "ddp.accumulate=2"});
  ASSERT_TRUE(ok.ok());
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].kind, ScenarioKind::kDdpAccumulate);
  StatusOr<std::vector<ScenarioSpec>> bad = ParseScenarios({"comm*0.5", "warp.speed=9", "comm*y"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("warp.speed"), std::string::npos);
}

}  // namespace
}  // namespace overlapprof::whatif
