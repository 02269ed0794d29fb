#include "analyzers/cross_rank.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "analyzers/comm_ops.h"
#include "analyzers/iterations.h"
#include "analyzers/overlap.h"

namespace overlapprof {

namespace {

using Json = nlohmann::ordered_json;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
// Times after an offset is applied are clamped to ±kTimeClamp, so that the difference of two
// never overflows (offsets come from the data; a hostile trace could make them huge).
constexpr int64_t kTimeClamp = (int64_t{1} << 62) - 1;

int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kI64Max : kI64Min;
  return r;
}
int64_t SatSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? kI64Max : kI64Min;
  return r;
}
int64_t Clamp128(__int128 v) {
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
constexpr uint8_t kWholeGap = 0xff;  // OpRecord::ngaps: nothing of the op's interval was covered
constexpr uint16_t kOpNameOverflow = 0xffff;

// The time of an op's interval that compute did not cover, as pieces in time order: within
// [start, end), `uncovered` of its ns were not covered. A piece from a single gap is exact
// (uncovered == end - start); beyond kMaxGapsPerOp gaps, neighbours are merged (the pair whose
// merge loses least: min(uncovered, covered) of the merged piece), and inside a merged piece the
// uncovered time is taken as spread evenly. The sum over an op's pieces is always exact.
struct Piece {
  int64_t start = 0, end = 0, uncovered = 0;
};

// One communication op of one rank: 48 bytes, all the analyzer keeps per op.
struct OpRecord {
  int64_t start_ns = 0, end_ns = 0;  // first kernel start, last kernel end (the rank's clock)
  int64_t key_major = 0;             // seq; step (kUnknown: outside every step); 0
  int64_t bytes = kUnknown;
  uint32_t key_minor = 0;  // ordinal (0 for seq keys)
  uint32_t comm = 0;       // interned communicator
  uint32_t gaps = 0;       // first of its gaps in RankData::gaps
  uint16_t op = 0;         // interned op name
  uint8_t key_kind = kKeyOrdinal;
  uint8_t ngaps = 0;  // 0..kMaxGapsPerOp, or kWholeGap
};
static_assert(sizeof(OpRecord) == 48, "keep the per-op record small");

bool KeyLess(const OpRecord& a, const OpRecord& b) {
  return std::tie(a.comm, a.key_kind, a.key_major, a.key_minor) < std::tie(b.comm, b.key_kind, b.key_major, b.key_minor);
}
bool KeyEq(const OpRecord& a, const OpRecord& b) {
  return a.comm == b.comm && a.key_kind == b.key_kind && a.key_major == b.key_major && a.key_minor == b.key_minor;
}

struct RankData {
  int64_t rank = kUnknown;
  std::string host;
  int64_t exposed_comm_ns = 0;
  std::vector<OpRecord> ops;  // sorted by key, one per key
  std::vector<Piece> gaps;  // uncovered pieces of the ops (OpRecord::gaps, ngaps)
  std::vector<std::pair<uint32_t, int64_t>> comm_nranks;  // communicator -> largest comm_nranks seen
  size_t domain = 0;                                      // clock domain (Finish)
};

struct RankTotals {
  int64_t wait_ns = 0, transfer_ns = 0, exposed_wait_ns = 0, collectives = 0;
  // Straggler statistics over collectives with skew > kStragglerSkewNs.
  int64_t counted = 0, last_arrivals = 0, others_wait_ns = 0;
  __int128 lateness_sum = 0;
  double fair_share_sum = 0;  // sum of 1 / ranks over the counted collectives
};

struct Listed {
  uint32_t comm = 0;
  uint8_t key_kind = 0;
  int64_t key_major = 0;
  uint32_t key_minor = 0;
  uint16_t op = 0;
  int64_t bytes = kUnknown;
  int64_t start_ns = 0, skew_ns = 0, last_rank = 0;
  std::vector<std::array<int64_t, 3>> per_rank;  // rank, wait, transfer
};

int UncoveredPieces(const IntervalSet& compute, int64_t s, int64_t e, std::array<Piece, kMaxGapsPerOp + 1>& out) {
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
  auto it = std::partition_point(iv.begin(), iv.end(), [&](const Interval& x) { return x.end <= s; });
  int64_t cur = s;
  for (; it != iv.end() && it->start < e && cur < e; ++it) {
    if (it->start > cur) emit(cur, it->start);
    cur = std::max(cur, it->end);
  }
  if (cur < e) emit(cur, e);
  return n;
}

std::string KeyText(uint8_t kind, int64_t major, uint32_t minor) {
  switch (kind) {
    case kKeySeq: return fmt::format("seq:{}", major);
    case kKeyStepOrdinal:
      return major == kUnknown ? fmt::format("step:none:{}", minor) : fmt::format("step:{}:{}", major, minor);
    default: return fmt::format("ord:{}", minor);
  }
}

std::string RankName(int64_t r) { return fmt::format("rank {}", r); }

Json OptBytes(int64_t b) { return b == kUnknown ? Json(nullptr) : Json(b); }

class CrossRankAnalyzer : public Analyzer {
 public:
  std::string_view name() const override { return "cross_rank"; }

  Status AnalyzeRank(const RankTrace& t, size_t rank_index, const AnalysisOptions& options,
                     Summary& summary) override {
    const bool have_result = rank_index < summary.ranks.size();
    // The file name only: the summary must not depend on where the files were.
    const std::string file = t.meta.source_path.empty()
                                 ? std::string("a trace")
                                 : std::filesystem::path(t.meta.source_path).filename().string();
    if (t.meta.rank == kUnknown) {
      // The rank's own notices already say its rank is unknown.
      notices_.push_back(fmt::format("{} does not say its rank: left out of cross-rank matching", file));
      return OkStatus();
    }
    if (!seen_ranks_.insert(t.meta.rank).second) {
      std::string text = fmt::format("rank {} appears in more than one trace ({}): only the first is matched "
                                     "across ranks",
                                     t.meta.rank, file);
      if (have_result) summary.ranks[rank_index].notices.push_back(text);
      notices_.push_back(std::move(text));
      return OkStatus();
    }

    // The overlap analyzer's derived data for this rank, or our own when it did not run.
    std::shared_ptr<const RankDerived> d = summary.current;
    if (!d || d->rank_index != rank_index) {
      auto own = std::make_shared<RankDerived>();
      own->sets = BuildTimelineSets(t);
      own->ops = CommOpSpans(t, own->sets.compute);
      StatCounters scratch;
      own->iterations = FindIterations(t, scratch, options.step_range);
      d = std::move(own);
    }
    const IntervalSet& compute = d->sets.compute;
    const bool steps = d->iterations.source == "ProfilerStep" || d->iterations.source == "step range";
    const std::vector<IterationWindow>& windows = d->iterations.windows;

    RankData r;
    r.rank = t.meta.rank;
    r.host = t.meta.host;
    r.exposed_comm_ns = have_result ? summary.ranks[rank_index].whole.exposed_comm_ns : 0;
    r.ops.reserve(d->ops.size());
    std::map<std::pair<uint32_t, int64_t>, uint32_t> ordinal;  // (communicator, step) -> next ordinal
    std::map<uint32_t, int64_t> nranks;                        // communicator -> largest comm_nranks
    std::array<Piece, kMaxGapsPerOp + 1> pieces;
    for (const OpSpan& s : d->ops) {
      if (s.family == "p2p") {
        ++p2p_skipped_;
        continue;
      }
      const CommOp* op = s.op != kNoIndex && s.op < t.comm_ops.size() ? &t.comm_ops[s.op] : nullptr;
      OpRecord rec;
      rec.start_ns = s.start_ns;
      rec.end_ns = std::max(s.end_ns, s.start_ns);
      rec.bytes = s.bytes;
      static const std::string kUnknownName = "unknown";  // (both branches lvalues: no copy per op)
      rec.comm = Intern(op && !op->communicator.empty() ? op->communicator : kUnknownName, comms_, comm_ids_);
      const uint32_t opid = Intern(s.op_name.empty() ? kUnknownName : s.op_name, op_names_, op_ids_);
      rec.op = opid >= kOpNameOverflow ? kOpNameOverflow : static_cast<uint16_t>(opid);
      if (op && op->seq != kUnknown) {
        rec.key_kind = kKeySeq;
        rec.key_major = op->seq;
      } else {
        int64_t step = 0;
        rec.key_kind = kKeyOrdinal;
        if (steps) {
          rec.key_kind = kKeyStepOrdinal;
          step = kUnknown;
          // Windows partition the GPU timeline in order: the last starting at or before the op.
          auto w = std::upper_bound(windows.begin(), windows.end(), s.start_ns,
                                    [](int64_t v, const IterationWindow& x) { return v < x.start_ns; });
          if (w != windows.begin()) {
            --w;
            if (s.start_ns < w->end_ns || (w + 1 == windows.end() && s.start_ns <= w->end_ns)) step = w->step;
          }
        }
        rec.key_major = step;
        rec.key_minor = ordinal[{rec.comm, step}]++;
      }
      if (op && op->comm_nranks != kUnknown) {
        auto [it, fresh] = nranks.emplace(rec.comm, op->comm_nranks);
        if (!fresh) it->second = std::max(it->second, op->comm_nranks);
      }
      const int n = UncoveredPieces(compute, rec.start_ns, rec.end_ns, pieces);
      if (n == 1 && pieces[0].start == rec.start_ns && pieces[0].end == rec.end_ns) {
        rec.ngaps = kWholeGap;
      } else {
        rec.ngaps = static_cast<uint8_t>(n);
        rec.gaps = static_cast<uint32_t>(r.gaps.size());
        r.gaps.insert(r.gaps.end(), pieces.begin(), pieces.begin() + n);
      }
      r.ops.push_back(rec);
    }
    // Ops arrive sorted by start, so a stable sort keeps the earliest of a duplicated key.
    std::stable_sort(r.ops.begin(), r.ops.end(), KeyLess);
    auto last = std::unique(r.ops.begin(), r.ops.end(), KeyEq);
    duplicate_keys_ += r.ops.end() - last;
    r.ops.erase(last, r.ops.end());
    r.comm_nranks.assign(nranks.begin(), nranks.end());
    r.ops.shrink_to_fit();
    r.gaps.shrink_to_fit();
    ranks_.push_back(std::move(r));
    return OkStatus();
  }

  Status Finish(const AnalysisOptions&, Summary& summary) override {
    std::sort(ranks_.begin(), ranks_.end(), [](const RankData& a, const RankData& b) { return a.rank < b.rank; });
    int64_t total_ops = 0;
    for (const RankData& r : ranks_) total_ops += static_cast<int64_t>(r.ops.size());

    // Clock domains: one per host; a rank whose host is unknown is its own.
    std::vector<std::string> domain_names;
    std::vector<std::vector<int64_t>> domain_ranks;
    {
      std::map<std::string, size_t> by_host;
      for (RankData& r : ranks_) {
        std::string key = r.host.empty() ? std::string() : r.host;
        if (!key.empty()) {
          auto [it, fresh] = by_host.emplace(key, domain_names.size());
          if (fresh) {
            domain_names.push_back(key);
            domain_ranks.emplace_back();
          }
          r.domain = it->second;
        } else {
          r.domain = domain_names.size();
          domain_names.push_back(RankName(r.rank));
          domain_ranks.emplace_back();
        }
        domain_ranks[r.domain].push_back(r.rank);
      }
    }
    const size_t ndom = domain_names.size();
    const size_t ref = ranks_.empty() ? 0 : ranks_[0].domain;  // the domain of the lowest rank

    // Pass 1: matched/unmatched counts and, with several domains, end-time differences.
    int64_t matched = 0, unmatched = 0;
    std::vector<DiffSampler> diffs(ndom);
    std::vector<__int128> dsum(ndom);
    std::vector<int64_t> dcnt(ndom);
    std::vector<size_t> touched;
    ForEachGroup([&](const std::vector<Member>& g) {
      if (g.size() < 2) {
        ++unmatched;
        return;
      }
      ++matched;
      if (ndom < 2) return;
      const int64_t base = g[0].rec->end_ns;
      touched.clear();
      for (const Member& m : g) {
        const size_t dm = ranks_[m.slot].domain;
        if (dcnt[dm] == 0) touched.push_back(dm);
        dsum[dm] += m.rec->end_ns - base;
        ++dcnt[dm];
      }
      if (dcnt[ref] > 0) {
        const long double mref = static_cast<long double>(dsum[ref]) / dcnt[ref];
        for (size_t dm : touched) {
          if (dm == ref) continue;
          const long double diff = static_cast<long double>(dsum[dm]) / dcnt[dm] - mref;
          diffs[dm].Add(static_cast<int64_t>(std::llround(diff)));
        }
      }
      for (size_t dm : touched) {
        dsum[dm] = 0;
        dcnt[dm] = 0;
      }
    });
    std::vector<ClockEstimate> clocks(ndom);
    for (size_t dm = 0; dm < ndom; ++dm) {
      if (dm == ref) continue;
      clocks[dm] = EstimateClockOffset(std::move(diffs[dm].values));
      clocks[dm].samples = diffs[dm].seen;
    }
    diffs.clear();
    auto adjust = [&](size_t slot, int64_t t) {
      const ClockEstimate& c = clocks[ranks_[slot].domain];
      if (!c.applied) return t;
      return std::clamp(SatSub(t, c.offset_ns), -kTimeClamp, kTimeClamp);
    };

    // Pass 2: per collective figures, per rank totals, stragglers, the listed collectives.
    std::vector<RankTotals> totals(ranks_.size());
    std::vector<double> skews;
    skews.reserve(static_cast<size_t>(matched));
    int64_t mismatched = 0, ends_before_last = 0, over_full = 0, memberships = 0;
    std::array<int64_t, 3> by_kind{};
    std::vector<Listed> listed;  // a min-heap on (skew, earlier start) while collecting
    // "a is kept over b": larger skew, then earlier start. As a heap order, the front is the
    // entry kept least.
    auto better = [](int64_t skew_a, int64_t start_a, int64_t skew_b, int64_t start_b) {
      return skew_a != skew_b ? skew_a > skew_b : start_a < start_b;
    };
    auto listed_better = [&](const Listed& a, const Listed& b) {
      return better(a.skew_ns, a.start_ns, b.skew_ns, b.start_ns);
    };
    std::vector<int64_t> starts, ends;
    std::map<uint32_t, int64_t> comm_size;  // communicator -> largest comm_nranks any rank saw
    for (const RankData& r : ranks_)
      for (const auto& [c, n] : r.comm_nranks) comm_size[c] = std::max(comm_size[c], n);
    ForEachGroup([&](const std::vector<Member>& g) {
      if (g.size() < 2) return;
      const size_t n = g.size();
      starts.resize(n);
      ends.resize(n);
      int64_t smin = kI64Max, smax = kI64Min, second = kI64Min;
      size_t last = 0;
      bool mismatch = false;
      for (size_t i = 0; i < n; ++i) {
        starts[i] = adjust(g[i].slot, g[i].rec->start_ns);
        ends[i] = adjust(g[i].slot, g[i].rec->end_ns);
        smin = std::min(smin, starts[i]);
        if (starts[i] > smax) {
          second = smax;
          smax = starts[i];
          last = i;
        } else {
          second = std::max(second, starts[i]);
        }
        if (g[i].rec->op != g[0].rec->op || g[i].rec->bytes != g[0].rec->bytes) mismatch = true;
      }
      mismatched += mismatch;
      memberships += static_cast<int64_t>(n);
      ++by_kind[std::min<size_t>(g[0].rec->key_kind, 2)];
      auto cs = comm_size.find(g[0].rec->comm);
      if (cs != comm_size.end() && cs->second > 0 && static_cast<int64_t>(n) > cs->second) ++over_full;
      const int64_t skew = SatSub(smax, smin);
      skews.push_back(static_cast<double>(skew));
      const bool counted = skew > kStragglerSkewNs;
      Listed entry;
      const bool list = listed.size() < kMaxListedCollectives ||
                        better(skew, smin, listed.front().skew_ns, listed.front().start_ns);
      if (list) entry.per_rank.reserve(n);
      int64_t others_wait = 0;
      for (size_t i = 0; i < n; ++i) {
        const OpRecord& rec = *g[i].rec;
        RankTotals& tot = totals[g[i].slot];
        // Waiting ends when the last rank arrives, or at the kernel's end if that is earlier
        // (possible only with misaligned clocks; counted).
        const int64_t wait_end = std::min(smax, ends[i]);
        const int64_t wait = std::max<int64_t>(0, SatSub(wait_end, starts[i]));
        const int64_t transfer = std::max<int64_t>(0, SatSub(ends[i], smax));
        if (ends[i] < smax) ++ends_before_last;
        tot.wait_ns = SatAdd(tot.wait_ns, wait);
        tot.transfer_ns = SatAdd(tot.transfer_ns, transfer);
        tot.exposed_wait_ns = SatAdd(tot.exposed_wait_ns, ExposedWait(ranks_[g[i].slot], rec, wait));
        ++tot.collectives;
        if (counted) {
          ++tot.counted;
          tot.fair_share_sum += 1.0 / static_cast<double>(n);
          if (i != last) others_wait = SatAdd(others_wait, wait);
        }
        if (list) entry.per_rank.push_back({ranks_[g[i].slot].rank, wait, transfer});
      }
      if (counted) {
        RankTotals& lt = totals[g[last].slot];
        ++lt.last_arrivals;
        lt.others_wait_ns = SatAdd(lt.others_wait_ns, others_wait);
        lt.lateness_sum += static_cast<__int128>(smax) - second;
      }
      if (list) {
        const OpRecord& f = *g[0].rec;
        entry.comm = f.comm;
        entry.key_kind = f.key_kind;
        entry.key_major = f.key_major;
        entry.key_minor = f.key_minor;
        entry.op = f.op;
        entry.bytes = f.bytes;
        entry.start_ns = smin;
        entry.skew_ns = skew;
        entry.last_rank = ranks_[g[last].slot].rank;
        if (listed.size() >= kMaxListedCollectives) {
          std::pop_heap(listed.begin(), listed.end(), listed_better);
          listed.pop_back();
        }
        listed.push_back(std::move(entry));
        std::push_heap(listed.begin(), listed.end(), listed_better);
      }
    });
    std::stable_sort(listed.begin(), listed.end(), [](const Listed& a, const Listed& b) {
      return std::tie(a.start_ns, a.comm, a.key_kind, a.key_major, a.key_minor) <
             std::tie(b.start_ns, b.comm, b.key_kind, b.key_major, b.key_minor);
    });

    // collectives_summary (always).
    Json cs;
    cs["matched"] = matched;
    cs["unmatched"] = unmatched;
    cs["listed"] = listed.size();
    cs["mismatched"] = mismatched;
    cs["ranks"] = ranks_.size();
    cs["ops"] = total_ops;
    cs["p2p_skipped"] = p2p_skipped_;
    cs["duplicate_keys"] = duplicate_keys_;
    cs["matched_by"] = Json{{"seq", by_kind[kKeySeq]},
                            {"step_ordinal", by_kind[kKeyStepOrdinal]},
                            {"ordinal", by_kind[kKeyOrdinal]}};
    if (!skews.empty()) {
      Spread sp = SpreadOf(skews);
      cs["skew_ns"] = Json{{"median", std::llround(sp.median)},
                           {"p90", std::llround(sp.p90)},
                           {"max", std::llround(*std::max_element(skews.begin(), skews.end()))}};
    } else {
      cs["skew_ns"] = nullptr;
    }
    cs["straggler_threshold_ns"] = kStragglerSkewNs;
    cs["ends_before_last_arrival"] = ends_before_last;
    // Communicators with fewer ranks present than their size (partial traces).
    Json partial = Json::array();
    {
      std::map<uint32_t, int64_t> present;  // communicator -> ranks with an op on it (and a size)
      for (const RankData& r : ranks_)
        for (const auto& [c, n] : r.comm_nranks) ++present[c];
      for (const auto& [c, size] : comm_size)
        if (present[c] < size && partial.size() < 100)
          partial.push_back(Json{{"communicator", comms_[c]}, {"nranks", size}, {"ranks_present", present[c]}});
    }
    cs["partial_communicators"] = std::move(partial);
    std::vector<std::string> notes = notices_;
    if (ranks_.size() < 2)
      notes.push_back(ranks_.empty() ? "no rank with a known rank id: nothing to match"
                                     : "a single rank: nothing to match across ranks");
    else if (matched == 0)
      notes.push_back("no communication op was found on two or more ranks under the same communicator and key");
    if (over_full > 0)
      notes.push_back(fmt::format("{} collectives had more ranks than their communicator's size: different groups "
                                  "may share a communicator name, and were matched together",
                                  over_full));
    cs["notices"] = notes;
    summary.sections["collectives_summary"] = std::move(cs);
    if (matched == 0) return OkStatus();

    // collectives
    Json cols = Json::array();
    for (const Listed& l : listed) {
      Json c;
      c["communicator"] = comms_[l.comm];
      c["seq"] = l.key_kind == kKeySeq ? Json(l.key_major) : Json(nullptr);
      c["key"] = KeyText(l.key_kind, l.key_major, l.key_minor);
      c["op"] = l.op == kOpNameOverflow ? std::string("other") : op_names_[l.op];
      c["bytes"] = OptBytes(l.bytes);
      c["ranks"] = l.per_rank.size();
      c["start_ns"] = l.start_ns;
      c["skew_ns"] = l.skew_ns;
      c["last_rank"] = l.last_rank;
      Json w = Json::object(), x = Json::object();
      for (const auto& [rank, wait, transfer] : l.per_rank) {
        w[std::to_string(rank)] = wait;
        x[std::to_string(rank)] = transfer;
      }
      c["wait_ns"] = std::move(w);
      c["transfer_ns"] = std::move(x);
      cols.push_back(std::move(c));
    }
    summary.sections["collectives"] = std::move(cols);

    // stragglers: ranks in counted collectives, by the time the others lost waiting for them.
    std::vector<size_t> order;
    for (size_t i = 0; i < ranks_.size(); ++i)
      if (totals[i].counted > 0) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (totals[a].others_wait_ns != totals[b].others_wait_ns)
        return totals[a].others_wait_ns > totals[b].others_wait_ns;
      return totals[a].last_arrivals > totals[b].last_arrivals;
    });
    Json strag = Json::array();
    for (size_t i : order) {
      const RankTotals& t = totals[i];
      Json s;
      s["rank"] = ranks_[i].rank;
      s["last_arrivals"] = t.last_arrivals;
      s["collectives_counted"] = t.counted;
      s["last_fraction"] = std::round(static_cast<double>(t.last_arrivals) / static_cast<double>(t.counted) * 1e4) / 1e4;
      s["others_wait_ns"] = t.others_wait_ns;
      s["mean_lateness_ns"] = t.last_arrivals > 0 ? Json(Clamp128(t.lateness_sum / t.last_arrivals)) : Json(nullptr);
      strag.push_back(std::move(s));
    }
    summary.sections["stragglers"] = std::move(strag);

    // clock_offsets
    Json clk = Json::array();
    for (size_t dm = 0; dm < ndom; ++dm) {
      Json c;
      c["domain"] = domain_names[dm];
      c["ranks"] = domain_ranks[dm];
      c["reference"] = dm == ref;
      c["offset_ns"] = clocks[dm].offset_ns;
      c["noise_ns"] = dm == ref ? Json(nullptr) : Json(clocks[dm].noise_ns);
      c["samples"] = clocks[dm].samples;
      c["applied"] = clocks[dm].applied;
      clk.push_back(std::move(c));
    }
    summary.sections["clock_offsets"] = std::move(clk);

    // cross_rank: per rank totals.
    Json per = Json::array();
    for (size_t i = 0; i < ranks_.size(); ++i) {
      const RankTotals& t = totals[i];
      Json p;
      p["rank"] = ranks_[i].rank;
      p["clock_domain"] = domain_names[ranks_[i].domain];
      p["collectives"] = t.collectives;
      p["wait_ns"] = t.wait_ns;
      p["transfer_ns"] = t.transfer_ns;
      p["exposed_wait_ns"] = t.exposed_wait_ns;
      p["exposed_comm_ns"] = ranks_[i].exposed_comm_ns;
      per.push_back(std::move(p));
    }
    summary.sections["cross_rank"] = std::move(per);

    // First the warning that makes the figures below doubtful, then the findings.
    if (ends_before_last * 20 >= memberships && ends_before_last > 0)
      summary.AddFinding(name(), kUnknown, "warning",
                         fmt::format("in {} of {} rank-collectives the rank's kernel ended before the last rank's "
                                     "began, impossible on one clock: the ranks' clocks disagree (or matching is off); "
                                     "waits are capped at the kernel ends",
                                     ends_before_last, memberships));
    AddFindings(summary, totals, order, clocks, domain_names, ref, matched, unmatched, mismatched);
    return OkStatus();
  }

 private:
  struct Member {
    size_t slot;
    const OpRecord* rec;
  };

  // At most kCap values kept, evenly spread over all seen (a stride that doubles when full):
  // enough for a median, and bounded however many clock domains there are.
  struct DiffSampler {
    static constexpr size_t kCap = 4096;
    std::vector<int64_t> values;
    int64_t seen = 0;
    int64_t stride = 1;
    void Add(int64_t v) {
      if (seen++ % stride != 0) return;
      values.push_back(v);
      if (values.size() >= kCap) {
        size_t k = 0;
        for (size_t i = 0; i < values.size(); i += 2) values[k++] = values[i];
        values.resize(k);
        stride *= 2;
      }
    }
  };

  // Calls fn once per key over all ranks (a k-way merge of the ranks' sorted ops), members in
  // rank order.
  template <typename Fn>
  void ForEachGroup(Fn&& fn) const {
    std::vector<std::pair<size_t, size_t>> heap;  // (slot, position)
    auto greater = [&](const std::pair<size_t, size_t>& a, const std::pair<size_t, size_t>& b) {
      const OpRecord& x = ranks_[a.first].ops[a.second];
      const OpRecord& y = ranks_[b.first].ops[b.second];
      if (KeyLess(y, x)) return true;
      if (KeyLess(x, y)) return false;
      return a.first > b.first;
    };
    for (size_t s = 0; s < ranks_.size(); ++s)
      if (!ranks_[s].ops.empty()) heap.emplace_back(s, 0);
    std::make_heap(heap.begin(), heap.end(), greater);
    std::vector<Member> group;
    std::vector<std::pair<size_t, size_t>> taken;
    while (!heap.empty()) {
      group.clear();
      taken.clear();
      std::pop_heap(heap.begin(), heap.end(), greater);
      taken.push_back(heap.back());
      heap.pop_back();
      const OpRecord& key = ranks_[taken[0].first].ops[taken[0].second];
      while (!heap.empty() && KeyEq(ranks_[heap.front().first].ops[heap.front().second], key)) {
        std::pop_heap(heap.begin(), heap.end(), greater);
        taken.push_back(heap.back());
        heap.pop_back();
      }
      for (const auto& [s, p] : taken) group.push_back({s, &ranks_[s].ops[p]});
      fn(group);
      for (auto [s, p] : taken) {
        if (++p < ranks_[s].ops.size()) {
          heap.emplace_back(s, p);
          std::push_heap(heap.begin(), heap.end(), greater);
        }
      }
    }
  }

  // |[start, start + wait) \ compute| on the rank's own clock (see Piece).
  static int64_t ExposedWait(const RankData& r, const OpRecord& rec, int64_t wait) {
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

  static uint32_t Intern(const std::string& s, std::vector<std::string>& names, std::map<std::string, uint32_t>& ids) {
    if (auto it = ids.find(s); it != ids.end()) return it->second;  // (emplace would allocate a node first)
    const uint32_t id = static_cast<uint32_t>(names.size());
    ids.emplace(s, id);
    names.push_back(s);
    return id;
  }

  void AddFindings(Summary& summary, const std::vector<RankTotals>& totals, const std::vector<size_t>& straggler_order,
                   const std::vector<ClockEstimate>& clocks, const std::vector<std::string>& domain_names, size_t ref,
                   int64_t matched, int64_t unmatched, int64_t mismatched) const {
    constexpr std::string_view kName = "cross_rank";
    // Stragglers: a rank last far more often than its fair share (1 / ranks per collective).
    int reported = 0;
    for (size_t i : straggler_order) {
      const RankTotals& t = totals[i];
      if (t.last_arrivals == 0 || t.others_wait_ns <= 0) continue;
      const double frac = static_cast<double>(t.last_arrivals) / static_cast<double>(t.counted);
      const double fair = t.fair_share_sum / static_cast<double>(t.counted);
      const double threshold = std::clamp(3.0 * fair, 0.25, 0.75);
      const bool persistent = t.last_arrivals >= 3 && frac >= threshold;
      if (!persistent && reported > 0) continue;
      summary.AddFinding(kName, ranks_[i].rank, persistent ? "warning" : "info",
                         fmt::format("rank {} arrived last at {} of {} collectives; the other ranks lost {} waiting for "
                                     "it{}",
                                     ranks_[i].rank, FormatPercent(frac), t.counted, FormatDuration(t.others_wait_ns),
                                     t.last_arrivals > 0
                                         ? fmt::format(" (it started {} after the next-latest rank on average)",
                                                       FormatDuration(Clamp128(t.lateness_sum / t.last_arrivals)))
                                         : std::string()));
      if (++reported >= 3) break;
    }
    // Exposed communication that is waiting: the ranks with the most.
    std::vector<size_t> by_wait;
    for (size_t i = 0; i < ranks_.size(); ++i)
      if (totals[i].exposed_wait_ns > 0 && ranks_[i].exposed_comm_ns > 0) by_wait.push_back(i);
    std::stable_sort(by_wait.begin(), by_wait.end(),
                     [&](size_t a, size_t b) { return totals[a].exposed_wait_ns > totals[b].exposed_wait_ns; });
    int shown = 0;
    for (size_t i : by_wait) {
      const int64_t exposed = ranks_[i].exposed_comm_ns;
      const int64_t w = std::min(totals[i].exposed_wait_ns, exposed);
      const double share = static_cast<double>(w) / static_cast<double>(exposed);
      if (share < 0.10) continue;
      summary.AddFinding(kName, ranks_[i].rank, share >= 0.25 ? "warning" : "info",
                         fmt::format("of rank {}'s {} exposed communication, {} is waiting for other ranks to arrive "
                                     "(straggler), not transfer",
                                     ranks_[i].rank, FormatDuration(exposed), FormatDuration(w)));
      if (++shown >= 5) break;
    }
    // Clocks: the first few domains by name, then one line for the rest.
    constexpr int kClockLines = 3;
    int applied_lines = 0, unaligned_lines = 0;
    int64_t applied_rest = 0, unaligned_rest = 0, largest_rest = 0;
    for (size_t dm = 0; dm < clocks.size(); ++dm) {
      if (dm == ref) continue;
      const ClockEstimate& c = clocks[dm];
      if (c.applied) {
        if (applied_lines++ >= kClockLines) {
          ++applied_rest;
          largest_rest = std::max(largest_rest, std::abs(c.offset_ns));
          continue;
        }
        summary.AddFinding(kName, kUnknown, "info",
                           fmt::format("the clock of {} reads {} {} that of {} (from the ends of {} collectives, noise "
                                       "{}): corrected before matching times",
                                       domain_names[dm], FormatDuration(std::abs(c.offset_ns)),
                                       c.offset_ns > 0 ? "ahead of" : "behind", domain_names[ref], c.samples,
                                       FormatDuration(c.noise_ns)));
      } else if (c.samples < kMinClockSamples) {
        if (unaligned_lines++ >= kClockLines) {
          ++unaligned_rest;
          continue;
        }
        summary.AddFinding(kName, kUnknown, "warning",
                           fmt::format("the clock of {} could not be aligned with that of {} ({} shared collectives, "
                                       "at least {} needed): its skew and wait figures assume the clocks agree",
                                       domain_names[dm], domain_names[ref], c.samples, kMinClockSamples));
      }
    }
    if (applied_rest > 0)
      summary.AddFinding(kName, kUnknown, "info",
                         fmt::format("clock offsets of {} more clock domains were corrected too (the largest {}; see "
                                     "clock_offsets)",
                                     applied_rest, FormatDuration(largest_rest)));
    if (unaligned_rest > 0)
      summary.AddFinding(kName, kUnknown, "warning",
                         fmt::format("the clocks of {} more clock domains could not be aligned (see clock_offsets)",
                                     unaligned_rest));
    if (mismatched > 0)
      summary.AddFinding(kName, kUnknown, "warning",
                         fmt::format("{} of {} matched collectives disagree across ranks on op or size: matching by "
                                     "order may be off (profiling windows or communicators that differ across ranks)",
                                     mismatched, matched));
    if (unmatched > 0 && unmatched * 10 >= matched)
      summary.AddFinding(kName, kUnknown, "info",
                         fmt::format("{} communication ops were found on one rank only ({} matched across ranks): "
                                     "the ranks' profiling windows or communicators differ",
                                     unmatched, matched));
  }

  std::vector<RankData> ranks_;
  std::set<int64_t> seen_ranks_;
  std::vector<std::string> comms_, op_names_;
  std::map<std::string, uint32_t> comm_ids_, op_ids_;
  std::vector<std::string> notices_;
  int64_t p2p_skipped_ = 0, duplicate_keys_ = 0;
};

}  // namespace

ClockEstimate EstimateClockOffset(std::vector<int64_t> d) {
  ClockEstimate e;
  e.samples = static_cast<int64_t>(d.size());
  if (d.empty()) {
    e.noise_ns = kClockNoiseFloorNs;
    return e;
  }
  auto median = [](std::vector<int64_t>& v) -> int64_t {
    const size_t n = v.size(), mid = n / 2;
    std::nth_element(v.begin(), v.begin() + mid, v.end());
    const int64_t hi = v[mid];
    if (n % 2 == 1) return hi;
    const int64_t lo = *std::max_element(v.begin(), v.begin() + mid);
    return Clamp128((static_cast<__int128>(lo) + hi) / 2);
  };
  e.offset_ns = median(d);
  for (int64_t& v : d) {
    const __int128 dev = static_cast<__int128>(v) - e.offset_ns;
    v = Clamp128(dev < 0 ? -dev : dev);
  }
  const int64_t mad = median(d);
  const long double noise = 1.4826L * static_cast<long double>(mad);
  e.noise_ns = noise >= static_cast<long double>(kI64Max) ? kI64Max
                                                          : std::max<int64_t>(kClockNoiseFloorNs, std::llround(noise));
  const __int128 abs_offset = e.offset_ns < 0 ? -static_cast<__int128>(e.offset_ns) : e.offset_ns;
  e.applied = e.samples >= kMinClockSamples && abs_offset > static_cast<__int128>(kClockNoiseFactor) * e.noise_ns;
  return e;
}

std::unique_ptr<Analyzer> MakeCrossRankAnalyzer() { return std::make_unique<CrossRankAnalyzer>(); }

}  // namespace overlapprof
