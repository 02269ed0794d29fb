#pragma once
// What the in-process hooks hand to the writer thread through the ring (ring.h). One
// fixed-size, trivially copyable record per event: a header whose fields mean the same for
// every kind, and one payload struct per kind in a union (as Tracy's QueueItem). Strings are
// copied inline (truncated) so a hook never allocates. Times are CLOCK_REALTIME nanoseconds
// (the clock CUPTI uses on Linux, so host and GPU records share one timeline), except where a
// payload says otherwise.
#include <cstdint>

#include "src/trace/collective.h"

namespace overlapprof::inject {

// The collective of kCommOp and kPluginOp records: src/trace/collective.def.
using ::overlapprof::Collective;

// Which payload a record carries.
enum class RecKind : uint8_t {
  kCommOp = 1,       // a collective or point-to-point call (comm_op)
  kCommInit = 2,     // communicator created (InitRank, InitRankConfig, InitAll, Split, ...) (comm_init)
  kCommDestroy = 3,  // ncclCommDestroy / ncclCommAbort (header only)
  kRangePush = 4,    // NVTX push (per thread) (range: name)
  kRangePop = 5,     // NVTX pop (per thread) (header only)
  kRangeStart = 6,   // NVTX start/end range (by id, any thread) (range: id and name)
  kRangeEnd = 7,     // (range: id)
  kMark = 8,         // NVTX instantaneous marker (range: name)
  kCommReady = 9,    // a non-blocking communicator became ready: its rank, size, device (same comm_id) (header only)
  kGroupSimulated = 10,  // ncclGroupSimulateEnd ended a group: its ops never ran (group)
  kBufferRegister = 11,  // ncclCommRegister / WindowRegister and their deregistrations (reg)
  kPluginComm = 12,  // NCCL's profiler plugin initialized a communicator (nccl_plugin.cc) (plugin_comm)
  kPluginOp = 13,    // one operation timed by NCCL's profiler plugin (plugin_op)
};

inline constexpr int kInlineNameBytes = 48;

// kCommOp.
struct CommOpPayload {
  Collective op;
  int8_t datatype;      // ncclDataType_t, -1 unknown
  int32_t root_peer;    // root of rooted collectives, peer of send/recv; -1 otherwise
  uint64_t seq;         // per-communicator sequence number
  uint64_t count;       // elements (NCCL's count argument)
  uint64_t stream;      // the cudaStream_t value passed to NCCL
  uint64_t launch_id;   // external correlation id pushed (CUPTI) around the launching call
};

enum class CommInitCall : uint8_t {
  kInitRank = 1, kInitRankConfig, kInitAll, kSplit, kInitRankScalable, kShrink,
};

// kCommInit. The header's comm_rank/comm_nranks/device are unknown (-1) while kFlagPending.
struct CommInitPayload {
  CommInitCall call;
  uint64_t parent;        // the communicator it was split or shrunk from (its comm_id), 0 none
  uint64_t nccl_version;  // the loaded NCCL's version code, 0 unknown
  char name[kInlineNameBytes];  // commName (truncated, NUL-terminated)
};

// kRangePush, kRangeStart, kRangeEnd, kMark.
struct RangePayload {
  uint64_t id;  // kRangeStart/kRangeEnd: the NVTX range id; 0 otherwise
  char name[kInlineNameBytes];  // the NVTX message (truncated, NUL-terminated); "" for kRangeEnd
};

// kGroupSimulated.
struct GroupPayload {
  uint64_t launch_id;  // the group's (as its ops' CommOpPayload::launch_id)
};

// kBufferRegister. The header's result is what NCCL returned.
enum class RegisterCall : uint8_t { kBuffer = 1, kBufferDeregister, kWindow, kWindowDeregister };
struct RegisterPayload {
  RegisterCall call;
  uint8_t window_flags;  // the window flags (NCCL_WIN_COLL_SYMMETRIC) for kWindow
  uint64_t bytes;        // the registered bytes (0 for a deregistration)
};

// kPluginComm. The header's comm_id is ours (0 unknown), comm_rank/comm_nranks NCCL's.
struct PluginCommPayload {
  uint8_t abi_version;  // 4, 5, 6
  int32_t nnodes;
  uint64_t comm_hash;   // NCCL's commHash
  char name[kInlineNameBytes];  // commName (truncated, NUL-terminated)
};

// kPluginOp. The header's t_enter/t_exit are the op's GPU start and end (NCCL's %globaltimer
// ns: min channel start, max channel stop), host CLOCK_REALTIME for copy-engine ops (kCe);
// tid is the thread that started it; comm_id ours (0 unknown), comm_rank/comm_nranks NCCL's.
inline constexpr uint8_t kPluginFlagP2p = 1;         // a P2p event (send/recv)
inline constexpr uint8_t kPluginFlagCe = 2;          // a copy-engine collective: host times, no channels
inline constexpr uint8_t kPluginFlagIncomplete = 4;  // flushed before all its events completed
struct PluginOpPayload {
  Collective op;          // NCCL's function (kSendRecv, kOther for what it does not name)
  int8_t datatype;        // ncclDataType_t, -1 unknown
  uint8_t flags;          // kPluginFlag*
  uint8_t channels_expected;  // NCCL's nChannels (0: not given)
  int32_t root_peer;      // root, or peer of a p2p op; -1 otherwise
  uint64_t seq;           // NCCL's per-function sequence number (0 for p2p, which has none)
  uint64_t count;
  uint64_t comm_hash;     // NCCL's commHash
  uint64_t group_id;      // NCCL group event (one kernel plan): fused ops share it
  int64_t host_start_ns;  // CLOCK_REALTIME when NCCL started the op's event
  int64_t clock_sample;   // min over channels of (CLOCK_REALTIME at the KernelCh start event - its GPU start)
  char algo[12];          // NCCL's algorithm name, truncated
  char proto[8];          // protocol name, truncated
  uint8_t channels;       // KernelCh events completed
  uint8_t abi_version;    // 4, 5, 6
  uint32_t proxy_ops;     // ProxyOp events (OVERLAPPROF_NCCL_DETAIL=proxy)
  uint32_t proxy_steps;   // ProxyStep events
};

struct HookRecord {
  RecKind kind{};
  uint8_t flags = 0;     // kFlag* below
  int32_t tid = 0;       // kernel thread id of the calling thread
  int64_t t_enter = 0;   // ns
  int64_t t_exit = 0;    // ns
  uint64_t comm_id = 0;  // communicator identity (same on every rank of the communicator), 0 none
  int32_t comm_rank = -1;
  int32_t comm_nranks = -1;
  int32_t device = -1;
  int32_t result = 0;    // ncclResult_t the real call returned
  union {
    CommOpPayload comm_op;
    CommInitPayload comm_init;
    RangePayload range;
    GroupPayload group;
    RegisterPayload reg;
    PluginCommPayload plugin_comm;
    PluginOpPayload plugin_op = {};
  };
};

inline constexpr uint8_t kFlagInGroup = 1;      // issued inside ncclGroupStart/End
inline constexpr uint8_t kFlagNonblocking = 2;  // communicator created non-blocking
inline constexpr uint8_t kFlagTruncated = 4;    // name did not fit
inline constexpr uint8_t kFlagPending = 8;      // kCommInit: rank/size/device not known yet (kCommReady follows)

}  // namespace overlapprof::inject
