#pragma once
// The causal model of a step (docs/what-if.md): per rank, the host calls per thread in order, the
// GPU tasks per stream in FIFO order, launch edges, host-waits-for-GPU edges and cross-stream edges
// (inferred where the trace does not record them), and across ranks the matched collectives. The
// model is a graph of events (a task's start and end) joined by edges with a latency in ns; the
// replay gives every event the latest of (source time + latency) over its edges, in topological
// order, so the unmodified graph gives back the measured times. Scenarios change latencies.
//
// Units: ns. Times of a rank are on its own clock; collectives convert through the cross-rank
// analyzer's clock offsets (domain minus reference). Memory: only the modeled steady iterations
// (at most kMaxModelIterations + 1 windows per rank).
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analyzers/iterations.h"
#include "analyzers/what_if_fit.h"
#include "src/trace/model.h"

namespace overlapprof::whatif {

// Steps replayed per rank: the first run of consecutive steady windows, at most this many steps
// (one more window is modeled: a step ends where the next window's first GPU task starts).
inline constexpr size_t kMaxModelIterations = 8;
// A GPU task that starts at most this long after a task on another stream of its rank ended, later
// than its own stream and launch allow, waits for that task (an inferred event edge).
inline constexpr int64_t kEventToleranceNs = 5000;

// A GPU task that starts more than this long after its stream and its launch call allowed (past
// the rank's typical launch latency), with no recorded or inferred dependency to explain it, waits
// for something the model does not see: its delay is counted as unexplained (RankModel).
inline constexpr int64_t kUnexplainedDelayNs = 50000;
// Scenarios are not predicted when a modeled rank's unexplained delays exceed this share of its
// measured steps: the replay would keep (or, without host overhead, drop) delays whose cause it
// does not know.
inline constexpr double kMaxUnexplainedShare = 0.05;

// What an edge models; scenarios change latencies by kind.
enum class EdgeKind : uint8_t {
  kHostWork,      // host call start -> its end (its measured duration)
  kHostGap,       // previous host call's end -> host call start (same thread, or inferred across threads)
  kLaunch,        // launch call start -> GPU task start
  kStream,        // previous task on the stream ends -> GPU task start
  kEvent,         // task on another stream ends -> GPU task start (recorded or inferred: Edge::recorded)
  kSyncWait,      // GPU task end -> synchronizing host call end (recorded or inferred: Edge::recorded)
  kCompute,       // compute GPU task start -> end (measured duration)
  kComm,          // communication GPU task not matched across ranks: start -> end
  kMemory,        // memcpy / memset start -> end
  kOther,         // any other GPU task start -> end
  kArrive,        // collective member start -> the collective's arrival event (lat = -clock offset)
  kTransfer,      // arrival -> member end (lat = clock offset + transfer, `aux` = transfer)
};

enum class TaskKind : uint8_t { kHost, kHostSync, kGpu };

struct Edge {
  uint32_t src = 0, dst = 0;  // events: 2 * task (start), 2 * task + 1 (end), or an arrival event
  int64_t lat = 0;
  int64_t aux = 0;  // kTransfer: the transfer time (lat - aux is the clock offset term)
  EdgeKind kind = EdgeKind::kHostWork;
  bool source_is_sync = false;  // kHostGap: the source is a synchronizing host call
  bool recorded = false;        // kEvent, kSyncWait: from the trace's event records (EventLink), not inferred
};

struct Task {
  int64_t start_ns = 0, end_ns = 0;  // measured, the rank's clock
  TaskKind kind = TaskKind::kHost;
};

// A collective member of one rank: its task and match key (communicator, sequence number, or the
// op's ordinal in its communicator on the rank, negated minus one).
struct CollectiveMember {
  std::string communicator;
  int64_t key = 0;
  uint32_t task = 0;
  Collective op = Collective::kUnknown;
  int64_t bytes = kUnknown;  // CommOp::bytes
};

// One rank's model. Task and event indices are the rank's own until the run's graph joins them.
struct RankModel {
  int64_t rank = kUnknown;
  std::string why_not;  // non-empty: the rank is not modeled
  std::vector<Task> tasks;
  std::vector<Edge> edges;  // within the rank (collective ends are added by the run)
  std::vector<CollectiveMember> collectives;
  // The GPU tasks of modeled window w are [window_first[w], window_first[w + 1]) (GPU tasks are
  // stored in start order); window_first has one entry per window and one past the end.
  std::vector<uint32_t> window_first;
  // GPU task -> its index in the trace's activities (tasks [0, gpu_activity.size()) are the GPU
  // tasks), so that a scenario can look at what the model does not keep (names, bytes).
  std::vector<uint32_t> gpu_activity;
  // Measured step k: start of window k + 1's first task - start of window k's first task.
  std::vector<int64_t> measured_steps;
  int64_t dependencies_inferred = 0;
  // Edges from the trace's own records of CUDA events (RankTrace::event_links: a stream or the host
  // waiting for an event record); where one exists for a task, rules C and E (GPU) or S (host) are
  // not applied to it.
  int64_t dependencies_recorded = 0;
  // Sum over the modeled GPU tasks of their start delay beyond what their stream, launch and
  // inferred dependencies explain, where it exceeds kUnexplainedDelayNs (ns).
  int64_t unexplained_ns = 0;
  size_t Iterations() const { return measured_steps.size(); }
};

// Builds the model of one rank from its trace (host calls needed) and iteration windows.
RankModel BuildRankModel(const RankTrace& trace, const std::vector<IterationWindow>& windows);

// A scenario's change to one GPU task (RankModel::tasks index; host tasks ignore it).
struct TaskChange {
  double factor = 1.0;   // its duration (a matched collective member: its transfer) multiplied by this
  int64_t extra_ns = 0;  // then this added (ns; may be negative: the replay clamps nothing)
  // A matched collective member that no longer synchronizes: it ends when it starts (no waiting for
  // the other members, no transfer), as when the collective is not issued at all.
  bool detached = false;
  // Its start waits only for the previous task on its stream: its launch and its other (recorded or
  // inferred) dependencies are dropped, as when it is issued earlier than they happen.
  bool stream_only = false;
};

// How a scenario changes the model's latencies.
struct Change {
  double comm_factor = 1.0;  // transfers and unmatched communication times multiplied by this
  bool host_free = false;    // host work, host gaps inside a step and launch latency at 0
  // Host work and host gaps (not those after a synchronization) multiplied by this; host_free wins.
  double host_factor = 1.0;
  // Per rank slot: factor applied to compute durations, and to host work and host gaps other than
  // those after a synchronization (empty: none).
  std::vector<double> compute_factor;
  // Per rank slot, per task of that slot's RankModel (empty, or shorter: no change). Applied on top
  // of comm_factor and compute_factor.
  std::vector<std::vector<TaskChange>> tasks;
};

// The critical path of one replayed step: the chain of binding edges from the next window's first GPU
// task back to this window's first, its time split by what the edges model (ns; docs/what-if.md).
enum PathPart : uint8_t { kPathCompute, kPathComm, kPathWaiting, kPathHost, kPathLaunch, kPathMemory, kPathOther };
inline constexpr int kPathParts = 7;
struct PathSplit {
  int64_t length_ns = 0;        // the replayed step
  int64_t part_ns[kPathParts] = {};  // sums to the path's time (negative latencies count 0)
  int64_t waited_slot = -1;     // the slot whose work the path waited on longest (waiting), -1 none
};

// The run's graph: every rank's model joined by its collectives.
class RunGraph {
 public:
  // `offsets[slot]`: the slot's clock offset (domain minus reference; 0 when not applied).
  RunGraph(std::vector<RankModel> ranks, const std::vector<int64_t>& offsets);
  // Replays with `change`; returns per slot the replayed steps (empty for unmodeled slots).
  // With `paths`: also each replayed step's critical path, per slot.
  std::vector<std::vector<int64_t>> Replay(const Change& change,
                                           std::vector<std::vector<PathSplit>>* paths = nullptr) const;
  const std::vector<RankModel>& ranks() const { return ranks_; }
  int64_t matched_collectives() const { return matched_; }
  int64_t negative_transfers() const { return negative_transfers_; }
  // The modeled ranks' collective members with known bytes, timed (for FitTransfers): a matched
  // member's transfer, an unmatched one's kernel duration.
  const std::vector<TransferSample>& transfer_samples() const { return samples_; }
  // Per slot: the sum of its compute tasks' durations (for the straggler scenario).
  std::vector<int64_t> ComputeTime() const;

 private:
  std::vector<RankModel> ranks_;
  std::vector<uint32_t> base_;       // per slot: its first event in the run's numbering
  std::vector<uint32_t> edge_slot_;  // per edge: the slot it belongs to
  std::vector<Edge> edges_;          // run numbering
  std::vector<int64_t> measured_;    // per event: measured time (anchors)
  // Per collective arrival event (event - first_arrival_): its members' (slot, start event, -offset).
  struct Arrival {
    uint32_t slot, start;
    int64_t lat;
  };
  std::vector<std::vector<Arrival>> arrivals_;
  uint32_t first_arrival_ = 0;
  uint32_t events_ = 0;
  int64_t matched_ = 0, negative_transfers_ = 0;
  std::vector<TransferSample> samples_;
};

}  // namespace overlapprof::whatif
