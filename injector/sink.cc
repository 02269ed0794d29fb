// The writer thread (see sink.h). Everything here runs on that one thread; it reaches the
// rest of the injector only through the recorder's writer-side accessors (recorder.h).
#include "injector/sink.h"

#include <fcntl.h>
#include <poll.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "injector/batching.h"
#include "injector/injector.h"
#include "injector/ring.h"
#include "src/store/writer.h"
#include "src/trace/classify.h"

namespace overlapprof::inject {
namespace {

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

const char* InitCallName(CommInitCall c) {
  switch (c) {
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

// NCCL's version code as NCCL writes it: 22809 -> "2.28.9" (codes from 2.9 on: major*10000 +
// minor*100 + patch), 2708 -> "2.7.8" (before: major*1000 + minor*100 + patch).
std::string NcclVersionText(uint64_t code) {
  char b[32];
  if (code >= 10000)
    std::snprintf(b, sizeof b, "%llu.%llu.%llu", static_cast<unsigned long long>(code / 10000),
                  static_cast<unsigned long long>(code % 10000 / 100), static_cast<unsigned long long>(code % 100));
  else
    std::snprintf(b, sizeof b, "%llu.%llu.%llu", static_cast<unsigned long long>(code / 1000),
                  static_cast<unsigned long long>(code % 1000 / 100), static_cast<unsigned long long>(code % 100));
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

}  // namespace

Sink::Sink(const SinkConfig& cfg) : cfg_(cfg), decoder_(NewCuptiDecoder()) { trace_.meta = cfg.meta; }
Sink::~Sink() = default;

Status Sink::Open() {
  StoreWriter::Options o;
  o.mode = StoreWriter::Mode::kLive;
  o.overwrite = false;
  o.row_copies = false;  // chunks only: what analysis reads, at a fraction of the cost
  OVERLAPPROF_RETURN_IF_ERROR(writer_.Open(cfg_.path, trace_.meta, o));
  if (cfg_.rank_from_env) OVERLAPPROF_RETURN_IF_ERROR(writer_.PutMeta("rank_source", "environment"));
  bool slot_taken = false;  // NCCL_PROFILER_PLUGIN names another plugin (plugin_sink.h)
  OVERLAPPROF_RETURN_IF_ERROR(writer_.PutMeta("nccl_profiler_plugin", PluginSink::SlotState(&slot_taken)));
  if (slot_taken) trace_.stats.Set(Stat::nccl_profiler_slot_taken, 1);
  // The period that bounds what a process that ends without its final flush (_exit, a
  // crash, SIGKILL) loses: everything after meta last_commit_ns, up to about this long.
  OVERLAPPROF_RETURN_IF_ERROR(writer_.PutMeta("flush_interval_ms", int64_t{cfg_.flush_ms}));
  // "finished" once Finish() ran; `overlapprof run` marks files still "recording" after
  // the job as incomplete (the process was killed before its last flush).
  return writer_.PutMeta("recording_state", "recording");
}

size_t Sink::DrainRing(Ring<HookRecord>* ring) {
  HookRecord r;
  size_t n = 0;
  while (ring->TryPop(&r)) {
    Take(r);
    if ((++n & 4095) == 0) {
      g_recorder.WriterProgress();
      if (failed_) DiscardBatch();  // memory stays flat while a full ring is counted
    }
  }
  if (n) g_recorder.WriterProgress();
  if (failed_) DiscardBatch();
  return n;
}

void Sink::DrainCupti(bool force) {
  if (!CuptiActive()) return;
  CuptiFlush(force);
  CuptiDrain(decoder_.get(), &trace_);
  if (failed_) DiscardBatch();
}

void Sink::DrainCuptiFinal() {
  if (!CuptiActive()) return;
  CuptiFlush(true);
  CuptiShutdown();
  CuptiDrain(decoder_.get(), &trace_);
  if (failed_) DiscardBatch();
}

int64_t Sink::BatchRecords() const {
  return static_cast<int64_t>(Pending() + trace_.external_correlations.size() + trace_.event_links.size()) +
         meta_records_;
}

int64_t Sink::OpenRanges() const {
  size_t n = started_.size();
  for (const auto& [tid, stack] : stacks_) n += stack.size();
  return static_cast<int64_t>(n);
}

int64_t Sink::DiscardBatch() {
  int64_t lost = BatchRecords();
  if (lost > 0) g_recorder.stats().Add(Stat::records_lost_write_failed, lost);
  ClearRows();
  meta_records_ = 0;
  return lost;
}

void Sink::ClearRows() {
  trace_.activities.clear();
  trace_.host_calls.clear();
  trace_.ranges.clear();
  trace_.external_correlations.clear();
  trace_.event_links.clear();
  trace_.comm_ops.clear();
  trace_.nccl_plugin_ops.clear();
}

void Sink::EnterFailed() {
  if (failed_) return;
  failed_ = true;
  // Open NVTX ranges will never be written either: counted now, and their ends (if any
  // come) find nothing to close (nvtx_ranges_unmatched), so nothing is counted twice.
  int64_t open = OpenRanges();
  if (open > 0) g_recorder.stats().Add(Stat::records_lost_write_failed, open);
  DiscardBatch();
  // The batch's rows give their memory back, not only cleared. The dictionaries (names,
  // streams) stay: the CUPTI decoder's caches refer to their ids, and they are bounded by
  // the distinct names and streams.
  auto release = [](auto& v) { std::remove_reference_t<decltype(v)>().swap(v); };
  release(trace_.activities);
  release(trace_.host_calls);
  release(trace_.ranges);
  release(trace_.external_correlations);
  release(trace_.event_links);
  release(trace_.comm_ops);
  release(trace_.nccl_plugin_ops);
  comm_names_.clear();
  stacks_.clear();
  started_.clear();
  CuptiStopActivities();
}

Status Sink::MarkFailed() { return writer_.MarkWriteFailed(Stats(), Extras()); }

size_t Sink::Pending() const {
  return trace_.comm_ops.size() + trace_.activities.size() + trace_.host_calls.size() + trace_.ranges.size() +
         trace_.nccl_plugin_ops.size();
}

Status Sink::Commit() { return Commit(NowNs()); }

Status Sink::Commit(int64_t began_ns) {
  if (failed_) return MakeError(StatusCode::kIo, "the store failed before");
  OVERLAPPROF_RETURN_IF_ERROR(writer_.Append(trace_));
  ClearRows();
  if (plugin_.meta_dirty()) OVERLAPPROF_RETURN_IF_ERROR(writer_.PutMeta("nccl_profiler", plugin_.MetaJson()));
  if (meta_dirty_) {
    OVERLAPPROF_RETURN_IF_ERROR(writer_.UpdateMeta(trace_.meta));
    OVERLAPPROF_RETURN_IF_ERROR(writer_.PutMeta("communicators", CommunicatorsJson()));
    if (!cfg_.rank_from_env && !rank_source_.empty())
      OVERLAPPROF_RETURN_IF_ERROR(writer_.PutMeta("rank_source", rank_source_));
    meta_dirty_ = false;
  }
  // The counters and meta last_commit_ns in one transaction (its last): a reader that sees
  // this commit's time sees its counters.
  OVERLAPPROF_RETURN_IF_ERROR(writer_.WriteStats(Stats(), Extras(), {{"last_commit_ns", began_ns}}));
  meta_records_ = 0;
  return OkStatus();
}

Status Sink::Finish() {
  plugin_.FinalStats(&trace_.stats);
  OVERLAPPROF_RETURN_IF_ERROR(Commit(NowNs()));
  OVERLAPPROF_RETURN_IF_ERROR(plugin_.FinishStore(&writer_));
  OVERLAPPROF_RETURN_IF_ERROR(writer_.PutMeta("recording_state", "finished"));
  return writer_.Finish(Stats(), Extras());
}

void Sink::Abort() { writer_.Abort(); }

StatCounters Sink::Stats() const {
  StatCounters s = trace_.stats;
  g_recorder.stats().AddTo(&s);
  s.Add(Stat::nccl_ops_in_forked_children, g_recorder.ForkedChildOps());
  return s;
}

std::vector<ExtraStat> Sink::Extras() {
  std::vector<ExtraStat> extra;
  CuptiDroppedByStream(&extra);
  return extra;
}

std::string Sink::CommunicatorsJson() const {
  std::string j = "[";
  for (const auto& c : comms_) {
    if (j.size() > 1) j += ",";
    j += "{\"id\":\"" + Hex(c.id) + "\",\"rank\":" + std::to_string(c.rank) +
         ",\"nranks\":" + std::to_string(c.nranks) + ",\"device\":" + std::to_string(c.device) +
         ",\"created_by\":\"" + InitCallName(c.call) + "\",\"parent\":" +
         (c.parent ? "\"" + Hex(c.parent) + "\"" : std::string("null")) +
         ",\"created_ns\":" + std::to_string(c.created_ns) +
         ",\"destroyed_ns\":" + (c.destroyed_ns ? std::to_string(c.destroyed_ns) : std::string("null"));
    if (c.buffers || c.windows || c.deregistered)
      j += ",\"registered_buffers\":" + std::to_string(c.buffers) + ",\"registered_buffer_bytes\":" +
           std::to_string(c.buffer_bytes) + ",\"windows\":" + std::to_string(c.windows) +
           ",\"symmetric_windows\":" + std::to_string(c.symmetric_windows) + ",\"window_bytes\":" +
           std::to_string(c.window_bytes) + ",\"deregistrations\":" + std::to_string(c.deregistered);
    j += "}";
  }
  return j + "]";
}

void Sink::Take(const HookRecord& r) {
  switch (r.kind) {
    case RecKind::kCommOp: TakeCommOp(r); break;
    case RecKind::kCommInit: TakeCommInit(r); break;
    case RecKind::kCommReady: TakeCommReady(r); break;
    case RecKind::kGroupSimulated: TakeGroupSimulated(r); break;
    case RecKind::kBufferRegister: TakeBufferRegister(r); break;
    case RecKind::kPluginComm: TakePluginComm(r); break;
    case RecKind::kPluginOp: plugin_.TakeOp(r, &trace_); break;
    case RecKind::kCommDestroy: TakeCommDestroy(r); break;
    case RecKind::kRangePush:
    case RecKind::kRangePop:
    case RecKind::kRangeStart:
    case RecKind::kRangeEnd:
    case RecKind::kMark: TakeRange(r); break;
  }
}

void Sink::TakeCommOp(const HookRecord& r) {
  const CommOpPayload& p = r.comm_op;
  CommOp op;
  op.communicator = CommName(r.comm_id);
  op.comm_rank = r.comm_rank;
  op.comm_nranks = r.comm_nranks;
  op.seq = static_cast<int64_t>(p.seq);
  op.op = p.op;
  DtypeInfo d = Dtype(p.datatype);
  op.datatype = d.name;
  op.count = static_cast<int64_t>(p.count);
  op.bytes = d.size ? static_cast<int64_t>(p.count) * d.size : kUnknown;
  op.root_peer = p.root_peer;
  op.host_enter_ns = r.t_enter;
  op.host_exit_ns = r.t_exit;
  op.host_tid = r.tid;
  op.source = CommSource::kNcclHook;
  op.rule = CommRule::kIdentity;
  op.launch_id = static_cast<int64_t>(p.launch_id);
  op.stream_handle = static_cast<int64_t>(p.stream);
  trace_.comm_ops.push_back(std::move(op));
}

// Communicator events are kept in meta (communicators), not as rows: each counts in
// meta_records_ and marks the meta dirty.
void Sink::TakeCommInit(const HookRecord& r) {
  ++meta_records_;
  const CommInitPayload& p = r.comm_init;
  bool pending = (r.flags & kFlagPending) != 0;
  comms_.push_back({r.comm_id, p.parent, r.comm_rank, r.comm_nranks, r.device, p.call, r.t_exit, 0, pending});
  if (p.nccl_version > 0 && trace_.meta.nccl_version.empty())
    trace_.meta.nccl_version = NcclVersionText(p.nccl_version);
  if (!pending) ConsiderRank(r.comm_rank, r.comm_nranks, p.call, p.parent);
  meta_dirty_ = true;
}

void Sink::TakeCommReady(const HookRecord& r) {
  ++meta_records_;
  // The oldest pending communicator of that id (ids are unique per communicator but
  // for InitAll's, which are blocking, never pending).
  for (auto& c : comms_) {
    if (c.id != r.comm_id || !c.pending) continue;
    c.pending = false;
    c.rank = r.comm_rank;
    c.nranks = r.comm_nranks;
    c.device = r.device;
    ConsiderRank(c.rank, c.nranks, c.call, c.parent);
    meta_dirty_ = true;
    break;
  }
}

void Sink::TakeGroupSimulated(const HookRecord& r) {
  // The group's ops still in the open batch are dropped (they never ran); any committed
  // before this record arrived stay (a commit inside a group's microseconds: rare).
  auto& ops = trace_.comm_ops;
  size_t before = ops.size();
  auto launch = static_cast<int64_t>(r.group.launch_id);
  ops.erase(std::remove_if(ops.begin(), ops.end(), [&](const CommOp& o) { return o.launch_id == launch; }),
            ops.end());
  trace_.stats.Add(Stat::nccl_simulated_ops, static_cast<int64_t>(before - ops.size()));
}

void Sink::TakeBufferRegister(const HookRecord& r) {
  ++meta_records_;
  if (r.result != 0) return;  // NCCL refused it: nothing was registered
  Comm* c = nullptr;
  for (auto& e : comms_)
    if (e.id == r.comm_id && e.destroyed_ns == 0) c = &e;
  if (!c) return;  // a communicator we never saw created (or already ended)
  switch (r.reg.call) {
    case RegisterCall::kBuffer:
      ++c->buffers;
      c->buffer_bytes += static_cast<int64_t>(r.reg.bytes);
      break;
    case RegisterCall::kWindow:
      ++c->windows;
      if (r.reg.window_flags & 0x01) ++c->symmetric_windows;  // NCCL_WIN_COLL_SYMMETRIC
      c->window_bytes += static_cast<int64_t>(r.reg.bytes);
      break;
    case RegisterCall::kBufferDeregister:
    case RegisterCall::kWindowDeregister:
      ++c->deregistered;
      break;
  }
  meta_dirty_ = true;
}

void Sink::TakePluginComm(const HookRecord& r) {
  ++meta_records_;
  // An init NCCL ran on a thread of its own (non-blocking creation) does not name our
  // communicator: the one communicator of the same rank and size, if it is unique.
  uint64_t resolved = 0;
  int matches = 0;
  if (r.comm_id == 0)
    for (const auto& c : comms_)
      if (c.rank == r.comm_rank && c.nranks == r.comm_nranks && c.destroyed_ns == 0 && ++matches == 1)
        resolved = c.id;
  plugin_.TakeComm(r, matches == 1 ? resolved : 0);
}

void Sink::TakeCommDestroy(const HookRecord& r) {
  ++meta_records_;
  for (auto& c : comms_)
    if (c.id == r.comm_id && c.destroyed_ns == 0) c.destroyed_ns = r.t_enter;
  meta_dirty_ = true;
}

// NVTX: push/pop per thread, start/end by range id, marks as empty ranges. An end without
// its beginning is counted (nvtx_ranges_unmatched).
void Sink::TakeRange(const HookRecord& r) {
  switch (r.kind) {
    case RecKind::kRangePush:
      stacks_[r.tid].push_back({r.t_enter, NameOf(r)});
      break;
    case RecKind::kRangePop: {
      auto it = stacks_.find(r.tid);
      if (it == stacks_.end() || it->second.empty()) {
        trace_.stats.Add(Stat::nvtx_ranges_unmatched);
        break;
      }
      OpenRange o = it->second.back();
      it->second.pop_back();
      AddRange(o.start, r.t_enter, o.name, r.tid);
      break;
    }
    case RecKind::kRangeStart:
      started_[r.range.id] = {r.t_enter, NameOf(r)};
      break;
    case RecKind::kRangeEnd: {
      auto it = started_.find(r.range.id);
      if (it == started_.end()) {
        trace_.stats.Add(Stat::nvtx_ranges_unmatched);
        break;
      }
      AddRange(it->second.start, r.t_enter, it->second.name, r.tid);
      started_.erase(it);
      break;
    }
    case RecKind::kMark:
      AddRange(r.t_enter, r.t_enter, NameOf(r), r.tid);
      break;
    default:
      break;
  }
}

void Sink::ConsiderRank(int32_t rank, int32_t nranks, CommInitCall call, uint64_t parent) {
  const auto kInitAll = CommInitCall::kInitAll;
  if (cfg_.rank_from_env || nranks <= 1 || rank < 0 || call == kInitAll) return;
  bool derived = call == CommInitCall::kSplit || call == CommInitCall::kShrink;
  // A communicator derived from a single-process InitAll (a helper, not a rank) says
  // nothing about the process's rank.
  if (derived && parent != 0)
    for (const auto& c : comms_)
      if (c.id == parent && c.call == kInitAll) return;
  bool better = rank_nranks_ == 0 || (rank_derived_ && !derived) ||
                (derived == rank_derived_ && nranks > rank_nranks_);
  if (!better) return;
  rank_rank_ = rank;
  rank_nranks_ = nranks;
  rank_derived_ = derived;
  ApplyRankCandidate();
}

void Sink::ApplyRankCandidate() {
  trace_.meta.rank = rank_rank_;
  trace_.meta.world_size = rank_nranks_;
  rank_source_ = rank_derived_ ? "sub_communicator" : "communicator";
  trace_.stats.Set(Stat::rank_uncertain, rank_derived_ ? 1 : 0);
  meta_dirty_ = true;
}

// The communicator's id as text, formatted once per communicator.
const std::string& Sink::CommName(uint64_t id) {
  auto it = comm_names_.find(id);
  if (it == comm_names_.end()) it = comm_names_.emplace(id, Hex(id)).first;
  return it->second;
}

uint32_t Sink::NameOf(const HookRecord& r) {
  size_t n = strnlen(r.range.name, sizeof r.range.name);
  return trace_.names.Intern(std::string_view(r.range.name, n));
}

void Sink::AddRange(int64_t start, int64_t end, uint32_t name_id, int64_t tid) {
  if (end < start) {
    trace_.stats.Add(Stat::nvtx_ranges_unmatched);
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

namespace {

// The writer thread's loop, in phases: open the store, drain/commit passes until asked to
// stop, the final drain and close. Every failure is logged and leaves the host process alone.
// Slots the writer populates ahead of the producers from its start (64 Ki records, 12 MiB).
constexpr size_t kFirstPrefault = size_t{1} << 16;

class WriterLoop {
 public:
  explicit WriterLoop(Recorder* rec) : rec_(rec), cfg_(rec->config()), ring_(rec->ring()), sink_(cfg_),
        policy_(rec->flush_ms(), ring_->capacity(), NowNs()) {}

  // Creates the store. When it cannot be created (a full disk before the first commit) the
  // loop still runs, in the failed mode: what arrives is counted and dropped (Fail).
  void Open() {
    if (Status st = sink_.Open(); !st.ok()) Fail(st, "creating");
  }

  // Passes until a stop request; each pass drains the ring and commits when the policy says.
  void Run() {
    size_t last_drained = 0;
    ring_->Prefault(kFirstPrefault);
    for (;;) {
      // A wake eventfd the host closed or reused is not polled (fd -1: the poll is a plain
      // sleep) nor read: never a spin on someone else's file, never a read from it.
      struct pollfd p = {rec_->CheckedWakeFd(), POLLIN, 0};
      ::poll(&p, 1, policy_.PollTimeoutMs(last_drained));
      uint64_t v;
      if (p.fd >= 0 && ::read(p.fd, &v, sizeof v) < 0) v = 0;
      bool stopping = rec_->StopRequested();
      int requests = rec_->TakeFlushRequests();
      last_drained = sink_.DrainRing(ring_);
      // Keep the ring's pages populated ahead of the producers (ring.h, Prefault): twice
      // what the last pass drained, at least 64 Ki records (12 MiB).
      ring_->Prefault(std::max<size_t>(kFirstPrefault, 2 * last_drained));
      int64_t now = NowNs();
      if (!policy_.ShouldCommit(now, sink_.Pending(), requests, stopping)) continue;
      policy_.Committed(now);
      // CUPTI's completed buffers reach the store at every commit (a default flush: the
      // buffers whose records are all complete, full or not), so GPU activities are bounded
      // by the same flush period as host records.
      sink_.DrainCupti(requests > 0 || stopping);
      sink_.DrainRing(ring_);
      Commit(now);
      if (requests > 0) rec_->SignalFlushDone();
      if (stopping) return;
    }
  }

  // The final drain (CUPTI then the ring) and the close; a failed store gets its final
  // counts when one small transaction fits, else they are said in one log line.
  void Finish() {
    sink_.DrainCuptiFinal();
    sink_.DrainRing(ring_);
    if (rec_->DescriptorWasLost()) {
      // Neither finished nor aborted: both would go through descriptors that are not ours.
    } else if (!failed_) {
      if (Status st = sink_.Finish(); !st.ok()) {
        Fail(st, "finishing");
        FinalCounts();
      }
    } else {
      FinalCounts();
    }
    rec_->SignalFlushDone();
  }

 private:
  void Commit(int64_t began_ns) {
    if (failed_) {
      // The counters so far, when they changed (a full disk refuses them cheaply).
      int64_t lost = g_recorder.stats().Get(Stat::records_lost_write_failed);
      if (lost != marked_lost_ && sink_.MarkFailed().ok()) marked_lost_ = lost;
      return;
    }
    if (rec_->DescriptorWasLost()) {
      // Our SQLite descriptors may be the host's now: no more SQLite calls at all (each
      // would fail, and WAL reads retry with sleeps); RunWriter never closes this store.
      // What the batch holds and what still arrives is counted and dropped.
      failed_ = true;
      marked_lost_ = -1;
      sink_.EnterFailed();
      return;
    }
    Status st = sink_.Commit(began_ns);
    rec_->WriterProgress();
    if (!st.ok()) Fail(st, "writing");
  }

  // The store cannot be written (creating, committing or finishing it failed): nothing more
  // is kept, every record from here on is counted as lost (Sink::EnterFailed), hooks go on
  // pushing so that they are counted too, and memory stays flat. One line says so.
  void Fail(const Status& st, const char* what) {
    failed_ = true;
    sink_.EnterFailed();
    Status mark = sink_.MarkFailed();
    if (mark.ok()) marked_lost_ = g_recorder.stats().Get(Stat::records_lost_write_failed);
    // Not even that fits: an empty marker beside the file (no data block needed) tells
    // `overlapprof run`, which then sets records_lost_write_failed itself.
    if (!mark.ok()) SetMarker(true);
    Log("%s %s failed: %s; recording stops here: every record since the last commit and every one after it is "
        "dropped and counted (records_lost_write_failed)%s",
        what, cfg_.path.c_str(), st.message().c_str(),
        mark.ok() ? "" : "; the failure could not be noted in the file either: the final count is said at exit");
  }

  // At the end, in the failed mode: the final counters into the file when one small
  // transaction fits (then the marker goes), else in one line.
  void FinalCounts() {
    sink_.DiscardBatch();
    if (!rec_->DescriptorWasLost() && sink_.MarkFailed().ok()) {
      SetMarker(false);
    } else {
      const AtomicStats& st = g_recorder.stats();
      Log("%s: could not be written; %lld records lost (records_lost_write_failed), %lld hook records and %lld "
          "CUPTI records dropped before (records_dropped_hooks, records_dropped_cupti); these counts are not in the file",
          cfg_.path.c_str(), static_cast<long long>(st.Get(Stat::records_lost_write_failed)),
          static_cast<long long>(st.Get(Stat::records_dropped_hooks)),
          static_cast<long long>(st.Get(Stat::records_dropped_cupti)));
    }
    if (!rec_->DescriptorWasLost()) sink_.Abort();
  }

  // FILE.write_failed (sink.h, kWriteFailedSuffix): created or removed.
  void SetMarker(bool present) {
    std::string m = cfg_.path + kWriteFailedSuffix;
    if (!present) {
      ::unlink(m.c_str());
      return;
    }
    int fd = ::open(m.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) ::close(fd);
  }

  Recorder* rec_;
  const SinkConfig& cfg_;
  Ring<HookRecord>* ring_;
  Sink sink_;
  BatchPolicy policy_;
  bool failed_ = false;
  int64_t marked_lost_ = -1;  // records_lost_write_failed as the file last noted it (failed mode)
};

}  // namespace

// ---- The store's descriptors ---------------------------------------------------------------
// The injector's own (static) SQLite does its I/O through the unix VFS's system-call table;
// we override the entries that take a descriptor, so every descriptor SQLite opens is an
// OwnedFd (high number, identity at open) and every use is checked first: a descriptor the
// host closed or reused is never read, written, locked, mapped, truncated or closed by us
// (the call fails with EBADF, SQLite reports an I/O error, the writer stops and
// recorder_descriptor_lost is counted). Writer thread only (the only user of this SQLite).
namespace {

StoreSyscalls& Real() { return g_recorder.store_syscalls(); }

OwnedFd* FindStoreFd(int fd) {
  OwnedFd* fds = g_recorder.store_fds();
  for (size_t i = 0; i < Recorder::kStoreFds; ++i)
    if (fds[i].get() == fd) return &fds[i];
  return nullptr;
}

// True when `fd` is a descriptor SQLite opened through us and still ours; else counts the
// loss, stops recording and sets errno = EBADF.
bool Mine(int fd) {
  OwnedFd* o = FindStoreFd(fd);
  if (o && o->Owned()) return true;
  g_recorder.DescriptorLost("store file");
  errno = EBADF;
  return false;
}

int GuardOpen(const char* path, int flags, int mode) {
  int raw = Real().open(path, flags | O_CLOEXEC, mode);
  if (raw < 0) return raw;
  OwnedFd* fds = g_recorder.store_fds();
  for (size_t i = 0; i < Recorder::kStoreFds; ++i) {
    if (fds[i].get() >= 0) continue;
    if (!fds[i].Adopt(raw)) return -1;
    return fds[i].get();
  }
  Real().close(raw);  // more files than we track: refuse rather than use an unchecked one
  errno = EMFILE;
  return -1;
}

int GuardClose(int fd) {
  OwnedFd* o = FindStoreFd(fd);
  if (!o) return 0;  // not ours: never closed by us
  bool mine = o->Owned();
  o->fd.store(-1, std::memory_order_release);
  return mine ? Real().close(fd) : 0;
}

int GuardFstat(int fd, struct stat* st) { return Mine(fd) ? Real().fstat(fd, st) : -1; }
int GuardFtruncate(int fd, off_t n) { return Mine(fd) ? Real().ftruncate(fd, n) : -1; }
int GuardFcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);  // SQLite passes an int, a long or a struct flock*
  va_end(ap);
  return Mine(fd) ? Real().fcntl(fd, cmd, arg) : -1;
}
ssize_t GuardRead(int fd, void* b, size_t n) { return Mine(fd) ? Real().read(fd, b, n) : -1; }
ssize_t GuardPread(int fd, void* b, size_t n, off_t o) { return Mine(fd) ? Real().pread(fd, b, n, o) : -1; }
ssize_t GuardPread64(int fd, void* b, size_t n, off64_t o) { return Mine(fd) ? Real().pread64(fd, b, n, o) : -1; }
ssize_t GuardWrite(int fd, const void* b, size_t n) { return Mine(fd) ? Real().write(fd, b, n) : -1; }
ssize_t GuardPwrite(int fd, const void* b, size_t n, off_t o) { return Mine(fd) ? Real().pwrite(fd, b, n, o) : -1; }
ssize_t GuardPwrite64(int fd, const void* b, size_t n, off64_t o) {
  return Mine(fd) ? Real().pwrite64(fd, b, n, o) : -1;
}
int GuardFchmod(int fd, mode_t m) { return Mine(fd) ? Real().fchmod(fd, m) : -1; }
int GuardFallocate(int fd, off_t o, off_t n) { return Mine(fd) ? Real().fallocate(fd, o, n) : EBADF; }
int GuardFchown(int fd, uid_t u, gid_t g) { return Mine(fd) ? Real().fchown(fd, u, g) : -1; }
void* GuardMmap(void* a, size_t n, int prot, int flags, int fd, off_t o) {
  if (fd >= 0 && !Mine(fd)) return MAP_FAILED;
  return Real().mmap(a, n, prot, flags, fd, o);
}

// Swaps one entry; false when this SQLite lacks it (then its calls are left alone: the
// entries SQLite has are the ones it uses).
template <typename F>
bool Override(sqlite3_vfs* vfs, const char* name, F* real, F guard) {
  sqlite3_syscall_ptr cur = vfs->xGetSystemCall(vfs, name);
  if (!cur) return false;
  *real = reinterpret_cast<F>(cur);
  return vfs->xSetSystemCall(vfs, name, reinterpret_cast<sqlite3_syscall_ptr>(guard)) == SQLITE_OK;
}

// False when the VFS cannot be guarded (then the store is not opened: an unguarded SQLite
// could write into the host's files).
bool InstallStoreFdGuards() {
  sqlite3_vfs* vfs = sqlite3_vfs_find(nullptr);
  if (!vfs || vfs->iVersion < 3 || !vfs->xSetSystemCall || !vfs->xGetSystemCall) return false;
  StoreSyscalls& r = Real();
  if (r.open) return true;  // done before
  bool ok = Override(vfs, "open", &r.open, &GuardOpen) && Override(vfs, "close", &r.close, &GuardClose) &&
            Override(vfs, "fstat", &r.fstat, &GuardFstat) && Override(vfs, "ftruncate", &r.ftruncate, &GuardFtruncate) &&
            Override(vfs, "fcntl", &r.fcntl, &GuardFcntl) && Override(vfs, "write", &r.write, &GuardWrite);
  // Present or not depending on how SQLite was built.
  Override(vfs, "read", &r.read, &GuardRead);
  Override(vfs, "pread", &r.pread, &GuardPread);
  Override(vfs, "pread64", &r.pread64, &GuardPread64);
  Override(vfs, "pwrite", &r.pwrite, &GuardPwrite);
  Override(vfs, "pwrite64", &r.pwrite64, &GuardPwrite64);
  Override(vfs, "fchmod", &r.fchmod, &GuardFchmod);
  Override(vfs, "fallocate", &r.fallocate, &GuardFallocate);
  Override(vfs, "fchown", &r.fchown, &GuardFchown);
  Override(vfs, "mmap", &r.mmap, &GuardMmap);
  return ok;
}

}  // namespace

void RunWriter(Recorder* rec) noexcept {
  try {
    // The ring's first pages before anything else: creating the store takes milliseconds, and
    // producers already pushing would otherwise take those first-touch faults themselves.
    rec->ring()->Prefault(kFirstPrefault);
    if (!InstallStoreFdGuards()) {
      Log("cannot guard the store's descriptors (SQLite VFS); this process is not recorded");
      rec->WriterFinished();
      return;
    }
    // On the heap: after a lost descriptor it is never destroyed (its SQLite connection
    // refers to descriptors that are not ours; closing it would only retry against them).
    auto* loop = new WriterLoop(rec);
    loop->Open();
    loop->Run();
    loop->Finish();
    if (!rec->DescriptorWasLost()) delete loop;
  } catch (const std::exception& e) {
    Log("writer thread stopped: %s", e.what());
  } catch (...) {
  }
  rec->WriterFinished();
}

}  // namespace overlapprof::inject
