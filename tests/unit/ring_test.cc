// The injector's lock-free ring (injector/ring.h): order, capacity, drops, and no loss or
// duplication with several producers racing one consumer.
#include "injector/ring.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

namespace overlapprof::inject {
namespace {

struct Item {
  uint32_t producer = 0;
  uint32_t seq = 0;
};

TEST(Ring, FifoAndFullRefusesWithoutBlocking) {
  Ring<int> r(5);  // rounded up to 8
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.capacity(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(r.TryPush(i));
  EXPECT_FALSE(r.TryPush(99));  // full: refused at once
  int v = -1;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(r.TryPop(&v));
    EXPECT_EQ(v, i);
  }
  EXPECT_FALSE(r.TryPop(&v));
  EXPECT_TRUE(r.TryPush(100));  // wraps around
  ASSERT_TRUE(r.TryPop(&v));
  EXPECT_EQ(v, 100);
}

TEST(Ring, ProducersRacingOneConsumerLoseNothingUncounted) {
  constexpr int kProducers = 4;
  constexpr uint32_t kPerProducer = 200000;
  Ring<Item> r(1024);
  std::atomic<uint64_t> dropped{0};
  std::atomic<int> running{kProducers};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      for (uint32_t i = 0; i < kPerProducer; ++i)
        if (!r.TryPush({static_cast<uint32_t>(p), i})) dropped.fetch_add(1);
      running.fetch_sub(1);
    });
  std::vector<uint32_t> next(kProducers, 0);
  uint64_t popped = 0;
  bool out_of_order = false;
  auto drain = [&] {
    Item it;
    while (r.TryPop(&it)) {
      ++popped;
      // Per producer, items come out in the order they went in (gaps are drops).
      if (it.seq < next[it.producer]) out_of_order = true;
      next[it.producer] = it.seq + 1;
    }
  };
  while (running.load() > 0) drain();
  for (auto& t : producers) t.join();
  drain();
  EXPECT_FALSE(out_of_order);
  EXPECT_EQ(popped + dropped.load(), uint64_t{kProducers} * kPerProducer);
}

// Resident memory of this process, bytes (/proc/self/statm, second field, in pages).
int64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long size = 0, resident = 0;
  int n = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(resident) * ::sysconf(_SC_PAGESIZE) : -1;
}

// Construction touches no slot: only the pages the ring reaches are resident (writing every slot
// would cost 24 MiB per process by default, 3 GiB with the largest ring).
TEST(Ring, ConstructionTouchesNoSlotPages) {
  int64_t before = ResidentBytes();
  ASSERT_GT(before, 0);
  Ring<Item> r(size_t{1} << 22);  // 4 M slots of 64 bytes: 256 MiB of address space
  ASSERT_TRUE(r.ok());
  int64_t after = ResidentBytes();
  EXPECT_LT(after - before, int64_t{8} << 20) << "the ring's construction wrote its slots";
  // Still a correct ring across the untouched pages: a full lap and a wrap.
  Ring<Item> small(1 << 12);
  for (uint32_t lap = 0; lap < 3; ++lap) {
    for (uint32_t i = 0; i < (1u << 12); ++i) ASSERT_TRUE(small.TryPush({lap, i}));
    EXPECT_FALSE(small.TryPush({lap, 0}));
    Item it;
    for (uint32_t i = 0; i < (1u << 12); ++i) {
      ASSERT_TRUE(small.TryPop(&it));
      EXPECT_EQ(it.producer, lap);
      EXPECT_EQ(it.seq, i);
    }
    EXPECT_FALSE(small.TryPop(&it));
  }
}

}  // namespace
}  // namespace overlapprof::inject
