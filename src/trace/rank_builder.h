#pragma once
// What every importer does the same way while it builds a rank's trace (docs/classification.md):
//  - a kernel without identity is communication by its name (rule 3), with its own comm op
//    naming the collective the kernel runs; each distinct name is looked up once;
//  - a peer copy is communication with its own "p2p_copy" op (rule 4);
//  - each GPU activity is linked to the host call that launched it (correlation id -> the first
//    call with that id): its launch time, and for communication its op's host call.
// The importer keeps what is particular to its format: which copies are peer copies, identity
// from metadata, host-op rules, and how the activities are stored (it appends them itself, with
// its own growth policy).
//
// One RankTraceBuilder per rank trace under construction, used by one thread. It holds only
// per-trace memos and the launch-linking state; every call names the trace it builds, which
// must be the same RankTrace each time (so the builder may live beside it and be moved).
// Correlation ids come from the file: they are kept in sorted vectors, never in
// identity-hashed containers (floodable).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "src/trace/model.h"

namespace overlapprof {

// Which activities a launch link covers and what it sets.
enum class LaunchLink : uint8_t {
  // Importers: every GPU activity but sync records gets its launch time from its call, and a
  // communication activity's op the call's enter/exit/thread (RankTrace::LinkLaunch). An
  // activity without an id, or whose id no call has, counts as correlations_unmatched.
  kImported,
  // Injector stores (LinkInjectorRecords): every activity that has an id and no launch time yet
  // gets the launch time of its call, sync records included; ops are not touched (they carry
  // their NCCL call's times). Counted as unmatched: a non-sync activity whose id no call has.
  kRecorded,
};

class RankTraceBuilder {
 public:
  static constexpr size_t kNotWaiting = static_cast<size_t>(-1);

  // --- Activities: call before appending `a` to t.activities (the importer appends it) ---

  // Rule 3, for a kernel without identity: communication when its name (a.name_id, an id of
  // t.names) belongs to a communication kernel family (kCommKernelFamilies), else compute.
  // Communication gets a new op (NewCommOp, rule kernel name) whose collective is read from the
  // kernel name. Both lookups are done once per distinct name.
  void AddKernel(RankTrace& t, Activity& a);
  // Rule 4, for a copy the importer found to be between two GPUs: communication, with a new op
  // "p2p_copy" (rule peer copy) of the copy's bytes.
  static void AddPeerCopy(RankTrace& t, Activity& a);
  // A new comm op for `a`, appended to t.comm_ops: source kernel name, `rule`, communicator
  // "unknown", a's stream; `a` becomes communication and refers to it. The caller names the
  // collective (and fills what else it knows).
  static CommOp& NewCommOp(RankTrace& t, Activity& a, CommRule rule);

  // --- Launches, host calls in memory (Kineto, rocprof, injector stores) ---

  // Links the activities of t (those `link` covers) to the first call in `calls` (in their
  // order) with the activity's correlation id, and counts the unmatched (see LaunchLink).
  // `on_link(activity index, index into calls)` is called after each link, in activity order.
  // Fastest when `calls` are sorted by id (no index is built) and the activities come mostly
  // in launch order (each lookup gallops on from the last answer).
  template <typename OnLink>
  void LinkLaunches(RankTrace& t, std::span<const HostCall> calls, LaunchLink link, OnLink&& on_link);
  void LinkLaunches(RankTrace& t, std::span<const HostCall> calls, LaunchLink link = LaunchLink::kImported) {
    LinkLaunches(t, calls, link, [](uint32_t, uint32_t) {});
  }

  // --- Launches, host calls streamed (nsys: the runtime table is read once, rows not kept) ---
  // With LaunchLink::kImported semantics:
  //   ExpectLaunches(t); for each call: if (InRange(id)) { w = Waiting(id); if (w != kNotWaiting
  //   && !Launched(w)) Launch(t, w, call); }  EndLaunches(t);

  // Every GPU activity of t (not sync) that has a correlation id waits for its call. False
  // when none does (nothing to read). Activities appended later do not wait.
  bool ExpectLaunches(const RankTrace& t);
  // Whether `correlation` lies between the lowest and highest id waited for (a cheap filter).
  bool InRange(int64_t correlation) const { return correlation >= lo_ && correlation <= hi_; }
  // A handle on the activities waiting for the call with id `correlation`, or kNotWaiting.
  // Gallops on from the last answer: calls come in about the order of their ids.
  size_t Waiting(int64_t correlation);
  // True when a call with that id already launched them (the first call wins).
  bool Launched(size_t waiting) const { return linked_[waiting] != 0; }
  // `h` launched them: RankTrace::LinkLaunch for each. A no-op when already Launched.
  void Launch(RankTrace& t, size_t waiting, const HostCall& h);
  // Counts correlations_unmatched: every GPU activity of t (not sync) that no call launched,
  // those without an id included (also when ExpectLaunches was never called: none was read).
  // Frees the waiting list.
  void EndLaunches(RankTrace& t);

  // The first index i in [0, n) with key(i) >= id (n when none), for keys sorted ascending;
  // `hint` (in/out) is where the last answer was: a lookup gallops on from it when id lies
  // past it, else searches below it. For ids asked in mostly increasing order.
  template <typename Key>
  static size_t GallopLowerBound(size_t n, Key&& key, int64_t id, size_t& hint);

 private:
  // By name id: -1 not yet classified, 0 compute, 1 communication (AddKernel).
  std::vector<int8_t> name_is_comm_;
  // By name id: the collective its kernel name runs, read once (AddKernel).
  std::vector<std::optional<decltype(CommOp::op)>> name_op_;
  // ExpectLaunches .. EndLaunches: (correlation id, activity index) sorted, a flag per entry
  // (linked), the ids' range, where the last match was, how many activities were linked.
  std::vector<std::pair<int64_t, uint32_t>> waiting_;
  std::vector<uint8_t> linked_;
  int64_t lo_ = 1, hi_ = 0;  // empty range
  size_t hint_ = 0;
  int64_t linked_activities_ = 0;
};

template <typename Key>
size_t RankTraceBuilder::GallopLowerBound(size_t n, Key&& key, int64_t id, size_t& hint) {
  size_t lo = 0, hi = std::min(hint, n);  // key(hint) >= id: the answer is in [0, hint]
  if (hint < n && key(hint) < id) {
    lo = hint + 1;  // everything before lo is < id; key(hi) >= id, or hi == n
    for (size_t step = 1;; step *= 2) {
      hi = std::min(hint + step, n);
      if (hi == n || key(hi) >= id) break;
      lo = hi + 1;
    }
  }
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (key(mid) < id) lo = mid + 1;
    else hi = mid;
  }
  return hint = lo;
}

template <typename OnLink>
void RankTraceBuilder::LinkLaunches(RankTrace& t, std::span<const HostCall> calls, LaunchLink link, OnLink&& on_link) {
  // The index: the calls themselves when their ids already come sorted (one id per call,
  // increasing: the usual case, and nothing to allocate); else (id, index) pairs sorted by id,
  // then index. Either way the first call with an id wins.
  const bool direct = std::is_sorted(calls.begin(), calls.end(), [](const HostCall& x, const HostCall& y) {
    return x.correlation_id < y.correlation_id;
  });
  std::vector<std::pair<int64_t, uint32_t>> by_corr;
  if (!direct) {
    by_corr.reserve(calls.size());
    for (uint32_t i = 0; i < calls.size(); ++i)
      if (calls[i].correlation_id != kUnknown) by_corr.emplace_back(calls[i].correlation_id, i);
    std::sort(by_corr.begin(), by_corr.end());  // in place (a stable sort by id: a buffer as large)
  }
  const size_t n = direct ? calls.size() : by_corr.size();
  auto id_at = [&](size_t i) { return direct ? calls[i].correlation_id : by_corr[i].first; };
  const bool recorded = link == LaunchLink::kRecorded;
  size_t hint = 0;
  int64_t unmatched = 0;
  for (uint32_t i = 0; i < t.activities.size(); ++i) {
    Activity& a = t.activities[i];
    if (recorded ? a.correlation_id == kUnknown || a.launch_ns != kUnknown : a.kind == ActivityKind::kSync) continue;
    const size_t w = a.correlation_id == kUnknown ? n : GallopLowerBound(n, id_at, a.correlation_id, hint);
    if (w == n || id_at(w) != a.correlation_id) {
      if (a.kind != ActivityKind::kSync) ++unmatched;
      continue;
    }
    const uint32_t c = direct ? static_cast<uint32_t>(w) : by_corr[w].second;
    if (recorded) a.launch_ns = calls[c].start_ns;
    else t.LinkLaunch(a, calls[c]);
    on_link(i, c);
  }
  t.stats.Add(Stat::correlations_unmatched, unmatched);
}

}  // namespace overlapprof
