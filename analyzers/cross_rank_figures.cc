// Per collective wait, transfer and skew; per rank totals (docs/cross-rank.md, "Definitions").
#include "analyzers/cross_rank_figures.h"

#include <algorithm>
#include <tuple>

namespace overlapprof::cross_rank {

std::map<uint32_t, int64_t> CommunicatorSizes(const std::vector<RankOps>& ranks) {
  std::map<uint32_t, int64_t> comm_size;
  for (const RankOps& r : ranks)
    for (const auto& [c, n] : r.comm_nranks) comm_size[c] = std::max(comm_size[c], n);
  return comm_size;
}

namespace {

// The kMaxListedCollectives collectives kept for listing: the largest skew, then the earlier start.
class TopSkewCollectives {
 public:
  // Whether a collective with this skew and start would be kept now.
  bool Wants(int64_t skew, int64_t start) const {
    return heap_.size() < kMaxListedCollectives || Better(skew, start, heap_.front().skew_ns, heap_.front().start_ns);
  }
  // Adds one that Wants() accepted, dropping the one kept least when full.
  void Add(Listed entry) {
    if (heap_.size() >= kMaxListedCollectives) {
      std::pop_heap(heap_.begin(), heap_.end(), HeapOrder);
      heap_.pop_back();
    }
    heap_.push_back(std::move(entry));
    std::push_heap(heap_.begin(), heap_.end(), HeapOrder);
  }
  // The kept collectives in time order (ties: by key).
  std::vector<Listed> TakeInTimeOrder() {
    std::stable_sort(heap_.begin(), heap_.end(), [](const Listed& a, const Listed& b) {
      return std::tie(a.start_ns, a.comm, a.key_kind, a.key_major, a.key_minor) <
             std::tie(b.start_ns, b.comm, b.key_kind, b.key_major, b.key_minor);
    });
    return std::move(heap_);
  }

 private:
  // "a is kept over b": larger skew, then earlier start.
  static bool Better(int64_t skew_a, int64_t start_a, int64_t skew_b, int64_t start_b) {
    return skew_a != skew_b ? skew_a > skew_b : start_a < start_b;
  }
  // As a heap order (a min-heap on being kept), the front is the entry kept least.
  static bool HeapOrder(const Listed& a, const Listed& b) { return Better(a.skew_ns, a.start_ns, b.skew_ns, b.start_ns); }

  std::vector<Listed> heap_;
};

// One group's arrivals on the reference clock.
struct Arrivals {
  int64_t smin = kI64Max, smax = kI64Min, second = kI64Min;  // first, last and second-to-last start
  size_t last = 0;         // the member that arrived last
  bool by_plugin = false;  // every member has the plugin's GPU times
  bool mismatch = false;   // members disagree on op or bytes
};

// The members' starts and ends on the reference clock (into `starts`/`ends`): true per-rank
// GPU times when every member has the plugin's, else the kernels' for all.
Arrivals ArriveGroup(const std::vector<Member>& g, const std::vector<RankOps>& ranks, const ClockDomains& domains,
                     std::vector<int64_t>& starts, std::vector<int64_t>& ends) {
  const size_t n = g.size();
  starts.resize(n);
  ends.resize(n);
  Arrivals a;
  size_t with_plugin = 0;
  for (size_t i = 0; i < n; ++i) with_plugin += g[i].rec->kernel_times != kNoKernelTimes;
  a.by_plugin = with_plugin == n;
  for (size_t i = 0; i < n; ++i) {
    int64_t s0 = g[i].rec->start_ns, e0 = g[i].rec->end_ns;
    if (!a.by_plugin && g[i].rec->kernel_times != kNoKernelTimes) {
      const auto& kt = ranks[g[i].slot].kernel_times;
      if (g[i].rec->kernel_times < kt.size()) std::tie(s0, e0) = kt[g[i].rec->kernel_times];
    }
    starts[i] = domains.Adjust(g[i].slot, s0);
    ends[i] = domains.Adjust(g[i].slot, e0);
    a.smin = std::min(a.smin, starts[i]);
    if (starts[i] > a.smax) {
      a.second = a.smax;
      a.smax = starts[i];
      a.last = i;
    } else {
      a.second = std::max(a.second, starts[i]);
    }
    if (g[i].rec->op != g[0].rec->op || g[i].rec->bytes != g[0].rec->bytes) a.mismatch = true;
  }
  return a;
}

// The group's counts: timing source, mismatches, memberships, key kind, over-full communicators.
void CountGroup(const std::vector<Member>& g, const Arrivals& a, const std::map<uint32_t, int64_t>& comm_size,
                CollectiveFigures& f) {
  const size_t n = g.size();
  if (a.by_plugin) {
    ++f.timed_by_plugin;
  } else {
    for (const Member& m : g)
      if (m.rec->kernel_times != kNoKernelTimes) {
        ++f.kernel_fallback;
        break;
      }
  }
  f.mismatched += a.mismatch;
  f.memberships += static_cast<int64_t>(n);
  ++f.by_kind[std::min<size_t>(g[0].rec->key_kind, 2)];
  auto cs = comm_size.find(g[0].rec->comm);
  if (cs != comm_size.end() && cs->second > 0 && static_cast<int64_t>(n) > cs->second) ++f.over_full;
}

// Each member's wait (until the last arrival, or its kernel's end if earlier: possible only with
// misaligned clocks, counted) and transfer into its rank's totals; for a counted (straggler)
// collective, the last arrival's lateness and the others' wait. Appends (rank, wait, transfer)
// per member to `per_rank` when given.
void AddMemberTotals(const std::vector<Member>& g, const Arrivals& a, const std::vector<int64_t>& starts,
                     const std::vector<int64_t>& ends, bool counted, const std::vector<RankOps>& ranks,
                     CollectiveFigures& f, std::vector<std::array<int64_t, 3>>* per_rank) {
  const size_t n = g.size();
  int64_t others_wait = 0;
  for (size_t i = 0; i < n; ++i) {
    const OpRecord& rec = *g[i].rec;
    RankTotals& tot = f.totals[g[i].slot];
    const int64_t wait_end = std::min(a.smax, ends[i]);
    const int64_t wait = std::max<int64_t>(0, SatSub(wait_end, starts[i]));
    const int64_t transfer = std::max<int64_t>(0, SatSub(ends[i], a.smax));
    if (ends[i] < a.smax) ++f.ends_before_last;
    tot.wait_ns = SatAdd(tot.wait_ns, wait);
    tot.transfer_ns = SatAdd(tot.transfer_ns, transfer);
    const int64_t exposed_wait = ExposedWait(ranks[g[i].slot], rec, wait);
    tot.exposed_wait_ns = SatAdd(tot.exposed_wait_ns, exposed_wait);
    if (exposed_wait > 0) {
      const int64_t w = ranks[g[i].slot].WindowOf(rec.start_ns);
      const RankOps& me = ranks[g[i].slot];
      if (w >= 0) tot.exposed_wait_by_window[w] = SatAdd(tot.exposed_wait_by_window[w], exposed_wait);
      if (me.any_steady ? w >= 0 && me.window_steady[w] : true) {
        int64_t& waited = tot.exposed_wait_for[ranks[g[a.last].slot].rank];
        waited = SatAdd(waited, exposed_wait);
      }
    }
    ++tot.collectives;
    if (counted) {
      ++tot.counted;
      tot.fair_share_sum += 1.0 / static_cast<double>(n);
      if (i != a.last) others_wait = SatAdd(others_wait, wait);
    }
    if (per_rank) per_rank->push_back({ranks[g[i].slot].rank, wait, transfer});
  }
  if (counted) {
    RankTotals& lt = f.totals[g[a.last].slot];
    ++lt.last_arrivals;
    lt.others_wait_ns = SatAdd(lt.others_wait_ns, others_wait);
    lt.lateness_sum += static_cast<__int128>(a.smax) - a.second;
  }
}

}  // namespace

CollectiveFigures MeasureCollectives(const std::vector<RankOps>& ranks, const ClockDomains& domains,
                                     const std::map<uint32_t, int64_t>& comm_size, int64_t matched) {
  CollectiveFigures f;
  f.totals.resize(ranks.size());
  for (size_t s = 0; s < ranks.size(); ++s) f.totals[s].exposed_wait_by_window.assign(ranks[s].window_starts.size(), 0);
  f.skews.reserve(static_cast<size_t>(std::max<int64_t>(matched, 0)));
  TopSkewCollectives listed;
  for (const RankOps& r : ranks) f.any_plugin = f.any_plugin || !r.kernel_times.empty();
  std::vector<int64_t> starts, ends;
  ForEachGroup(ranks, [&](const std::vector<Member>& g) {
    if (g.size() < 2) return;
    const Arrivals a = ArriveGroup(g, ranks, domains, starts, ends);
    CountGroup(g, a, comm_size, f);
    const int64_t skew = SatSub(a.smax, a.smin);
    f.skews.push_back(static_cast<double>(skew));
    const bool counted = skew > kStragglerSkewNs;
    Listed entry;
    const bool list = listed.Wants(skew, a.smin);
    if (list) entry.per_rank.reserve(g.size());
    AddMemberTotals(g, a, starts, ends, counted, ranks, f, list ? &entry.per_rank : nullptr);
    if (!list) return;
    const OpRecord& first = *g[0].rec;
    entry.comm = first.comm;
    entry.key_kind = first.key_kind;
    entry.key_major = first.key_major;
    entry.key_minor = first.key_minor;
    entry.op = first.op;
    entry.bytes = first.bytes;
    entry.start_ns = a.smin;
    entry.skew_ns = skew;
    entry.last_rank = ranks[g[a.last].slot].rank;
    entry.plugin_timed = a.by_plugin;
    listed.Add(std::move(entry));
  });
  f.listed = listed.TakeInTimeOrder();
  return f;
}

std::vector<ListedCollective> ListedCollectives(const std::vector<Listed>& listed, const Interner& comms) {
  std::vector<ListedCollective> out;
  out.reserve(listed.size());
  for (const Listed& l : listed) {
    ListedCollective c;
    c.communicator = comms.Name(l.comm);
    if (l.key_kind == kKeySeq) c.seq = l.key_major;
    c.key = KeyText(l.key_kind, l.key_major, l.key_minor);
    c.op = l.op;
    if (l.bytes != kUnknown) c.bytes = l.bytes;
    c.start_ns = l.start_ns;
    c.skew_ns = l.skew_ns;
    c.last_rank = l.last_rank;
    c.members.reserve(l.per_rank.size());
    for (const auto& [rank, wait, transfer] : l.per_rank) c.members.push_back({rank, wait, transfer});
    c.timing = l.plugin_timed ? "nccl_profiler" : "kernels";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace overlapprof::cross_rank
