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
// Completed buffers are queued for the writer thread, which decodes them. g_buf_mu guards
// the pool and the queue only; no CUPTI function is called while it is held.
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
#include <cstdlib>
#include <cstring>
#include <mutex>
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
static_assert(offsetof(CUpti_ActivityMemset4, bytes) == 8 && offsetof(CUpti_ActivityMemset4, start) == 16 &&
                  offsetof(CUpti_ActivityMemset4, deviceId) == 32 &&
                  offsetof(CUpti_ActivityMemset4, streamId) == 40 &&
                  offsetof(CUpti_ActivityMemset4, correlationId) == 44,
              "CUpti_ActivityMemset prefix moved");

namespace overlapprof::inject {
namespace {

// The CUPTI entry points we use, resolved from the loaded libcupti.
struct CuptiApi {
  decltype(&cuptiSubscribe) Subscribe = nullptr;
  decltype(&cuptiEnableCallback) EnableCallback = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) RegisterCallbacks = nullptr;
  decltype(&cuptiActivityEnable) Enable = nullptr;
  decltype(&cuptiActivityDisable) Disable = nullptr;
  decltype(&cuptiActivityFlushAll) FlushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) GetNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) GetNumDropped = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) PushExternal = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) PopExternal = nullptr;
  decltype(&cuptiGetResultString) ResultString = nullptr;
  decltype(&cuptiGetCallbackName) CallbackName = nullptr;                          // optional
  decltype(&cuptiActivityFlushPeriod) FlushPeriod = nullptr;                       // optional
  decltype(&cuptiActivityRegisterTimestampCallback) RegisterTimestamp = nullptr;  // optional
  decltype(&cuptiGetContextId) ContextId = nullptr;                               // optional
};
CuptiApi g_api;
std::atomic<bool> g_active{false};
CUpti_SubscriberHandle g_subscriber = nullptr;

const char* ResultText(CUptiResult r) {
  const char* s = nullptr;
  if (g_api.ResultString && g_api.ResultString(r, &s) == CUPTI_SUCCESS && s) return s;
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

constexpr size_t kBufferBytes = 4 << 20;
constexpr size_t kAlign = 8;
size_t g_max_buffers = 64;  // 256 MiB at most; OVERLAPPROF_CUPTI_BUFFERS overrides
struct Completed {
  uint8_t* data;
  size_t valid;
};
std::mutex g_buf_mu;  // guards the three below; never held across a CUPTI call
std::vector<uint8_t*> g_free;
std::vector<Completed> g_completed;
std::vector<Completed> g_work;  // writer thread only
size_t g_allocated = 0;
// Dropped records per (context, stream), as CUPTI reports them; a fixed table (no
// allocation in CUPTI's callback). Past kDropSlots pairs, drops go to the last slot.
struct DropSlot {
  uint32_t context, stream;
  uint64_t dropped;
};
constexpr size_t kDropSlots = 64;
DropSlot g_drops[kDropSlots];
size_t g_drop_slots = 0;

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;
  uint8_t* b = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_buf_mu);
    if (!g_free.empty()) {
      b = g_free.back();
      g_free.pop_back();
    } else if (g_allocated < g_max_buffers) {
      b = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
      if (b) ++g_allocated;
    }
  }
  if (!b) g_counters.cupti_buffers_unavailable.fetch_add(1, std::memory_order_relaxed);
  *buffer = b;
  *size = b ? kBufferBytes : 0;
}

void CUPTIAPI BufferCompleted(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid) {
  size_t dropped = 0;
  uint32_t context_id = 0;
  if (g_api.GetNumDropped && g_api.GetNumDropped(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    g_counters.cupti_records_dropped.fetch_add(dropped, std::memory_order_relaxed);
    if (ctx && g_api.ContextId) g_api.ContextId(ctx, &context_id);
  }
  std::lock_guard<std::mutex> lock(g_buf_mu);
  if (dropped > 0) {
    size_t i = 0;
    while (i < g_drop_slots && !(g_drops[i].context == context_id && g_drops[i].stream == stream_id)) ++i;
    if (i == g_drop_slots) {
      if (g_drop_slots < kDropSlots) g_drops[g_drop_slots++] = {context_id, stream_id, 0};
      else i = kDropSlots - 1;
    }
    g_drops[i].dropped += dropped;
  }
  if (!buffer) return;
  g_completed.push_back({buffer, valid});  // never reallocates: capacity reserved in Start()
}

uint64_t CUPTIAPI RealtimeNs() { return static_cast<uint64_t>(NowNs()); }

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void*) {
  // A context is about to go away: its records must be flushed while it still exists.
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING &&
      g_active.load() && g_api.FlushAll) {
    g_api.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
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
  g_counters.cupti_unavailable.store(1);
  Log("%s: GPU activities are not recorded for this process (NCCL calls still are); the job runs on", why);
}

void Start() {
  if (!Activate()) return;  // not a recorded process (no OVERLAPPROF_OUTPUT_DIR, or a forked child)
  void* h = OpenCupti();
  if (!h) return Unavailable("libcupti not found (set OVERLAPPROF_CUPTI_LIB)");
  CuptiApi a;
  bool ok = Sym(h, "cuptiSubscribe", &a.Subscribe, true) & Sym(h, "cuptiEnableCallback", &a.EnableCallback, true) &
            Sym(h, "cuptiActivityRegisterCallbacks", &a.RegisterCallbacks, true) &
            Sym(h, "cuptiActivityEnable", &a.Enable, true) & Sym(h, "cuptiActivityDisable", &a.Disable, true) &
            Sym(h, "cuptiActivityFlushAll", &a.FlushAll, true) &
            Sym(h, "cuptiActivityGetNextRecord", &a.GetNextRecord, true) &
            Sym(h, "cuptiActivityGetNumDroppedRecords", &a.GetNumDropped, true) &
            Sym(h, "cuptiActivityPushExternalCorrelationId", &a.PushExternal, true) &
            Sym(h, "cuptiActivityPopExternalCorrelationId", &a.PopExternal, true) &
            Sym(h, "cuptiGetResultString", &a.ResultString, true) &
            Sym(h, "cuptiGetCallbackName", &a.CallbackName, false) &
            Sym(h, "cuptiActivityFlushPeriod", &a.FlushPeriod, false) &
            Sym(h, "cuptiActivityRegisterTimestampCallback", &a.RegisterTimestamp, false) &
            Sym(h, "cuptiGetContextId", &a.ContextId, false);
  if (!ok) return Unavailable("libcupti is too old");
  g_api = a;
  if (const char* n = std::getenv("OVERLAPPROF_CUPTI_BUFFERS"); n && std::atoi(n) > 0)
    g_max_buffers = static_cast<size_t>(std::atoi(n));
  try {
    g_free.reserve(g_max_buffers);
    g_completed.reserve(g_max_buffers);
    g_work.reserve(g_max_buffers);
  } catch (...) {
    return Unavailable("out of memory");
  }

  CUptiResult r = g_api.Subscribe(&g_subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnCallback), nullptr);
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
  if (g_api.RegisterTimestamp) g_api.RegisterTimestamp(RealtimeNs);
  OVERLAPPROF_CUPTI_OK(g_api.EnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                            CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));
  if (!OVERLAPPROF_CUPTI_OK(g_api.RegisterCallbacks(BufferRequested, BufferCompleted)))
    return Unavailable("cuptiActivityRegisterCallbacks failed");
  bool kernels = OVERLAPPROF_CUPTI_OK(g_api.Enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  OVERLAPPROF_CUPTI_OK(g_api.Enable(CUPTI_ACTIVITY_KIND_MEMCPY));
  OVERLAPPROF_CUPTI_OK(g_api.Enable(CUPTI_ACTIVITY_KIND_MEMSET));
  OVERLAPPROF_CUPTI_OK(g_api.Enable(CUPTI_ACTIVITY_KIND_RUNTIME));
  OVERLAPPROF_CUPTI_OK(g_api.Enable(CUPTI_ACTIVITY_KIND_DRIVER));
  OVERLAPPROF_CUPTI_OK(g_api.Enable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
  OVERLAPPROF_CUPTI_OK(g_api.Enable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  if (!kernels) return Unavailable("CONCURRENT_KERNEL activity could not be enabled");
  if (g_api.FlushPeriod) {
    const char* f = std::getenv("OVERLAPPROF_FLUSH_MS");
    int ms = f ? std::atoi(f) : 1000;
    g_api.FlushPeriod(static_cast<uint32_t>(ms > 0 ? ms : 1000));
  }
  g_active.store(true);
}

// ---- Decoding (writer thread) -----------------------------------------------------------

struct Decoder {
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
      if (!g_api.CallbackName || g_api.CallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name) name = "";
      std::string_view n(name);
      bool keep = false;
      for (std::string_view p : {"cudaLaunch", "cudaMemcpy", "cudaMemset", "cudaGraphLaunch", "cuLaunch", "cuMemcpy",
                                 "cuMemset", "cuGraphLaunch"})
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
Decoder g_decoder;  // writer thread only

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
  a.category = Classify(kind, t->names.Get(name_id), false);
  t->activities.push_back(a);
}

void DecodeRecord(RankTrace* t, const CUpti_Activity* rec) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      AddActivity(t, ActivityKind::kKernel, k->start, k->end, k->deviceId, k->streamId, k->correlationId,
                  g_decoder.KernelName(t, k->name), kUnknown, 0);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      AddActivity(t, ActivityKind::kMemcpy, m->start, m->end, m->deviceId, m->streamId, m->correlationId,
                  t->names.Intern(CopyKindName(m->copyKind)), static_cast<int64_t>(m->bytes), m->copyKind);
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
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
      uint32_t name_id = 0;
      CUpti_CallbackDomain domain =
          rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
      if (!g_decoder.KeepApi(t, domain, a->cbid, &name_id)) break;
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

bool CuptiActive() noexcept { return g_active.load(std::memory_order_relaxed); }

void CuptiPushExternalId(uint64_t id) noexcept {
  if (g_active.load(std::memory_order_relaxed)) g_api.PushExternal(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}

void CuptiPopExternalId() noexcept {
  uint64_t last = 0;
  if (g_active.load(std::memory_order_relaxed)) g_api.PopExternal(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

void CuptiFlush(bool force) noexcept {
  if (g_active.load() && g_api.FlushAll) g_api.FlushAll(force ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

void CuptiDroppedByStream(std::vector<ExtraStat>* out) {
  std::lock_guard<std::mutex> lock(g_buf_mu);
  for (size_t i = 0; i < g_drop_slots; ++i) {
    ExtraStat e;
    e.name = "records_dropped_cupti[context=" + std::to_string(g_drops[i].context) +
             ",stream=" + std::to_string(g_drops[i].stream) + "]";
    e.severity = Severity::kInfo;  // the total, records_dropped_cupti, carries the error
    e.value = static_cast<int64_t>(g_drops[i].dropped);
    e.description = "CUPTI records dropped for this context and stream (part of records_dropped_cupti)";
    out->push_back(std::move(e));
  }
}

void CuptiShutdown() noexcept {
  // Further buffers may still complete; they stay queued and are never decoded.
  g_active.store(false);
}

void CuptiDrain(RankTrace* t) noexcept {
  // Both vectors keep the capacity reserved in Start(), so no push_back under g_buf_mu
  // ever allocates (BufferCompleted runs on CUPTI's threads and must not fail).
  std::vector<Completed>& work = g_work;
  {
    std::lock_guard<std::mutex> lock(g_buf_mu);
    work.assign(g_completed.begin(), g_completed.end());
    g_completed.clear();
  }
  for (const Completed& c : work) {
    try {
      CUpti_Activity* rec = nullptr;
      while (g_api.GetNextRecord(c.data, c.valid, &rec) == CUPTI_SUCCESS) DecodeRecord(t, rec);
    } catch (...) {
      // Out of memory while decoding: the buffer's remaining records are lost (and counted).
      g_counters.cupti_records_dropped.fetch_add(1);
    }
    std::lock_guard<std::mutex> lock(g_buf_mu);
    g_free.push_back(c.data);
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
