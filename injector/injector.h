#pragma once
// Internal interface of the injector (liboverlapprof_inject.so). Contract with the host
// process, which every file here keeps:
//  - The preload constructor only reads the environment: it starts no thread, allocates
//    nothing big and touches no CUDA. The injector activates lazily, on the first NCCL call
//    or when CUDA initializes (CUPTI's InitializeInjection), so processes that do neither
//    (torchrun's agent, compilers, nvidia-smi) are never affected.
//  - A hook's fast path when not recording is one relaxed atomic load (Recording()).
//  - Hooks never block and never allocate: they copy a fixed-size record into a lock-free
//    ring; a full ring drops the record and counts it (records_dropped_hooks).
//  - Nothing throws across the boundary into the host process; every entry point catches.
//  - No lock of ours is held across a CUPTI call.
//  - A process forked from a recording process is inert and never touches the parent's file.
// Units: ns on CLOCK_REALTIME everywhere.
#include <atomic>
#include <cstdint>

#include "injector/records.h"

namespace overlapprof::inject {

enum State : int { kUninit = 0, kActive = 1, kInert = 2, kActivating = 3 };
extern std::atomic<int> g_state;

// Slow path of Recording(): decides once per process whether to record, and starts the
// writer thread if so. Safe to call from any thread, any number of times.
bool Activate() noexcept;

// True when this process records. The fast path is one relaxed load.
inline bool Recording() noexcept {
  int s = g_state.load(std::memory_order_relaxed);
  if (s == kActive) return true;
  if (s == kInert) return false;
  return Activate();
}

// Queues a record for the writer thread; counts it as dropped when the ring is full.
void Push(const HookRecord& r) noexcept;

int64_t NowNs() noexcept;  // CLOCK_REALTIME, ns
int32_t Tid() noexcept;    // cached gettid()

// One line on stderr, prefixed "overlapprof[pid]: ". printf-style; never allocates more
// than a stack buffer.
void Log(const char* fmt, ...) noexcept __attribute__((format(printf, 1, 2)));

// Atomic counters the hooks and CUPTI callbacks bump (the writer copies them into the
// store's stats table at every flush).
struct Counters {
  std::atomic<uint64_t> hook_records_dropped{0};
  std::atomic<uint64_t> cupti_records_dropped{0};
  std::atomic<uint64_t> cupti_buffers_unavailable{0};
  std::atomic<uint64_t> nccl_missing_function{0};
  std::atomic<uint64_t> names_truncated{0};
  std::atomic<uint64_t> cupti_unavailable{0};  // 1 when CUPTI could not be used here
};
extern Counters g_counters;

// Wakes the writer thread (async-signal-safe).
void WakeWriter() noexcept;

// Implemented in cupti.cc. CuptiActive() is true once CUPTI is subscribed and recording.
bool CuptiActive() noexcept;
// Push/pop an external correlation id around an NCCL call that launches GPU work, so its
// kernel or memcpy maps to the op exactly. No-ops when CUPTI is not active.
void CuptiPushExternalId(uint64_t id) noexcept;
void CuptiPopExternalId() noexcept;

}  // namespace overlapprof::inject
