// CUPTI activity collection, entered through CUDA_INJECTION64_PATH: libcuda calls
// InitializeInjection() from cuInit, so only processes that initialize CUDA pay anything.
// libcupti is opened here with dlopen (the copy already loaded in the process if there is
// one, e.g. PyTorch's), never linked, so the library loads in processes without CUDA.
//
// Activity kinds: CONCURRENT_KERNEL (never KERNEL, which serializes kernels), MEMCPY, MEMSET,
// RUNTIME and DRIVER (their correlation ids tie GPU work to launches; NCCL launches with
// the driver API), EXTERNAL_CORRELATION (the ids nccl_hooks.cc pushes) and SYNCHRONIZATION.
//
// Buffers come from a bounded pool; when it is empty CUPTI gets no buffer and drops records,
// which cuptiActivityGetNumDroppedRecords reports and we count (records_dropped_cupti).
// Completed buffers are queued for the writer thread, which decodes them. CuptiState::mu
// (recorder.h) guards the pool and the queue only; no CUPTI function is called while it is
// held. All of this file's state lives in the recorder (g_recorder.cupti()); the API table
// is published with release (api_ready, active) and read after an acquire load.
//
// Records are read through the fields common to every record version since CUDA 11 (start,
// end, deviceId, streamId, correlationId, name; checked below), so a libcupti older than
// the headers this was built with still decodes correctly.
#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "injector/injector.h"
#include "injector/sink.h"
#include "src/trace/classify.h"

static_assert(offsetof(CUpti_ActivityKernel10, start) == 16 && offsetof(CUpti_ActivityKernel10, end) == 24 &&
                  offsetof(CUpti_ActivityKernel10, deviceId) == 40 &&
                  offsetof(CUpti_ActivityKernel10, streamId) == 48 &&
                  offsetof(CUpti_ActivityKernel10, correlationId) == 92 &&
                  offsetof(CUpti_ActivityKernel10, name) == 104,
              "CUpti_ActivityKernel prefix moved: check the record versions this reads");
static_assert(offsetof(CUpti_ActivityMemcpy6, bytes) == 8 && offsetof(CUpti_ActivityMemcpy6, start) == 16 &&
                  offsetof(CUpti_ActivityMemcpy6, deviceId) == 32 &&
                  offsetof(CUpti_ActivityMemcpy6, streamId) == 40 &&
                  offsetof(CUpti_ActivityMemcpy6, correlationId) == 44,
              "CUpti_ActivityMemcpy prefix moved");
static_assert(offsetof(CUpti_ActivityMemcpyPtoP4, bytes) == 8 && offsetof(CUpti_ActivityMemcpyPtoP4, start) == 16 &&
                  offsetof(CUpti_ActivityMemcpyPtoP4, deviceId) == 32 &&
                  offsetof(CUpti_ActivityMemcpyPtoP4, streamId) == 40 &&
                  offsetof(CUpti_ActivityMemcpyPtoP4, srcDeviceId) == 44 &&
                  offsetof(CUpti_ActivityMemcpyPtoP4, dstDeviceId) == 52 &&
                  offsetof(CUpti_ActivityMemcpyPtoP4, correlationId) == 60,
              "CUpti_ActivityMemcpyPtoP prefix moved");
static_assert(offsetof(CUpti_ActivityMemset4, bytes) == 8 && offsetof(CUpti_ActivityMemset4, start) == 16 &&
                  offsetof(CUpti_ActivityMemset4, deviceId) == 32 &&
                  offsetof(CUpti_ActivityMemset4, streamId) == 40 &&
                  offsetof(CUpti_ActivityMemset4, correlationId) == 44,
              "CUpti_ActivityMemset prefix moved");

namespace overlapprof::inject {
namespace {

CuptiState& Cupti() { return g_recorder.cupti(); }

// The API table for a thread that saw `active` (acquire) or wrote the table itself.
const CuptiApi& Api() { return Cupti().api; }

const char* ResultText(CUptiResult r) {
  const char* s = nullptr;
  if (Api().ResultString && Api().ResultString(r, &s) == CUPTI_SUCCESS && s) return s;
  return "unknown CUPTI error";
}

// Logs "cuptiX(args): <CUPTI's message>" and evaluates to false on failure.
#define OVERLAPPROF_CUPTI_OK(call)                                                   \
  ([&]() -> bool {                                                                   \
    CUptiResult _r = (call);                                                         \
    if (_r == CUPTI_SUCCESS) return true;                                            \
    Log("%s: %s", #call, ResultText(_r));                                            \
    return false;                                                                    \
  }())

// ---- Buffer pool ------------------------------------------------------------------------

constexpr size_t kAlign = 8;

// CUPTI's threads: a buffer from the pool (kBufferBytes), or none (CUPTI then drops records,
// counted in records_dropped_cupti).
void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  CuptiState& c = Cupti();
  *max_records = 0;
  uint8_t* b = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.n_free > 0) {
      b = c.free_buffers[--c.n_free];
    } else if (c.allocated < c.max_buffers) {
      b = static_cast<uint8_t*>(std::aligned_alloc(kAlign, CuptiState::kBufferBytes));
      if (b) ++c.allocated;
    }
  }
  if (!b) Count(Stat::records_dropped_cupti);
  *buffer = b;
  *size = b ? CuptiState::kBufferBytes : 0;
}

// CUPTI's threads: a buffer is full (or flushed); queued for the writer thread. The API
// table is read after an acquire load of api_ready (CUPTI only calls back once registered).
void CUPTIAPI BufferCompleted(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid) {
  CuptiState& c = Cupti();
  size_t dropped = 0;
  uint32_t context_id = 0;
  if (c.api_ready.load(std::memory_order_acquire) && c.api.GetNumDropped &&
      c.api.GetNumDropped(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    Count(Stat::records_dropped_cupti, static_cast<int64_t>(dropped));
    if (ctx && c.api.ContextId) c.api.ContextId(ctx, &context_id);
  }
  std::lock_guard<std::mutex> lock(c.mu);
  if (dropped > 0) {
    size_t i = 0;
    while (i < c.n_drops && !(c.drops[i].context == context_id && c.drops[i].stream == stream_id)) ++i;
    if (i == c.n_drops) {
      if (c.n_drops < CuptiState::kDropSlots) c.drops[c.n_drops++] = {context_id, stream_id, 0};
      else i = CuptiState::kDropSlots - 1;
    }
    c.drops[i].dropped += dropped;
  }
  if (!buffer) return;
  // Every buffer CUPTI holds came from the pool, so at most max_buffers are ever queued.
  if (c.n_completed < c.max_buffers) c.completed[c.n_completed++] = {buffer, valid};
}

uint64_t CUPTIAPI RealtimeNs() { return static_cast<uint64_t>(NowNs()); }

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void*) {
  // A context is about to go away: its records must be flushed while it still exists.
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING &&
      Cupti().active.load(std::memory_order_acquire) && Api().FlushAll) {
    Api().FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    WakeWriter();
  }
}

// ---- Finding libcupti -------------------------------------------------------------------

int FindCuptiCallback(struct dl_phdr_info* info, size_t, void* data) {
  if (info->dlpi_name && std::strstr(info->dlpi_name, "libcupti.so")) {
    std::strncpy(static_cast<char*>(data), info->dlpi_name, 4095);
    return 1;
  }
  return 0;
}

void* OpenCupti() {
  if (const char* p = std::getenv("OVERLAPPROF_CUPTI_LIB"); p && *p) {
    void* h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    if (!h) Log("OVERLAPPROF_CUPTI_LIB=%s: %s", p, dlerror());
    return h;
  }
  char loaded[4096] = {};
  dl_iterate_phdr(FindCuptiCallback, loaded);
  if (loaded[0])
    if (void* h = dlopen(loaded, RTLD_NOW | RTLD_NOLOAD)) return h;
  for (const char* name : {"libcupti.so", "libcupti.so.13", "libcupti.so.12", "libcupti.so.11.8",
                           "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so", "/usr/local/cuda/lib64/libcupti.so"})
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
  return nullptr;
}

template <typename F>
bool Sym(void* h, const char* name, F* out, bool required) {
  *out = reinterpret_cast<F>(dlsym(h, name));
  if (!*out && required) Log("libcupti lacks %s", name);
  return *out != nullptr || !required;
}

// Which tool most likely holds CUPTI, from what such tools leave in the environment.
const char* GuessOtherTool() {
  if (std::getenv("NSYS_PROFILING_SESSION_ID") || std::getenv("NSYS_TARGET_STD_REDIRECT_ACTIVE"))
    return "Nsight Systems (nsys)";
  if (std::getenv("NV_COMPUTE_PROFILER_PERFWORKS_DIR") || std::getenv("NV_NSIGHT_INJECTION_TRANSPORT_TYPE"))
    return "Nsight Compute (ncu)";
  if (std::getenv("KINETO_CONFIG") || std::getenv("KINETO_USE_DAEMON")) return "the PyTorch profiler (Kineto)";
  if (std::getenv("DCGM_PROFILING") || std::getenv("DCGM_FR_HOSTENGINE")) return "DCGM profiling";
  return "another CUPTI client (for example torch.profiler, Nsight Systems or DCGM)";
}

void Unavailable(const char* why) {
  g_recorder.stats().Set(Stat::cupti_unavailable, 1);
  Log("%s: GPU activities are not recorded for this process (NCCL calls still are); the job runs on", why);
}

// Resolves the API table into `a`; false (logged) when a required function is missing.
bool ResolveApi(void* h, CuptiApi* a) {
  return Sym(h, "cuptiSubscribe", &a->Subscribe, true) & Sym(h, "cuptiEnableCallback", &a->EnableCallback, true) &
         Sym(h, "cuptiActivityRegisterCallbacks", &a->RegisterCallbacks, true) &
         Sym(h, "cuptiActivityEnable", &a->Enable, true) & Sym(h, "cuptiActivityDisable", &a->Disable, true) &
         Sym(h, "cuptiActivityFlushAll", &a->FlushAll, true) &
         Sym(h, "cuptiActivityGetNextRecord", &a->GetNextRecord, true) &
         Sym(h, "cuptiActivityGetNumDroppedRecords", &a->GetNumDropped, true) &
         Sym(h, "cuptiActivityPushExternalCorrelationId", &a->PushExternal, true) &
         Sym(h, "cuptiActivityPopExternalCorrelationId", &a->PopExternal, true) &
         Sym(h, "cuptiGetResultString", &a->ResultString, true) &
         Sym(h, "cuptiGetCallbackName", &a->CallbackName, false) &
         Sym(h, "cuptiActivityFlushPeriod", &a->FlushPeriod, false) &
         Sym(h, "cuptiActivityRegisterTimestampCallback", &a->RegisterTimestamp, false) &
         Sym(h, "cuptiGetContextId", &a->ContextId, false) & Sym(h, "cuptiGetVersion", &a->Version, false);
}

// CUDA event records and the event ids of waits (the recorded cross-stream and host-waits-GPU
// dependencies): only from CUPTI 12.8 (API version 26) on, whose synchronization records carry
// cudaEventSyncId; with an older CUPTI they are not recorded and the store says so
// (cuda_event_links_unavailable). Called before SYNCHRONIZATION is enabled, so the decoder
// never reads a record of the older, shorter layout as the newer one.
void EnableEventLinks(CuptiState& c) {
  constexpr uint32_t kFirstWithSyncIds = 26;  // CUDA 12.8; 13.x report 130000 and up
  uint32_t version = 0;
  const bool new_enough = c.api.Version && c.api.Version(&version) == CUPTI_SUCCESS && version >= kFirstWithSyncIds;
  c.event_sync_ids.store(new_enough, std::memory_order_release);
  if (new_enough && !OVERLAPPROF_CUPTI_OK(c.api.Enable(CUPTI_ACTIVITY_KIND_CUDA_EVENT)))
    c.event_sync_ids.store(false, std::memory_order_release);
  if (!c.event_sync_ids.load(std::memory_order_relaxed)) g_recorder.stats().Set(Stat::cuda_event_links_unavailable, 1);
}

// The pool's fixed arrays, before CUPTI can ask for a buffer.
bool AllocatePool(CuptiState& c) {
  if (const char* n = std::getenv("OVERLAPPROF_CUPTI_BUFFERS"); n && std::atoi(n) > 0)
    c.max_buffers = static_cast<size_t>(std::atoi(n));
  c.free_buffers = new (std::nothrow) uint8_t*[c.max_buffers];
  c.completed = new (std::nothrow) CuptiState::Completed[c.max_buffers];
  return c.free_buffers && c.completed;
}

// Subscribes, registers the buffer callbacks and enables the activity kinds.
void Subscribe(CuptiState& c) {
  const CuptiApi& api = c.api;
  CUptiResult r = api.Subscribe(&c.subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnCallback), nullptr);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    char why[256];
    std::snprintf(why, sizeof why, "CUPTI is already held by %s", GuessOtherTool());
    return Unavailable(why);
  }
  if (r != CUPTI_SUCCESS) {
    char why[256];
    std::snprintf(why, sizeof why, "cuptiSubscribe: %s", ResultText(r));
    return Unavailable(why);
  }
  // Host hooks and CUPTI on one clock: CLOCK_REALTIME (CUPTI's own on Linux; made explicit
  // where CUPTI lets us).
  if (api.RegisterTimestamp) api.RegisterTimestamp(RealtimeNs);
  OVERLAPPROF_CUPTI_OK(api.EnableCallback(1, c.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                          CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));
  if (!OVERLAPPROF_CUPTI_OK(api.RegisterCallbacks(BufferRequested, BufferCompleted)))
    return Unavailable("cuptiActivityRegisterCallbacks failed");
  bool kernels = OVERLAPPROF_CUPTI_OK(api.Enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  OVERLAPPROF_CUPTI_OK(api.Enable(CUPTI_ACTIVITY_KIND_MEMCPY));
  // Peer-to-peer copies (between two GPUs) come as MEMCPY2 records, with both devices.
  OVERLAPPROF_CUPTI_OK(api.Enable(CUPTI_ACTIVITY_KIND_MEMCPY2));
  OVERLAPPROF_CUPTI_OK(api.Enable(CUPTI_ACTIVITY_KIND_MEMSET));
  OVERLAPPROF_CUPTI_OK(api.Enable(CUPTI_ACTIVITY_KIND_RUNTIME));
  OVERLAPPROF_CUPTI_OK(api.Enable(CUPTI_ACTIVITY_KIND_DRIVER));
  OVERLAPPROF_CUPTI_OK(api.Enable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
  EnableEventLinks(c);
  OVERLAPPROF_CUPTI_OK(api.Enable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  if (!kernels) return Unavailable("CONCURRENT_KERNEL activity could not be enabled");
  // CUPTI's worker thread delivers buffers at least every flush period too (the writer's
  // default flush at each commit is the bound that holds without it).
  if (api.FlushPeriod) api.FlushPeriod(static_cast<uint32_t>(g_recorder.flush_ms()));
  // Publishes the API table to the hooks and the writer thread (they load it with acquire;
  // seq_cst for the store_failed hand-shake below).
  c.active.store(true, std::memory_order_seq_cst);
  // The store failed before CUDA initialized (a disk full at the file's creation): nothing
  // would be kept, so CUPTI collects nothing. (The writer's own CuptiStopActivities runs after
  // it set store_failed and covers the other order: one of the two sees the other's store.)
  if (c.store_failed.load(std::memory_order_seq_cst)) CuptiStopActivities();
}

// InitializeInjection (libcuda's cuInit, one thread). The API table is written here, once,
// before anything can read it: api_ready and active are stored with release after it.
void Start() {
  if (!g_recorder.Activate()) return;  // not a recorded process (no OVERLAPPROF_OUTPUT_DIR, or a forked child)
  CuptiState& c = Cupti();
  if (c.api_ready.load(std::memory_order_acquire)) return;  // CUDA initialized twice: already started
  void* h = OpenCupti();
  if (!h) return Unavailable("libcupti not found (set OVERLAPPROF_CUPTI_LIB)");
  CuptiApi a;
  if (!ResolveApi(h, &a)) return Unavailable("libcupti is too old");
  if (!AllocatePool(c)) return Unavailable("out of memory");
  c.api = a;
  c.api_ready.store(true, std::memory_order_release);
  Subscribe(c);
}

// ---- Decoding (writer thread) -----------------------------------------------------------

}  // namespace

// The writer thread's decoding state (sink.h): owned by the Sink, never shared.
struct CuptiDecoder {
  std::vector<CuptiState::Completed> work;  // buffers taken from the queue, being decoded
  std::unordered_map<const char*, uint32_t> kernel_names;  // CUPTI keeps kernel names alive
  std::unordered_map<uint32_t, int> api_keep;              // (domain << 16 | cbid) -> keep?
  std::unordered_map<uint32_t, uint32_t> api_names;

  uint32_t KernelName(RankTrace* t, const char* mangled) {
    if (!mangled) return t->names.Intern("unknown kernel");
    auto it = kernel_names.find(mangled);
    if (it != kernel_names.end()) return it->second;
    int status = 0;
    char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    uint32_t id = t->names.Intern(status == 0 && d ? d : mangled);
    std::free(d);
    kernel_names.emplace(mangled, id);
    return id;
  }

  // Keeps the API calls that launch or wait for GPU work (launches, copies, sets, graph
  // launches, synchronization); the rest (cudaGetDevice, ...) would only add volume.
  bool KeepApi(RankTrace* t, CUpti_CallbackDomain domain, uint32_t cbid, uint32_t* name_id) {
    uint32_t key = (static_cast<uint32_t>(domain) << 16) | (cbid & 0xffff);
    auto it = api_keep.find(key);
    if (it == api_keep.end()) {
      const char* name = nullptr;
      if (!Api().CallbackName || Api().CallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name) name = "";
      std::string_view n(name);
      bool keep = false;
      // Launches, and the event calls the recorded dependencies (EventLink) refer to.
      for (std::string_view p : {"cudaLaunch", "cudaMemcpy", "cudaMemset", "cudaGraphLaunch", "cuLaunch", "cuMemcpy",
                                 "cuMemset", "cuGraphLaunch", "cudaEventRecord", "cuEventRecord",
                                 "cudaStreamWaitEvent", "cuStreamWaitEvent"})
        if (n.substr(0, p.size()) == p) keep = true;
      if (n.find("Synchronize") != std::string_view::npos) keep = true;
      it = api_keep.emplace(key, keep ? 1 : 0).first;
      if (keep) api_names[key] = t->names.Intern(n);
    }
    if (!it->second) return false;
    *name_id = api_names[key];
    return true;
  }
};

void CuptiDecoderDeleter::operator()(CuptiDecoder* d) const noexcept { delete d; }

CuptiDecoderPtr NewCuptiDecoder() noexcept {
  try {
    auto* d = new CuptiDecoder();
    d->work.reserve(64);
    return CuptiDecoderPtr(d);
  } catch (...) {
    return nullptr;
  }
}

namespace {

const char* CopyKindName(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "Memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "Memcpy PtoP";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "Memcpy HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "Memcpy AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "Memcpy AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "Memcpy DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "Memcpy AtoA";
  }
  return "Memcpy";
}

const char* SyncName(uint32_t type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "cudaEventSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "cudaStreamWaitEvent";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "cudaStreamSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "cudaDeviceSynchronize";
  }
  return "synchronization";
}

void AddActivity(RankTrace* t, ActivityKind kind, uint64_t start, uint64_t end, uint32_t device, uint32_t stream,
                 uint32_t correlation, uint32_t name_id, int64_t bytes, uint8_t copy_kind) {
  if (end < start || !TimeInRange(static_cast<int64_t>(start)) || !TimeInRange(static_cast<int64_t>(end))) {
    t->stats.Add(Stat::clock_anomalies);
    return;
  }
  Activity a;
  a.start_ns = static_cast<int64_t>(start);
  a.end_ns = static_cast<int64_t>(end);
  a.correlation_id = correlation;
  a.bytes = bytes;
  a.copy_kind = copy_kind;
  a.name_id = name_id;
  a.kind = kind;
  a.stream = t->StreamIndex(device, stream == 0xffffffffu ? kUnknown : static_cast<int64_t>(stream));
  // A peer copy (rule 4, docs/classification.md) is communication done by the copy engines.
  a.category = kind == ActivityKind::kMemcpy && IsPeerCopy(copy_kind) ? Category::kComm
                                                                       : Classify(kind, t->names.Get(name_id), false);
  t->activities.push_back(a);
}

// A cudaStreamWaitEvent or cudaEventSynchronize, with the id of the event record it waits for
// (only records whose CUPTI has cudaEventSyncId: CuptiState::event_sync_ids).
void AddEventWait(RankTrace* t, const CUpti_ActivitySynchronization2& s) {
  EventLink l;
  if (s.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT) l.kind = EventLinkKind::kStreamWait;
  else if (s.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE) l.kind = EventLinkKind::kHostWait;
  else return;
  if (s.cudaEventSyncId == CUPTI_SYNCHRONIZATION_INVALID_VALUE || s.cudaEventSyncId == ~uint64_t{0}) return;
  l.correlation_id = s.correlationId;
  l.sync_id = static_cast<int64_t>(s.cudaEventSyncId & 0x7fffffffffffffffull);
  // The record names no device: the waiting stream is the same (no device, native id) entry as
  // the synchronization's own activity (AddActivity); consumers match it to the kernels' stream
  // by native id.
  if (l.kind == EventLinkKind::kStreamWait && s.streamId != CUPTI_SYNCHRONIZATION_INVALID_VALUE)
    l.stream = t->StreamIndex(0xffffffffu, s.streamId);
  t->event_links.push_back(l);
}

void DecodeRecord(CuptiDecoder* d, RankTrace* t, const CUpti_Activity* rec) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      AddActivity(t, ActivityKind::kKernel, k->start, k->end, k->deviceId, k->streamId, k->correlationId,
                  d->KernelName(t, k->name), kUnknown, 0);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      AddActivity(t, ActivityKind::kMemcpy, m->start, m->end, m->deviceId, m->streamId, m->correlationId,
                  t->names.Intern(CopyKindName(m->copyKind)), static_cast<int64_t>(m->bytes), m->copyKind);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      // Peer-to-peer: copy kind PtoP, or DtoD between two devices. Stored as copy kind PtoP
      // (10) so every reader sees a peer copy, and named with its source and destination
      // devices ("Memcpy PtoP (device 0 -> device 1)"): the name is where the store keeps them
      // (no source/destination columns; a handful of distinct names per process).
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(rec);
      const bool peer = IsPeerCopy(m->copyKind, m->srcDeviceId, m->dstDeviceId);
      const uint8_t kind = peer ? kCopyKindPeer : m->copyKind;
      char name[96];
      if (peer)
        std::snprintf(name, sizeof name, "%s (device %u -> device %u)", CopyKindName(kind), m->srcDeviceId,
                      m->dstDeviceId);
      AddActivity(t, ActivityKind::kMemcpy, m->start, m->end, m->deviceId, m->streamId, m->correlationId,
                  t->names.Intern(peer ? std::string_view(name) : std::string_view(CopyKindName(kind))),
                  static_cast<int64_t>(m->bytes), kind);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      AddActivity(t, ActivityKind::kMemset, m->start, m->end, m->deviceId, m->streamId, m->correlationId,
                  t->names.Intern("Memset"), static_cast<int64_t>(m->bytes), 0);
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization*>(rec);
      // Host-side waits: kept as "other" activities on the stream they waited for.
      AddActivity(t, ActivityKind::kSync, s->start, s->end, 0xffffffffu, s->streamId, s->correlationId,
                  t->names.Intern(SyncName(s->type)), kUnknown, 0);
      if (Cupti().event_sync_ids.load(std::memory_order_acquire))
        AddEventWait(t, *reinterpret_cast<const CUpti_ActivitySynchronization2*>(rec));
      break;
    }
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: {
      if (!Cupti().event_sync_ids.load(std::memory_order_acquire)) break;  // no cudaEventSyncId before 12.8
      const auto* e = reinterpret_cast<const CUpti_ActivityCudaEvent2*>(rec);
      EventLink l;
      l.kind = EventLinkKind::kRecord;
      l.correlation_id = e->correlationId;
      l.sync_id = static_cast<int64_t>(e->cudaEventSyncId & 0x7fffffffffffffffull);
      l.stream = t->StreamIndex(e->deviceId, e->streamId);
      t->event_links.push_back(l);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
      uint32_t name_id = 0;
      CUpti_CallbackDomain domain =
          rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
      if (!d->KeepApi(t, domain, a->cbid, &name_id)) break;
      if (a->end < a->start) {
        t->stats.Add(Stat::clock_anomalies);
        break;
      }
      HostCall h;
      h.start_ns = static_cast<int64_t>(a->start);
      h.end_ns = static_cast<int64_t>(a->end);
      h.correlation_id = a->correlationId;
      h.tid = a->threadId;
      h.name_id = name_id;
      t->host_calls.push_back(h);
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
        t->external_correlations.emplace_back(e->correlationId, static_cast<int64_t>(e->externalId));
      break;
    }
    default:
      break;
  }
}

}  // namespace

// The hooks' side: one acquire load (a plain load on x86), then the call through the table.
bool CuptiActive() noexcept { return Cupti().active.load(std::memory_order_acquire); }

void CuptiPushExternalId(uint64_t id) noexcept {
  if (CuptiActive()) Api().PushExternal(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}

void CuptiPopExternalId() noexcept {
  uint64_t last = 0;
  if (CuptiActive()) Api().PopExternal(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

void CuptiFlush(bool force) noexcept {
  if (CuptiActive() && Api().FlushAll) Api().FlushAll(force ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

void CuptiDroppedByStream(std::vector<ExtraStat>* out) {
  CuptiState& c = Cupti();
  std::lock_guard<std::mutex> lock(c.mu);
  for (size_t i = 0; i < c.n_drops; ++i) {
    ExtraStat e;
    e.name = "records_dropped_cupti[context=" + std::to_string(c.drops[i].context) +
             ",stream=" + std::to_string(c.drops[i].stream) + "]";
    e.severity = Severity::kInfo;  // the total, records_dropped_cupti, carries the error
    e.value = static_cast<int64_t>(c.drops[i].dropped);
    e.description = "CUPTI records dropped for this context and stream (part of records_dropped_cupti)";
    out->push_back(std::move(e));
  }
}

void CuptiStopActivities() noexcept {
  CuptiState& c = Cupti();
  c.store_failed.store(true, std::memory_order_seq_cst);
  if (!c.active.load(std::memory_order_seq_cst) || !c.api.Disable) return;
  for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                               CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
                               CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                               CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_CUDA_EVENT})
    c.api.Disable(k);
}

void CuptiShutdown() noexcept {
  // Further buffers may still complete; they stay queued and are never decoded.
  Cupti().active.store(false, std::memory_order_release);
}

void CuptiDrain(CuptiDecoder* d, RankTrace* t) noexcept {
  CuptiState& c = Cupti();
  if (!c.api_ready.load(std::memory_order_acquire)) return;
  // The queue is copied out under the lock (the work list keeps its capacity: no allocation
  // after the first drains), then decoded without it: no CUPTI call under c.mu.
  std::vector<CuptiState::Completed> local;
  std::vector<CuptiState::Completed>& work = d ? d->work : local;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    try {
      work.assign(c.completed, c.completed + c.n_completed);
    } catch (...) {
      work.clear();  // out of memory: the buffers stay queued for the next drain
      return;
    }
    c.n_completed = 0;
  }
  for (const CuptiState::Completed& b : work) {
    try {
      CUpti_Activity* rec = nullptr;
      if (!d) throw std::bad_alloc();
      while (Api().GetNextRecord(b.data, b.valid, &rec) == CUPTI_SUCCESS) DecodeRecord(d, t, rec);
    } catch (...) {
      // Out of memory while decoding: the buffer's remaining records are lost (and counted).
      Count(Stat::records_dropped_cupti);
    }
    std::lock_guard<std::mutex> lock(c.mu);
    c.free_buffers[c.n_free++] = b.data;  // at most max_buffers: every buffer came from the pool
  }
}

}  // namespace overlapprof::inject

// Called by libcuda from cuInit when CUDA_INJECTION64_PATH names this library. Returns 1
// (success) always: a failure here must never stop the job.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  try {
    overlapprof::inject::Start();
  } catch (...) {
  }
  return 1;
}
