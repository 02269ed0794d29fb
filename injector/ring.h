#pragma once
// A bounded multi-producer, single-consumer queue of fixed-size records (Vyukov's bounded
// queue with a sequence number per slot). Lock-free: a producer claims a slot with one CAS
// and never waits; when the ring is full TryPush fails at once and the caller counts the
// drop (records_dropped_hooks). It never blocks and never allocates after construction.
//
// Threading: any number of producers (training threads calling NCCL/NVTX), one consumer
// (the injector's writer thread).
//
// Memory: the slots come from an anonymous mmap and are never written at construction. A
// slot stores its sequence number relative to its index (`seq - index`), so the kernel's
// zero pages already hold Vyukov's initial state (seq == index): a page is touched only when
// the ring first reaches it, construction costs one mmap whatever the capacity, and a
// process that records little pays little (issue 14: `new Slot[c]` wrote 24 MiB by default,
// 3 GiB with the largest ring, at activation). The storage is never unmapped (the recorder
// owns its ring for the life of the process).
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

namespace overlapprof::inject {

template <typename T>
class Ring {
 public:
  // capacity is rounded up to a power of two (at least 2).
  explicit Ring(size_t capacity) {
    size_t c = 2;
    while (c < capacity) c <<= 1;
    mask_ = c - 1;
    // MAP_NORESERVE: untouched pages are not charged against overcommit either.
    void* p = ::mmap(nullptr, c * sizeof(Slot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (p == MAP_FAILED) {
      mask_ = 0;
      return;
    }
    // Zero bytes are a valid Slot (an atomic size_t 0, a T of zero bytes): only trivially
    // copyable records whose all-zero bytes are a value.
    slots_ = static_cast<Slot*>(p);
  }
  ~Ring() {
    if (slots_) ::munmap(slots_, (mask_ + 1) * sizeof(Slot));
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  bool ok() const { return slots_ != nullptr; }
  size_t capacity() const { return slots_ ? mask_ + 1 : 0; }

  // Producer side. Returns false (and writes nothing) when the ring is full.
  bool TryPush(const T& value) {
    if (!slots_) return false;
    size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      size_t idx = pos & mask_;
      Slot& s = slots_[idx];
      size_t seq = s.seq.load(std::memory_order_acquire) + idx;
      intptr_t diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
      if (diff == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          s.value = value;
          s.seq.store(pos + 1 - idx, std::memory_order_release);
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
    size_t idx = head_ & mask_;
    Slot& s = slots_[idx];
    size_t seq = s.seq.load(std::memory_order_acquire) + idx;
    if (static_cast<intptr_t>(seq) - static_cast<intptr_t>(head_ + 1) < 0) return false;
    *out = s.value;
    s.seq.store(head_ + mask_ + 1 - idx, std::memory_order_release);
    ++head_;
    return true;
  }

 private:
  static_assert(std::is_trivially_copyable_v<T>, "slots are raw zeroed memory");
  struct alignas(64) Slot {
    std::atomic<size_t> seq;  // seq - index (see the top of this file)
    T value;
  };
  Slot* slots_ = nullptr;
  size_t mask_ = 0;
  alignas(64) std::atomic<size_t> tail_{0};
  alignas(64) size_t head_ = 0;  // consumer only
};

}  // namespace overlapprof::inject
