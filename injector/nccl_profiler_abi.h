#pragma once
// NCCL's profiler plugin ABI, the versions overlapprof exports (injector/nccl_plugin.cc):
// our own declarations, written from NCCL's sources (NCCL ships no profiler header with its
// installed nccl.h). Each struct names the NCCL file it matches; the static_asserts below pin
// every size and offset we read or write on x86-64/aarch64 (LP64), so a mistake fails the
// build instead of a user's job.
//
// Sources read (github.com/NVIDIA/nccl):
//  - v4: ext-profiler/example/nccl/profiler_v4.h (commit 56a409d2) and
//        src/include/plugin/profiler/profiler_v4.h (commit 276b2fe4), identical layouts;
//        NCCL's loader src/plugin/profiler/profiler_v4.cc (commit 081eafaf) shows the v4 init
//        argument order (mask before commName, commHash after) and which fields it copies.
//        NCCL 2.26 and later.
//  - v5: ext-profiler/example/nccl/profiler_v5.h (commit 56a409d2) and
//        src/include/plugin/profiler/profiler_v5.h (commit 0e3a403d): same layout (the latter
//        has `bool graphCaptured` in groupApi where the former has `int`; offsets of
//        everything after it are the same, and we do not read it). NCCL 2.27/2.28.
//  - v6: src/include/plugin/profiler/profiler_v6.h (commits e5d9a7ae and 07cbae81; the later
//        one adds a `kernelStep` union member of 32 bytes, which changes neither the union's
//        size nor any offset). NCCL 2.29 (CE collectives).
//  - event type bits and event states: src/include/plugin/nccl_profiler.h (commits 51c58fd6
//    and 88980683).
//  - v7 is NOT declared or exported: two incompatible `ncclProfilerEventDescr_v7_t` exist in
//    the sources (NVIDIA/nccl 88980683: uint64 userTag in coll/p2p/collApi/p2pApi/ceColl and a
//    kernelPhase member, union of 112 bytes; a fork's v7 with a `userTag { const char* tag; }`
//    member and none of those), and NVIDIA's own file exists in a second version we could not
//    read. A v7 NCCL falls back to our v6 (NCCL probes v7, then v6, v5, v4).
#include <nccl.h>  // ncclResult_t

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

namespace overlapprof::inject::ncclprof {

// Event type bits (eActivationMask and eDescr->type). nccl_profiler.h.
enum : uint64_t {
  kGroup = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kProxyOp = 1u << 3,
  kProxyStep = 1u << 4,
  kProxyCtrl = 1u << 5,
  kKernelCh = 1u << 6,
  kNetPlugin = 1u << 7,
  kGroupApi = 1u << 8,      // v5+
  kCollApi = 1u << 9,       // v5+
  kP2pApi = 1u << 10,       // v5+
  kKernelLaunch = 1u << 11, // v5+
  kCeColl = 1u << 12,       // v6+
  kCeSync = 1u << 13,       // v6+
  kCeBatch = 1u << 14,      // v6+
};

// ncclProfilerEventState_t values we act on (one enum for every version; nccl_profiler.h).
enum EventState : int {
  kKernelChStop = 22,
};

// ncclDebugLogger_t (NCCL's debug.h): unused by us, passed by NCCL.
using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// ---- v4: profiler_v4.h ---------------------------------------------------------------------
struct EventDescrV4 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;  // NCCL's own v4 adapter (profiler_v4.cc) never sets it: not read
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;  // start, GPU %globaltimer ns
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

union EventStateArgsV4 {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;  // stop, GPU %globaltimer ns (state kKernelChStop)
  } kernelCh;
};

struct ProfilerV4 {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, DebugLogger logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, EventDescrV4* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, int eState, EventStateArgsV4* eStateArgs);
  ncclResult_t (*finalize)(void* context);
};

// ---- v5: profiler_v5.h ---------------------------------------------------------------------
// v5's coll/p2p add parentGroup (the Group event; parentObj is then the CollApi/P2pApi event).
struct EventDescrV5 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      int graphCaptured;  // `bool` in src/include's copy: same offsets either way
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

using EventStateArgsV5 = EventStateArgsV4;  // same union (v5 adds members of the same size)

struct ProfilerV5 {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, DebugLogger logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, EventDescrV5* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, int eState, EventStateArgsV5* eStateArgs);
  ncclResult_t (*finalize)(void* context);
};

// ---- v6: profiler_v6.h ---------------------------------------------------------------------
// The v5 members at the same offsets, plus copy-engine (CE) collectives. CE events carry no
// GPU timestamps and no state updates ("plugin manages all timing internally").
struct EventDescrV6 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
};

using EventStateArgsV6 = EventStateArgsV5;

struct ProfilerV6 {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, DebugLogger logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, EventDescrV6* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, int eState, EventStateArgsV6* eStateArgs);
  ncclResult_t (*finalize)(void* context);
};

// ---- Layout checks (LP64). Offsets are those the C headers give. ---------------------------
static_assert(sizeof(void*) == 8 && sizeof(size_t) == 8 && sizeof(int) == 4 && sizeof(pid_t) == 4, "LP64 only");
static_assert(sizeof(ncclResult_t) == sizeof(int), "ncclResult_t is a C enum");
// v4
static_assert(offsetof(EventDescrV4, parentObj) == 8 && offsetof(EventDescrV4, rank) == 16);
static_assert(offsetof(EventDescrV4, coll) == 24);
static_assert(offsetof(EventDescrV4, coll.count) == 24 + 32 && offsetof(EventDescrV4, coll.root) == 24 + 40);
static_assert(offsetof(EventDescrV4, coll.datatype) == 24 + 48 && offsetof(EventDescrV4, coll.nChannels) == 24 + 56);
static_assert(offsetof(EventDescrV4, coll.algo) == 24 + 64 && offsetof(EventDescrV4, coll.proto) == 24 + 72);
static_assert(offsetof(EventDescrV4, p2p.count) == 24 + 24 && offsetof(EventDescrV4, p2p.peer) == 24 + 32);
static_assert(offsetof(EventDescrV4, kernelCh.channelId) == 24 && offsetof(EventDescrV4, kernelCh.pTimer) == 24 + 8);
static_assert(offsetof(EventDescrV4, proxyOp.channelId) == 24 + 4 && offsetof(EventDescrV4, proxyOp.isSend) == 24 + 20);
static_assert(sizeof(EventDescrV4) == 104);
static_assert(sizeof(EventStateArgsV4) == 8 && offsetof(EventStateArgsV4, kernelCh.pTimer) == 0);
static_assert(offsetof(ProfilerV4, init) == 8 && offsetof(ProfilerV4, finalize) == 40 && sizeof(ProfilerV4) == 48);
// v5
static_assert(offsetof(EventDescrV5, parentObj) == 8 && offsetof(EventDescrV5, rank) == 16);
static_assert(offsetof(EventDescrV5, coll) == 24 && offsetof(EventDescrV5, coll.nChannels) == 24 + 56);
static_assert(offsetof(EventDescrV5, coll.algo) == 24 + 64 && offsetof(EventDescrV5, coll.parentGroup) == 24 + 80);
static_assert(offsetof(EventDescrV5, p2p.peer) == 24 + 32 && offsetof(EventDescrV5, p2p.nChannels) == 24 + 36);
static_assert(offsetof(EventDescrV5, p2p.parentGroup) == 24 + 40);
static_assert(offsetof(EventDescrV5, kernelCh.pTimer) == 24 + 8 && offsetof(EventDescrV5, collApi.graphCaptured) == 24 + 40);
static_assert(sizeof(EventDescrV5) == 112);
static_assert(offsetof(ProfilerV5, init) == 8 && offsetof(ProfilerV5, finalize) == 40 && sizeof(ProfilerV5) == 48);
// v6: the v5 members unchanged, ceColl after them
static_assert(offsetof(EventDescrV6, coll.parentGroup) == offsetof(EventDescrV5, coll.parentGroup));
static_assert(offsetof(EventDescrV6, p2p.parentGroup) == offsetof(EventDescrV5, p2p.parentGroup));
static_assert(offsetof(EventDescrV6, kernelCh.pTimer) == offsetof(EventDescrV5, kernelCh.pTimer));
static_assert(offsetof(EventDescrV6, ceColl.count) == 24 + 32 && offsetof(EventDescrV6, ceColl.root) == 24 + 40);
static_assert(offsetof(EventDescrV6, ceColl.datatype) == 24 + 48 && offsetof(EventDescrV6, ceColl.stream) == 24 + 80);
static_assert(sizeof(EventDescrV6) == 112);
static_assert(sizeof(ProfilerV6) == 48);

}  // namespace overlapprof::inject::ncclprof
