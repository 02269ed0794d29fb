#pragma once
// The in-memory model of one rank's trace: what importers produce, what the store
// writes and reads, and what analyzers consume. Units: every time is an integer number of
// nanoseconds on the trace's clock (RunMeta::clock_source); bytes are bytes.
//
// A RankTrace is built by one thread and then only read; it holds no locks.
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/common/file_key_map.h"
#include "src/common/stats.h"
#include "src/trace/collective.h"

namespace overlapprof {

// Kind of GPU activity (what the device executed).
enum class ActivityKind : uint8_t { kKernel = 1, kMemcpy = 2, kMemset = 3, kSync = 4 };
// What an activity counts as in the overlap engine (docs/classification.md).
enum class Category : uint8_t { kCompute = 0, kComm = 1, kMemory = 2, kOther = 3 };
// Kind of a host or GPU range.
enum class RangeKind : uint8_t {
  kStep = 1,           // an iteration marker (ProfilerStep#N, or a user-named NVTX range)
  kAnnotation = 2,     // a host-side user annotation / NVTX range
  kGpuAnnotation = 3,  // a range the profiler projected onto a GPU stream
};
// Where a communication op's metadata came from.
enum class CommSource : uint8_t {
  kNcclHook = 1,    // the injector's NCCL interposition (exact)
  kKinetoArgs = 2,  // NCCL metadata in a PyTorch-profiler kernel's args
  kKernelName = 3,  // inferred from the kernel name only
};
// Which link of the classification chain made an activity communication
// (docs/classification.md), in the order the chain tries them.
enum class CommRule : uint8_t {
  kIdentity = 1,     // an NCCL record (injector) or `Collective name` metadata
  kHostOp = 2,       // the host op that launched it (External id): nccl:*, c10d::*, symm_mem::*, ...
  kKernelName = 3,   // a kernel-name family (src/trace/classify.h kCommKernelFamilies)
  kPeerCopy = 4,     // a peer-to-peer memcpy (op Collective::kPeerCopy)
  kUserPattern = 5,  // --comm-kernel REGEX
  kCopyEngine = 6,   // a memcpy an NCCL call or a c10d op launched (copy-engine collectives, NCCL 2.29+)
};

std::string_view ActivityKindName(ActivityKind k);
std::string_view CategoryName(Category c);
std::string_view RangeKindName(RangeKind k);
std::string_view CommSourceName(CommSource s);
std::string_view CommRuleName(CommRule r);

inline constexpr uint32_t kNoIndex = 0xffffffffu;
// Every time in a trace lies in [0, kMaxTimeNs) (about the year 2116 as Unix-epoch ns), so
// differences and sums of two times never overflow int64. Importers and the store reader
// enforce it; records outside are counted (events_timestamp_out_of_range) or rejected.
inline constexpr int64_t kMaxTimeNs = int64_t{1} << 62;
inline bool TimeInRange(int64_t t) { return t >= 0 && t < kMaxTimeNs; }
inline constexpr int64_t kUnknown = -1;

// Interned strings. Ids are dense, stable for the life of the table; id 0 is "".
class StringTable {
 public:
  StringTable() { Intern(""); }
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;
  StringTable(StringTable&&) = default;
  StringTable& operator=(StringTable&&) = default;

  uint32_t Intern(std::string_view s);
  // Returns the id if `s` is already interned, else kNoIndex.
  uint32_t Find(std::string_view s) const;
  // (Both branches must be string_views: "cond ? std::string : \"\"" would make a temporary.)
  std::string_view Get(uint32_t id) const {
    return id < strings_.size() ? std::string_view(strings_[id]) : std::string_view();
  }
  size_t size() const { return strings_.size(); }

 private:
  std::deque<std::string> strings_;  // deque: elements never move, so the views stay valid
  std::unordered_map<std::string_view, uint32_t> index_;
};

struct Stream {
  int64_t device = kUnknown;
  int64_t native_id = kUnknown;  // the CUDA stream id as the source reports it
  std::string name;
};

struct Activity {
  int64_t start_ns = 0;
  int64_t end_ns = 0;  // >= start_ns
  int64_t correlation_id = kUnknown;
  // Host time of the API call that launched it (resolved through correlation_id when the
  // trace is written): what attributes GPU work to the iteration that issued it.
  int64_t launch_ns = kUnknown;
  int64_t bytes = kUnknown;     // memcpy/memset only
  uint32_t name_id = 0;         // StringTable id
  uint32_t stream = kNoIndex;   // index into RankTrace::streams
  uint32_t comm_op = kNoIndex;  // index into RankTrace::comm_ops
  ActivityKind kind = ActivityKind::kKernel;
  Category category = Category::kCompute;
  uint8_t copy_kind = 0;  // memcpy direction (CUPTI_ACTIVITY_MEMCPY_KIND_*), 0 unknown
};

struct CommOp {
  std::string communicator;  // communicator id (NCCL comm hash, or process-group name)
  int64_t comm_rank = kUnknown;
  int64_t comm_nranks = kUnknown;
  int64_t seq = kUnknown;  // per-communicator sequence number
  Collective op = Collective::kUnknown;  // the store's `op` column holds its name
  std::string datatype;
  int64_t count = kUnknown;  // elements (NCCL's count argument)
  int64_t bytes = kUnknown;  // count * sizeof(datatype)
  int64_t root_peer = kUnknown;
  uint32_t stream = kNoIndex;
  int64_t host_enter_ns = kUnknown;
  int64_t host_exit_ns = kUnknown;
  int64_t host_tid = kUnknown;
  std::string pg_desc;
  CommSource source = CommSource::kKernelName;
  // Which rule classified it. Not stored: a store reader derives it from `source` and `op`
  // (identity for hook/args, p2p_copy for peer copies, else kernel name).
  CommRule rule = CommRule::kKernelName;
  // Injector only: the external correlation id pushed (CUPTI) around the call that launched
  // this op's GPU work (the op itself, or the outermost ncclGroupEnd); ops of one group share
  // it. Links the op to its kernel through RankTrace::external_correlations.
  int64_t launch_id = kUnknown;
  int64_t stream_handle = kUnknown;  // the cudaStream_t value passed to NCCL (injector only)
};

// One operation timed by NCCL's own profiler plugin (injector/nccl_plugin.cc; store table
// nccl_profiler_op, schema 1.2). GPU times come from NCCL's kernel (%globaltimer, per
// channel: start = min, end = max) and are also given on the trace clock (start_ns/end_ns =
// raw + the rank's measured clock offset). Copy-engine ops carry host times only.
struct NcclPluginOp {
  std::string communicator;        // our communicator id (as CommOp::communicator); "" unknown
  int64_t nccl_comm_hash = kUnknown;  // NCCL's commHash (bit pattern as a signed integer)
  int64_t comm_rank = kUnknown;
  int64_t comm_nranks = kUnknown;
  Collective op = Collective::kUnknown;  // as CommOp::op; also kSendRecv, kOther
  int64_t nccl_seq = kUnknown;     // NCCL's per-function sequence number (collectives)
  std::string datatype;
  int64_t count = kUnknown;
  int64_t bytes = kUnknown;
  int64_t root_peer = kUnknown;
  std::string algorithm, protocol;
  int64_t channels_expected = kUnknown;  // NCCL's nChannels
  int64_t channels = 0;                  // KernelCh events seen complete
  int64_t gpu_start_raw = kUnknown;      // %globaltimer ns
  int64_t gpu_end_raw = kUnknown;
  int64_t start_ns = kUnknown;           // trace clock
  int64_t end_ns = kUnknown;
  int64_t host_start_ns = kUnknown;      // when NCCL started the op's event (trace clock)
  int64_t group_id = kUnknown;           // NCCL group event (one kernel plan): fused ops share it
  int64_t proxy_ops = 0, proxy_steps = 0;
  int64_t abi_version = kUnknown;        // 4, 5, 6
  int64_t flags = 0;                     // kP2p | kCopyEngine (host times) | kIncomplete (below)
  int64_t host_tid = kUnknown;
  // The NCCL call it was joined to (store column comm_op_id, set by `overlapprof run` after the
  // job: src/store/plugin_join.h): an index into RankTrace::comm_ops, kNoIndex when unjoined.
  uint32_t comm_op = kNoIndex;

  // GPU times on the trace clock (not a copy-engine op, both times known and ordered).
  bool HasGpuTimes() const {
    return (flags & kCopyEngine) == 0 && start_ns != kUnknown && end_ns != kUnknown && end_ns >= start_ns;
  }
  static constexpr int64_t kP2p = 1, kCopyEngine = 2, kIncomplete = 4;  // flags
};

// The rule of an op read back from a store, which does not keep it: identity for ops with
// NCCL metadata (hook or Kineto args), peer copy for Collective::kPeerCopy, else kernel name.
inline CommRule DeriveCommRule(const CommOp& c) {
  if (c.source != CommSource::kKernelName) return CommRule::kIdentity;
  return c.op == Collective::kPeerCopy ? CommRule::kPeerCopy : CommRule::kKernelName;
}

// A host API call (CUDA runtime/driver) that launched GPU work.
struct HostCall {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t correlation_id = kUnknown;
  int64_t tid = kUnknown;
  uint32_t name_id = 0;
};

struct Range {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t step = kUnknown;  // N of ProfilerStep#N for kStep
  int64_t tid = kUnknown;   // host thread, for host ranges
  uint32_t name_id = 0;
  uint32_t stream = kNoIndex;  // for kGpuAnnotation
  RangeKind kind = RangeKind::kAnnotation;
};

struct Device {
  int64_t id = kUnknown;
  std::string name;
  int64_t compute_major = kUnknown;
  int64_t compute_minor = kUnknown;
  int64_t total_memory = kUnknown;
  int64_t sm_count = kUnknown;
};

struct RunMeta {
  int64_t rank = kUnknown;  // global rank; kUnknown when the trace does not say
  int64_t world_size = kUnknown;
  int64_t local_rank = kUnknown;
  int64_t pid = kUnknown;
  std::string host;
  std::string clock_source;   // e.g. "CLOCK_REALTIME (CUPTI)", "kineto"
  std::string tool_version;   // the overlapprof that wrote the data
  std::string source_format;  // "kineto", "overlapprof"
  std::string source_path;    // the file it came from
  std::string backend;        // "nccl", "rccl", ...
  std::string nccl_version;
  std::string pg_config_json;  // process groups, as the source reported them (JSON text)
  // NCCL's profiler plugin (injector stores, schema 1.2): meta `nccl_profiler` (JSON text: ABI,
  // communicators, clock offset), empty when the plugin was not active in the process; meta
  // `timing_source` ("nccl_profiler" or "kernels"), set after the join, empty in older stores.
  std::string nccl_profiler_json;
  std::string timing_source;
  // The recorder's meta `overlap_env` (injector stores, schema 1.3): a JSON object of the listed
  // environment variables that change overlap (injector/overlap_env.h) and their values in the
  // job, "{}" when none was set; empty when the trace does not say (imported traces, older stores).
  std::string overlap_env_json;
};

// A CUDA event's record, or a wait on it, as the recorder saw them (CUPTI's CUDA_EVENT and
// SYNCHRONIZATION records, joined by CUPTI's cudaEventSyncId, unique per cudaEventRecord call):
// the recorded form of the cross-stream and host-waits-for-GPU dependencies (docs/what-if.md).
// Injector traces only (schema 1.3), and only where the process's CUPTI is 12.8 or newer.
enum class EventLinkKind : uint8_t {
  kRecord = 1,      // cudaEventRecord: `stream` is the stream the event was recorded on
  kStreamWait = 2,  // cudaStreamWaitEvent: `stream` waits (GPU side) for the record with `sync_id`
  kHostWait = 3,    // cudaEventSynchronize: the host waits; `stream` is kNoIndex
};
struct EventLink {
  int64_t correlation_id = kUnknown;  // the API call (RankTrace::host_calls) that made it
  int64_t sync_id = kUnknown;         // joins a wait to its record
  uint32_t stream = kNoIndex;         // index into RankTrace::streams
  EventLinkKind kind = EventLinkKind::kRecord;
};

// A counter from a store file that this build does not know (written by a newer minor
// schema version). Kept and shown, so no data-quality signal is lost.
struct ExtraStat {
  std::string name;
  Severity severity = Severity::kInfo;
  int64_t value = 0;
  std::string description;
};

// Optional parts of a trace a consumer may not need (readers can skip decoding them).
struct TraceNeeds {
  bool host_calls = false;   // RankTrace::host_calls
  bool annotations = false;  // ranges other than steps (host and GPU annotations)
  static TraceNeeds All() { return {true, true}; }
  TraceNeeds& operator|=(const TraceNeeds& o) {
    host_calls |= o.host_calls;
    annotations |= o.annotations;
    return *this;
  }
};

struct RankTrace {
  RunMeta meta;
  StringTable names;
  std::vector<Device> devices;
  std::vector<Stream> streams;
  std::vector<Activity> activities;  // sorted by (start_ns, end_ns) after Finalize()
  std::vector<CommOp> comm_ops;
  std::vector<HostCall> host_calls;  // sorted by start_ns after Finalize()
  std::vector<Range> ranges;         // sorted by start_ns after Finalize()
  // CUPTI external correlation records: (correlation_id of an API call, external id pushed
  // around it). Injector traces only; resolved against CommOp::launch_id by the reader.
  std::vector<std::pair<int64_t, int64_t>> external_correlations;
  // Operations timed by NCCL's profiler plugin (injector traces, schema 1.2; written as rows).
  std::vector<NcclPluginOp> nccl_plugin_ops;
  // CUDA event records and the waits on them (injector traces, schema 1.3; read with host calls).
  std::vector<EventLink> event_links;
  StatCounters stats;
  std::vector<ExtraStat> extra_stats;
  // What the reader found about the data itself (a recording that did not finish, and how much
  // it may miss): shown first among the rank's notices in every report.
  std::vector<std::string> notices;

  // Returns the index of the stream (device, native_id), adding it if new.
  uint32_t StreamIndex(int64_t device, int64_t native_id);
  // `a` (one of `activities`) was launched by the host call `h`: its launch time, and for
  // communication its op's host call (enter, exit, thread). Every importer's correlation step.
  void LinkLaunch(Activity& a, const HostCall& h) {
    a.launch_ns = h.start_ns;
    if (a.comm_op == kNoIndex) return;
    CommOp& op = comm_ops[a.comm_op];
    op.host_enter_ns = h.start_ns;
    op.host_exit_ns = h.end_ns;
    op.host_tid = h.tid;
  }
  // Sorts activities, host calls and ranges by time (stable, so equal keys keep
  // source order); remaps nothing else. Idempotent.
  void Finalize();

 private:
  // Keys come from untrusted files (src/common/file_key_map.h); log n of a few streams is cheap.
  FileKeyMap<std::pair<int64_t, int64_t>, uint32_t> stream_index_;
};

}  // namespace overlapprof
