#pragma once
// The writer thread's side of the injector: turns hook records and CUPTI records into
// RankTrace batches and appends them to the rank's store (StoreWriter, kLive mode: WAL, one
// transaction per batch). Runs only on the writer thread; holds no lock a hook could wait on.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "injector/plugin_sink.h"
#include "injector/records.h"
#include "injector/ring.h"
#include "src/store/writer.h"
#include "src/trace/model.h"

namespace overlapprof::inject {

class Recorder;

// Beside a rank file whose write failed and whose failure could not be noted in it either
// (recording_state "write_failed", records_lost_write_failed): an empty FILE.write_failed.
// `overlapprof run` (src/cli/run.cc, same name) sets the counter from it and removes it.
inline constexpr const char* kWriteFailedSuffix = ".write_failed";

struct SinkConfig {
  std::string path;        // the rank's store file
  int flush_ms = 1000;     // commit period (meta flush_interval_ms)
  RunMeta meta;            // rank, world size, pid, host, ... (rank may be learnt later)
  bool rank_from_env = false;
};

// Implemented in cupti.cc; called by the writer thread only, with no lock of ours held.
// CuptiFlush asks CUPTI to hand over buffered records (force: also incomplete ones).
void CuptiFlush(bool force) noexcept;
// The writer thread's CUPTI decoding state (kernel-name cache, API-call filter, work list),
// owned by the Sink.
struct CuptiDecoder;
struct CuptiDecoderDeleter {
  void operator()(CuptiDecoder* d) const noexcept;
};
using CuptiDecoderPtr = std::unique_ptr<CuptiDecoder, CuptiDecoderDeleter>;
CuptiDecoderPtr NewCuptiDecoder() noexcept;  // null when out of memory
// Moves the records of every completed CUPTI buffer into `t` (activities, host calls) and
// `t->external_correlations`, and returns the buffers to the pool. With a null decoder the
// buffers are only recycled (their records counted as dropped).
void CuptiDrain(CuptiDecoder* d, RankTrace* t) noexcept;
// Called once by the writer thread before its final drain: disables CUPTI activity so no
// buffer is completed after the store is closed.
void CuptiShutdown() noexcept;
// After the store failed: CUPTI's activity kinds are disabled, so it stops collecting GPU
// activities (what it collected before is still delivered, decoded, and counted as lost).
void CuptiStopActivities() noexcept;
// The dropped-record counts per (context, stream) so far, as extra stats rows.
void CuptiDroppedByStream(std::vector<ExtraStat>* out);

// The writer thread's body (runtime.cc starts it): opens the store, drains and commits until
// the recorder asks it to stop, then finishes the file and moves the recorder to kFinished.
void RunWriter(Recorder* rec) noexcept;

// Hook records (and CUPTI buffers) → a RankTrace batch → the rank's store (kLive, chunks
// only). Writer thread only (tests drive it directly: tests/injector/sink_test.cc).
// Dictionaries (names, streams) are cumulative; the rows of a batch are cleared by Commit.
class Sink {
 public:
  explicit Sink(const SinkConfig& cfg);  // `cfg` must outlive the Sink
  ~Sink();
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  Status Open();  // creates the file; meta recording_state = "recording"
  // Takes every record the ring holds into the batch; returns how many.
  size_t DrainRing(Ring<HookRecord>* ring);
  // One record into the batch (or the communicators' meta), by kind: the Take* below.
  void Take(const HookRecord& r);
  // Moves completed CUPTI buffers into the batch (no-op when CUPTI is not recording).
  void DrainCupti(bool force);
  // The last drain: CUPTI is flushed, disabled, and what it held is taken.
  void DrainCuptiFinal();
  // Records in the open batch (comm ops, activities, host calls, ranges).
  size_t Pending() const;
  // The batch, the communicators and rank when they changed, then the counters with meta
  // last_commit_ns = began_ns (CLOCK_REALTIME ns when the commit began: the writer's pass
  // that drained what this commit holds) in the last transaction.
  Status Commit(int64_t began_ns);
  Status Commit();  // began now
  // Commit, then recording_state = "finished", the stats and indexes, and close.
  Status Finish();
  void Abort();
  // After a failed Open or Commit (disk full, quota, I/O error): the open batch is dropped
  // and counted (records_lost_write_failed, error), CUPTI stops collecting, and from then on
  // DrainRing/DrainCupti take what arrives as before but count and drop it after each drain
  // (DiscardBatch) instead of keeping it: memory stays flat and every record is counted.
  // The unit is what the file would have held: one per comm op, GPU activity, host call,
  // external correlation, range (an NVTX range still open at the failure: one) and plugin
  // op, and one per communicator event (creation, readiness, registration, destruction).
  // MarkFailed then tries one small transaction (recording_state = "write_failed" and the
  // counters); it usually fits in the WAL space the failed commit had already taken.
  void EnterFailed();
  // Counts the open batch as lost and clears it; returns how many records it held.
  int64_t DiscardBatch();
  // What the open batch holds, in the unit above.
  int64_t BatchRecords() const;
  Status MarkFailed();
  bool failed() const { return failed_; }
  const RankTrace& trace() const { return trace_; }

 private:
  // The recorder's counters (hooks, CUPTI callbacks) plus this sink's own (clock anomalies
  // found while decoding, unmatched NVTX ranges), all from src/common/stats.def.
  StatCounters Stats() const;
  static std::vector<ExtraStat> Extras();
  std::string CommunicatorsJson() const;
  int64_t OpenRanges() const;
  void ClearRows();
  const std::string& CommName(uint64_t id);
  uint32_t NameOf(const HookRecord& r);
  void TakeCommOp(const HookRecord& r);
  void TakeCommInit(const HookRecord& r);
  void TakeCommReady(const HookRecord& r);
  void TakeGroupSimulated(const HookRecord& r);
  void TakeBufferRegister(const HookRecord& r);
  void TakePluginComm(const HookRecord& r);
  void TakeCommDestroy(const HookRecord& r);
  void TakeRange(const HookRecord& r);  // kRangePush/Pop/Start/End, kMark
  void AddRange(int64_t start, int64_t end, uint32_t name_id, int64_t tid);

  struct Comm {
    uint64_t id, parent;
    int32_t rank, nranks, device;
    CommInitCall call;
    int64_t created_ns, destroyed_ns;
    bool pending;  // non-blocking, not ready at creation: kCommReady fills rank/size/device
    // Successful registrations (kBufferRegister): buffers, windows, symmetric windows, their
    // bytes, and deregistrations of either.
    int64_t buffers = 0, buffer_bytes = 0, windows = 0, symmetric_windows = 0, window_bytes = 0, deregistered = 0;
  };
  // The process's rank from a communicator, when no launcher variable named it: the world
  // communicator (created by InitRank*, the largest seen) wins over any sub-communicator
  // (Split/Shrink); a rank from a sub-communicator only is marked uncertain.
  void ConsiderRank(int32_t rank, int32_t nranks, CommInitCall call, uint64_t parent);
  void ApplyRankCandidate();
  struct OpenRange {
    int64_t start;
    uint32_t name;
  };
  const SinkConfig& cfg_;
  RankTrace trace_;
  StoreWriter writer_;
  CuptiDecoderPtr decoder_;  // may be null (out of memory): CUPTI buffers are then only recycled
  std::vector<Comm> comms_;
  std::unordered_map<uint64_t, std::string> comm_names_;
  std::unordered_map<int32_t, std::vector<OpenRange>> stacks_;  // NVTX push/pop per thread
  std::unordered_map<uint64_t, OpenRange> started_;             // NVTX start/end by range id
  bool meta_dirty_ = false;
  int64_t meta_records_ = 0;  // communicator events taken since the last commit (no row of their own)
  bool failed_ = false;  // EnterFailed ran: nothing more is kept
  // The rank candidate chosen so far (ConsiderRank); rank_nranks_ 0: none.
  int32_t rank_rank_ = -1, rank_nranks_ = 0;
  bool rank_derived_ = false;
  std::string rank_source_;  // meta rank_source: "environment", "communicator", "sub_communicator"
  PluginSink plugin_;        // NCCL's profiler plugin records (plugin_sink.h)
};

}  // namespace overlapprof::inject
