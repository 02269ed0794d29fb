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
#include <dlfcn.h>
#include <nccl.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

struct ncclComm {
  int nranks, rank, device;
  bool nonblocking;
  std::atomic<int> pending_polls{0};
};

#define FAKE_API(ret, func, ...)                                                    \
  extern "C" __attribute__((visibility("default"))) ret p##func(__VA_ARGS__);       \
  extern "C" __attribute__((visibility("default"), weak, alias("p" #func))) ret func(__VA_ARGS__); \
  extern "C" ret p##func(__VA_ARGS__)

namespace {
ncclResult_t Check(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  if (comm->pending_polls.load() > 0) return ncclInvalidUsage;  // NCCL: wait for init first
  return ncclSuccess;
}
ncclResult_t CheckType(ncclDataType_t t) {
  return (t < 0 || t >= ncclNumTypes) ? ncclInvalidArgument : ncclSuccess;
}
ncclResult_t NewComm(ncclComm_t* out, int nranks, int rank, ncclConfig_t* config) {
  if (!out || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  auto* c = new ncclComm();
  c->nranks = nranks;
  c->rank = rank;
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
uint64_t g_kernel_start = 0, g_kernel_end = 0;
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
ncclResult_t Op(ncclComm_t comm, ncclDataType_t t) {
  if (ncclResult_t r = Check(comm); r != ncclSuccess) return r;
  if (ncclResult_t r = CheckType(t); r != ncclSuccess) return r;
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
FAKE_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  return NewComm(comm, nranks, rank, nullptr);
}
FAKE_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId, int rank,
         ncclConfig_t* config) {
  return NewComm(comm, nranks, rank, config);
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
  return NewComm(newcomm, n, rank, config);
}
FAKE_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) { return Check(comm); }
FAKE_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  delete comm;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
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
FAKE_API(ncclResult_t, ncclAllReduce, const void*, void*, size_t, ncclDataType_t t, ncclRedOp_t, ncclComm_t comm,
         cudaStream_t) {
  return Op(comm, t);
}
FAKE_API(ncclResult_t, ncclBroadcast, const void*, void*, size_t, ncclDataType_t t, int root, ncclComm_t comm,
         cudaStream_t) {
  if (comm && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Op(comm, t);
}
FAKE_API(ncclResult_t, ncclBcast, void*, size_t, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t) {
  if (comm && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Op(comm, t);
}
FAKE_API(ncclResult_t, ncclReduce, const void*, void*, size_t, ncclDataType_t t, ncclRedOp_t, int root,
         ncclComm_t comm, cudaStream_t) {
  if (comm && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Op(comm, t);
}
FAKE_API(ncclResult_t, ncclAllGather, const void*, void*, size_t, ncclDataType_t t, ncclComm_t comm, cudaStream_t) {
  return Op(comm, t);
}
FAKE_API(ncclResult_t, ncclReduceScatter, const void*, void*, size_t, ncclDataType_t t, ncclRedOp_t, ncclComm_t comm,
         cudaStream_t) {
  return Op(comm, t);
}
FAKE_API(ncclResult_t, ncclSend, const void*, size_t, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t) {
  if (comm && (peer < 0 || peer >= comm->nranks)) return ncclInvalidArgument;
  return Op(comm, t);
}
FAKE_API(ncclResult_t, ncclRecv, void*, size_t, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t) {
  if (comm && (peer < 0 || peer >= comm->nranks)) return ncclInvalidArgument;
  return Op(comm, t);
}
FAKE_API(ncclResult_t, ncclGroupStart) {
  ++g_group_depth;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclGroupEnd) {
  if (g_group_depth <= 0) return ncclInvalidUsage;
  --g_group_depth;
  MaybeLaunch("ncclDevKernel_SendRecv");
  return ncclSuccess;
}
#ifndef FAKE_NCCL_OLD
// Newer entry points (2.24+, 2.28+): absent from the "old NCCL" build.
FAKE_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* sim) {
  if (g_group_depth <= 0 || !sim) return ncclInvalidUsage;
  --g_group_depth;  // nothing is launched
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
FAKE_API(ncclResult_t, ncclAlltoAll, const void*, void*, size_t, ncclDataType_t t, ncclComm_t comm, cudaStream_t) {
  return Op(comm, t);
}
FAKE_API(ncclResult_t, ncclGather, const void*, void*, size_t, ncclDataType_t t, int root, ncclComm_t comm,
         cudaStream_t) {
  if (comm && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Op(comm, t);
}
FAKE_API(ncclResult_t, ncclScatter, const void*, void*, size_t, ncclDataType_t t, int root, ncclComm_t comm,
         cudaStream_t) {
  if (comm && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Op(comm, t);
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
