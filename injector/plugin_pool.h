#pragma once
// The NCCL profiler plugin's operations in flight (injector/nccl_plugin.cc): a bounded pool
// of preallocated slots, one per operation (a Coll, P2p or CE collective event) while its
// events arrive, and the aggregation of its per-channel GPU times into one record.
//
// An operation's events come from several NCCL threads: its task event starts and stops on
// the thread that enqueues it; its KernelCh events (one per channel: start with the GPU start
// time, a KernelChStop state with the GPU stop time, stop) and ProxyOp/ProxyStep events come
// from NCCL's proxy or profiler thread, before or after the task event stopped. The record
// is complete, and pushed once, when the task event has stopped, no channel or proxy event is
// in flight, and as many channels completed as NCCL announced (nChannels; at least one when
// it announced none). Everything about that decision is one atomic word per slot (`state`),
// changed by CAS only, so exactly one thread sees the completing transition and emits.
//
// Handles given to NCCL are not pointers: they encode (kind, channel, slot, generation). A
// slot's generation changes when it is reused, so an event that refers to an operation
// already emitted (NCCL announced fewer channels than it then reported) is recognised and
// counted (orphaned), never applied to another operation. No lock, no allocation after the
// pool is created (one anonymous mmap, touched only as slots are first used); a full pool
// drops the operation and counts it.
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "injector/records.h"

namespace overlapprof::inject {

// What a handle names.
enum class PluginHandleKind : uint64_t {
  kNone = 0,
  kOp = 1,         // a task (Coll/P2p) or CE collective event: its slot
  kChannel = 2,    // a KernelCh event: the op's slot and the channel
  kProxyOp = 3,    // a ProxyOp event: the op's slot
  kProxyStep = 4,  // a ProxyStep event: the op's slot
  kGroup = 5,      // a Group event: the group id
  kIgnored = 6,    // anything else we were handed (CeSync, CeBatch): stop is a no-op
};

struct PluginHandle {
  PluginHandleKind kind = PluginHandleKind::kNone;
  uint32_t channel = 0;
  uint32_t slot = 0;
  uint32_t gen = 0;
  uint64_t group = 0;  // kGroup

  static constexpr uint64_t kSlotBits = 21;
  static constexpr uint32_t kMaxSlots = uint32_t{1} << kSlotBits;

  void* Encode() const {
    uint64_t v;
    if (kind == PluginHandleKind::kGroup)
      v = static_cast<uint64_t>(kind) | (group << 3);
    else
      v = static_cast<uint64_t>(kind) | (uint64_t{channel & 0xff} << 3) | (uint64_t{slot} << 11) | (uint64_t{gen} << 32);
    return reinterpret_cast<void*>(static_cast<uintptr_t>(v));
  }
  static PluginHandle Decode(const void* p) {
    uint64_t v = reinterpret_cast<uintptr_t>(p);
    PluginHandle h;
    h.kind = static_cast<PluginHandleKind>(v & 7);
    if (h.kind == PluginHandleKind::kGroup) {
      h.group = v >> 3;
    } else {
      h.channel = static_cast<uint32_t>((v >> 3) & 0xff);
      h.slot = static_cast<uint32_t>((v >> 11) & (kMaxSlots - 1));
      h.gen = static_cast<uint32_t>(v >> 32);
    }
    return h;
  }
};

// One operation in flight. `rec` and `expected` are written by the thread that starts the op
// before `state` publishes it (release); the rest are atomics.
struct PluginOpSlot {
  // state: gen (bits 32-63) | done (23) | task stopped (22) | events in flight (8-21) |
  // channels completed (0-7, saturating).
  std::atomic<uint64_t> state;
  std::atomic<uint64_t> gpu_start;  // min channel start (0: none yet)
  std::atomic<uint64_t> gpu_stop;   // max channel stop
  std::atomic<int64_t> clock_sample;  // min (host time at channel start - GPU start); 0: none
  std::atomic<int64_t> host_stop;     // host time the task event stopped (CE ops' end)
  std::atomic<uint32_t> proxy_ops, proxy_steps;
  std::atomic<uint32_t> context;  // the context index + 1 (finalize flushes its own)
  uint32_t expected;              // channels NCCL announced (0: unknown)
  HookRecord rec;                 // kPluginOp, filled at start
};

class PluginOpPool {
 public:
  static constexpr uint64_t kChanMask = 0xff;
  static constexpr uint64_t kInflightShift = 8, kInflightMask = 0x3fff;
  static constexpr uint64_t kTaskStopped = uint64_t{1} << 22;
  static constexpr uint64_t kDone = uint64_t{1} << 23;
  static constexpr uint32_t kNil = 0xffffffffu;

  // `capacity` slots (at most PluginHandle::kMaxSlots), reserved (MAP_NORESERVE), not written.
  explicit PluginOpPool(size_t capacity) {
    if (capacity < 16) capacity = 16;
    if (capacity > PluginHandle::kMaxSlots - 1) capacity = PluginHandle::kMaxSlots - 1;
    size_t bytes = capacity * sizeof(PluginOpSlot) + capacity * sizeof(std::atomic<uint32_t>);
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;
    map_ = p;
    map_len_ = bytes;
    slots_ = static_cast<PluginOpSlot*>(p);  // all-zero bytes are a valid, unused slot
    next_ = reinterpret_cast<std::atomic<uint32_t>*>(static_cast<char*>(p) + capacity * sizeof(PluginOpSlot));
    capacity_ = static_cast<uint32_t>(capacity);
  }
  ~PluginOpPool() {
    if (map_) ::munmap(map_, map_len_);
  }
  PluginOpPool(const PluginOpPool&) = delete;
  PluginOpPool& operator=(const PluginOpPool&) = delete;
  bool ok() const { return slots_ != nullptr; }
  uint32_t capacity() const { return capacity_; }
  // Slots ever used (a finalize scans only those).
  uint32_t high_water() const {
    uint32_t b = bump_.load(std::memory_order_acquire);
    return b < capacity_ ? b : capacity_;
  }
  PluginOpSlot& slot(uint32_t i) { return slots_[i]; }

  // Takes a free slot and starts an op in it: `rec` (kind kPluginOp, filled by the caller),
  // `expected` channels (0: unknown), for context `ctx` (index + 1, 0: none). Returns its
  // handle, or null when the pool is full (the caller counts the drop).
  void* Start(const HookRecord& rec, uint32_t expected, uint32_t ctx) {
    uint32_t i = Pop();
    if (i == kNil) return nullptr;
    PluginOpSlot& s = slots_[i];
    uint32_t gen = static_cast<uint32_t>(s.state.load(std::memory_order_relaxed) >> 32) + 1;
    if (gen == 0) gen = 1;
    s.rec = rec;
    s.expected = expected > 255 ? 255 : expected;
    s.gpu_start.store(0, std::memory_order_relaxed);
    s.gpu_stop.store(0, std::memory_order_relaxed);
    s.clock_sample.store(0, std::memory_order_relaxed);
    s.host_stop.store(0, std::memory_order_relaxed);
    s.proxy_ops.store(0, std::memory_order_relaxed);
    s.proxy_steps.store(0, std::memory_order_relaxed);
    s.context.store(ctx, std::memory_order_relaxed);
    s.state.store(uint64_t{gen} << 32, std::memory_order_release);
    PluginHandle h;
    h.kind = PluginHandleKind::kOp;
    h.slot = i;
    h.gen = gen;
    return h.Encode();
  }

  // The transitions. Each returns false when the handle is stale (its op was emitted: the
  // caller counts an orphaned event). `emit` is called (once per op) by the transition that
  // completes it, with the finished record; the slot is then recycled.
  template <typename Emit>
  bool StopTask(const PluginHandle& h, int64_t host_now, Emit&& emit) {
    if (h.slot >= capacity_) return false;
    int64_t zero = 0;  // the first stop's time (a later, stale stop changes nothing)
    if (Live(h)) slots_[h.slot].host_stop.compare_exchange_strong(zero, host_now, std::memory_order_relaxed);
    return Transition(h, [](uint64_t v) { return (v & kTaskStopped) ? v : v | kTaskStopped; }, emit);
  }
  // A KernelCh event started: GPU start time `gpu_start`, noticed at host time `host_now`.
  // Returns the channel's handle (null when stale).
  void* ChannelStart(const PluginHandle& op, uint32_t channel, uint64_t gpu_start, int64_t host_now) {
    if (!Enter(op)) return nullptr;
    PluginOpSlot& s = slots_[op.slot];
    if (gpu_start != 0) {
      AtomicMin(s.gpu_start, gpu_start);
      int64_t sample = host_now - static_cast<int64_t>(gpu_start);
      int64_t cur = s.clock_sample.load(std::memory_order_relaxed);
      while ((cur == 0 || sample < cur) && !s.clock_sample.compare_exchange_weak(cur, sample, std::memory_order_relaxed)) {
      }
    }
    PluginHandle h = op;
    h.kind = PluginHandleKind::kChannel;
    h.channel = channel;
    return h.Encode();
  }
  // The KernelChStop state of a live channel: its GPU stop time.
  void ChannelStopTime(const PluginHandle& ch, uint64_t gpu_stop) {
    if (ch.slot >= capacity_ || gpu_stop == 0) return;
    AtomicMax(slots_[ch.slot].gpu_stop, gpu_stop);
  }
  template <typename Emit>
  bool ChannelStop(const PluginHandle& ch, Emit&& emit) {
    return Transition(ch, [](uint64_t v) {
      uint64_t chans = v & kChanMask;
      return Leave(v) - chans + (chans < kChanMask ? chans + 1 : chans);
    }, emit);
  }
  // ProxyOp events keep the op open like channels do, without counting as one.
  void* ProxyStart(const PluginHandle& op) {
    if (!Enter(op)) return nullptr;
    slots_[op.slot].proxy_ops.fetch_add(1, std::memory_order_relaxed);
    PluginHandle h = op;
    h.kind = PluginHandleKind::kProxyOp;
    return h.Encode();
  }
  template <typename Emit>
  bool ProxyStop(const PluginHandle& p, Emit&& emit) {
    return Transition(p, [](uint64_t v) { return Leave(v); }, emit);
  }
  // A ProxyStep under a live ProxyOp (which keeps the op open): counted only.
  void* ProxyStep(const PluginHandle& proxy_op) {
    if (proxy_op.slot >= capacity_ || !Live(proxy_op)) return nullptr;
    slots_[proxy_op.slot].proxy_steps.fetch_add(1, std::memory_order_relaxed);
    PluginHandle h = proxy_op;
    h.kind = PluginHandleKind::kProxyStep;
    return h.Encode();
  }

  // Emits (marked incomplete) every op of context `ctx` (0: every op) still open: NCCL
  // finalized the communicator, or the process exits. Ops whose events are still arriving
  // on another thread are taken over by the CAS: whoever sets `done` emits.
  template <typename Emit>
  size_t Flush(uint32_t ctx, Emit&& emit) {
    size_t n = 0;
    uint32_t hw = high_water();
    for (uint32_t i = 0; i < hw; ++i) {
      PluginOpSlot& s = slots_[i];
      uint64_t v = s.state.load(std::memory_order_acquire);
      if ((v >> 32) == 0 || (v & kDone)) continue;
      if (ctx != 0 && s.context.load(std::memory_order_relaxed) != ctx) continue;
      while (!(v & kDone)) {
        if (s.state.compare_exchange_weak(v, v | kDone, std::memory_order_acq_rel)) {
          Finish(i, true, emit);
          ++n;
          break;
        }
      }
    }
    return n;
  }

 private:
  static uint64_t Leave(uint64_t v) {
    uint64_t inflight = (v >> kInflightShift) & kInflightMask;
    return inflight ? v - (uint64_t{1} << kInflightShift) : v;
  }
  // Copy-engine ops have no channels: complete once stopped with nothing in flight.
  static bool Complete(uint64_t v, const PluginOpSlot& s) {
    if (!(v & kTaskStopped) || ((v >> kInflightShift) & kInflightMask) != 0) return false;
    if (s.rec.plugin_op.flags & kPluginFlagCe) return true;
    uint64_t chans = v & kChanMask;
    return s.expected ? chans >= s.expected : chans >= 1;
  }
  bool Live(const PluginHandle& h) const {
    if (h.slot >= capacity_) return false;
    uint64_t v = slots_[h.slot].state.load(std::memory_order_acquire);
    return static_cast<uint32_t>(v >> 32) == h.gen && !(v & kDone);
  }
  // One more event in flight on a live op; false when stale (or too many in flight).
  bool Enter(const PluginHandle& h) {
    if (h.slot >= capacity_) return false;
    std::atomic<uint64_t>& st = slots_[h.slot].state;
    uint64_t v = st.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<uint32_t>(v >> 32) != h.gen || (v & kDone)) return false;
      if (((v >> kInflightShift) & kInflightMask) == kInflightMask) return false;
      if (st.compare_exchange_weak(v, v + (uint64_t{1} << kInflightShift), std::memory_order_acq_rel)) return true;
    }
  }
  template <typename Step, typename Emit>
  bool Transition(const PluginHandle& h, Step step, Emit& emit) {
    if (h.slot >= capacity_) return false;
    PluginOpSlot& s = slots_[h.slot];
    uint64_t v = s.state.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<uint32_t>(v >> 32) != h.gen || (v & kDone)) return false;
      uint64_t nv = step(v);
      bool complete = Complete(nv, s);
      if (complete) nv |= kDone;
      if (s.state.compare_exchange_weak(v, nv, std::memory_order_acq_rel)) {
        if (complete) Finish(h.slot, false, emit);
        return true;
      }
    }
  }
  // The op in slot `i` is done (this thread set the bit): its record out, the slot back.
  template <typename Emit>
  void Finish(uint32_t i, bool incomplete, Emit& emit) {
    PluginOpSlot& s = slots_[i];
    HookRecord r = s.rec;
    PluginOpPayload& p = r.plugin_op;
    if (p.flags & kPluginFlagCe) {
      r.t_exit = s.host_stop.load(std::memory_order_relaxed);
    } else {
      r.t_enter = static_cast<int64_t>(s.gpu_start.load(std::memory_order_relaxed));
      r.t_exit = static_cast<int64_t>(s.gpu_stop.load(std::memory_order_relaxed));
    }
    uint64_t v = s.state.load(std::memory_order_relaxed);
    p.channels = static_cast<uint8_t>(v & kChanMask);
    p.channels_expected = static_cast<uint8_t>(s.expected);
    p.clock_sample = s.clock_sample.load(std::memory_order_relaxed);
    p.proxy_ops = s.proxy_ops.load(std::memory_order_relaxed);
    p.proxy_steps = s.proxy_steps.load(std::memory_order_relaxed);
    if (incomplete) p.flags |= kPluginFlagIncomplete;
    emit(r);
    Push(i);
  }
  static void AtomicMin(std::atomic<uint64_t>& a, uint64_t x) {
    uint64_t cur = a.load(std::memory_order_relaxed);
    while ((cur == 0 || x < cur) && !a.compare_exchange_weak(cur, x, std::memory_order_relaxed)) {
    }
  }
  static void AtomicMax(std::atomic<uint64_t>& a, uint64_t x) {
    uint64_t cur = a.load(std::memory_order_relaxed);
    while (x > cur && !a.compare_exchange_weak(cur, x, std::memory_order_relaxed)) {
    }
  }

  // The free list: a Treiber stack of recycled slots (head: index | tag << 32, the tag against
  // ABA), and a bump counter for slots never used.
  uint32_t Pop() {
    uint64_t h = free_head_.load(std::memory_order_acquire);
    for (;;) {
      uint32_t i = static_cast<uint32_t>(h);
      if (i == kNil) break;
      uint32_t nxt = next_[i].load(std::memory_order_relaxed);
      uint64_t nh = ((h >> 32) + 1) << 32 | nxt;
      if (free_head_.compare_exchange_weak(h, nh, std::memory_order_acq_rel)) return i;
    }
    uint32_t b = bump_.load(std::memory_order_relaxed);
    while (b < capacity_) {
      if (bump_.compare_exchange_weak(b, b + 1, std::memory_order_acq_rel)) return b;
    }
    return kNil;
  }
  void Push(uint32_t i) {
    uint64_t h = free_head_.load(std::memory_order_relaxed);
    for (;;) {
      next_[i].store(static_cast<uint32_t>(h), std::memory_order_relaxed);
      uint64_t nh = ((h >> 32) + 1) << 32 | i;
      if (free_head_.compare_exchange_weak(h, nh, std::memory_order_release, std::memory_order_relaxed)) return;
    }
  }

  PluginOpSlot* slots_ = nullptr;
  std::atomic<uint32_t>* next_ = nullptr;
  void* map_ = nullptr;
  size_t map_len_ = 0;
  uint32_t capacity_ = 0;
  std::atomic<uint64_t> free_head_{kNil};
  std::atomic<uint32_t> bump_{0};
};

}  // namespace overlapprof::inject
