// One set of iteration windows for the ranks of one job (see the header).
#include "analyzers/cross_rank_windows.h"

#include "src/common/file_key_map.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "analyzers/overlap.h"

namespace overlapprof {

namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool IsMarkers(const std::string& source) { return source == "ProfilerStep" || source == "step range"; }

// Whether `a` is a better reference than `b`: stronger evidence, then a known and lower rank,
// then the earlier input.
bool BetterReference(const RankWindowRecord& a, const RankWindowRecord& b) {
  if (a.evidence != b.evidence) return a.evidence > b.evidence;
  if ((a.rank == kUnknown) != (b.rank == kUnknown)) return b.rank == kUnknown;
  if (a.rank != b.rank) return a.rank < b.rank;
  return a.input_index < b.input_index;
}

// Index of the first op starting in [lo, hi), or ops.size().
size_t FirstOpIn(const std::vector<RankWindowRecord::Op>& ops, int64_t lo, int64_t hi) {
  auto it = std::lower_bound(ops.begin(), ops.end(), lo,
                             [](const RankWindowRecord::Op& o, int64_t v) { return o.start_ns < v; });
  return it != ops.end() && it->start_ns < hi ? static_cast<size_t>(it - ops.begin()) : ops.size();
}

// Keys of the first op of each window.
std::vector<uint64_t> BoundaryKeys(const RankWindowRecord& r) {
  std::vector<uint64_t> keys;
  for (const IterationWindow& w : r.windows)
    if (size_t i = FirstOpIn(r.ops, w.start_ns, w.end_ns); i < r.ops.size()) keys.push_back(r.ops[i].key);
  return keys;
}

// The ops of `r` inside its windowed span (first window's start to last window's end), by key.
FileKeySet<uint64_t> KeysInSpan(const RankWindowRecord& r) {
  FileKeySet<uint64_t> keys;
  if (r.windows.empty()) return keys;
  const int64_t lo = r.windows.front().start_ns, hi = r.windows.back().end_ns;
  for (const auto& o : r.ops)
    if (o.start_ns >= lo && o.start_ns < hi) keys.insert(o.key);
  return keys;
}

// Window starts where `a` and `b` differ, over the ops both hold inside both windowed spans.
// Two ranks with markers are not compared: their step numbers name the same steps, and the GPU
// work each projects into a step may differ by a collective launched near the step's edge (seen
// on the 2-rank H100 fixture: windows of 8 and 0 ops on one rank where the other has 4 and 4).
int64_t Disagreeing(const RankWindowRecord& a, const RankWindowRecord& b) {
  if (a.windows.empty() || b.windows.empty()) return 0;
  if (a.evidence == WindowEvidence::kMarkers && b.evidence == WindowEvidence::kMarkers) return 0;
  const FileKeySet<uint64_t> in_a = KeysInSpan(a), in_b = KeysInSpan(b);
  auto common = [&](uint64_t k) { return in_a.count(k) > 0 && in_b.count(k) > 0; };
  FileKeySet<uint64_t> ba, bb;
  for (uint64_t k : BoundaryKeys(a))
    if (common(k)) ba.insert(k);
  for (uint64_t k : BoundaryKeys(b))
    if (common(k)) bb.insert(k);
  int64_t n = 0;
  for (uint64_t k : ba) n += bb.count(k) == 0;
  for (uint64_t k : bb) n += ba.count(k) == 0;
  return n;
}

// The reference's windows on rank `t` through the ops both hold (see the header). Windows whose
// first op `t` lacks are left out.
std::vector<IterationWindow> MapWindows(const RankWindowRecord& ref, const RankWindowRecord& t) {
  FileKeyMap<uint64_t, size_t> index;
  for (size_t i = 0; i < t.ops.size(); ++i) index.emplace(t.ops[i].key, i);  // the first of a key
  // The latest end of the ops before each op of t.
  std::vector<int64_t> prev_end(t.ops.size(), std::numeric_limits<int64_t>::min());
  for (size_t i = 1; i < t.ops.size(); ++i) prev_end[i] = std::max(prev_end[i - 1], t.ops[i - 1].end_ns);
  struct Mapped {
    size_t k;  // the reference's window
    int64_t start;
  };
  std::vector<Mapped> starts;
  for (size_t k = 0; k < ref.windows.size(); ++k) {
    const IterationWindow& w = ref.windows[k];
    const size_t a = FirstOpIn(ref.ops, w.start_ns, w.end_ns);
    if (a == ref.ops.size()) continue;
    auto it = index.find(ref.ops[a].key);
    if (it == index.end()) continue;
    const RankWindowRecord::Op& o = t.ops[it->second];
    const int64_t lead = ref.ops[a].start_ns - w.start_ns;  // >= 0
    const int64_t start = std::min(o.start_ns, std::max(prev_end[it->second], o.start_ns - lead));
    if (!starts.empty() && start <= starts.back().start) continue;  // ops in another order: not carried
    starts.push_back({k, start});
  }
  std::vector<IterationWindow> out;
  for (size_t j = 0; j < starts.size(); ++j) {
    const IterationWindow& w = ref.windows[starts[j].k];
    IterationWindow m;
    m.start_ns = starts[j].start;
    m.step = w.step;
    m.projected = true;
    const bool contiguous = j + 1 < starts.size() && starts[j + 1].k == starts[j].k + 1 &&
                            ref.windows[starts[j].k + 1].start_ns <= w.end_ns;
    if (contiguous) {
      m.end_ns = starts[j + 1].start;
    } else {
      // After the same last op as on the reference, by as much as there.
      m.end_ns = m.start_ns + (w.end_ns - w.start_ns);
      auto last = std::lower_bound(ref.ops.begin(), ref.ops.end(), w.end_ns,
                                   [](const RankWindowRecord::Op& o, int64_t v) { return o.start_ns < v; });
      if (last != ref.ops.begin() && std::prev(last)->start_ns >= w.start_ns) {
        --last;
        if (auto it = index.find(last->key); it != index.end())
          m.end_ns = t.ops[it->second].end_ns + std::max<int64_t>(0, w.end_ns - last->end_ns);
      }
      if (j + 1 < starts.size()) m.end_ns = std::min(m.end_ns, starts[j + 1].start);
      m.end_ns = std::max(m.end_ns, m.start_ns);
    }
    out.push_back(m);
  }
  return out;
}

std::string RankName(const RankWindowRecord& r) {
  return r.rank == kUnknown ? fmt::format("input {}", r.input_index) : fmt::format("rank {}", r.rank);
}

}  // namespace

RankWindowRecord RecordRankWindows(const RankTrace& t, const RankDerived& d, size_t input_index) {
  RankWindowRecord r;
  r.input_index = input_index;
  r.rank = t.meta.rank;
  r.source = d.iterations.source;
  r.steps = d.iterations.steps;
  r.windows = d.iterations.windows;
  r.evidence = r.windows.empty()        ? WindowEvidence::kNone
               : IsMarkers(r.source)    ? WindowEvidence::kMarkers
                                        : WindowEvidence::kDetected;
  std::unordered_map<std::string, uint64_t> ordinal;  // communicator -> ops seen on it
  r.ops.reserve(d.ops.size());
  for (const OpSpan& s : d.ops) {
    if (s.family == Collective::kPeerCopy) continue;  // copies between GPUs, not matched across ranks
    const CommOp* op = s.op != kNoIndex && s.op < t.comm_ops.size() ? &t.comm_ops[s.op] : nullptr;
    static const std::string kNoComm;
    const std::string& comm = op ? op->communicator : kNoComm;
    const uint64_t c = Mix(std::hash<std::string>()(comm));
    const uint64_t key = op && op->seq != kUnknown ? Mix(c ^ (static_cast<uint64_t>(op->seq) << 1 | 1))
                                                   : Mix(c ^ (ordinal[comm]++ << 1));
    r.ops.push_back({key, s.start_ns, std::max(s.end_ns, s.start_ns)});
  }
  return r;
}

bool WindowPlan::any_replaced() const {
  return std::any_of(ranks.begin(), ranks.end(), [](const auto& e) { return e.second.replace; });
}

WindowPlan PlanRankWindows(const std::vector<RankWindowRecord>& records) {
  WindowPlan plan;
  if (records.size() < 2) return plan;
  const RankWindowRecord* ref = nullptr;
  for (const RankWindowRecord& r : records)
    if (r.evidence != WindowEvidence::kNone && (!ref || BetterReference(r, *ref))) ref = &r;
  if (!ref) return plan;
  for (const RankWindowRecord& t : records) {
    if (&t == ref) continue;
    RankWindowPlan p;
    p.disagreeing = Disagreeing(*ref, t);
    if (p.disagreeing > 0)
      p.notice = fmt::format("its own iteration windows ({}) and {}'s ({}) start at {} different communication op(s) "
                             "of the ops both hold: the ranks disagree on where a step starts",
                             t.source, RankName(*ref), ref->source, p.disagreeing);
    // A rank with markers keeps them; one with detected windows agreeing with a detected
    // reference keeps its own (its cuts on its own timeline); every other one takes the
    // reference's.
    const bool take = t.evidence < ref->evidence || (t.evidence == WindowEvidence::kDetected && p.disagreeing > 0);
    if (take) {
      std::vector<IterationWindow> mapped = MapWindows(*ref, t);
      if (mapped.empty()) {
        p.notice += fmt::format("{}{}'s iteration windows ({}) could not be carried to this rank: none of their first "
                                "communication ops is among this rank's (other profiling windows, or no common "
                                "sequence numbers or op order)",
                                p.notice.empty() ? "" : "; ", RankName(*ref), ref->source);
      } else {
        p.replace = true;
        IterationInfo& info = p.windows;
        info.windows = std::move(mapped);
        info.source = "carried";
        info.steps = ref->steps;
        info.notice = fmt::format(
            "{} iterations carried from {}'s {} windows through the communication ops both ranks hold (NCCL "
            "sequence numbers, else their order per communicator): {} of its {} windows{}",
            info.windows.size(), RankName(*ref), ref->source, info.windows.size(), ref->windows.size(),
            t.evidence == WindowEvidence::kNone ? "; this rank's own evidence gave none" : "");
      }
    }
    if (p.replace || !p.notice.empty()) plan.ranks.emplace(t.input_index, std::move(p));
  }
  return plan;
}

}  // namespace overlapprof
