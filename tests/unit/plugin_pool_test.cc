// The NCCL profiler plugin's pool of operations in flight and its aggregation
// (injector/plugin_pool.h): GPU start = min channel start, end = max channel stop, one emit
// per op whatever the order of its events, stale events recognised, bounded with drops
// visible to the caller, concurrent channels from several threads (also under TSan:
// injector_unit_tests).
#include "injector/plugin_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace overlapprof::inject {
namespace {

struct Sink {
  std::mutex mu;
  std::vector<HookRecord> out;
  auto Fn() {
    return [this](const HookRecord& r) {
      std::lock_guard<std::mutex> l(mu);
      out.push_back(r);
    };
  }
};

HookRecord Rec(uint64_t seq, uint8_t flags = 0) {
  HookRecord r;
  r.kind = RecKind::kPluginOp;
  r.plugin_op.seq = seq;
  r.plugin_op.flags = flags;
  return r;
}

TEST(PluginPool, MinStartMaxStopOverChannelsThenOneEmit) {
  PluginOpPool pool(64);
  Sink s;
  PluginHandle op = PluginHandle::Decode(pool.Start(Rec(7), 3, 1));
  ASSERT_EQ(op.kind, PluginHandleKind::kOp);
  std::vector<PluginHandle> ch;
  for (uint32_t c = 0; c < 3; ++c) {
    void* h = pool.ChannelStart(op, c, 1000 + c * 10, 5000 + c);
    ASSERT_NE(h, nullptr);
    ch.push_back(PluginHandle::Decode(h));
  }
  for (uint32_t c = 0; c < 3; ++c) pool.ChannelStopTime(ch[c], 2000 - c * 10);
  EXPECT_TRUE(pool.ChannelStop(ch[0], s.Fn()));
  EXPECT_TRUE(pool.ChannelStop(ch[1], s.Fn()));
  EXPECT_TRUE(pool.StopTask(op, 9000, s.Fn()));
  EXPECT_TRUE(s.out.empty()) << "one channel still running";
  EXPECT_TRUE(pool.ChannelStop(ch[2], s.Fn()));
  ASSERT_EQ(s.out.size(), 1u);
  const HookRecord& r = s.out[0];
  EXPECT_EQ(r.t_enter, 1000);
  EXPECT_EQ(r.t_exit, 2000);
  EXPECT_EQ(r.plugin_op.seq, 7u);
  EXPECT_EQ(r.plugin_op.channels, 3);
  EXPECT_EQ(r.plugin_op.channels_expected, 3);
  EXPECT_EQ(r.plugin_op.clock_sample, 5002 - 1020);  // min over channels of host - gpu start (channel 2)
  EXPECT_FALSE(r.plugin_op.flags & kPluginFlagIncomplete);
  // Late events of the emitted op: stale, never applied to the slot's next op.
  EXPECT_EQ(pool.ChannelStart(op, 3, 1, 1), nullptr);
  EXPECT_FALSE(pool.StopTask(op, 1, s.Fn()));
  PluginHandle next = PluginHandle::Decode(pool.Start(Rec(8), 1, 1));
  EXPECT_EQ(next.slot, op.slot) << "the slot is recycled";
  EXPECT_NE(next.gen, op.gen);
  EXPECT_FALSE(pool.ChannelStop(ch[0], s.Fn()));
  EXPECT_EQ(s.out.size(), 1u);
}

TEST(PluginPool, ChannelsAfterTheTaskStoppedAndUnknownChannelCount) {
  PluginOpPool pool(16);
  Sink s;
  // NCCL's profiler thread reports channels after the op's own event stopped.
  PluginHandle op = PluginHandle::Decode(pool.Start(Rec(1), 0 /* unknown */, 1));
  EXPECT_TRUE(pool.StopTask(op, 10, s.Fn()));
  EXPECT_TRUE(s.out.empty()) << "no channel yet: an op with unknown channels waits for one";
  PluginHandle c = PluginHandle::Decode(pool.ChannelStart(op, 5, 100, 150));
  pool.ChannelStopTime(c, 300);
  EXPECT_TRUE(pool.ChannelStop(c, s.Fn()));
  ASSERT_EQ(s.out.size(), 1u);
  EXPECT_EQ(s.out[0].t_enter, 100);
  EXPECT_EQ(s.out[0].t_exit, 300);
}

TEST(PluginPool, CopyEngineOpsCompleteAtStopWithHostTimes) {
  PluginOpPool pool(16);
  Sink s;
  HookRecord r = Rec(3, kPluginFlagCe);
  r.t_enter = 500;
  PluginHandle op = PluginHandle::Decode(pool.Start(r, 0, 1));
  EXPECT_TRUE(pool.StopTask(op, 900, s.Fn()));
  ASSERT_EQ(s.out.size(), 1u);
  EXPECT_EQ(s.out[0].t_enter, 500);
  EXPECT_EQ(s.out[0].t_exit, 900);
}

TEST(PluginPool, ProxyOpsKeepTheOpOpenAndAreCounted) {
  PluginOpPool pool(16);
  Sink s;
  PluginHandle op = PluginHandle::Decode(pool.Start(Rec(1), 1, 1));
  PluginHandle px = PluginHandle::Decode(pool.ProxyStart(op));
  ASSERT_EQ(px.kind, PluginHandleKind::kProxyOp);
  EXPECT_NE(pool.ProxyStep(px), nullptr);
  EXPECT_NE(pool.ProxyStep(px), nullptr);
  PluginHandle c = PluginHandle::Decode(pool.ChannelStart(op, 0, 10, 20));
  pool.ChannelStopTime(c, 30);
  EXPECT_TRUE(pool.ChannelStop(c, s.Fn()));
  EXPECT_TRUE(pool.StopTask(op, 40, s.Fn()));
  EXPECT_TRUE(s.out.empty()) << "the proxy op is still running";
  EXPECT_TRUE(pool.ProxyStop(px, s.Fn()));
  ASSERT_EQ(s.out.size(), 1u);
  EXPECT_EQ(s.out[0].plugin_op.proxy_ops, 1u);
  EXPECT_EQ(s.out[0].plugin_op.proxy_steps, 2u);
}

TEST(PluginPool, FullPoolRefusesAndRecyclesAfterEmit) {
  PluginOpPool pool(16);
  Sink s;
  std::vector<PluginHandle> ops;
  for (int i = 0; i < 16; ++i) {
    void* h = pool.Start(Rec(i), 1, 1);
    ASSERT_NE(h, nullptr);
    ops.push_back(PluginHandle::Decode(h));
  }
  EXPECT_EQ(pool.Start(Rec(99), 1, 1), nullptr) << "full: the caller counts the drop";
  PluginHandle c = PluginHandle::Decode(pool.ChannelStart(ops[3], 0, 1, 2));
  pool.ChannelStop(c, s.Fn());
  pool.StopTask(ops[3], 3, s.Fn());
  ASSERT_EQ(s.out.size(), 1u);
  EXPECT_NE(pool.Start(Rec(100), 1, 1), nullptr);
}

TEST(PluginPool, FlushEmitsOpenOpsOfOneContextMarkedIncomplete) {
  PluginOpPool pool(16);
  Sink s;
  PluginHandle a = PluginHandle::Decode(pool.Start(Rec(1), 2, 1));
  PluginHandle b = PluginHandle::Decode(pool.Start(Rec(2), 2, 2));
  PluginHandle ca = PluginHandle::Decode(pool.ChannelStart(a, 0, 10, 11));
  pool.ChannelStopTime(ca, 20);
  pool.ChannelStop(ca, s.Fn());
  EXPECT_EQ(pool.Flush(1, s.Fn()), 1u);
  ASSERT_EQ(s.out.size(), 1u);
  EXPECT_TRUE(s.out[0].plugin_op.flags & kPluginFlagIncomplete);
  EXPECT_EQ(s.out[0].plugin_op.channels, 1);
  EXPECT_EQ(s.out[0].t_exit, 20);
  EXPECT_FALSE(pool.StopTask(a, 30, s.Fn())) << "flushed: later events are stale";
  EXPECT_EQ(pool.Flush(0, s.Fn()), 1u);  // everything left (b)
  EXPECT_EQ(s.out.size(), 2u);
  EXPECT_EQ(s.out[1].plugin_op.seq, 2u);
  (void)b;
}

TEST(PluginPool, HandlesRoundTrip) {
  PluginHandle h;
  h.kind = PluginHandleKind::kChannel;
  h.channel = 63;
  h.slot = PluginHandle::kMaxSlots - 1;
  h.gen = 0xfffffffeu;
  PluginHandle d = PluginHandle::Decode(h.Encode());
  EXPECT_EQ(d.kind, h.kind);
  EXPECT_EQ(d.channel, h.channel);
  EXPECT_EQ(d.slot, h.slot);
  EXPECT_EQ(d.gen, h.gen);
  PluginHandle g;
  g.kind = PluginHandleKind::kGroup;
  g.group = 12345;
  EXPECT_NE(g.Encode(), nullptr);
  EXPECT_EQ(PluginHandle::Decode(g.Encode()).group, 12345u);
}

// Ops started on one thread, their channels reported from others, racing the task stops and
// a flush: every op is emitted exactly once.
TEST(PluginPool, ConcurrentChannelsEmitEachOpOnce) {
  constexpr int kOps = 600, kChannels = 4;
  PluginOpPool pool(256);
  Sink s;
  std::atomic<int> dropped{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      for (int i = w; i < kOps; i += 4) {
        void* h = pool.Start(Rec(i), kChannels, 1 + w);
        if (!h) {
          dropped.fetch_add(1);
          continue;
        }
        PluginHandle op = PluginHandle::Decode(h);
        std::vector<std::thread> chans;
        for (int c = 0; c < kChannels; ++c)
          chans.emplace_back([&, op, c] {
            void* ch = pool.ChannelStart(op, c, 100 + c, 200);
            if (!ch) return;
            pool.ChannelStopTime(PluginHandle::Decode(ch), 300 - c);
            pool.ChannelStop(PluginHandle::Decode(ch), s.Fn());
          });
        pool.StopTask(op, 1, s.Fn());
        for (auto& t : chans) t.join();
      }
    });
  }
  for (auto& t : workers) t.join();
  pool.Flush(0, s.Fn());
  EXPECT_EQ(static_cast<int>(s.out.size()) + dropped.load(), kOps);
  std::vector<int> seen(kOps, 0);
  for (const auto& r : s.out) {
    ++seen[r.plugin_op.seq];
    EXPECT_EQ(r.t_enter, 100);
    EXPECT_EQ(r.t_exit, 300);
    EXPECT_EQ(r.plugin_op.channels, kChannels);
  }
  for (int i = 0; i < kOps; ++i) EXPECT_LE(seen[i], 1) << i;
}

}  // namespace
}  // namespace overlapprof::inject
