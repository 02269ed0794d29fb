#pragma once
// Internal interface of the injector (liboverlapprof_inject.so). Contract with the host
// process, which every file here keeps:
//  - The preload constructor only reads the environment: it starts no thread, allocates
//    nothing big and touches no CUDA. The injector activates lazily, on the first NCCL call
//    or when CUDA initializes (CUPTI's InitializeInjection), so processes that do neither
//    (torchrun's agent, compilers, nvidia-smi) are never affected.
//  - A hook's fast path when not recording is one relaxed atomic load (Recording()): the
//    recorder's state (recorder.h, which documents the state machine).
//  - Hooks never block and never allocate: they copy a fixed-size record into a lock-free
//    ring; a full ring drops the record and counts it (records_dropped_hooks).
//  - Nothing throws across the boundary into the host process; every entry point catches.
//  - No lock of ours is held across a CUPTI call.
//  - A process forked from a recording process never records and never touches the parent's
//    file; the parent's file counts the fork and the child's NCCL ops (recorder.h).
//  - Log lines go only to a descriptor verified as the job's original stderr (Log, LogFd).
// Units: ns on CLOCK_REALTIME everywhere.
#include <atomic>
#include <cstdint>

#include "injector/recorder.h"
#include "injector/records.h"

namespace overlapprof::inject {

// The process-wide state and its state machine: recorder.h (g_recorder). What hooks use:

// True when this process records. The fast path is one relaxed atomic load.
inline bool Recording() noexcept { return g_recorder.Recording(); }

// Queues a record for the writer thread; counts it as dropped when the ring is full.
inline void Push(const HookRecord& r) noexcept { g_recorder.Push(r); }

// Bumps a data-quality counter (src/common/stats.def).
inline void Count(Stat s, int64_t n = 1) noexcept { g_recorder.stats().Add(s, n); }

int64_t NowNs() noexcept;  // CLOCK_REALTIME, ns
int32_t TidSlow() noexcept;
// The calling thread's kernel id (gettid), cached per thread.
inline int32_t Tid() noexcept {
  int32_t t = t_thread.tid;
  return t ? t : TidSlow();
}

// One line on the job's stderr as it was when the library loaded (Recorder::LogFd: checked
// before the write; nothing is written when it is no longer that), prefixed
// "overlapprof[pid]: ". printf-style; never allocates more than a stack buffer.
void Log(const char* fmt, ...) noexcept __attribute__((format(printf, 1, 2)));

// Wakes the writer thread (async-signal-safe).
inline void WakeWriter() noexcept { g_recorder.WakeWriter(); }

// Implemented in cupti.cc. CuptiActive() is true once CUPTI is subscribed and recording.
bool CuptiActive() noexcept;
// Push/pop an external correlation id around an NCCL call that launches GPU work, so its
// kernel or memcpy maps to the op exactly. No-ops when CUPTI is not active.
void CuptiPushExternalId(uint64_t id) noexcept;
void CuptiPopExternalId() noexcept;

// Implemented in nccl_plugin.cc (NCCL's profiler plugin). At exit, before the final flush:
// operations still open are pushed, marked incomplete.
void PluginAtExit() noexcept;

}  // namespace overlapprof::inject
