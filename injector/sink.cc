// The writer thread (see sink.h). Everything here runs on that one thread.
#include "injector/sink.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "injector/injector.h"
#include "injector/ring.h"
#include "src/store/writer.h"
#include "src/trace/classify.h"

namespace overlapprof::inject {
namespace {

const char* OpName(uint8_t op) {
  switch (static_cast<CommOpCode>(op)) {
    case CommOpCode::kAllReduce: return "allreduce";
    case CommOpCode::kBroadcast: return "broadcast";
    case CommOpCode::kReduce: return "reduce";
    case CommOpCode::kAllGather: return "allgather";
    case CommOpCode::kReduceScatter: return "reducescatter";
    case CommOpCode::kAllToAll: return "alltoall";
    case CommOpCode::kGather: return "gather";
    case CommOpCode::kScatter: return "scatter";
    case CommOpCode::kSend: return "send";
    case CommOpCode::kRecv: return "recv";
  }
  return "unknown";
}

// ncclDataType_t values (nccl.h): names and sizes.
struct DtypeInfo {
  const char* name;
  int64_t size;
};
DtypeInfo Dtype(int8_t t) {
  static const DtypeInfo kTypes[] = {{"int8", 1},    {"uint8", 1},    {"int32", 4},      {"uint32", 4},
                                     {"int64", 8},   {"uint64", 8},   {"float16", 2},    {"float32", 4},
                                     {"float64", 8}, {"bfloat16", 2}, {"float8e4m3", 1}, {"float8e5m2", 1}};
  if (t >= 0 && t < static_cast<int8_t>(sizeof kTypes / sizeof kTypes[0])) return kTypes[t];
  return {"unknown", 0};
}

const char* InitCallName(uint8_t c) {
  switch (static_cast<CommInitCall>(c)) {
    case CommInitCall::kInitRank: return "ncclCommInitRank";
    case CommInitCall::kInitRankConfig: return "ncclCommInitRankConfig";
    case CommInitCall::kInitAll: return "ncclCommInitAll";
    case CommInitCall::kSplit: return "ncclCommSplit";
    case CommInitCall::kInitRankScalable: return "ncclCommInitRankScalable";
    case CommInitCall::kShrink: return "ncclCommShrink";
  }
  return "unknown";
}

std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// "ProfilerStep#12" -> 12, else -1.
int64_t StepNumber(std::string_view name) {
  static constexpr std::string_view kPrefix = "ProfilerStep#";
  if (name.substr(0, kPrefix.size()) != kPrefix || name.size() == kPrefix.size()) return -1;
  int64_t n = 0;
  for (char c : name.substr(kPrefix.size())) {
    if (c < '0' || c > '9' || n > (int64_t{1} << 50)) return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

class Sink {
 public:
  explicit Sink(const SinkConfig& cfg) : cfg_(cfg) { trace_.meta = cfg.meta; }

  Status Open() {
    StoreWriter::Options o;
    o.mode = StoreWriter::Mode::kLive;
    o.overwrite = false;
    o.row_copies = false;  // chunks only: what analysis reads, at a fraction of the cost
    OVERLAPPROF_RETURN_IF_ERROR(writer_.Open(cfg_.path, trace_.meta, o));
    // "finished" once Finish() ran; `overlapprof run` marks files still "recording" after
    // the job as incomplete (the process was killed before its last flush).
    return writer_.PutMeta("recording_state", "recording");
  }

  // Returns how many records it took.
  size_t DrainRing(Ring<HookRecord>* ring) {
    HookRecord r;
    size_t n = 0;
    while (ring->TryPop(&r)) {
      Take(r);
      ++n;
    }
    return n;
  }

  RankTrace* trace() { return &trace_; }
  size_t Pending() const {
    return trace_.comm_ops.size() + trace_.activities.size() + trace_.host_calls.size() + trace_.ranges.size();
  }

  // One transaction: the batch, the communicators and rank when they changed, the counters.
  Status Commit() {
    OVERLAPPROF_RETURN_IF_ERROR(writer_.Append(trace_));
    trace_.activities.clear();
    trace_.host_calls.clear();
    trace_.ranges.clear();
    trace_.external_correlations.clear();
    trace_.comm_ops.clear();
    if (meta_dirty_) {
      OVERLAPPROF_RETURN_IF_ERROR(writer_.UpdateMeta(trace_.meta));
      OVERLAPPROF_RETURN_IF_ERROR(writer_.PutMeta("communicators", CommunicatorsJson()));
      meta_dirty_ = false;
    }
    return writer_.WriteStats(Stats(), Extras());
  }

  Status Finish() {
    OVERLAPPROF_RETURN_IF_ERROR(Commit());
    OVERLAPPROF_RETURN_IF_ERROR(writer_.PutMeta("recording_state", "finished"));
    return writer_.Finish(Stats(), Extras());
  }

  void Abort() { writer_.Abort(); }

 private:
  StatCounters Stats() const {
    StatCounters s;
    s.Set(Stat::records_dropped_hooks, static_cast<int64_t>(g_counters.hook_records_dropped.load()));
    s.Set(Stat::records_dropped_cupti, static_cast<int64_t>(g_counters.cupti_records_dropped.load() +
                                                            g_counters.cupti_buffers_unavailable.load()));
    s.Set(Stat::nccl_missing_function, static_cast<int64_t>(g_counters.nccl_missing_function.load()));
    s.Set(Stat::nvtx_names_truncated, static_cast<int64_t>(g_counters.names_truncated.load()));
    s.Set(Stat::cupti_unavailable, static_cast<int64_t>(g_counters.cupti_unavailable.load()));
    s.Set(Stat::nvtx_ranges_unmatched, unmatched_ranges_);
    return s;
  }

  static std::vector<ExtraStat> Extras() {
    std::vector<ExtraStat> extra;
    CuptiDroppedByStream(&extra);
    return extra;
  }

  std::string CommunicatorsJson() const {
    std::string j = "[";
    for (const auto& c : comms_) {
      if (j.size() > 1) j += ",";
      j += "{\"id\":\"" + Hex(c.id) + "\",\"rank\":" + std::to_string(c.rank) +
           ",\"nranks\":" + std::to_string(c.nranks) + ",\"device\":" + std::to_string(c.device) +
           ",\"created_by\":\"" + InitCallName(c.call) + "\",\"parent\":" +
           (c.parent ? "\"" + Hex(c.parent) + "\"" : std::string("null")) +
           ",\"created_ns\":" + std::to_string(c.created_ns) +
           ",\"destroyed_ns\":" + (c.destroyed_ns ? std::to_string(c.destroyed_ns) : std::string("null")) + "}";
    }
    return j + "]";
  }

  void Take(const HookRecord& r) {
    switch (r.kind) {
      case RecKind::kCommOp: {
        CommOp op;
        op.communicator = CommName(r.comm_id);
        op.comm_rank = r.comm_rank;
        op.comm_nranks = r.comm_nranks;
        op.seq = static_cast<int64_t>(r.seq);
        op.op = OpName(r.op);
        DtypeInfo d = Dtype(r.datatype);
        op.datatype = d.name;
        op.count = static_cast<int64_t>(r.count);
        op.bytes = d.size ? static_cast<int64_t>(r.count) * d.size : kUnknown;
        op.root_peer = r.root_peer;
        op.host_enter_ns = r.t_enter;
        op.host_exit_ns = r.t_exit;
        op.host_tid = r.tid;
        op.source = CommSource::kNcclHook;
        op.launch_id = static_cast<int64_t>(r.launch_id);
        op.stream_handle = static_cast<int64_t>(r.stream);
        trace_.comm_ops.push_back(std::move(op));
        break;
      }
      case RecKind::kCommInit: {
        comms_.push_back({r.comm_id, r.seq, r.comm_rank, r.comm_nranks, r.device, r.op, r.t_exit, 0});
        if (!cfg_.rank_from_env && trace_.meta.rank == kUnknown && r.comm_nranks > 1 &&
            r.op != static_cast<uint8_t>(CommInitCall::kInitAll)) {
          // No launcher variable named the rank: the first multi-rank communicator does.
          trace_.meta.rank = r.comm_rank;
          trace_.meta.world_size = r.comm_nranks;
        }
        meta_dirty_ = true;
        break;
      }
      case RecKind::kCommDestroy:
        for (auto& c : comms_)
          if (c.id == r.comm_id && c.destroyed_ns == 0) c.destroyed_ns = r.t_enter;
        meta_dirty_ = true;
        break;
      case RecKind::kRangePush:
        stacks_[r.tid].push_back({r.t_enter, NameOf(r)});
        break;
      case RecKind::kRangePop: {
        auto it = stacks_.find(r.tid);
        if (it == stacks_.end() || it->second.empty()) {
          ++unmatched_ranges_;
          break;
        }
        OpenRange o = it->second.back();
        it->second.pop_back();
        AddRange(o.start, r.t_enter, o.name, r.tid);
        break;
      }
      case RecKind::kRangeStart:
        started_[r.stream] = {r.t_enter, NameOf(r)};
        break;
      case RecKind::kRangeEnd: {
        auto it = started_.find(r.stream);
        if (it == started_.end()) {
          ++unmatched_ranges_;
          break;
        }
        AddRange(it->second.start, r.t_enter, it->second.name, r.tid);
        started_.erase(it);
        break;
      }
      case RecKind::kMark:
        AddRange(r.t_enter, r.t_enter, NameOf(r), r.tid);
        break;
    }
  }

  // The communicator's id as text, formatted once per communicator.
  const std::string& CommName(uint64_t id) {
    auto it = comm_names_.find(id);
    if (it == comm_names_.end()) it = comm_names_.emplace(id, Hex(id)).first;
    return it->second;
  }

  uint32_t NameOf(const HookRecord& r) {
    size_t n = strnlen(r.name, sizeof r.name);
    return trace_.names.Intern(std::string_view(r.name, n));
  }

  void AddRange(int64_t start, int64_t end, uint32_t name_id, int64_t tid) {
    if (end < start) {
      ++unmatched_ranges_;
      return;
    }
    Range g;
    g.start_ns = start;
    g.end_ns = end;
    g.name_id = name_id;
    g.tid = tid;
    g.step = StepNumber(trace_.names.Get(name_id));
    g.kind = g.step >= 0 ? RangeKind::kStep : RangeKind::kAnnotation;
    trace_.ranges.push_back(g);
  }

  struct Comm {
    uint64_t id, parent;
    int32_t rank, nranks, device;
    uint8_t call;
    int64_t created_ns, destroyed_ns;
  };
  struct OpenRange {
    int64_t start;
    uint32_t name;
  };
  const SinkConfig& cfg_;
  RankTrace trace_;
  StoreWriter writer_;
  std::vector<Comm> comms_;
  std::unordered_map<uint64_t, std::string> comm_names_;
  std::unordered_map<int32_t, std::vector<OpenRange>> stacks_;  // NVTX push/pop per thread
  std::unordered_map<uint64_t, OpenRange> started_;             // NVTX start/end by range id
  int64_t unmatched_ranges_ = 0;
  bool meta_dirty_ = false;
};

}  // namespace

void RunWriter(const SinkConfig& cfg, Ring<HookRecord>* ring, int flush_ms, int wake_fd, int done_fd,
               std::atomic<bool>* stop, std::atomic<int>* flush_requests, std::atomic<int>* writer_state) noexcept {
  try {
    Sink sink(cfg);
    if (Status st = sink.Open(); !st.ok()) {
      Log("cannot create %s: %s; this process is not recorded", cfg.path.c_str(), st.message().c_str());
      g_state.store(kInert);
      writer_state->store(2);
      return;
    }
    // The ring is drained often (so a burst of hooks does not fill it); the store is
    // committed every flush_ms.
    const int drain_ms = std::min(flush_ms, 50);
    int64_t next_commit = NowNs() + int64_t{flush_ms} * 1000000;
    bool failed = false;
    size_t last_drained = 0;
    for (;;) {
      // Idle: wake every drain_ms. Busy (the last drain took over an eighth of the ring): come
      // back after 1 ms, so a sustained high call rate does not overflow the ring.
      struct pollfd p = {wake_fd, POLLIN, 0};
      ::poll(&p, 1, last_drained > ring->capacity() / 8 ? 1 : drain_ms);
      uint64_t v;
      if (::read(wake_fd, &v, sizeof v) < 0) v = 0;
      bool stopping = stop->load();
      int requests = flush_requests->exchange(0);
      last_drained = sink.DrainRing(ring);
      int64_t now = NowNs();
      // Commit on the flush period, and early when a batch grows past a quarter of the ring:
      // the ring is not drained during a commit, so a commit must stay short at high rates.
      bool big = sink.Pending() >= ring->capacity() / 4;
      if (!stopping && requests == 0 && !big && now < next_commit) continue;
      next_commit = now + int64_t{flush_ms} * 1000000;
      if (CuptiActive()) {
        CuptiFlush(requests > 0 || stopping);
        CuptiDrain(sink.trace());
      }
      sink.DrainRing(ring);
      if (!failed) {
        if (Status st = sink.Commit(); !st.ok()) {
          Log("writing %s failed: %s; recording stops here", cfg.path.c_str(), st.message().c_str());
          failed = true;
          g_state.store(kInert);
        }
      }
      if (requests > 0) {
        uint64_t one = 1;
        if (::write(done_fd, &one, sizeof one) < 0) {
        }
      }
      if (stopping) break;
    }
    if (CuptiActive()) {
      CuptiFlush(true);
      CuptiShutdown();
      CuptiDrain(sink.trace());
    }
    sink.DrainRing(ring);
    if (!failed) {
      if (Status st = sink.Finish(); !st.ok())
        Log("finishing %s failed: %s", cfg.path.c_str(), st.message().c_str());
    } else {
      sink.Abort();
    }
    uint64_t one = 1;
    if (::write(done_fd, &one, sizeof one) < 0) {
    }
  } catch (const std::exception& e) {
    Log("writer thread stopped: %s", e.what());
    g_state.store(kInert);
  } catch (...) {
    g_state.store(kInert);
  }
  writer_state->store(2);
}

}  // namespace overlapprof::inject
