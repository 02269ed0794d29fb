// The op-type analyzer (analyzers/op_types.cc) on a small synthetic timeline, through the real importer and pipeline (times in µs).
#include <gtest/gtest.h>

#include "analyzer_trace_util.h"

namespace overlapprof {
namespace {

using testing::Analyze;
using testing::DdpStep;
using testing::Json;
using testing::KinetoJson;

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

}  // namespace
}  // namespace overlapprof
