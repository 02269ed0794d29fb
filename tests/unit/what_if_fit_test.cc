// The latency/bandwidth fit of collective transfer times (analyzers/what_if_fit.h).
#include "analyzers/what_if_fit.h"

#include <gtest/gtest.h>

namespace overlapprof::whatif {
namespace {

// time = 20 µs + bytes / (50 bytes/ns), plus samples that waited (above the envelope): the fit
// gives back the line, not a least-squares compromise with the waiting.
TEST(WhatIfFit, LowerEnvelopeTheilSenGivesBackTheLine) {
  std::vector<TransferSample> s;
  for (int64_t mb : {1, 2, 4, 8, 16, 32}) {
    const int64_t bytes = mb << 20;
    const int64_t ns = 20000 + bytes / 50;
    s.push_back({Collective::kAllReduce, bytes, ns, false});
    s.push_back({Collective::kAllReduce, bytes, ns + 3000000, false});  // waited 3 ms
    s.push_back({Collective::kAllReduce, bytes, ns * 2, false});
  }
  const std::vector<TransferFit> fits = FitTransfers(s);
  ASSERT_EQ(fits.size(), 1u);
  const TransferFit& f = fits[0];
  EXPECT_TRUE(f.fitted) << f.why_not;
  EXPECT_FALSE(f.from_kernels);
  EXPECT_EQ(f.samples, 18);
  EXPECT_EQ(f.sizes, 6);
  EXPECT_NEAR(f.latency_ns, 20000, 2);
  EXPECT_NEAR(f.bytes_per_ns, 50, 0.01);
  EXPECT_GT(f.median_excess_pct, 50);  // two thirds of the samples lie far above
}

TEST(WhatIfFit, FamiliesApartTransfersBeforeKernelsAndOneSizeIsNotFitted) {
  std::vector<TransferSample> s = {
      {Collective::kAllGather, 1000, 5000, true},      {Collective::kAllGather, 2000, 6000, true},
      {Collective::kAllReduce, 1 << 20, 90000, false}, {Collective::kAllReduce, 1 << 20, 95000, false},
      {Collective::kAllReduce, 1 << 21, 10, true},  // a kernel duration: the family has transfers
  };
  const std::vector<TransferFit> fits = FitTransfers(s);
  ASSERT_EQ(fits.size(), 2u);
  for (const TransferFit& f : fits) {
    if (f.op == Collective::kAllGather) {
      EXPECT_TRUE(f.from_kernels);
      EXPECT_TRUE(f.fitted);
      EXPECT_NEAR(f.latency_ns, 4000, 1);
      EXPECT_NEAR(f.bytes_per_ns, 1, 1e-9);
    } else {
      EXPECT_EQ(f.op, Collective::kAllReduce);
      EXPECT_FALSE(f.from_kernels);
      EXPECT_EQ(f.samples, 2);
      EXPECT_FALSE(f.fitted);
      EXPECT_NE(f.why_not.find("one message size"), std::string::npos);
    }
  }
}

// k times faster: the fitted part scaled, the time above the fit (waiting) kept.
TEST(WhatIfFit, ScaledTransferKeepsTheExcessOverTheFit) {
  TransferFit f;
  f.fitted = true;
  f.latency_ns = 20000;
  f.bytes_per_ns = 50;
  const int64_t bytes = 5000000;  // 100 µs of bandwidth
  EXPECT_EQ(ScaledTransfer(f, bytes, 120000, 0.5, 2.0), 60000);
  EXPECT_EQ(ScaledTransfer(f, bytes, 520000, 0.5, 2.0), 460000);  // 400 µs waited, kept
  EXPECT_EQ(ScaledTransfer(f, bytes, 520000, 1.0, 1.0), 520000);
  EXPECT_EQ(ScaledTransfer(f, bytes, 50000, 0.0, 1e9), 0);  // shorter than the fit: all of it rescaled
  TransferFit none;
  EXPECT_EQ(ScaledTransfer(none, bytes, 70000, 0.5, 2.0), 70000);
}

}  // namespace
}  // namespace overlapprof::whatif
