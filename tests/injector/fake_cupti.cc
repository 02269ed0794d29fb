// A test double of libcupti: the boundary between the injector and the GPU. It implements
// the CUPTI functions the injector resolves (injector/cupti.cc) and fills activity buffers
// with records laid out as CUPTI's structs, from "launches" a test program makes through
// fake_cupti_launch() (the NCCL double calls it too, from inside its collectives, when it is
// loaded). A launch records what CUDA would: an API record with a fresh correlation id, an
// external correlation record when an external id is pushed on the calling thread, and the
// kernel (or memcpy) record with the given GPU times.
//
// FAKE_CUPTI_BUSY=1 makes cuptiSubscribe fail as it does when another tool holds CUPTI.
#include <cupti.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t Max(size_t a, size_t b) { return a > b ? a : b; }
constexpr size_t kStride =
    (Max(Max(Max(sizeof(CUpti_ActivityKernel10), sizeof(CUpti_ActivityMemcpy6)), sizeof(CUpti_ActivityMemcpyPtoP4)),
         Max(Max(sizeof(CUpti_ActivityAPI), sizeof(CUpti_ActivityExternalCorrelation)),
             Max(sizeof(CUpti_ActivityCudaEvent2), sizeof(CUpti_ActivitySynchronization2)))) + 7) & ~size_t{7};

struct Rec {
  alignas(8) unsigned char bytes[kStride];
};

std::mutex g_mu;
// Never destroyed (as CUPTI's own state outlives exit handlers): a library loaded after the
// recorder started has its static destructors run before the recorder's exit flush, which
// still calls cuptiActivityFlushAll.
std::vector<Rec>& g_pending = *new std::vector<Rec>;
std::vector<std::string*>& g_names = *new std::vector<std::string*>;  // kernel names stay alive, as CUPTI's do
CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
uint32_t g_next_correlation = 1;
thread_local std::vector<uint64_t> t_external;

template <typename T>
T* Append() {
  g_pending.emplace_back();
  std::memset(g_pending.back().bytes, 0, kStride);
  return reinterpret_cast<T*>(g_pending.back().bytes);
}

}  // namespace

#define FAKE extern "C" __attribute__((visibility("default")))

FAKE CUptiResult cuptiGetResultString(CUptiResult r, const char** str) {
  *str = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "fake CUPTI error";
  return CUPTI_SUCCESS;
}
FAKE CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* s, CUpti_CallbackFunc, void*) {
  if (const char* b = std::getenv("FAKE_CUPTI_BUSY"); b && *b == '1') return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  *s = reinterpret_cast<CUpti_SubscriberHandle>(0x1);
  return CUPTI_SUCCESS;
}
FAKE CUptiResult cuptiEnableCallback(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) {
  return CUPTI_SUCCESS;
}
FAKE CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                CUpti_BuffersCallbackCompleteFunc done) {
  g_request = req;
  g_complete = done;
  return CUPTI_SUCCESS;
}
// FAKE_CUPTI_HONOUR_DISABLE=1: launches while CONCURRENT_KERNEL is disabled record nothing, as
// CUPTI collects nothing for a disabled kind (by default the double records regardless).
std::atomic<bool> g_kernels_enabled{false};
FAKE CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) {
  if (k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) g_kernels_enabled.store(true);
  return CUPTI_SUCCESS;
}
FAKE CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) {
  if (k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) g_kernels_enabled.store(false);
  return CUPTI_SUCCESS;
}
FAKE CUptiResult cuptiActivityFlushPeriod(uint32_t) { return CUPTI_SUCCESS; }
// FAKE_CUPTI_DROPPED=N: the first completed buffer reports N records dropped on stream 20.
FAKE CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  static bool reported = false;
  const char* n = std::getenv("FAKE_CUPTI_DROPPED");
  *dropped = !reported && n ? static_cast<size_t>(std::atoi(n)) : 0;
  reported = reported || n;
  return CUPTI_SUCCESS;
}
FAKE CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind, uint64_t id) {
  t_external.push_back(id);
  return CUPTI_SUCCESS;
}
FAKE CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind, uint64_t* last) {
  if (t_external.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (last) *last = t_external.back();
  t_external.pop_back();
  return CUPTI_SUCCESS;
}
FAKE CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  // cbid 1: the launch call; 2: a call that launches nothing (filtered out by the injector);
  // 3-5: the event calls of fake_cupti_event.
  static const char* const kRuntime[] = {"", "cudaLaunchKernel", "cudaGetDevice", "cudaEventRecord",
                                         "cudaStreamWaitEvent", "cudaEventSynchronize"};
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) *name = cbid == 1 ? "cuLaunchKernelEx" : "cuCtxGetCurrent";
  else *name = cbid < 6 ? kRuntime[cbid] : "cudaGetDevice";
  return CUPTI_SUCCESS;
}
// FAKE_CUPTI_VERSION=N: the API version reported (default 130001, CUDA 13.0 Update 1; below 26,
// CUDA 12.8, the records carry no cudaEventSyncId).
FAKE CUptiResult cuptiGetVersion(uint32_t* version) {
  const char* v = std::getenv("FAKE_CUPTI_VERSION");
  *version = v ? static_cast<uint32_t>(std::atoi(v)) : 130001u;
  return CUPTI_SUCCESS;
}
FAKE CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  uint8_t* next = *record ? reinterpret_cast<uint8_t*>(*record) + kStride : buffer;
  if (next + kStride > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}
FAKE CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  // FAKE_CUPTI_STALL_MS: a forced flush (the final one) blocks that long, as CUPTI does on a
  // hung GPU or a stalled host (the exit must not wait for it past its bound).
  if (const char* st = std::getenv("FAKE_CUPTI_STALL_MS"); st && (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(st)));
  std::vector<Rec> recs;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    recs.swap(g_pending);
  }
  size_t at = 0;
  while (at < recs.size() && g_request && g_complete) {
    uint8_t* buf = nullptr;
    size_t size = 0, max_records = 0;
    g_request(&buf, &size, &max_records);
    if (!buf || size < kStride) return CUPTI_SUCCESS;  // no buffer: CUPTI would drop
    size_t n = 0;
    while (at < recs.size() && (n + 1) * kStride <= size) std::memcpy(buf + kStride * n++, recs[at++].bytes, kStride);
    g_complete(nullptr, 20, buf, size, n * kStride);
  }
  return CUPTI_SUCCESS;
}

// A launch, as CUDA would record it (see the top of the file). `kind` 0: kernel, 1: memcpy
// (device to device, one GPU), 2: peer-to-peer memcpy from device 0 to device 1 (a MEMCPY2
// record, as CUPTI gives copies between two GPUs).
FAKE void fake_cupti_launch(const char* name, uint32_t stream, uint64_t gpu_start, uint64_t gpu_end,
                            uint64_t host_start, int kind) {
  static const bool honour = std::getenv("FAKE_CUPTI_HONOUR_DISABLE") && *std::getenv("FAKE_CUPTI_HONOUR_DISABLE") == '1';
  if (honour && !g_kernels_enabled.load()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  uint32_t corr = g_next_correlation++;
  auto* api = Append<CUpti_ActivityAPI>();
  api->kind = CUPTI_ACTIVITY_KIND_DRIVER;
  api->cbid = 1;
  api->start = host_start;
  api->end = host_start + 2000;
  api->correlationId = corr;
  api->threadId = 1;
  auto* noise = Append<CUpti_ActivityAPI>();  // an API call that launches nothing
  noise->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  noise->cbid = 2;
  noise->start = host_start;
  noise->end = host_start + 100;
  noise->correlationId = g_next_correlation++;
  if (!t_external.empty()) {
    auto* e = Append<CUpti_ActivityExternalCorrelation>();
    e->kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e->externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    e->externalId = t_external.back();
    e->correlationId = corr;
  }
  if (kind == 1) {
    auto* m = Append<CUpti_ActivityMemcpy6>();
    m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    m->bytes = 4096;
    m->start = gpu_start;
    m->end = gpu_end;
    m->streamId = stream;
    m->correlationId = corr;
    return;
  }
  if (kind == 2) {
    auto* m = Append<CUpti_ActivityMemcpyPtoP4>();
    m->kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
    m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    m->bytes = 8192;
    m->start = gpu_start;
    m->end = gpu_end;
    m->deviceId = 0;
    m->srcDeviceId = 0;
    m->dstDeviceId = 1;
    m->streamId = stream;
    m->correlationId = corr;
    return;
  }
  g_names.push_back(new std::string(name));
  auto* k = Append<CUpti_ActivityKernel10>();
  k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k->start = gpu_start;
  k->end = gpu_end;
  k->streamId = stream;
  k->correlationId = corr;
  k->name = g_names.back()->c_str();
}

// An event call, as CUDA 12.8+ records it: `kind` 1: cudaEventRecord on `stream` (a CUDA_EVENT
// record); 2: cudaStreamWaitEvent of `stream`; 3: cudaEventSynchronize (both SYNCHRONIZATION
// records, the wait [gpu_start, gpu_end)). `sync_id` joins a wait to its record.
FAKE void fake_cupti_event(int kind, uint32_t stream, uint64_t sync_id, uint64_t host_start, uint64_t gpu_start,
                           uint64_t gpu_end) {
  std::lock_guard<std::mutex> lock(g_mu);
  uint32_t corr = g_next_correlation++;
  auto* api = Append<CUpti_ActivityAPI>();
  api->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api->cbid = static_cast<CUpti_CallbackId>(kind + 2);
  api->start = host_start;
  api->end = kind == 3 ? gpu_end : host_start + 1000;
  api->correlationId = corr;
  api->threadId = 1;
  if (kind == 1) {
    auto* e = Append<CUpti_ActivityCudaEvent2>();
    e->kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
    e->correlationId = corr;
    e->streamId = stream;
    e->eventId = 1;
    e->cudaEventSyncId = sync_id;
    return;
  }
  auto* s = Append<CUpti_ActivitySynchronization2>();
  s->kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s->type = kind == 2 ? CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT
                      : CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
  s->start = gpu_start;
  s->end = gpu_end;
  s->correlationId = corr;
  s->streamId = kind == 2 ? stream : CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  s->cudaEventId = 1;
  s->cudaEventSyncId = sync_id;
}
