// Matching collectives across ranks: what each rank contributes (docs/cross-rank.md, "Matching").
#include "analyzers/cross_rank_match.h"

#include <fmt/format.h>

#include "analyzers/comm_ops.h"
#include "analyzers/overlap.h"

namespace overlapprof::cross_rank {

std::string KeyText(uint8_t kind, int64_t major, uint32_t minor) {
  switch (kind) {
    case kKeySeq: return fmt::format("seq:{}", major);
    case kKeyStepOrdinal:
      return major == kUnknown ? fmt::format("step:none:{}", minor) : fmt::format("step:{}:{}", major, minor);
    default: return fmt::format("ord:{}", minor);
  }
}

uint32_t Interner::Intern(const std::string& s) {
  if (auto it = ids_.find(s); it != ids_.end()) return it->second;  // (emplace would allocate a node first)
  const uint32_t id = static_cast<uint32_t>(names_.size());
  ids_.emplace(s, id);
  names_.push_back(s);
  return id;
}

int UncoveredPieces(const IntervalSet& compute, int64_t s, int64_t e, std::array<Piece, kMaxGapsPerOp + 1>& out) {
  return UncoveredPieces(compute, compute.FirstEndingAfter(s), s, e, out);
}

int UncoveredPieces(const IntervalSet& compute, size_t first, int64_t s, int64_t e,
                    std::array<Piece, kMaxGapsPerOp + 1>& out) {
  int n = 0;
  auto emit = [&](int64_t a, int64_t b) {
    if (b <= a) return;
    out[n++] = {a, b, b - a};
    if (n <= kMaxGapsPerOp) return;
    int best = 0;
    int64_t best_loss = kI64Max;
    for (int i = 0; i + 1 < n; ++i) {
      const int64_t len = out[i + 1].end - out[i].start, u = out[i].uncovered + out[i + 1].uncovered;
      const int64_t loss = std::min(u, len - u);
      if (loss <= best_loss) {  // ties: the later pair, so that the start (where waiting is) stays exact
        best_loss = loss;
        best = i;
      }
    }
    out[best].end = out[best + 1].end;
    out[best].uncovered += out[best + 1].uncovered;
    for (int i = best + 1; i + 1 < n; ++i) out[i] = out[i + 1];
    --n;
  };
  const auto& iv = compute.intervals();
  auto it = iv.begin() + static_cast<std::ptrdiff_t>(std::min(first, iv.size()));
  int64_t cur = s;
  for (; it != iv.end() && it->start < e && cur < e; ++it) {
    if (it->start > cur) emit(cur, it->start);
    cur = std::max(cur, it->end);
  }
  if (cur < e) emit(cur, e);
  return n;
}

int64_t ExposedWait(const RankOps& r, const OpRecord& rec, int64_t wait) {
  if (wait <= 0) return 0;
  const int64_t hi = SatAdd(rec.start_ns, wait);
  if (rec.ngaps == kWholeGap) return std::min(hi, rec.end_ns) - rec.start_ns;
  int64_t sum = 0;
  for (uint32_t i = 0; i < rec.ngaps && rec.gaps + i < r.gaps.size(); ++i) {
    const Piece& g = r.gaps[rec.gaps + i];
    if (hi >= g.end) {
      sum += g.uncovered;
    } else if (hi > g.start) {
      // Exact for a single gap (uncovered == length); spread evenly in a merged piece.
      const __int128 part = static_cast<__int128>(g.uncovered) * (hi - g.start);
      sum += static_cast<int64_t>(part / (g.end - g.start));
      break;
    } else {
      break;
    }
  }
  return sum;
}

namespace {

bool IsPointToPoint(Collective c) {
  return c == Collective::kSend || c == Collective::kRecv || c == Collective::kSendRecv;
}

// The step of the iteration window holding `start` (kUnknown: outside every window). Windows
// partition the GPU timeline in order: the last starting at or before the op.
int64_t StepOf(const std::vector<IterationWindow>& windows, int64_t start) {
  auto w = std::upper_bound(windows.begin(), windows.end(), start,
                            [](int64_t v, const IterationWindow& x) { return v < x.start_ns; });
  if (w == windows.begin()) return kUnknown;
  --w;
  if (start < w->end_ns || (w + 1 == windows.end() && start <= w->end_ns)) return w->step;
  return kUnknown;
}

void RecordWindows(const std::vector<IterationWindow>& windows, RankOps& r) {
  r.window_starts.reserve(windows.size());
  r.window_ends.reserve(windows.size());
  for (const IterationWindow& w : windows) {
    r.window_starts.push_back(w.start_ns);
    r.window_ends.push_back(w.end_ns);
    r.window_steady.push_back(!w.warmup);
    r.any_steady = r.any_steady || !w.warmup;
  }
}

// A send or recv with both ranks known becomes a P2pRecord; the others are counted (unnamed
// SendRecv kernels, no peer).
void RecordPointToPoint(const OpSpan& s, const CommOp* op, const std::vector<IterationWindow>& windows,
                        Interner& comms, RecordCounts& counts, RankOps& r) {
  ++counts.p2p_skipped;
  const bool send = s.collective == Collective::kSend;
  if (!send && s.collective != Collective::kRecv) {
    ++counts.p2p_unnamed;
  } else if (!op || op->comm_rank == kUnknown || op->root_peer == kUnknown || op->comm_rank == op->root_peer) {
    ++counts.p2p_no_peer;
  } else {
    P2pRecord p;
    p.start_ns = s.start_ns;
    p.end_ns = std::max(s.end_ns, s.start_ns);
    p.step = windows.empty() ? kUnknown : StepOf(windows, s.start_ns);
    p.self = op->comm_rank;
    p.peer = op->root_peer;
    p.comm = comms.Intern(op->communicator.empty() ? std::string("unknown") : op->communicator);
    p.send = send;
    r.p2p.push_back(p);
  }
}

// The key a collective is matched by across ranks: its sequence number when the source gives
// one, else its ordinal per communicator (per step when the steps come from markers).
void SetMatchKey(const CommOp* op, const OpSpan& s, bool steps, const std::vector<IterationWindow>& windows,
                 std::map<std::pair<uint32_t, int64_t>, uint32_t>& ordinal, OpRecord& rec) {
  if (op && op->seq != kUnknown) {
    rec.key_kind = kKeySeq;
    rec.key_major = op->seq;
    return;
  }
  int64_t step = 0;
  rec.key_kind = kKeyOrdinal;
  if (steps) {
    rec.key_kind = kKeyStepOrdinal;
    step = StepOf(windows, s.start_ns);
  }
  rec.key_major = step;
  rec.key_minor = ordinal[{rec.comm, step}]++;
}

// The op's pieces not covered by compute: the whole op (kWholeGap), or up to kMaxGapsPerOp
// pieces appended to r.gaps.
void RecordGaps(const IntervalSet& compute, IntervalSet::Cursor& cursor, std::array<Piece, kMaxGapsPerOp + 1>& pieces,
                OpRecord& rec, RankOps& r) {
  const int n = UncoveredPieces(compute, cursor.FirstEndingAfter(rec.start_ns), rec.start_ns, rec.end_ns, pieces);
  if (n == 1 && pieces[0].start == rec.start_ns && pieces[0].end == rec.end_ns) {
    rec.ngaps = kWholeGap;
  } else {
    rec.ngaps = static_cast<uint8_t>(n);
    rec.gaps = static_cast<uint32_t>(r.gaps.size());
    r.gaps.insert(r.gaps.end(), pieces.begin(), pieces.begin() + n);
  }
}

}  // namespace

PreparedRankOps PrepareRankOps(const RankTrace& t, const RankDerived& d) {
  PreparedRankOps prepared;
  Interner& comms = prepared.comms;
  std::map<uint32_t, int64_t>& nranks = prepared.nranks;  // communicator -> largest comm_nranks
  const IntervalSet& compute = d.sets.compute;
  const bool steps = d.iterations.source == "ProfilerStep" || d.iterations.source == "step range" || d.iterations.steps;
  const std::vector<IterationWindow>& windows = d.iterations.windows;

  RankOps& r = prepared.ops;
  r.rank = t.meta.rank;
  r.host = t.meta.host;
  RecordWindows(windows, r);
  r.ops.reserve(d.ops.size());
  r.gaps.reserve(d.ops.size() * kMaxGapsPerOp);  // the most there can be: no copies while growing
  std::map<std::pair<uint32_t, int64_t>, uint32_t> ordinal;  // (communicator, step) -> next ordinal
  std::array<Piece, kMaxGapsPerOp + 1> pieces;
  IntervalSet::Cursor cursor(compute);  // ops come in start order
  for (const OpSpan& s : d.ops) {
    const CommOp* op = s.op != kNoIndex && s.op < t.comm_ops.size() ? &t.comm_ops[s.op] : nullptr;
    if (s.collective == Collective::kPeerCopy) {  // copy-engine copies between GPUs: no send/recv to pair
      ++prepared.counts.p2p_skipped;
      continue;
    }
    if (IsPointToPoint(s.collective)) {
      RecordPointToPoint(s, op, windows, comms, prepared.counts, r);
      continue;
    }
    OpRecord rec;
    rec.start_ns = s.start_ns;
    rec.end_ns = std::max(s.end_ns, s.start_ns);
    rec.bytes = s.bytes;
    static const std::string kUnknownName = "unknown";  // (both branches lvalues: no copy per op)
    rec.comm = comms.Intern(op && !op->communicator.empty() ? op->communicator : kUnknownName);
    rec.op = s.collective;
    SetMatchKey(op, s, steps, windows, ordinal, rec);
    if (op && op->comm_nranks != kUnknown) {
      auto [it, fresh] = nranks.emplace(rec.comm, op->comm_nranks);
      if (!fresh) it->second = std::max(it->second, op->comm_nranks);
    }
    if (s.plugin_timed) {
      rec.kernel_times = static_cast<uint32_t>(r.kernel_times.size());
      if (s.kernel_start_ns != kUnknown)
        r.kernel_times.emplace_back(s.kernel_start_ns, std::max(s.kernel_end_ns, s.kernel_start_ns));
      else
        r.kernel_times.emplace_back(rec.start_ns, rec.end_ns);
    }
    RecordGaps(compute, cursor, pieces, rec, r);
    r.ops.push_back(rec);
  }
  return prepared;
}

RankOps AddRankOps(PreparedRankOps p, Interner& comms, RecordCounts& counts) {
  // The rank's ids to the run's: interned in the order the rank first used them, which is the
  // order interning op by op would have given new names their ids.
  std::vector<uint32_t> comm_id(p.comms.size());
  for (uint32_t i = 0; i < comm_id.size(); ++i) comm_id[i] = comms.Intern(p.comms.Name(i));
  RankOps r = std::move(p.ops);
  for (OpRecord& rec : r.ops) rec.comm = comm_id[rec.comm];
  for (P2pRecord& q : r.p2p) q.comm = comm_id[q.comm];
  counts.p2p_skipped += p.counts.p2p_skipped;
  counts.p2p_unnamed += p.counts.p2p_unnamed;
  counts.p2p_no_peer += p.counts.p2p_no_peer;
  // Ops arrive sorted by start, so a stable sort keeps the earliest of a duplicated key.
  std::stable_sort(r.ops.begin(), r.ops.end(), KeyLess);
  auto last = std::unique(r.ops.begin(), r.ops.end(), KeyEq);
  counts.duplicate_keys += r.ops.end() - last;
  r.ops.erase(last, r.ops.end());
  r.comm_nranks.clear();
  for (const auto& [c, n] : p.nranks) r.comm_nranks.emplace_back(comm_id[c], n);
  std::sort(r.comm_nranks.begin(), r.comm_nranks.end());  // by the run's communicator id (distinct)
  // Kept until Finish: no room left over, unless a copy would save little (under an eighth).
  auto shrink = [](auto& v) {
    if (v.capacity() - v.size() > v.capacity() / 8) v.shrink_to_fit();
  };
  shrink(r.ops);
  shrink(r.gaps);
  shrink(r.kernel_times);
  return r;
}

RankOps RecordRankOps(const RankTrace& t, const RankDerived& d, Interner& comms, RecordCounts& counts) {
  return AddRankOps(PrepareRankOps(t, d), comms, counts);
}

}  // namespace overlapprof::cross_rank
