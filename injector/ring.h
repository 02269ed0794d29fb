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
// process that records little pays little: memory is committed only for the slots used, never
// for the capacity. The storage is never unmapped (the recorder owns its ring for the life of
// the process).
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
    // Rings of 2 MiB and more are aligned to 2 MiB and advised as huge pages: a first touch
    // then costs one fault per 2 MiB (about 10,900 slots) instead of one per 4 KiB.
    size_t bytes = c * sizeof(Slot);
    bool huge = bytes >= kHugePage;
    map_len_ = bytes + (huge ? kHugePage : 0);
    void* p = ::mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      mask_ = 0;
      return;
    }
    map_ = p;
    uintptr_t start = reinterpret_cast<uintptr_t>(p);
    if (huge) {
      start = (start + kHugePage - 1) & ~(kHugePage - 1);
      ::madvise(reinterpret_cast<void*>(start), bytes, MADV_HUGEPAGE);  // best effort
    }
    // Zero bytes are a valid Slot (an atomic size_t 0, a T of zero bytes): only trivially
    // copyable records whose all-zero bytes are a value.
    slots_ = reinterpret_cast<Slot*>(start);
  }
  ~Ring() {
    if (map_) ::munmap(map_, map_len_);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  bool ok() const { return slots_ != nullptr; }

  // Consumer side: populates the pages of the slots up to `ahead` past the producers' tail
  // (MADV_POPULATE_WRITE: the kernel allocates zero pages without changing their content,
  // so no slot is written), so producers do not take the first-touch page faults on their
  // own thread. Stops once the whole ring is populated, or at once where the kernel lacks
  // the advice (producers then fault in each page on first use). Best effort.
  void Prefault(size_t ahead) {
    size_t cap = mask_ + 1;
    if (!slots_ || populated_ >= cap) return;
    size_t want = tail_.load(std::memory_order_relaxed) + ahead;
    if (want > cap) want = cap;
    if (want <= populated_) return;
    const uintptr_t page = 4096;
    uintptr_t b = (reinterpret_cast<uintptr_t>(slots_) + populated_ * sizeof(Slot)) & ~(page - 1);
    uintptr_t e = (reinterpret_cast<uintptr_t>(slots_) + want * sizeof(Slot) + page - 1) & ~(page - 1);
    if (::madvise(reinterpret_cast<void*>(b), e - b, kPopulateWrite) != 0) {
      populated_ = cap;  // unsupported (Linux < 5.14): stop trying
      return;
    }
    populated_ = want;
  }
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
  static constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  Slot* slots_ = nullptr;
  void* map_ = nullptr;  // the mapping (slots_ is its 2 MiB-aligned start for large rings)
  size_t map_len_ = 0;
  size_t mask_ = 0;
  alignas(64) std::atomic<size_t> tail_{0};
  alignas(64) size_t head_ = 0;  // consumer only
  size_t populated_ = 0;         // consumer only: slots [0, populated_) are populated
  static constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE (Linux 5.14; older headers lack it)
};

}  // namespace overlapprof::inject
