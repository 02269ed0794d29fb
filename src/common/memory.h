#pragma once
// Transparent huge pages for large buffers about to be filled.
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace overlapprof {

// Asks for transparent huge pages (THP, 2 MiB) under the whole 2 MiB-aligned part of a large
// buffer not written yet: filling tens of MB then takes a few dozen page faults instead of
// thousands (a first rank's records, its interval unions). Advice only (THP off, or none free:
// 4 KiB pages); nothing for buffers under 4 MiB, or memory already written (reused heap).
inline void AdviseHugePages(void* p, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < 2 * kHuge) return;
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

// v.reserve(n), with huge pages advised for the room reserved.
template <typename T>
void ReserveHuge(std::vector<T>& v, size_t n) {
  v.reserve(n);
  AdviseHugePages(v.data(), v.capacity() * sizeof(T));
}

// Grows the heap by `bytes` of address space advised for huge pages and hands it back to malloc
// at once (nothing is written to it): the allocations later carved from it fault in 2 MiB at a
// time, whatever their size and whichever thread makes them (with one malloc arena). Takes
// effect only while the process's M_MMAP_THRESHOLD and M_TRIM_THRESHOLD are above `bytes` (else
// malloc maps the block apart, or free gives it back at once); costs nothing but address space
// until used.
inline void AdviseHugePagesForHeap(size_t bytes) {
  void* p = std::malloc(bytes);
  if (!p) return;
  AdviseHugePages(p, bytes);
  std::free(p);
}

// Hands `v` over to the process's exit, which gives its memory back at once, instead of a
// destructor that frees it block by block: a command's result about to be dropped as the process
// ends (a large trace's JSON summary is millions of small blocks: ~25 ms of freeing on the
// critical path, docs/performance.md). Kept reachable from a static pointer, so a leak checker
// reports nothing. Not thread-safe: the main thread's, once or a few times per process.
template <typename T>
void KeepUntilExit(T&& v) {
  using U = std::remove_reference_t<T>;
  static auto* kept = new std::vector<std::unique_ptr<U>>();  // never destroyed, by design
  kept->push_back(std::make_unique<U>(std::forward<T>(v)));
}

}  // namespace overlapprof
