#pragma once
// What the in-process hooks hand to the writer thread through the ring (ring.h). One
// fixed-size, trivially copyable record per event; strings are copied inline (truncated)
// so a hook never allocates. Times are CLOCK_REALTIME nanoseconds (the clock CUPTI uses on
// Linux, so host and GPU records share one timeline).
#include <cstdint>

#include "src/trace/collective.h"

namespace overlapprof::inject {

// The collective of kCommOp and kPluginOp records (HookRecord::op): src/trace/collective.def.
using ::overlapprof::Collective;

enum class RecKind : uint8_t {
  kCommOp = 1,       // a collective or point-to-point call
  kCommInit = 2,     // communicator created (InitRank, InitRankConfig, InitAll, Split, ...)
  kCommDestroy = 3,  // ncclCommDestroy / ncclCommAbort
  kRangePush = 4,    // NVTX push (per thread)
  kRangePop = 5,     // NVTX pop (per thread)
  kRangeStart = 6,   // NVTX start/end range (by id, any thread)
  kRangeEnd = 7,
  kMark = 8,         // NVTX instantaneous marker
  kCommReady = 9,    // a non-blocking communicator became ready: its rank, size, device (same comm_id)
  kGroupSimulated = 10,  // ncclGroupSimulateEnd ended the group `launch_id`: its ops never ran
  kBufferRegister = 11,  // ncclCommRegister / WindowRegister and their deregistrations (op: RegisterCall)
  kPluginComm = 12,  // NCCL's profiler plugin initialized a communicator (nccl_plugin.cc)
  kPluginOp = 13,    // one operation timed by NCCL's profiler plugin (PluginOpExtra)
};

inline constexpr int kInlineNameBytes = 48;

// kPluginOp's fields beyond HookRecord's own (in the place of `name`). HookRecord's fields for
// kPluginOp: op = func (a Collective: NCCL's functions, kSendRecv, kOther), datatype, flags
// (kPluginFlag*), tid (the thread that started it), t_enter/t_exit = GPU start/end (NCCL's
// %globaltimer ns: min channel start, max channel stop; host CLOCK_REALTIME for CE ops),
// comm_id (ours, 0 unknown), comm_rank/comm_nranks, root_peer, seq (NCCL's per-function
// sequence number; 0 for p2p, which has none), count, stream = NCCL's commHash,
// launch_id = group id (ops of one NCCL group event, i.e. one kernel plan, share it).
// kPluginComm: comm_id (ours, 0 unknown), stream = commHash, comm_rank, comm_nranks,
// root_peer = nNodes, op = ABI version, name = commName.
struct PluginOpExtra {
  int64_t host_start_ns;  // CLOCK_REALTIME when NCCL started the op's event
  int64_t clock_sample;   // min over channels of (CLOCK_REALTIME at the KernelCh start event - its GPU start)
  char algo[12];          // NCCL's algorithm name, truncated
  char proto[8];          // protocol name, truncated
  uint8_t channels_expected;  // NCCL's nChannels (0: not given)
  uint8_t channels;           // KernelCh events completed
  uint8_t abi_version;        // 4, 5, 6
  uint8_t reserved;
  uint32_t proxy_ops;   // ProxyOp events (OVERLAPPROF_NCCL_DETAIL=proxy)
  uint32_t proxy_steps; // ProxyStep events
};
static_assert(sizeof(PluginOpExtra) == kInlineNameBytes);
inline constexpr uint8_t kPluginFlagP2p = 1;         // a P2p event (send/recv)
inline constexpr uint8_t kPluginFlagCe = 2;          // a copy-engine collective: host times, no channels
inline constexpr uint8_t kPluginFlagIncomplete = 4;  // flushed before all its events completed

struct HookRecord {
  RecKind kind{};
  uint8_t op = 0;        // Collective for kCommOp; creation call for kCommInit (CommInitCall)
  int8_t datatype = -1;  // ncclDataType_t, -1 unknown
  uint8_t flags = 0;     // kFlagInGroup, kFlagNonblocking, ...
  int32_t tid = 0;       // kernel thread id of the calling thread
  int64_t t_enter = 0;   // ns
  int64_t t_exit = 0;    // ns
  uint64_t comm_id = 0;  // communicator identity (same on every rank of the communicator)
  int32_t comm_rank = -1;
  int32_t comm_nranks = -1;
  int32_t device = -1;
  int32_t root_peer = -1;  // root of rooted collectives, peer of send/recv; -1 otherwise
  uint64_t seq = 0;        // per-communicator sequence number (kCommOp); parent id (kCommInit)
  uint64_t count = 0;      // elements (kCommOp); NCCL's version code, 0 unknown (kCommInit)
  uint64_t stream = 0;     // cudaStream_t value (kCommOp); NVTX range id (kRangeStart/End)
  uint64_t launch_id = 0;  // external correlation id pushed around the launching call
  int32_t result = 0;      // ncclResult_t the real call returned
  union {
    char name[kInlineNameBytes] = {};  // NVTX message, commName (truncated, NUL-terminated)
    PluginOpExtra plugin;              // kPluginOp
  };
};

inline constexpr uint8_t kFlagInGroup = 1;      // issued inside ncclGroupStart/End
inline constexpr uint8_t kFlagNonblocking = 2;  // communicator created non-blocking
inline constexpr uint8_t kFlagTruncated = 4;    // name did not fit
inline constexpr uint8_t kFlagPending = 8;      // kCommInit: rank/size/device not known yet (kCommReady follows)

// kBufferRegister's op. count: the registered bytes (0 for a deregistration); flags: the
// window flags (NCCL_WIN_COLL_SYMMETRIC) for kWindow; result: what NCCL returned.
enum class RegisterCall : uint8_t { kBuffer = 1, kBufferDeregister, kWindow, kWindowDeregister };

enum class CommInitCall : uint8_t {
  kInitRank = 1, kInitRankConfig, kInitAll, kSplit, kInitRankScalable, kShrink,
};

}  // namespace overlapprof::inject
