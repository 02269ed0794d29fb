#pragma once
// A bounded multi-producer, single-consumer queue of fixed-size records (Vyukov's bounded
// queue with a sequence number per slot). Lock-free: a producer claims a slot with one CAS
// and never waits; when the ring is full TryPush fails at once and the caller counts the
// drop (records_dropped_hooks). It never blocks and never allocates after construction.
//
// Threading: any number of producers (training threads calling NCCL/NVTX), one consumer
// (the injector's writer thread).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace overlapprof::inject {

template <typename T>
class Ring {
 public:
  // capacity is rounded up to a power of two (at least 2).
  explicit Ring(size_t capacity) {
    size_t c = 2;
    while (c < capacity) c <<= 1;
    mask_ = c - 1;
    slots_.reset(new (std::nothrow) Slot[c]);
    if (!slots_) {
      mask_ = 0;
      return;
    }
    for (size_t i = 0; i < c; ++i) slots_[i].seq.store(i, std::memory_order_relaxed);
  }
  bool ok() const { return slots_ != nullptr; }
  size_t capacity() const { return slots_ ? mask_ + 1 : 0; }

  // Producer side. Returns false (and writes nothing) when the ring is full.
  bool TryPush(const T& value) {
    if (!slots_) return false;
    size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Slot& s = slots_[pos & mask_];
      size_t seq = s.seq.load(std::memory_order_acquire);
      intptr_t diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
      if (diff == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          s.value = value;
          s.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // full
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  // Consumer side (one thread). Returns false when empty (or when the next slot is claimed
  // but not yet written: the consumer simply picks it up on its next pass).
  bool TryPop(T* out) {
    if (!slots_) return false;
    Slot& s = slots_[head_ & mask_];
    size_t seq = s.seq.load(std::memory_order_acquire);
    if (static_cast<intptr_t>(seq) - static_cast<intptr_t>(head_ + 1) < 0) return false;
    *out = s.value;
    s.seq.store(head_ + mask_ + 1, std::memory_order_release);
    ++head_;
    return true;
  }

 private:
  struct alignas(64) Slot {
    std::atomic<size_t> seq{0};
    T value{};
  };
  std::unique_ptr<Slot[]> slots_;
  size_t mask_ = 0;
  alignas(64) std::atomic<size_t> tail_{0};
  alignas(64) size_t head_ = 0;  // consumer only
};

}  // namespace overlapprof::inject
