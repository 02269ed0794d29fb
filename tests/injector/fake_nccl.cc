// A test double of libnccl.so.2, built with NCCL's real header: the boundary the injector
// hooks, without a GPU. Like the real library it defines each function as pnccl* with a
// weak ncclX alias. It checks arguments as NCCL does (null communicator, bad rank, bad
// datatype) and returns ncclSuccess; communication itself is not simulated.
//
// FAKE_NCCL_OLD (a second build, libnccl_old) leaves out the functions newer NCCLs added
// (AlltoAll, Gather, Scatter, InitRankScalable, Shrink, Revoke, registration and windows), to test calls into a function the
// loaded NCCL lacks. FAKE_NCCL_INPROGRESS=N (environment) makes non-blocking communicators
// report ncclInProgress from init and from their first N-1 ncclCommGetAsyncError polls;
// until then ncclCommUserRank/Count/CuDevice answer ncclInProgress too, as NCCL's do.
//
// FAKE_NCCL_PROFILER=1 makes it load a profiler plugin as NCCL does (NCCL_PROFILER_PLUGIN,
// dlopen, ncclProfiler_v7 ... v4 probed newest first; FAKE_NCCL_PROFILER_MAXVER=N starts the
// probe at vN), init it per communicator with NCCL's commHash, and report every launch: a
// Group event per launch (a kernel plan), a Coll or P2p event per op in it (with NCCL's
// per-function sequence numbers), and for each op its channels' KernelCh events (start with
// the GPU start time, the KernelChStop state with the stop time, stop) from another thread,
// after the op's own event stopped (as NCCL's profiler thread does; FAKE_NCCL_PROFILER_ORDER=
// early delivers them before). GPU times: the launch's window is split among its ops in
// order; channel c of an op starts c*10 ns after the op and stops c*10 ns before its end; the
// "GPU clock" is CLOCK_REALTIME + FAKE_NCCL_GLOBALTIMER_OFFSET_NS. finalize on destroy.
// When the test program set the launch's kernel times (fake_nccl_next_kernel, with the CUPTI
// double), its ops share that kernel's window instead: one op is the whole kernel; n > 1 ops
// each get a 1/n slice, less its last tenth (the gap NCCL leaves between fused ops), so only
// the plugin can tell them apart. Channel starts are reported once the clock passed them.
#include <dlfcn.h>
#include <nccl.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "injector/nccl_profiler_abi.h"

namespace np = overlapprof::inject::ncclprof;

struct ncclComm {
  int nranks, rank, device;
  bool nonblocking;
  std::atomic<int> pending_polls{0};
  uint64_t hash = 0;                   // NCCL's commHash (not overlapprof's id)
  void* prof_ctx = nullptr;            // the plugin's context
  bool prof_init = false;
  std::map<std::string, uint64_t> seq;  // NCCL's per-function sequence numbers
};

#define FAKE_API(ret, func, ...)                                                    \
  extern "C" __attribute__((visibility("default"))) ret p##func(__VA_ARGS__);       \
  extern "C" __attribute__((visibility("default"), weak, alias("p" #func))) ret func(__VA_ARGS__); \
  extern "C" ret p##func(__VA_ARGS__)

namespace {

// ---- The profiler plugin, loaded and driven as NCCL does --------------------------------
struct Profiler {
  int abi = 0;  // 0: none
  const np::ProfilerV4* v4 = nullptr;
  const np::ProfilerV5* v5 = nullptr;  // v5 and v6 share init/stop/record signatures
  const np::ProfilerV6* v6 = nullptr;
  std::atomic<int> mask{0};  // set by every communicator's init (any thread), read per launch
};
Profiler g_prof;
std::atomic<int> g_prof_state{0};  // 0 not tried, 1 trying, 2 decided

int64_t Now() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
int64_t GpuClockOffset() {
  const char* e = std::getenv("FAKE_NCCL_GLOBALTIMER_OFFSET_NS");
  return e ? std::atoll(e) : 0;
}

void LoadProfiler() {
  int expected = 0;
  if (!g_prof_state.compare_exchange_strong(expected, 1)) {
    while (g_prof_state.load() != 2) std::this_thread::yield();
    return;
  }
  const char* on = std::getenv("FAKE_NCCL_PROFILER");
  const char* path = std::getenv("NCCL_PROFILER_PLUGIN");
  if (on && std::atoi(on) && path && *path) {
    if (void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
      const char* mv = std::getenv("FAKE_NCCL_PROFILER_MAXVER");
      int maxver = mv ? std::atoi(mv) : 7;
      for (int v = maxver; v >= 4 && !g_prof.abi; --v) {
        std::string sym = "ncclProfiler_v" + std::to_string(v);
        void* p = dlsym(lib, sym.c_str());
        if (!p) continue;
        if (v == 7) continue;  // no v7 declarations in this double (none exported by overlapprof)
        g_prof.abi = v;
        if (v == 4) g_prof.v4 = static_cast<const np::ProfilerV4*>(p);
        if (v == 5) g_prof.v5 = static_cast<const np::ProfilerV5*>(p);
        if (v == 6) g_prof.v6 = static_cast<const np::ProfilerV6*>(p);
      }
      std::fprintf(stderr, "fake_nccl: profiler plugin %s: %s\n", path,
                   g_prof.abi ? ("ncclProfiler_v" + std::to_string(g_prof.abi)).c_str() : "no supported version");
    } else {
      std::fprintf(stderr, "fake_nccl: profiler plugin %s: %s\n", path, dlerror());
    }
  }
  g_prof_state.store(2);
}

void ProfInit(ncclComm_t c) {
  LoadProfiler();
  if (!g_prof.abi) return;
  int mask = 0;
  ncclResult_t r;
  if (g_prof.abi == 4)
    r = g_prof.v4->init(&c->prof_ctx, &mask, "fake", c->hash, 1, c->nranks, c->rank, nullptr);
  else if (g_prof.abi == 5)
    r = g_prof.v5->init(&c->prof_ctx, c->hash, &mask, "fake", 1, c->nranks, c->rank, nullptr);
  else
    r = g_prof.v6->init(&c->prof_ctx, c->hash, &mask, "fake", 1, c->nranks, c->rank, nullptr);
  if (r == ncclSuccess) {
    g_prof.mask.store(mask);  // one mask for the process, as NCCL's ncclProfilerEventMask
    c->prof_init = true;
  }
}
void ProfFinalize(ncclComm_t c) {
  if (!c->prof_init) return;
  c->prof_init = false;
  if (g_prof.abi == 4) g_prof.v4->finalize(c->prof_ctx);
  else if (g_prof.abi == 5) g_prof.v5->finalize(c->prof_ctx);
  else g_prof.v6->finalize(c->prof_ctx);
}

// One op of a launch (a kernel plan).
struct Task {
  ncclComm_t comm;
  const char* func;  // NCCL's ncclFuncToString name
  size_t count;
  ncclDataType_t dtype;
  int root_peer;
  bool p2p;
  uint8_t channels;
  void* handle = nullptr;
  uint64_t gpu_start = 0, gpu_end = 0;  // trace clock
  uint64_t seq = 0;                     // NCCL's seqNumber (collectives), numbered at launch
};
thread_local std::vector<Task> t_tasks;

const char* DtypeName(ncclDataType_t t) {
  static const char* const kNames[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",    "ncclUint32",
                                       "ncclInt64",   "ncclUint64",  "ncclFloat16",  "ncclFloat32",
                                       "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return t >= 0 && t < 12 ? kNames[t] : "ncclInvalid";
}

template <typename Descr>
void FillTask(Descr& d, Task& t, void* group) {
  d.rank = t.comm->rank;
  if (t.p2p) {
    d.type = np::kP2p;
    d.p2p.func = t.func;
    d.p2p.buff = nullptr;
    d.p2p.datatype = DtypeName(t.dtype);
    d.p2p.count = t.count;
    d.p2p.peer = t.root_peer;
    d.p2p.nChannels = t.channels;
    if constexpr (requires { d.p2p.parentGroup; }) d.p2p.parentGroup = group;
    else d.parentObj = group;
  } else {
    d.type = np::kColl;
    d.coll.seqNumber = t.seq;
    d.coll.func = t.func;
    d.coll.sendBuff = nullptr;
    d.coll.recvBuff = nullptr;
    d.coll.count = t.count;
    d.coll.root = t.root_peer;
    d.coll.datatype = DtypeName(t.dtype);
    d.coll.nChannels = t.channels;
    d.coll.nWarps = 16;
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    if constexpr (requires { d.coll.parentGroup; }) d.coll.parentGroup = group;
    else d.parentObj = group;
  }
}

template <typename P, typename Descr>
void ProfileLaunch(const P* p, std::vector<Task>& tasks) {
  const int mask = g_prof.mask.load();
  void* ctx = tasks.front().comm->prof_ctx;
  void* group = nullptr;
  if (mask & np::kGroup) {
    Descr d{};
    d.type = np::kGroup;
    p->startEvent(ctx, &group, &d);
  }
  for (Task& t : tasks) {
    if (!(mask & (t.p2p ? np::kP2p : np::kColl))) continue;
    Descr d{};
    FillTask(d, t, group);
    p->startEvent(t.comm->prof_ctx, &t.handle, &d);
  }
  // FAKE_NCCL_GLOBALTIMER_DRIFT_NS=d: the GPU clock moves d ns further from CLOCK_REALTIME at
  // every launch (a drifting clock: one offset cannot fit every op).
  static std::atomic<long> launches{0};
  static const long drift =
      std::getenv("FAKE_NCCL_GLOBALTIMER_DRIFT_NS") ? std::atol(std::getenv("FAKE_NCCL_GLOBALTIMER_DRIFT_NS")) : 0;
  const int64_t off = GpuClockOffset() + launches.fetch_add(1) * drift;
  auto channels = [&] {
    if (!(mask & np::kKernelCh)) return;
    for (Task& t : tasks) {
      if (!t.handle) continue;
      for (int c = 0; c < t.channels; ++c) {
        Descr d{};
        d.type = np::kKernelCh;
        d.parentObj = t.handle;
        d.kernelCh.channelId = static_cast<uint8_t>(c);
        d.kernelCh.pTimer = t.gpu_start + off + uint64_t(c) * 10;
        while (Now() < int64_t(t.gpu_start + uint64_t(c) * 10)) {  // reported once it started
        }
        void* ch = nullptr;
        p->startEvent(t.comm->prof_ctx, &ch, &d);
        if (!ch) continue;
        np::EventStateArgsV4 a{};
        a.kernelCh.pTimer = t.gpu_end + off - uint64_t(c) * 10;
        p->recordEventState(ch, np::kKernelChStop, &a);
        p->stopEvent(ch);
      }
    }
  };
  const char* order = std::getenv("FAKE_NCCL_PROFILER_ORDER");
  bool early = order && std::strcmp(order, "early") == 0;
  if (early) std::thread(channels).join();
  for (Task& t : tasks)
    if (t.handle) p->stopEvent(t.handle);
  if (group) p->stopEvent(group);
  if (!early) std::thread(channels).join();
}

uint64_t g_kernel_start = 0, g_kernel_end = 0;  // the launch's kernel (fake_nccl_next_kernel), 0: none

// A launch of the calling thread's pending ops (the call itself, or the outermost GroupEnd).
// GPU times: [now, now + 20 us per op), or the kernel's window split among them (above),
// waited for, then reported.
void ReportLaunch() {
  std::vector<Task> tasks;
  tasks.swap(t_tasks);
  if (tasks.empty() || !g_prof.abi) return;
  // FAKE_NCCL_PROFILER_SKIP=k: the k-th op (0-based, over the process) is not reported (a
  // call without a plugin op); FAKE_NCCL_PROFILER_BADCOUNT=k: the k-th op is reported with
  // count + 1 (a plugin op that matches no call, and a call without one).
  static std::atomic<long> reported{0};
  static const long skip = std::getenv("FAKE_NCCL_PROFILER_SKIP") ? std::atol(std::getenv("FAKE_NCCL_PROFILER_SKIP")) : -1;
  static const long bad =
      std::getenv("FAKE_NCCL_PROFILER_BADCOUNT") ? std::atol(std::getenv("FAKE_NCCL_PROFILER_BADCOUNT")) : -1;
  std::vector<Task> mine;
  for (Task& t : tasks) {
    if (!t.comm->prof_init) continue;
    const long k = reported.fetch_add(1);
    if (!t.p2p) t.seq = t.comm->seq[t.func]++;  // numbered whether reported or not, as NCCL's
    if (k == skip) continue;
    if (k == bad) ++t.count;
    mine.push_back(t);
  }
  if (mine.empty()) return;
  int64_t start = Now();
  int64_t per = 20000, last_end = start + int64_t(mine.size()) * per;
  const int64_t n = static_cast<int64_t>(mine.size());
  if (g_kernel_end > g_kernel_start) {  // channels are reported as the clock passes them
    start = static_cast<int64_t>(g_kernel_start);
    last_end = start;
    per = (static_cast<int64_t>(g_kernel_end) - start) / n;
    for (int64_t i = 0; i < n; ++i) {
      mine[i].gpu_start = start + i * per;
      mine[i].gpu_end = n == 1 ? static_cast<int64_t>(g_kernel_end) : start + (i + 1) * per - per / 10;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      mine[i].gpu_start = start + i * per;
      mine[i].gpu_end = start + (i + 1) * per - 1000;
    }
  }
  while (Now() < last_end) {
  }
  // One plan per communicator, as NCCL's.
  while (!mine.empty()) {
    ncclComm_t c = mine.front().comm;
    std::vector<Task> plan, rest;
    for (Task& t : mine) (t.comm == c ? plan : rest).push_back(t);
    mine.swap(rest);
    if (g_prof.abi == 4) ProfileLaunch<np::ProfilerV4, np::EventDescrV4>(g_prof.v4, plan);
    else if (g_prof.abi == 5) ProfileLaunch<np::ProfilerV5, np::EventDescrV5>(g_prof.v5, plan);
    else ProfileLaunch<np::ProfilerV6, np::EventDescrV6>(g_prof.v6, plan);
  }
}

uint64_t HashBytes(const void* p, size_t n, uint64_t h = 0x9e3779b97f4a7c15ULL) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0xff51afd7ed558ccdULL + 7;
  return h;
}

ncclResult_t Check(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  if (comm->pending_polls.load() > 0) return ncclInvalidUsage;  // NCCL: wait for init first
  return ncclSuccess;
}
ncclResult_t CheckType(ncclDataType_t t) {
  return (t < 0 || t >= ncclNumTypes) ? ncclInvalidArgument : ncclSuccess;
}
ncclResult_t NewComm(ncclComm_t* out, int nranks, int rank, ncclConfig_t* config, uint64_t hash = 0) {
  if (!out || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  auto* c = new ncclComm();
  c->nranks = nranks;
  c->rank = rank;
  c->hash = hash ? hash : HashBytes(&c, sizeof c);
  ProfInit(c);
  const char* dev = std::getenv("FAKE_NCCL_DEVICE");
  c->device = dev ? std::atoi(dev) : 0;
  c->nonblocking = config && config->blocking == 0;
  *out = c;
  if (c->nonblocking) {
    const char* n = std::getenv("FAKE_NCCL_INPROGRESS");
    int polls = n ? std::atoi(n) : 0;
    if (polls > 0) {
      c->pending_polls.store(polls);
      return ncclInProgress;
    }
  }
  return ncclSuccess;
}
// With the CUPTI double loaded (tests/injector/fake_cupti.cc), a collective "launches" its
// kernel as NCCL would, at the GPU times the test program set with fake_nccl_next_kernel:
// outside a group the call itself launches, inside one the outermost ncclGroupEnd.
using LaunchFn = void (*)(const char*, uint32_t, uint64_t, uint64_t, uint64_t, int);
thread_local int g_group_depth = 0;
void MaybeLaunch(const char* kernel) {
  if (g_kernel_end == 0 || g_group_depth > 0) return;
  auto launch = reinterpret_cast<LaunchFn>(dlsym(RTLD_DEFAULT, "fake_cupti_launch"));
  if (!launch) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  launch(kernel, 20, g_kernel_start, g_kernel_end, uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec), 0);
  g_kernel_end = 0;
}
size_t TypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}
ncclResult_t Op(ncclComm_t comm, ncclDataType_t t, const char* func = "AllReduce", size_t count = 0,
               int root_peer = -1, bool p2p = false) {
  if (ncclResult_t r = Check(comm); r != ncclSuccess) return r;
  if (ncclResult_t r = CheckType(t); r != ncclSuccess) return r;
  // NCCL moves non-reducing collectives as bytes: its profiler reports them as ncclInt8 with the
  // count in bytes (seen with NCCL 2.28.9: Broadcast and AllGather).
  if (std::strcmp(func, "Broadcast") == 0 || std::strcmp(func, "AllGather") == 0) {
    count *= TypeSize(t);
    t = ncclInt8;
  }
  if (g_prof.abi) {
    t_tasks.push_back(Task{comm, func, count, t, root_peer, p2p, static_cast<uint8_t>(p2p ? 1 : 2)});
    if (g_group_depth == 0) ReportLaunch();
  }
  MaybeLaunch("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  return ncclSuccess;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) void fake_nccl_next_kernel(uint64_t start, uint64_t end) {
  g_kernel_start = start;
  g_kernel_end = end;
}

FAKE_API(ncclResult_t, ncclGetVersion, int* version) {
  if (!version) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* id) {
  if (!id) return ncclInvalidArgument;
  for (char& b : id->internal) b = static_cast<char>(std::rand());
  return ncclSuccess;
}
FAKE_API(const char*, ncclGetErrorString, ncclResult_t r) { return r == ncclSuccess ? "no error" : "fake error"; }
FAKE_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return NewComm(comm, nranks, rank, nullptr, HashBytes(&id, sizeof id));
}
FAKE_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
         ncclConfig_t* config) {
  return NewComm(comm, nranks, rank, config, HashBytes(&id, sizeof id));
}
FAKE_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int*) {
  if (!comms || ndev < 1) return ncclInvalidArgument;
  for (int i = 0; i < ndev; ++i)
    if (ncclResult_t r = NewComm(&comms[i], ndev, i, nullptr); r != ncclSuccess) return r;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  if (ncclResult_t r = Check(comm); r != ncclSuccess) return r;
  if (!newcomm) return ncclInvalidArgument;
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  // The double has no peers: the child has the ranks of the parent whose rank has the
  // same parity as `color` (test programs pick colors accordingly).
  int n = (comm->nranks + 1 - (color & 1)) / 2;
  if (n < 1) n = 1;
  int rank = comm->rank / 2;
  if (rank >= n) rank = n - 1;
  uint64_t k[2] = {comm->hash, static_cast<uint64_t>(color)};
  return NewComm(newcomm, n, rank, config, HashBytes(k, sizeof k));
}
FAKE_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  if (ncclResult_t r = Check(comm); r != ncclSuccess) return r;
  ProfFinalize(comm);
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  ProfFinalize(comm);
  delete comm;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  ProfFinalize(comm);
  delete comm;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* err) {
  if (!comm || !err) return ncclInvalidArgument;
  int left = comm->pending_polls.load();
  if (left > 0) comm->pending_polls.store(left - 1);
  *err = left > 1 ? ncclInProgress : ncclSuccess;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  if (!comm || !count) return ncclInvalidArgument;
  if (comm->pending_polls.load() > 0) return ncclInProgress;
  *count = comm->nranks;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  if (!comm || !device) return ncclInvalidArgument;
  if (comm->pending_polls.load() > 0) return ncclInProgress;
  *device = comm->device;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  if (!comm || !rank) return ncclInvalidArgument;
  if (comm->pending_polls.load() > 0) return ncclInProgress;
  *rank = comm->rank;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclAllReduce, const void*, void*, size_t count, ncclDataType_t t, ncclRedOp_t,
         ncclComm_t comm, cudaStream_t) {
  return Op(comm, t, "AllReduce", count);
}
FAKE_API(ncclResult_t, ncclBroadcast, const void*, void*, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
         cudaStream_t) {
  if (comm && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Op(comm, t, "Broadcast", count, root);
}
// As NCCL's own ncclBcast: a call of the exported ncclBroadcast, through the PLT, so an
// interposer sees it a second time (seen with NCCL 2.28.9 under PyTorch on an H100).
FAKE_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
         cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, t, root, comm, stream);
}
FAKE_API(ncclResult_t, ncclReduce, const void*, void*, size_t count, ncclDataType_t t, ncclRedOp_t, int root,
         ncclComm_t comm, cudaStream_t) {
  if (comm && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Op(comm, t, "Reduce", count, root);
}
FAKE_API(ncclResult_t, ncclAllGather, const void*, void*, size_t count, ncclDataType_t t, ncclComm_t comm,
         cudaStream_t) {
  return Op(comm, t, "AllGather", count);
}
FAKE_API(ncclResult_t, ncclReduceScatter, const void*, void*, size_t count, ncclDataType_t t, ncclRedOp_t,
         ncclComm_t comm, cudaStream_t) {
  return Op(comm, t, "ReduceScatter", count);
}
FAKE_API(ncclResult_t, ncclSend, const void*, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
         cudaStream_t) {
  if (comm && (peer < 0 || peer >= comm->nranks)) return ncclInvalidArgument;
  return Op(comm, t, "Send", count, peer, true);
}
FAKE_API(ncclResult_t, ncclRecv, void*, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t) {
  if (comm && (peer < 0 || peer >= comm->nranks)) return ncclInvalidArgument;
  return Op(comm, t, "Recv", count, peer, true);
}
FAKE_API(ncclResult_t, ncclGroupStart) {
  ++g_group_depth;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclGroupEnd) {
  if (g_group_depth <= 0) return ncclInvalidUsage;
  --g_group_depth;
  if (g_group_depth == 0) ReportLaunch();
  MaybeLaunch("ncclDevKernel_SendRecv");
  return ncclSuccess;
}
#ifndef FAKE_NCCL_OLD
// Newer entry points (2.24+, 2.28+): absent from the "old NCCL" build.
FAKE_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* sim) {
  if (g_group_depth <= 0 || !sim) return ncclInvalidUsage;
  --g_group_depth;  // nothing is launched
  if (g_group_depth == 0) t_tasks.clear();
  sim->estimatedTime = 1.0f;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int) { return Check(comm); }
// Registration: the handle / window handed back is the buffer's address + 1 (so the test can
// see the real function's output came through); a window must be 4096-aligned as in NCCL.
FAKE_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  if (ncclResult_t r = Check(comm); r != ncclSuccess) return r;
  if (!buff || !size || !handle) return ncclInvalidArgument;
  *handle = static_cast<char*>(buff) + 1;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  if (ncclResult_t r = Check(comm); r != ncclSuccess) return r;
  return handle ? ncclSuccess : ncclInvalidArgument;
}
FAKE_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
         int winFlags) {
  if (ncclResult_t r = Check(comm); r != ncclSuccess) return r;
  if (!buff || !size || !win || reinterpret_cast<uintptr_t>(buff) % NCCL_WIN_REQUIRED_ALIGNMENT) return ncclInvalidArgument;
  (void)winFlags;
  *win = reinterpret_cast<ncclWindow_t>(static_cast<char*>(buff) + 1);
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  if (ncclResult_t r = Check(comm); r != ncclSuccess) return r;
  return win ? ncclSuccess : ncclInvalidArgument;
}
FAKE_API(ncclResult_t, ncclAlltoAll, const void*, void*, size_t count, ncclDataType_t t, ncclComm_t comm,
         cudaStream_t) {
  return Op(comm, t, "AlltoAll", count);
}
FAKE_API(ncclResult_t, ncclGather, const void*, void*, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
         cudaStream_t) {
  if (comm && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Op(comm, t, "Gather", count, root);
}
FAKE_API(ncclResult_t, ncclScatter, const void*, void*, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
         cudaStream_t) {
  if (comm && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Op(comm, t, "Scatter", count, root);
}
FAKE_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
         ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || !commIds) return ncclInvalidArgument;
  return NewComm(newcomm, nranks, myrank, config);
}
FAKE_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* exclude, int nexclude, ncclComm_t* newcomm,
         ncclConfig_t* config, int) {
  if (ncclResult_t r = Check(comm); r != ncclSuccess) return r;
  if (!newcomm || nexclude < 0 || (nexclude > 0 && !exclude) || nexclude >= comm->nranks) return ncclInvalidArgument;
  int rank = comm->rank;
  for (int i = 0; i < nexclude; ++i)
    if (exclude[i] < comm->rank) --rank;
  return NewComm(newcomm, comm->nranks - nexclude, rank < 0 ? 0 : rank, config);
}
#endif
