// NCCL's profiler plugin, beside the NCCL hooks: NCCL loads this same library through
// NCCL_PROFILER_PLUGIN (set by `overlapprof run`) and calls the ncclProfiler_vN it finds,
// newest first. We export v6, v5 and v4 (injector/nccl_profiler_abi.h says from which NCCL
// sources each was confirmed, and why v7 is not exported).
//
// What it records: one kPluginOp record per operation (collective, point-to-point, or on v6
// a copy-engine collective) with its GPU start (min channel start) and end (max channel
// stop) from NCCL's KernelCh events (%globaltimer, written by the NCCL kernel), the channels
// it ran on, algorithm, protocol, function, count, NCCL's sequence number, communicator
// hash and rank, the group (kernel plan) it ran in, and a host-clock sample for the clock
// offset (sink side). The aggregation is plugin_pool.h.
//
// Contract (injector.h): no thread, no CUDA; nothing throws into NCCL; every entry point
// answers ncclSuccess (an init that cannot record activates nothing: mask 0); no lock at all
// on NCCL's threads (the pool is lock-free, the ring too); no allocation per event (the pool
// is one mmap at the first init, contexts are a fixed array); every drop is counted.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "injector/injector.h"
#include "injector/nccl_profiler_abi.h"
#include "injector/plugin_pool.h"

namespace overlapprof::inject {
namespace {

namespace np = ncclprof;

constexpr const char kPluginName[] = "overlapprof";

// NCCL's ncclFuncToString names -> the Collective HookRecord::op carries (records.h).
uint8_t FuncCode(const char* f) {
  constexpr auto code = [](Collective c) { return static_cast<uint8_t>(c); };
  if (!f) return code(Collective::kOther);
  static const struct {
    const char* name;
    uint8_t code;
  } kFuncs[] = {
      {"AllReduce", code(Collective::kAllReduce)},   {"AllGather", code(Collective::kAllGather)},
      {"ReduceScatter", code(Collective::kReduceScatter)}, {"Broadcast", code(Collective::kBroadcast)},
      {"Reduce", code(Collective::kReduce)},         {"Send", code(Collective::kSend)},
      {"Recv", code(Collective::kRecv)},             {"AlltoAll", code(Collective::kAllToAll)},
      {"Gather", code(Collective::kGather)},         {"Scatter", code(Collective::kScatter)},
      {"SendRecv", code(Collective::kSendRecv)},
  };
  for (const auto& e : kFuncs)
    if (std::strcmp(f, e.name) == 0) return e.code;
  return code(Collective::kOther);
}

// NCCL's ncclDatatypeToString names ("ncclFloat32", ...) → ncclDataType_t, -1 unknown.
int8_t DtypeCode(const char* d) {
  if (!d) return -1;
  static const char* const kTypes[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",    "ncclUint32",
                                       "ncclInt64",   "ncclUint64",  "ncclFloat16",  "ncclFloat32",
                                       "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; ++i)
    if (std::strcmp(d, kTypes[i]) == 0) return static_cast<int8_t>(i);
  return -1;
}

template <size_t N>
void CopyName(char (&dst)[N], const char* src) {
  if (!src) return;
  size_t n = strnlen(src, N - 1);
  std::memcpy(dst, src, n);
  dst[n] = '\0';
}

// The pool, created by the first init (one mmap; a racing second init frees its own).
PluginOpPool* Pool() {
  PluginState& ps = g_recorder.plugin();
  PluginOpPool* p = ps.pool.load(std::memory_order_acquire);
  if (p || ps.pool_failed.load(std::memory_order_relaxed)) return p;
  size_t n = PluginState::kDefaultOps;
  if (const char* e = std::getenv("OVERLAPPROF_NCCL_PLUGIN_OPS"); e && *e) {
    long v = std::strtol(e, nullptr, 10);
    if (v > 0) n = static_cast<size_t>(v);
  }
  auto* fresh = new (std::nothrow) PluginOpPool(n);
  if (!fresh || !fresh->ok()) {
    delete fresh;
    ps.pool_failed.store(true, std::memory_order_relaxed);
    Log("cannot reserve the NCCL profiler plugin's pool (%zu ops): per-operation NCCL timing is not recorded", n);
    return nullptr;
  }
  PluginOpPool* expected = nullptr;
  if (!ps.pool.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
    delete fresh;
    return expected;
  }
  return fresh;
}

// Finished records go to the ring (only while recording: after the final flush began,
// nothing is pushed, as for the hooks).
void Emit(const HookRecord& r) {
  if (g_recorder.state() == State::kActive) Push(r);
}
auto EmitFn() {
  return [](const HookRecord& r) { Emit(r); };
}

// The events we ask for. ProxyOp/ProxyStep (host-side network progress, many events per op)
// only with OVERLAPPROF_NCCL_DETAIL=proxy (`run --nccl-detail proxy`).
int Mask(uint8_t abi) {
  uint64_t m = np::kGroup | np::kColl | np::kP2p | np::kKernelCh;
  if (abi >= 6) m |= np::kCeColl | np::kCeSync;
  const char* d = std::getenv("OVERLAPPROF_NCCL_DETAIL");
  if (d && std::strcmp(d, "proxy") == 0) m |= np::kProxyOp | np::kProxyStep;
  return static_cast<int>(m);
}

ncclResult_t Init(void** context, int* mask, uint64_t comm_hash, const char* comm_name, int nnodes, int nranks,
                  int rank, uint8_t abi) noexcept {
  try {
    if (context) *context = nullptr;
    if (!Recording()) {  // not under `overlapprof run` (or recording ended): activate nothing
      if (mask) *mask = 0;
      return ncclSuccess;
    }
    PluginState& ps = g_recorder.plugin();
    if (!Pool()) {
      if (mask) *mask = 0;
      return ncclSuccess;
    }
    uint32_t idx = ps.next_context.fetch_add(1, std::memory_order_relaxed);
    // NCCL's mask is one for the process (every init sets it), so it is set even when this
    // communicator gets no context: its ops are then dropped and counted.
    if (mask) *mask = Mask(abi);
    if (idx >= PluginState::kContexts) {
      Count(Stat::nccl_plugin_ops_dropped);
      return ncclSuccess;
    }
    PluginContext& c = ps.contexts[idx];
    c.comm_id = t_thread.creating_comm_id;
    c.comm_hash = comm_hash;
    c.rank = rank;
    c.nranks = nranks;
    c.abi = abi;
    HookRecord r;
    r.kind = RecKind::kPluginComm;
    r.op = abi;
    r.tid = Tid();
    r.t_enter = r.t_exit = NowNs();
    r.comm_id = c.comm_id;
    r.stream = comm_hash;
    r.comm_rank = rank;
    r.comm_nranks = nranks;
    r.root_peer = nnodes;
    CopyName(r.name, comm_name);
    Push(r);
    if (context) *context = &c;
  } catch (...) {
  }
  return ncclSuccess;
}

// Index + 1 of a context we handed out (0: none).
uint32_t ContextIndex(const void* ctx) {
  PluginState& ps = g_recorder.plugin();
  auto* c = static_cast<const PluginContext*>(ctx);
  if (!c || c < ps.contexts || c >= ps.contexts + PluginState::kContexts) return 0;
  return static_cast<uint32_t>(c - ps.contexts) + 1;
}

uint64_t GroupOf(const void* parent) {
  PluginHandle h = PluginHandle::Decode(parent);
  return h.kind == PluginHandleKind::kGroup ? h.group : 0;
}

// A task (Coll/P2p) or CE collective: a slot in the pool.
void* StartOp(void* ctx, HookRecord& r, uint32_t expected) {
  PluginOpPool* pool = g_recorder.plugin().pool.load(std::memory_order_acquire);
  uint32_t ci = ContextIndex(ctx);
  if (!pool || ci == 0) {
    Count(Stat::nccl_plugin_ops_dropped);
    return nullptr;
  }
  const PluginContext& c = *static_cast<const PluginContext*>(ctx);
  r.kind = RecKind::kPluginOp;
  r.tid = Tid();
  r.comm_id = c.comm_id;
  r.stream = c.comm_hash;
  r.comm_rank = c.rank;
  r.comm_nranks = c.nranks;
  r.plugin.host_start_ns = NowNs();
  r.plugin.abi_version = c.abi;
  if (r.flags & kPluginFlagCe) r.t_enter = r.plugin.host_start_ns;
  void* h = pool->Start(r, expected, ci);
  if (!h) Count(Stat::nccl_plugin_ops_dropped);
  return h;
}

// The per-version descriptors differ in layout, not in meaning: one body, instantiated per
// descriptor type. `abi` is the version NCCL called.
template <typename Descr>
ncclResult_t StartEvent(void* ctx, void** handle, Descr* d, uint8_t abi) noexcept {
  try {
    if (!handle) return ncclSuccess;
    *handle = nullptr;
    if (!d || g_recorder.state() != State::kActive) return ncclSuccess;
    PluginOpPool* pool = g_recorder.plugin().pool.load(std::memory_order_acquire);
    if (!pool) return ncclSuccess;
    const uint64_t type = d->type;
    if (type == np::kGroup) {
      PluginHandle h;
      h.kind = PluginHandleKind::kGroup;
      h.group = g_recorder.plugin().next_group.fetch_add(1, std::memory_order_relaxed) & ((uint64_t{1} << 60) - 1);
      *handle = h.Encode();
    } else if (type == np::kColl) {
      HookRecord r;
      r.op = FuncCode(d->coll.func);
      r.datatype = DtypeCode(d->coll.datatype);
      r.count = d->coll.count;
      r.root_peer = d->coll.root;
      r.seq = d->coll.seqNumber;
      if constexpr (requires { d->coll.parentGroup; })
        r.launch_id = GroupOf(d->coll.parentGroup);
      else
        r.launch_id = GroupOf(d->parentObj);  // v4: the group is the parent
      CopyName(r.plugin.algo, d->coll.algo);
      CopyName(r.plugin.proto, d->coll.proto);
      *handle = StartOp(ctx, r, d->coll.nChannels);
    } else if (type == np::kP2p) {
      HookRecord r;
      r.op = FuncCode(d->p2p.func);
      r.datatype = DtypeCode(d->p2p.datatype);
      r.count = d->p2p.count;
      r.root_peer = d->p2p.peer;
      r.flags = kPluginFlagP2p;
      uint32_t expected = 0;  // v4: NCCL's own adapter leaves p2p.nChannels unset
      if constexpr (requires { d->p2p.parentGroup; }) {
        r.launch_id = GroupOf(d->p2p.parentGroup);
        expected = d->p2p.nChannels;
      } else {
        r.launch_id = GroupOf(d->parentObj);
      }
      *handle = StartOp(ctx, r, expected);
    } else if (type == np::kKernelCh) {
      PluginHandle op = PluginHandle::Decode(d->parentObj);
      if (op.kind != PluginHandleKind::kOp) return ncclSuccess;  // its op was dropped (counted)
      *handle = pool->ChannelStart(op, d->kernelCh.channelId, d->kernelCh.pTimer, NowNs());
      if (!*handle) Count(Stat::nccl_plugin_events_orphaned);
    } else if (type == np::kProxyOp) {
      PluginHandle op = PluginHandle::Decode(d->parentObj);
      if (op.kind != PluginHandleKind::kOp) return ncclSuccess;
      *handle = pool->ProxyStart(op);
      if (!*handle) Count(Stat::nccl_plugin_events_orphaned);
    } else if (type == np::kProxyStep) {
      PluginHandle p = PluginHandle::Decode(d->parentObj);
      if (p.kind != PluginHandleKind::kProxyOp) return ncclSuccess;
      *handle = pool->ProxyStep(p);
    } else if constexpr (requires { d->ceColl; }) {
      if (type == np::kCeColl) {
        HookRecord r;
        r.op = FuncCode(d->ceColl.func);
        r.datatype = DtypeCode(d->ceColl.datatype);
        r.count = d->ceColl.count;
        r.root_peer = d->ceColl.root;
        r.seq = d->ceColl.seqNumber;
        r.flags = kPluginFlagCe;
        CopyName(r.plugin.algo, "CE");
        CopyName(r.plugin.proto, d->ceColl.syncStrategy);
        *handle = StartOp(ctx, r, 0);
      } else if (type == np::kCeSync || type == np::kCeBatch) {
        PluginHandle h;
        h.kind = PluginHandleKind::kIgnored;
        *handle = h.Encode();
      }
    }
    (void)abi;
  } catch (...) {
  }
  return ncclSuccess;
}

ncclResult_t StopEvent(void* handle) noexcept {
  try {
    PluginOpPool* pool = g_recorder.plugin().pool.load(std::memory_order_acquire);
    if (!handle || !pool) return ncclSuccess;
    PluginHandle h = PluginHandle::Decode(handle);
    bool live = true;
    switch (h.kind) {
      case PluginHandleKind::kOp: live = pool->StopTask(h, NowNs(), EmitFn()); break;
      case PluginHandleKind::kChannel: live = pool->ChannelStop(h, EmitFn()); break;
      case PluginHandleKind::kProxyOp: live = pool->ProxyStop(h, EmitFn()); break;
      default: break;
    }
    if (!live) Count(Stat::nccl_plugin_events_orphaned);
  } catch (...) {
  }
  return ncclSuccess;
}

ncclResult_t RecordEventState(void* handle, int state, np::EventStateArgsV4* args) noexcept {
  try {
    PluginOpPool* pool = g_recorder.plugin().pool.load(std::memory_order_acquire);
    if (!handle || !pool || !args || state != np::kKernelChStop) return ncclSuccess;
    PluginHandle h = PluginHandle::Decode(handle);
    if (h.kind == PluginHandleKind::kChannel) pool->ChannelStopTime(h, args->kernelCh.pTimer);
  } catch (...) {
  }
  return ncclSuccess;
}

// NCCL finalizes the communicator: its ops still open are emitted, marked incomplete.
ncclResult_t Finalize(void* context) noexcept {
  try {
    uint32_t ci = ContextIndex(context);
    PluginOpPool* pool = g_recorder.plugin().pool.load(std::memory_order_acquire);
    if (ci && pool) pool->Flush(ci, EmitFn());
  } catch (...) {
  }
  return ncclSuccess;
}

ncclResult_t InitV4(void** context, int* mask, const char* name, uint64_t hash, int nnodes, int nranks, int rank,
                    np::DebugLogger) {
  return Init(context, mask, hash, name, nnodes, nranks, rank, 4);
}
ncclResult_t InitV5(void** context, uint64_t hash, int* mask, const char* name, int nnodes, int nranks, int rank,
                    np::DebugLogger) {
  return Init(context, mask, hash, name, nnodes, nranks, rank, 5);
}
ncclResult_t InitV6(void** context, uint64_t hash, int* mask, const char* name, int nnodes, int nranks, int rank,
                    np::DebugLogger) {
  return Init(context, mask, hash, name, nnodes, nranks, rank, 6);
}
ncclResult_t StartV4(void* ctx, void** h, np::EventDescrV4* d) { return StartEvent(ctx, h, d, 4); }
ncclResult_t StartV5(void* ctx, void** h, np::EventDescrV5* d) { return StartEvent(ctx, h, d, 5); }
ncclResult_t StartV6(void* ctx, void** h, np::EventDescrV6* d) { return StartEvent(ctx, h, d, 6); }
ncclResult_t Stop(void* h) { return StopEvent(h); }
ncclResult_t Record(void* h, int state, np::EventStateArgsV4* a) { return RecordEventState(h, state, a); }
ncclResult_t Fin(void* ctx) { return Finalize(ctx); }

}  // namespace

void PluginAtExit() noexcept {
  try {
    PluginOpPool* pool = g_recorder.plugin().pool.load(std::memory_order_acquire);
    if (pool) pool->Flush(0, EmitFn());
  } catch (...) {
  }
}

}  // namespace overlapprof::inject

// The exported tables NCCL looks up (dlsym on this library). Constant: NCCL only reads them.
#define OVERLAPPROF_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))
namespace np = overlapprof::inject::ncclprof;
namespace oi = overlapprof::inject;
OVERLAPPROF_PLUGIN_EXPORT const np::ProfilerV6 ncclProfiler_v6 = {oi::kPluginName, oi::InitV6, oi::StartV6, oi::Stop,
                                                                  oi::Record, oi::Fin};
OVERLAPPROF_PLUGIN_EXPORT const np::ProfilerV5 ncclProfiler_v5 = {oi::kPluginName, oi::InitV5, oi::StartV5, oi::Stop,
                                                                  oi::Record, oi::Fin};
OVERLAPPROF_PLUGIN_EXPORT const np::ProfilerV4 ncclProfiler_v4 = {oi::kPluginName, oi::InitV4, oi::StartV4, oi::Stop,
                                                                  oi::Record, oi::Fin};
