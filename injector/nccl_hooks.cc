// NCCL interposition (LD_PRELOAD). Each exported ncclX forwards to the real function of the
// NCCL already loaded in the process, resolved lazily on first use: NCCL's pnccl* alias
// first, then the library found among the loaded objects (PyTorch loads NCCL with
// RTLD_LOCAL, where RTLD_DEFAULT/RTLD_NEXT cannot see it). libnccl is never linked or loaded
// by us. A function the loaded NCCL lacks answers ncclInvalidUsage (counted, logged once).
//
// Recording: a call makes one HookRecord (op, datatype, count, root/peer, communicator,
// per-communicator sequence number, stream, host enter/exit). The GPU work of a call is
// tagged with a CUPTI external correlation id pushed around the call that launches it: the
// call itself outside a group, the outermost ncclGroupEnd inside one (NCCL launches grouped
// ops there); ops of a group share the id.
//
// Threads: hooks run on the application's threads. The communicator table
// (g_recorder.comms(), recorder.h) is read without locks; inserts and removals
// (communicator creation/destruction, rare) take its mutex, which is never held across a
// call into NCCL or CUPTI. The real functions, id counters and per-thread group state are
// the recorder's too: this file has no state of its own.
#include <dlfcn.h>
#include <link.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "injector/injector.h"

#define OVERLAPPROF_EXPORT extern "C" __attribute__((visibility("default")))

namespace overlapprof::inject {
namespace {

// ---- Finding the real NCCL ----------------------------------------------------------

int FindNcclCallback(struct dl_phdr_info* info, size_t, void* data) {
  const char* name = info->dlpi_name;
  if (name && std::strstr(name, "libnccl.so")) {
    std::strncpy(static_cast<char*>(data), name, 4095);
    return 1;
  }
  return 0;
}

void* LoadedNcclHandle() {
  std::atomic<void*>& handle = g_recorder.nccl().library;
  void* h = handle.load(std::memory_order_acquire);
  if (h) return h;
  char path[4096] = {};
  dl_iterate_phdr(FindNcclCallback, path);
  if (!path[0]) return nullptr;
  h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);  // only an already-loaded NCCL, never a new load
  if (h) handle.store(h, std::memory_order_release);
  return h;
}

void* Resolve(const char* name) {
  char pname[128] = "p";
  std::strncat(pname, name, sizeof pname - 2);
  if (void* f = dlsym(RTLD_DEFAULT, pname)) return f;
  if (void* h = LoadedNcclHandle()) {
    if (void* f = dlsym(h, pname)) return f;
    if (void* f = dlsym(h, name)) return f;
  }
  return dlsym(RTLD_NEXT, name);
}

// Every NCCL function we call: its slot in the recorder's table (NcclFunctions).
enum class Fn : size_t {
  ncclAllReduce, ncclBroadcast, ncclBcast, ncclReduce, ncclAllGather, ncclReduceScatter, ncclAlltoAll,
  ncclGather, ncclScatter, ncclSend, ncclRecv, ncclGroupStart, ncclGroupEnd, ncclCommInitRank,
  ncclCommInitRankConfig, ncclCommInitRankScalable, ncclCommInitAll, ncclCommSplit, ncclCommShrink,
  ncclCommDestroy, ncclCommAbort, ncclCommCuDevice, ncclCommUserRank, ncclCommCount, ncclGroupSimulateEnd,
  ncclCommFinalize, ncclCommRevoke, ncclCommGetAsyncError, ncclCommRegister, ncclCommDeregister,
  ncclCommWindowRegister, ncclCommWindowDeregister, ncclGetVersion, kCount
};
static_assert(static_cast<size_t>(Fn::kCount) <= NcclFunctions::kMax);

void* const kMissing = reinterpret_cast<void*>(1);  // in a slot: the loaded NCCL lacks it

// Slow path of Real(): resolves `name` into its slot (a benign race: every thread resolves
// the same pointer, published with release). nullptr when the loaded NCCL lacks it (logged).
// "Missing" is cached only when an NCCL is loaded (its ncclGetVersion resolves): a call made
// before the host loaded NCCL (a dlopen later on) must not make the function missing for
// good. Until then every such call takes this path again (a dl_iterate_phdr; only a host
// calling NCCL without an NCCL pays it).
__attribute__((noinline)) void* ResolveInto(std::atomic<void*>& slot, const char* name) {
  void* f = slot.load(std::memory_order_acquire);
  if (f == kMissing) return nullptr;
  if (f) return f;
  f = Resolve(name);
  if (f) {
    slot.store(f, std::memory_order_release);
    return f;
  }
  if (Resolve("ncclGetVersion")) {
    slot.store(kMissing, std::memory_order_release);
    Log("%s is not in the loaded NCCL: the call returns ncclInvalidUsage", name);
  } else if (!g_recorder.nccl().logged_not_loaded.exchange(true, std::memory_order_relaxed)) {
    Log("%s called before any NCCL is loaded: the call returns ncclInvalidUsage (resolved again later)", name);
  }
  return nullptr;
}

// The real function: one acquire load (a plain load on x86) once resolved.
template <typename F>
__attribute__((always_inline)) inline F Real(Fn which, const char* name) {
  std::atomic<void*>& slot = g_recorder.nccl().fn[static_cast<size_t>(which)];
  void* f = slot.load(std::memory_order_acquire);
  if (__builtin_expect(f == nullptr || f == kMissing, 0)) f = ResolveInto(slot, name);
  return reinterpret_cast<F>(f);
}
#define OVERLAPPROF_REAL(NAME) Real<decltype(&NAME)>(Fn::NAME, #NAME)

ncclResult_t Missing() {
  Count(Stat::nccl_missing_function);
  return ncclInvalidUsage;
}

// ---- Communicators ------------------------------------------------------------------

const void* const kTombstone = reinterpret_cast<const void*>(uintptr_t{1});

size_t SlotOf(const void* c) {
  uint64_t x = reinterpret_cast<uintptr_t>(c);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x & (CommTable::kSlots - 1);
}

}  // namespace

CommInfo* CommTable::Find(const void* c) noexcept {
  if (!c) return nullptr;
  size_t i = SlotOf(c);
  for (size_t n = 0; n < kSlots; ++n, i = (i + 1) & (kSlots - 1)) {
    const void* k = slots_[i].key.load(std::memory_order_acquire);
    if (k == c) return slots_[i].info.load(std::memory_order_acquire);
    if (k == nullptr) return nullptr;
  }
  return nullptr;
}

CommInfo* CommTable::Add(const void* c, uint64_t id, int rank, int nranks, int device, bool nonblocking) noexcept {
  auto* info = new (std::nothrow) CommInfo();
  if (!info) return nullptr;
  info->id = id;
  info->rank.store(rank, std::memory_order_relaxed);
  info->nranks.store(nranks, std::memory_order_relaxed);
  info->device.store(device, std::memory_order_relaxed);
  info->nonblocking = nonblocking;
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = SlotOf(c);
  for (size_t n = 0; n < kSlots; ++n, i = (i + 1) & (kSlots - 1)) {
    const void* k = slots_[i].key.load(std::memory_order_relaxed);
    if (k == nullptr || k == kTombstone || k == c) {
      slots_[i].info.store(info, std::memory_order_release);
      slots_[i].key.store(c, std::memory_order_release);
      return info;
    }
  }
  return info;  // table full: ops on it are recorded without communicator identity
}

void CommTable::Remove(const void* c) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = SlotOf(c);
  for (size_t n = 0; n < kSlots; ++n, i = (i + 1) & (kSlots - 1)) {
    const void* k = slots_[i].key.load(std::memory_order_relaxed);
    if (k == c) {
      slots_[i].key.store(kTombstone, std::memory_order_release);
      return;
    }
    if (k == nullptr) return;
  }
}

namespace {

CommInfo* FindComm(ncclComm_t c) { return g_recorder.comms().Find(c); }

uint64_t Fnv(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

// The communicator's rank, size and device as NCCL reports them; false when any query
// fails (a non-blocking communicator still initializing answers ncclInProgress).
bool QueryComm(ncclComm_t c, int* rank, int* nranks, int* device) {
  auto fr = OVERLAPPROF_REAL(ncclCommUserRank);
  auto fc = OVERLAPPROF_REAL(ncclCommCount);
  auto fd = OVERLAPPROF_REAL(ncclCommCuDevice);
  int r = -1, n = -1, d = -1;
  bool ok = c && fr && fc && fd && fr(c, &r) == ncclSuccess && fc(c, &n) == ncclSuccess && fd(c, &d) == ncclSuccess;
  if (ok) *rank = r, *nranks = n, *device = d;
  return ok;
}

// `rank`/`nranks`: what the creating call said (-1: unknown, asked from NCCL). When NCCL
// cannot answer yet (non-blocking, in progress) the communicator is recorded pending and
// RefreshPending fills it in once it is ready.
void RecordInit(CommInitCall call, ncclComm_t c, uint64_t id, uint64_t parent, int rank, int nranks,
                bool nonblocking, int64_t t0) {
  int qr = -1, qn = -1, device = -1;
  bool known = QueryComm(c, &qr, &qn, &device);
  if (known) {
    if (rank < 0) rank = qr;
    if (nranks < 0) nranks = qn;
  }
  CommTable& table = g_recorder.comms();
  CommInfo* info = table.Add(c, id, rank, nranks, device, nonblocking);
  bool pending = !known && nonblocking;
  if (info) {
    info->derived = call == CommInitCall::kSplit || call == CommInitCall::kShrink;
    if (pending) {
      table.pending_count.fetch_add(1, std::memory_order_relaxed);
      info->pending.store(true, std::memory_order_release);
    }
  }
  HookRecord r;
  r.kind = RecKind::kCommInit;
  r.op = static_cast<uint8_t>(call);
  r.tid = Tid();
  r.t_enter = t0;
  r.t_exit = NowNs();
  r.comm_id = id;
  r.comm_rank = rank;
  r.comm_nranks = nranks;
  r.device = device;
  r.seq = parent;
  r.flags = static_cast<uint8_t>((nonblocking ? kFlagNonblocking : 0) | (pending ? kFlagPending : 0));
  // The loaded NCCL's version (meta nccl_version): a plain getter, and NCCL is loaded by now.
  int version = 0;
  if (auto fv = OVERLAPPROF_REAL(ncclGetVersion); fv && fv(&version) == ncclSuccess && version > 0)
    r.count = static_cast<uint64_t>(version);
  Push(r);
}

// A pending communicator that NCCL now answers for: its rank, size and device are stored
// and a kCommReady record tells the writer (once: the thread that clears `pending` pushes).
// Called from ncclCommGetAsyncError (once it reports ready) and before an op on it. Holds
// no lock; the queries are NCCL calls.
__attribute__((noinline)) void RefreshPending(ncclComm_t c, CommInfo* info) {
  int rank = -1, nranks = -1, device = -1;
  if (!QueryComm(c, &rank, &nranks, &device)) return;
  bool expected = true;
  if (!info->pending.compare_exchange_strong(expected, false, std::memory_order_acq_rel)) return;
  info->rank.store(rank, std::memory_order_relaxed);
  info->nranks.store(nranks, std::memory_order_relaxed);
  info->device.store(device, std::memory_order_relaxed);
  g_recorder.comms().pending_count.fetch_sub(1, std::memory_order_relaxed);
  HookRecord r;
  r.kind = RecKind::kCommReady;
  r.tid = Tid();
  r.t_enter = r.t_exit = NowNs();
  r.comm_id = info->id;
  r.comm_rank = rank;
  r.comm_nranks = nranks;
  r.device = device;
  Push(r);
}

// Names the communicator being created for NCCL's profiler plugin init that NCCL calls inside
// the creating call (nccl_plugin.cc takes t_thread.creating_comm_id), for the call's extent.
class CreatingComm {
 public:
  explicit CreatingComm(uint64_t id) { t_thread.creating_comm_id = id; }
  ~CreatingComm() { t_thread.creating_comm_id = 0; }
  CreatingComm(const CreatingComm&) = delete;
  CreatingComm& operator=(const CreatingComm&) = delete;
};

bool IsNonblocking(const ncclConfig_t* config) {
  // NCCL_CONFIG_UNDEF_INT means "default" (blocking).
  return config && config->blocking == 0;
}

// ---- Groups and launch ids -------------------------------------------------------------

// One collective or point-to-point call: fills the record, tags its launch, pushes it.
class OpScope {
 public:
  OpScope(Collective op, ncclComm_t comm, size_t count, ncclDataType_t dt, int root_peer, cudaStream_t stream) {
    r_.kind = RecKind::kCommOp;
    r_.op = static_cast<uint8_t>(op);
    r_.datatype = static_cast<int8_t>(dt);
    r_.count = count;
    r_.root_peer = root_peer;
    r_.stream = reinterpret_cast<uintptr_t>(stream);
    r_.tid = Tid();
    if (CommInfo* info = FindComm(comm)) {
      if (__builtin_expect(info->pending.load(std::memory_order_relaxed), 0)) RefreshPending(comm, info);
      r_.comm_id = info->id;
      r_.comm_rank = info->rank.load(std::memory_order_relaxed);
      r_.comm_nranks = info->nranks.load(std::memory_order_relaxed);
      r_.device = info->device.load(std::memory_order_relaxed);
      r_.seq = info->seq.fetch_add(1, std::memory_order_relaxed);
    }
    if (t_thread.group_depth > 0) {
      r_.flags |= kFlagInGroup;
      r_.launch_id = t_thread.group_launch_id;
    } else {
      r_.launch_id = g_recorder.NextLaunchId();
      CuptiPushExternalId(r_.launch_id);
      pushed_ = true;
    }
    r_.t_enter = NowNs();
  }
  void Done(ncclResult_t res) {
    r_.t_exit = NowNs();
    if (pushed_) CuptiPopExternalId();
    r_.result = res;
    Push(r_);
  }

 private:
  HookRecord r_;
  bool pushed_ = false;
};

}  // namespace
}  // namespace overlapprof::inject

using namespace overlapprof::inject;

// ---- Collectives and point-to-point ---------------------------------------------------

#define OVERLAPPROF_OP_HOOK(NAME, CODE, PARAMS, ARGS, COUNT, DTYPE, ROOT, COMM, STREAM) \
  OVERLAPPROF_EXPORT ncclResult_t NAME PARAMS {                                          \
    auto fn = OVERLAPPROF_REAL(NAME);                                                    \
    if (!fn) return Missing();                                                           \
    if (!g_recorder.RecordingOp() || t_thread.op_depth > 0) return fn ARGS;              \
    OpScope scope(Collective::CODE, COMM, COUNT, DTYPE, ROOT, STREAM);                   \
    ++t_thread.op_depth;                                                                 \
    ncclResult_t res = fn ARGS;                                                          \
    --t_thread.op_depth;                                                                 \
    scope.Done(res);                                                                     \
    return res;                                                                          \
  }

OVERLAPPROF_OP_HOOK(ncclAllReduce, kAllReduce,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                     ncclComm_t comm, cudaStream_t stream),
                    (sendbuff, recvbuff, count, datatype, op, comm, stream), count, datatype, -1, comm, stream)
OVERLAPPROF_OP_HOOK(ncclBroadcast, kBroadcast,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream),
                    (sendbuff, recvbuff, count, datatype, root, comm, stream), count, datatype, root, comm, stream)
OVERLAPPROF_OP_HOOK(ncclBcast, kBroadcast,
                    (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                     cudaStream_t stream),
                    (buff, count, datatype, root, comm, stream), count, datatype, root, comm, stream)
OVERLAPPROF_OP_HOOK(ncclReduce, kReduce,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                     int root, ncclComm_t comm, cudaStream_t stream),
                    (sendbuff, recvbuff, count, datatype, op, root, comm, stream), count, datatype, root, comm,
                    stream)
// AllGather's count is per rank (sendcount); ReduceScatter's is per rank (recvcount). The
// record keeps NCCL's argument as it was passed.
OVERLAPPROF_OP_HOOK(ncclAllGather, kAllGather,
                    (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                     ncclComm_t comm, cudaStream_t stream),
                    (sendbuff, recvbuff, sendcount, datatype, comm, stream), sendcount, datatype, -1, comm, stream)
OVERLAPPROF_OP_HOOK(ncclReduceScatter, kReduceScatter,
                    (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                     ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
                    (sendbuff, recvbuff, recvcount, datatype, op, comm, stream), recvcount, datatype, -1, comm,
                    stream)
OVERLAPPROF_OP_HOOK(ncclAlltoAll, kAllToAll,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                     cudaStream_t stream),
                    (sendbuff, recvbuff, count, datatype, comm, stream), count, datatype, -1, comm, stream)
OVERLAPPROF_OP_HOOK(ncclGather, kGather,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream),
                    (sendbuff, recvbuff, count, datatype, root, comm, stream), count, datatype, root, comm, stream)
OVERLAPPROF_OP_HOOK(ncclScatter, kScatter,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream),
                    (sendbuff, recvbuff, count, datatype, root, comm, stream), count, datatype, root, comm, stream)
OVERLAPPROF_OP_HOOK(ncclSend, kSend,
                    (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                     cudaStream_t stream),
                    (sendbuff, count, datatype, peer, comm, stream), count, datatype, peer, comm, stream)
OVERLAPPROF_OP_HOOK(ncclRecv, kRecv,
                    (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                     cudaStream_t stream),
                    (recvbuff, count, datatype, peer, comm, stream), count, datatype, peer, comm, stream)

// ---- Groups ---------------------------------------------------------------------------

OVERLAPPROF_EXPORT ncclResult_t ncclGroupStart() {
  auto fn = OVERLAPPROF_REAL(ncclGroupStart);
  if (!fn) return Missing();
  // Inside a recorded op (NCCL building it from a group of its own) the op's launch id stays.
  if (Recording() && t_thread.op_depth == 0 && t_thread.group_depth++ == 0)
    t_thread.group_launch_id = g_recorder.NextLaunchId();
  return fn();
}

OVERLAPPROF_EXPORT ncclResult_t ncclGroupEnd() {
  auto fn = OVERLAPPROF_REAL(ncclGroupEnd);
  if (!fn) return Missing();
  if (t_thread.group_depth <= 0 || !Recording() || t_thread.op_depth > 0) return fn();
  if (t_thread.group_depth > 1) {
    --t_thread.group_depth;
    return fn();
  }
  // The outermost end launches every op of the group: tag that launch.
  CuptiPushExternalId(t_thread.group_launch_id);
  ncclResult_t res = fn();
  CuptiPopExternalId();
  t_thread.group_depth = 0;
  return res;
}

// A simulated group (NCCL 2.24+) launches nothing: no external id around it, and the
// writer drops the group's ops (kGroupSimulated), which never ran.
OVERLAPPROF_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  auto fn = OVERLAPPROF_REAL(ncclGroupSimulateEnd);
  if (!fn) return Missing();
  if (t_thread.group_depth <= 0 || !Recording()) return fn(simInfo);
  if (t_thread.group_depth > 1) {
    --t_thread.group_depth;
    return fn(simInfo);
  }
  int64_t t0 = NowNs();
  ncclResult_t res = fn(simInfo);
  t_thread.group_depth = 0;
  HookRecord r;
  r.kind = RecKind::kGroupSimulated;
  r.tid = Tid();
  r.t_enter = t0;
  r.t_exit = NowNs();
  r.launch_id = t_thread.group_launch_id;
  r.result = res;
  Push(r);
  return res;
}

// ---- Communicator creation and destruction --------------------------------------------

OVERLAPPROF_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  auto fn = OVERLAPPROF_REAL(ncclCommInitRank);
  if (!fn) return Missing();
  if (!Recording()) return fn(comm, nranks, commId, rank);
  int64_t t0 = NowNs();
  const uint64_t id = Fnv(&commId, sizeof commId);
  ncclResult_t res;
  {
    CreatingComm creating(id);
    res = fn(comm, nranks, commId, rank);
  }
  if ((res == ncclSuccess || res == ncclInProgress) && comm && *comm)
    RecordInit(CommInitCall::kInitRank, *comm, id, 0, rank, nranks, false, t0);
  return res;
}

OVERLAPPROF_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                       ncclConfig_t* config) {
  auto fn = OVERLAPPROF_REAL(ncclCommInitRankConfig);
  if (!fn) return Missing();
  if (!Recording()) return fn(comm, nranks, commId, rank, config);
  int64_t t0 = NowNs();
  const uint64_t id = Fnv(&commId, sizeof commId);
  ncclResult_t res;
  {
    CreatingComm creating(id);
    res = fn(comm, nranks, commId, rank, config);
  }
  if ((res == ncclSuccess || res == ncclInProgress) && comm && *comm)
    RecordInit(CommInitCall::kInitRankConfig, *comm, id, 0, rank, nranks, IsNonblocking(config), t0);
  return res;
}

OVERLAPPROF_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                         ncclUniqueId* commIds, ncclConfig_t* config) {
  auto fn = OVERLAPPROF_REAL(ncclCommInitRankScalable);
  if (!fn) return Missing();
  if (!Recording()) return fn(newcomm, nranks, myrank, nId, commIds, config);
  int64_t t0 = NowNs();
  const uint64_t id = commIds && nId > 0 ? Fnv(commIds, sizeof(ncclUniqueId) * nId) : 0;
  ncclResult_t res;
  {
    CreatingComm creating(id);
    res = fn(newcomm, nranks, myrank, nId, commIds, config);
  }
  if ((res == ncclSuccess || res == ncclInProgress) && newcomm && *newcomm && commIds && nId > 0)
    RecordInit(CommInitCall::kInitRankScalable, *newcomm, id, 0, myrank, nranks, IsNonblocking(config), t0);
  return res;
}

OVERLAPPROF_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  auto fn = OVERLAPPROF_REAL(ncclCommInitAll);
  if (!fn) return Missing();
  if (!Recording()) return fn(comms, ndev, devlist);
  int64_t t0 = NowNs();
  // Single-process communicators: an id unique to this process and call.
  uint64_t key[3] = {static_cast<uint64_t>(getpid()), g_recorder.NextInitAllCall(), 0x696e6974616c6cULL};
  const uint64_t id = Fnv(key, sizeof key);
  ncclResult_t res;
  {
    CreatingComm creating(id);
    res = fn(comms, ndev, devlist);
  }
  if (res == ncclSuccess && comms && ndev > 0) {
    for (int i = 0; i < ndev; ++i)
      if (comms[i]) RecordInit(CommInitCall::kInitAll, comms[i], id, 0, i, ndev, false, t0);
  }
  return res;
}

OVERLAPPROF_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                              ncclConfig_t* config) {
  auto fn = OVERLAPPROF_REAL(ncclCommSplit);
  if (!fn) return Missing();
  if (!Recording()) return fn(comm, color, key, newcomm, config);
  int64_t t0 = NowNs();
  CommInfo* parent = FindComm(comm);
  // Every rank of the parent calls Split collectively, in the same order: (parent id, split
  // index, color) names the child identically on the ranks that share it.
  uint64_t split_index = parent ? parent->splits.fetch_add(1) : 0;
  uint64_t k[3] = {parent ? parent->id : 0, split_index, static_cast<uint64_t>(static_cast<int64_t>(color))};
  const uint64_t id = Fnv(k, sizeof k);
  ncclResult_t res;
  {
    CreatingComm creating(id);
    res = fn(comm, color, key, newcomm, config);
  }
  if ((res == ncclSuccess || res == ncclInProgress) && newcomm && *newcomm) {
    RecordInit(CommInitCall::kSplit, *newcomm, id, parent ? parent->id : 0, -1, -1,
               IsNonblocking(config) || (parent && parent->nonblocking), t0);
  }
  return res;
}

OVERLAPPROF_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                               ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  auto fn = OVERLAPPROF_REAL(ncclCommShrink);
  if (!fn) return Missing();
  if (!Recording()) return fn(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  int64_t t0 = NowNs();
  CommInfo* parent = FindComm(comm);
  uint64_t split_index = parent ? parent->splits.fetch_add(1) : 0;
  uint64_t k[3] = {parent ? parent->id : 0, split_index, 0x7368726e6bULL};
  const uint64_t id = Fnv(k, sizeof k);
  ncclResult_t res;
  {
    CreatingComm creating(id);
    res = fn(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  }
  if ((res == ncclSuccess || res == ncclInProgress) && newcomm && *newcomm) {
    RecordInit(CommInitCall::kShrink, *newcomm, id, parent ? parent->id : 0, -1, -1,
               IsNonblocking(config) || (parent && parent->nonblocking), t0);
  }
  return res;
}

namespace {
// The end of a communicator's life for our bookkeeping: Destroy, Abort, Finalize (after
// which only Destroy is allowed) and Revoke (after which only Destroy/Abort/Shrink are).
// The first of them removes it from the table and records its end; a later one (Destroy
// after Finalize) finds nothing and records an end without identity, which the writer
// ignores.
template <typename Call>
ncclResult_t EndComm(ncclComm_t comm, Call call) {
  if (!Recording()) return call();
  CommInfo* info = FindComm(comm);
  HookRecord r;
  r.kind = RecKind::kCommDestroy;
  r.tid = Tid();
  r.t_enter = NowNs();
  ncclResult_t res = call();
  r.t_exit = NowNs();
  r.result = res;
  if (info) {
    r.comm_id = info->id;
    r.comm_rank = info->rank.load(std::memory_order_relaxed);
    r.comm_nranks = info->nranks.load(std::memory_order_relaxed);
    if (info->pending.exchange(false, std::memory_order_acq_rel))
      g_recorder.comms().pending_count.fetch_sub(1, std::memory_order_relaxed);
    g_recorder.comms().Remove(comm);
  }
  Push(r);
  return res;
}
}  // namespace

OVERLAPPROF_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  auto fn = OVERLAPPROF_REAL(ncclCommDestroy);
  if (!fn) return Missing();
  return EndComm(comm, [&] { return fn(comm); });
}

OVERLAPPROF_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  auto fn = OVERLAPPROF_REAL(ncclCommAbort);
  if (!fn) return Missing();
  return EndComm(comm, [&] { return fn(comm); });
}

// NCCL 2.18+ (Finalize, older) and 2.28+ (Revoke); a loaded NCCL without them answers
// ncclInvalidUsage as for any missing function.
OVERLAPPROF_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  auto fn = OVERLAPPROF_REAL(ncclCommFinalize);
  if (!fn) return Missing();
  return EndComm(comm, [&] { return fn(comm); });
}

OVERLAPPROF_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  auto fn = OVERLAPPROF_REAL(ncclCommRevoke);
  if (!fn) return Missing();
  return EndComm(comm, [&] { return fn(comm, revokeFlags); });
}

namespace {
// Buffer registration (NCCL 2.19+) and windows (2.27+; NCCL_WIN_COLL_SYMMETRIC windows are what
// symmetric-memory kernels run on): passed through unchanged, and a record per call so the
// communicator's entry says how many buffers and windows (and bytes) it had registered.
template <typename Call>
ncclResult_t Registration(RegisterCall what, ncclComm_t comm, size_t bytes, int win_flags, Call call) {
  if (!Recording()) return call();
  HookRecord r;
  r.kind = RecKind::kBufferRegister;
  r.op = static_cast<uint8_t>(what);
  r.tid = Tid();
  r.t_enter = NowNs();
  ncclResult_t res = call();
  r.t_exit = NowNs();
  r.result = res;
  r.count = bytes;
  r.flags = static_cast<uint8_t>(win_flags);
  if (CommInfo* info = FindComm(comm)) r.comm_id = info->id;
  Push(r);
  return res;
}
}  // namespace

OVERLAPPROF_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  auto fn = OVERLAPPROF_REAL(ncclCommRegister);
  if (!fn) return Missing();
  return Registration(RegisterCall::kBuffer, comm, size, 0, [&] { return fn(comm, buff, size, handle); });
}

OVERLAPPROF_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  auto fn = OVERLAPPROF_REAL(ncclCommDeregister);
  if (!fn) return Missing();
  return Registration(RegisterCall::kBufferDeregister, comm, 0, 0, [&] { return fn(comm, handle); });
}

OVERLAPPROF_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                       int winFlags) {
  auto fn = OVERLAPPROF_REAL(ncclCommWindowRegister);
  if (!fn) return Missing();
  return Registration(RegisterCall::kWindow, comm, size, winFlags,
                      [&] { return fn(comm, buff, size, win, winFlags); });
}

OVERLAPPROF_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  auto fn = OVERLAPPROF_REAL(ncclCommWindowDeregister);
  if (!fn) return Missing();
  return Registration(RegisterCall::kWindowDeregister, comm, 0, 0, [&] { return fn(comm, win); });
}

// Polled by hosts until a non-blocking communicator is ready: then a pending one gets its
// rank, size and device. Passed through at once while no communicator is pending.
OVERLAPPROF_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  auto fn = OVERLAPPROF_REAL(ncclCommGetAsyncError);
  if (!fn) return Missing();
  if (!Recording()) return fn(comm, asyncError);
  ncclResult_t res = fn(comm, asyncError);
  if (res == ncclSuccess && asyncError && *asyncError == ncclSuccess &&
      g_recorder.comms().pending_count.load(std::memory_order_relaxed) > 0) {
    if (CommInfo* info = FindComm(comm); info && info->pending.load(std::memory_order_acquire))
      RefreshPending(comm, info);
  }
  return res;
}
