#pragma once
// Matching collectives across ranks (docs/cross-rank.md, "Matching"): the per-op record each
// rank contributes, its match key, and the k-way merge that groups equal keys over all ranks.
// Internal to the cross-rank analyzer (analyzers/cross_rank.cc) and its tests.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "analyzers/cross_rank.h"
#include "analyzers/intervals.h"
#include "src/trace/model.h"

namespace overlapprof {

struct RankDerived;  // analyzers/overlap.h

namespace cross_rank {

inline constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

// Saturating arithmetic: times come from the data, which may be hostile.
inline int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kI64Max : kI64Min;
  return r;
}
inline int64_t SatSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? kI64Max : kI64Min;
  return r;
}
inline int64_t Clamp128(__int128 v) {
  if (v > kI64Max) return kI64Max;
  if (v < kI64Min) return kI64Min;
  return static_cast<int64_t>(v);
}

// How a rank keyed an op; ops match across ranks only with the same kind.
enum KeyKind : uint8_t {
  kKeySeq = 0,          // CommOp::seq (NCCL / PyTorch sequence number)
  kKeyStepOrdinal = 1,  // (step of the iteration window holding the op's start, ordinal in it)
  kKeyOrdinal = 2,      // ordinal of the op in its communicator on this rank
};
inline constexpr uint8_t kWholeGap = 0xff;  // OpRecord::ngaps: nothing of the op's interval was covered

// The time of an op's interval that compute did not cover, as pieces in time order: within
// [start, end), `uncovered` of its ns were not covered. A piece from a single gap is exact
// (uncovered == end - start); beyond kMaxGapsPerOp gaps, neighbours are merged (the pair whose
// merge loses least: min(uncovered, covered) of the merged piece), and inside a merged piece the
// uncovered time is taken as spread evenly. The sum over an op's pieces is always exact.
struct Piece {
  int64_t start = 0, end = 0, uncovered = 0;
};

inline constexpr uint32_t kNoKernelTimes = 0xffffffffu;

// One communication op of one rank: 56 bytes, all the analyzer keeps per op.
struct OpRecord {
  int64_t start_ns = 0, end_ns = 0;  // first kernel start, last kernel end (the rank's clock)
  int64_t key_major = 0;             // seq; step (kUnknown: outside every step); 0
  int64_t bytes = kUnknown;
  uint32_t key_minor = 0;  // ordinal (0 for seq keys)
  uint32_t comm = 0;       // interned communicator
  uint32_t gaps = 0;       // first of its gaps in RankOps::gaps
  Collective op = Collective::kUnknown;  // the op's kind (OpSpan::collective)
  uint8_t key_kind = kKeyOrdinal;
  uint8_t ngaps = 0;  // 0..kMaxGapsPerOp, or kWholeGap
  // start/end are the GPU times NCCL's profiler plugin gave the op (OpSpan::plugin_timed): the
  // index of its kernel times in RankOps::kernel_times, for a collective some rank lacks plugin
  // times for (docs/cross-rank.md, "Timing"). kNoKernelTimes: start/end are kernel times.
  uint32_t kernel_times = kNoKernelTimes;
};
static_assert(sizeof(OpRecord) == 56, "keep the per-op record small");

inline bool KeyLess(const OpRecord& a, const OpRecord& b) {
  return std::tie(a.comm, a.key_kind, a.key_major, a.key_minor) < std::tie(b.comm, b.key_kind, b.key_major, b.key_minor);
}
inline bool KeyEq(const OpRecord& a, const OpRecord& b) {
  return a.comm == b.comm && a.key_kind == b.key_kind && a.key_major == b.key_major && a.key_minor == b.key_minor;
}

// The match key as the JSON summary writes it: seq:N, step:S:K, step:none:K, ord:K.
std::string KeyText(uint8_t kind, int64_t major, uint32_t minor);

// Strings seen across all ranks (communicators), each stored once, as dense ids.
class Interner {
 public:
  uint32_t Intern(const std::string& s);
  const std::string& Name(uint32_t id) const { return names_[id]; }
  size_t size() const { return names_.size(); }

 private:
  std::vector<std::string> names_;
  std::map<std::string, uint32_t> ids_;
};

// One send or recv of one rank, kept for pairing (docs/cross-rank.md, "Point-to-point").
struct P2pRecord {
  int64_t start_ns = 0, end_ns = 0;  // the rank's clock
  int64_t step = kUnknown;           // the step of the iteration window holding its start
  int64_t self = 0, peer = 0;        // this rank's and the peer's rank in the communicator
  uint32_t comm = 0;                 // interned communicator
  bool send = false;
};

// What one rank contributes: its ops, sorted by key, one per key.
struct RankOps {
  int64_t rank = kUnknown;
  std::string host;
  int64_t exposed_comm_ns = 0;  // the overlap engine's, for the findings
  std::vector<OpRecord> ops;    // sorted by key, one per key
  std::vector<Piece> gaps;      // uncovered pieces of the ops (OpRecord::gaps, ngaps)
  // (first kernel start, last kernel end) of the plugin-timed ops (OpRecord::kernel_times);
  // their launch group's kernels, or the plugin's times when the group had no kernel.
  std::vector<std::pair<int64_t, int64_t>> kernel_times;
  std::vector<std::pair<uint32_t, int64_t>> comm_nranks;  // communicator -> largest comm_nranks seen
  std::vector<P2pRecord> p2p;   // its sends and recvs with known peers, by start
  // The rank's iteration windows (its own clock, in order, partitioning the GPU timeline), for
  // the exposed wait per iteration: an op's wait counts in the window holding its start.
  std::vector<int64_t> window_starts, window_ends;
  // Whether the ops of window i (and, when no window is steady, every op) count in the waiting
  // per waited-for rank: the step breakdown's basis (steady iterations, else the whole trace).
  std::vector<bool> window_steady;
  bool any_steady = false;
  // The window holding `start_ns`, or -1 when none does.
  int64_t WindowOf(int64_t start_ns) const {
    auto w = std::upper_bound(window_starts.begin(), window_starts.end(), start_ns);
    if (w == window_starts.begin()) return -1;
    const size_t i = static_cast<size_t>(w - window_starts.begin()) - 1;
    return start_ns < window_ends[i] ? static_cast<int64_t>(i) : -1;
  }
};

// Counts made while recording ranks, for collectives_summary.
struct RecordCounts {
  int64_t p2p_skipped = 0, duplicate_keys = 0;
  // Of p2p_skipped: SendRecv kernels that neither a host op nor an injector group named (all-to-all,
  // send or recv), and sends/recvs whose own or peer rank in the communicator is unknown.
  int64_t p2p_unnamed = 0, p2p_no_peer = 0;
};

// The uncovered pieces of [s, e) against `compute` (at most kMaxGapsPerOp; see Piece). Returns
// how many were written to `out`.
int UncoveredPieces(const IntervalSet& compute, int64_t s, int64_t e, std::array<Piece, kMaxGapsPerOp + 1>& out);
// The same with `first` = compute.FirstEndingAfter(s) already known (IntervalSet::Cursor).
int UncoveredPieces(const IntervalSet& compute, size_t first, int64_t s, int64_t e,
                    std::array<Piece, kMaxGapsPerOp + 1>& out);

// |[start, start + wait) \ compute| on the rank's own clock (see Piece).
int64_t ExposedWait(const RankOps& r, const OpRecord& rec, int64_t wait);

// One rank's records: every communication op of `derived` but point-to-point ones, keyed
// (sequence number, else step and ordinal when `derived` has step markers, else ordinal),
// sorted by key, duplicates of a key dropped (the earliest kept). Sends and recvs with a known
// own and peer rank go to RankOps::p2p (an all-to-all, named so by the importer, is a collective).
RankOps RecordRankOps(const RankTrace& trace, const RankDerived& derived, Interner& comms, RecordCounts& counts);

// RecordRankOps in two steps: the first needs the rank alone (Analyzer::PrepareRank: on the
// thread that read it), the second adds it to the run's interned names and counts (AnalyzeRank,
// in input order). RecordRankOps(t, d, ...) == AddRankOps(PrepareRankOps(t, d), ...).
struct PreparedRankOps {
  RankOps ops;                   // in start order; comm ids are `comms`' below
  Interner comms;                // the rank's own, in order of first use (as the run's would be)
  RecordCounts counts;           // the rank's p2p counts
  std::map<uint32_t, int64_t> nranks;  // communicator (the rank's id) -> largest comm_nranks
};
PreparedRankOps PrepareRankOps(const RankTrace& trace, const RankDerived& derived);
RankOps AddRankOps(PreparedRankOps prepared, Interner& comms, RecordCounts& counts);

// One rank's op in a group of equal keys: `slot` is the index of its RankOps.
struct Member {
  size_t slot;
  const OpRecord* rec;
};

// Calls fn(const std::vector<Member>&) once per key over all ranks (a k-way merge of the ranks'
// sorted ops), members in slot order. A group of one is an op no other rank has.
template <typename Fn>
void ForEachGroup(const std::vector<RankOps>& ranks, Fn&& fn) {
  std::vector<std::pair<size_t, size_t>> heap;  // (slot, position)
  auto greater = [&](const std::pair<size_t, size_t>& a, const std::pair<size_t, size_t>& b) {
    const OpRecord& x = ranks[a.first].ops[a.second];
    const OpRecord& y = ranks[b.first].ops[b.second];
    if (KeyLess(y, x)) return true;
    if (KeyLess(x, y)) return false;
    return a.first > b.first;
  };
  for (size_t s = 0; s < ranks.size(); ++s)
    if (!ranks[s].ops.empty()) heap.emplace_back(s, 0);
  std::make_heap(heap.begin(), heap.end(), greater);
  std::vector<Member> group;
  std::vector<std::pair<size_t, size_t>> taken;
  while (!heap.empty()) {
    group.clear();
    taken.clear();
    std::pop_heap(heap.begin(), heap.end(), greater);
    taken.push_back(heap.back());
    heap.pop_back();
    const OpRecord& key = ranks[taken[0].first].ops[taken[0].second];
    while (!heap.empty() && KeyEq(ranks[heap.front().first].ops[heap.front().second], key)) {
      std::pop_heap(heap.begin(), heap.end(), greater);
      taken.push_back(heap.back());
      heap.pop_back();
    }
    for (const auto& [s, p] : taken) group.push_back({s, &ranks[s].ops[p]});
    fn(group);
    for (auto [s, p] : taken) {
      if (++p < ranks[s].ops.size()) {
        heap.emplace_back(s, p);
        std::push_heap(heap.begin(), heap.end(), greater);
      }
    }
  }
}

}  // namespace cross_rank
}  // namespace overlapprof
