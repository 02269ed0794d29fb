// The injector writer thread's batching (injector/batching.h): when it drains the ring and
// when it commits a batch. The policy alone, deterministic: no threads, no store.
#include "injector/batching.h"

#include <gtest/gtest.h>

namespace overlapprof::inject {
namespace {

constexpr int64_t kMs = 1000000;  // ns

TEST(InjectorBatching, IdleDrainEveryFiftyMsOrTheFlushPeriodIfShorter) {
  BatchPolicy p(1000, 1024, 0);
  EXPECT_EQ(p.PollTimeoutMs(0), 50);
  EXPECT_EQ(p.PollTimeoutMs(128), 50);  // exactly an eighth of the ring: still idle
  BatchPolicy fast(10, 1024, 0);
  EXPECT_EQ(fast.PollTimeoutMs(0), 10);
}

TEST(InjectorBatching, BusyDrainAfterOneMsWhenTheLastDrainTookOverAnEighth) {
  BatchPolicy p(1000, 1024, 0);
  EXPECT_EQ(p.PollTimeoutMs(129), 1);
  EXPECT_EQ(p.PollTimeoutMs(1024), 1);
}

TEST(InjectorBatching, CommitsOnThePeriodOnly) {
  const int64_t t0 = 1700000000LL * 1000 * kMs;
  BatchPolicy p(1000, 1024, t0);
  EXPECT_EQ(p.next_commit_ns(), t0 + 1000 * kMs);
  EXPECT_FALSE(p.ShouldCommit(t0 + 999 * kMs, 10, 0, false));
  EXPECT_TRUE(p.ShouldCommit(t0 + 1000 * kMs, 10, 0, false));
  EXPECT_TRUE(p.ShouldCommit(t0 + 1000 * kMs, 0, 0, false));  // an empty batch still commits (counters)
  p.Committed(t0 + 1003 * kMs);  // the period restarts when the commit starts
  EXPECT_FALSE(p.ShouldCommit(t0 + 2002 * kMs, 10, 0, false));
  EXPECT_TRUE(p.ShouldCommit(t0 + 2003 * kMs, 10, 0, false));
}

TEST(InjectorBatching, CommitsEarlyWhenTheBatchReachesAQuarterOfTheRing) {
  BatchPolicy p(1000, 1024, 0);
  EXPECT_FALSE(p.ShouldCommit(1, 255, 0, false));
  EXPECT_TRUE(p.ShouldCommit(1, 256, 0, false));
}

TEST(InjectorBatching, FlushRequestsAndStopCommitAtOnce) {
  BatchPolicy p(600000, 1 << 17, 0);  // --flush-ms 600000: only a request or the stop commits
  EXPECT_FALSE(p.ShouldCommit(5 * kMs, 3, 0, false));
  EXPECT_TRUE(p.ShouldCommit(5 * kMs, 3, 1, false));
  EXPECT_TRUE(p.ShouldCommit(5 * kMs, 0, 0, true));
}

// A simulated writer at a sustained call rate: the batch never grows past a quarter of the
// ring (commits come early) and the drains go busy, so the ring cannot overflow between
// passes while a commit is short.
TEST(InjectorBatching, SustainedRateKeepsBatchesBoundedByAQuarterOfTheRing) {
  const size_t ring = 1 << 17;
  BatchPolicy p(1000, ring, 0);
  const int64_t calls_per_ms = 1000;  // 1 M calls/s
  int64_t now = 0;
  size_t pending = 0, last_drained = 0, commits = 0, max_pending = 0;
  for (int pass = 0; pass < 20000; ++pass) {
    int waited = p.PollTimeoutMs(last_drained);
    now += waited * kMs;
    last_drained = static_cast<size_t>(waited * calls_per_ms);
    pending += last_drained;
    if (pending > max_pending) max_pending = pending;
    if (p.ShouldCommit(now, pending, 0, false)) {
      p.Committed(now);
      pending = 0;
      ++commits;
    }
  }
  EXPECT_LE(max_pending, ring / 4 + 50 * calls_per_ms);
  EXPECT_GT(commits, 0u);
}

}  // namespace
}  // namespace overlapprof::inject
