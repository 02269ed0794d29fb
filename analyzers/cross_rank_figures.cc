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
    const size_t n = g.size();
    starts.resize(n);
    ends.resize(n);
    int64_t smin = kI64Max, smax = kI64Min, second = kI64Min;
    size_t last = 0;
    bool mismatch = false;
    // True per-rank GPU starts when every member has the plugin's; else kernels for all.
    size_t with_plugin = 0;
    for (size_t i = 0; i < n; ++i) with_plugin += g[i].rec->kernel_times != kNoKernelTimes;
    const bool by_plugin = with_plugin == n;
    if (by_plugin) ++f.timed_by_plugin;
    else if (with_plugin > 0) ++f.kernel_fallback;
    for (size_t i = 0; i < n; ++i) {
      int64_t s0 = g[i].rec->start_ns, e0 = g[i].rec->end_ns;
      if (!by_plugin && g[i].rec->kernel_times != kNoKernelTimes) {
        const auto& kt = ranks[g[i].slot].kernel_times;
        if (g[i].rec->kernel_times < kt.size()) std::tie(s0, e0) = kt[g[i].rec->kernel_times];
      }
      starts[i] = domains.Adjust(g[i].slot, s0);
      ends[i] = domains.Adjust(g[i].slot, e0);
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
    f.mismatched += mismatch;
    f.memberships += static_cast<int64_t>(n);
    ++f.by_kind[std::min<size_t>(g[0].rec->key_kind, 2)];
    auto cs = comm_size.find(g[0].rec->comm);
    if (cs != comm_size.end() && cs->second > 0 && static_cast<int64_t>(n) > cs->second) ++f.over_full;
    const int64_t skew = SatSub(smax, smin);
    f.skews.push_back(static_cast<double>(skew));
    const bool counted = skew > kStragglerSkewNs;
    Listed entry;
    const bool list = listed.Wants(skew, smin);
    if (list) entry.per_rank.reserve(n);
    int64_t others_wait = 0;
    for (size_t i = 0; i < n; ++i) {
      const OpRecord& rec = *g[i].rec;
      RankTotals& tot = f.totals[g[i].slot];
      // Waiting ends when the last rank arrives, or at the kernel's end if that is earlier
      // (possible only with misaligned clocks; counted).
      const int64_t wait_end = std::min(smax, ends[i]);
      const int64_t wait = std::max<int64_t>(0, SatSub(wait_end, starts[i]));
      const int64_t transfer = std::max<int64_t>(0, SatSub(ends[i], smax));
      if (ends[i] < smax) ++f.ends_before_last;
      tot.wait_ns = SatAdd(tot.wait_ns, wait);
      tot.transfer_ns = SatAdd(tot.transfer_ns, transfer);
      const int64_t exposed_wait = ExposedWait(ranks[g[i].slot], rec, wait);
      tot.exposed_wait_ns = SatAdd(tot.exposed_wait_ns, exposed_wait);
      if (exposed_wait > 0) {
        const int64_t w = ranks[g[i].slot].WindowOf(rec.start_ns);
        const RankOps& me = ranks[g[i].slot];
        if (w >= 0) tot.exposed_wait_by_window[w] = SatAdd(tot.exposed_wait_by_window[w], exposed_wait);
        if (me.any_steady ? w >= 0 && me.window_steady[w] : true) {
          int64_t& waited = tot.exposed_wait_for[ranks[g[last].slot].rank];
          waited = SatAdd(waited, exposed_wait);
        }
      }
      ++tot.collectives;
      if (counted) {
        ++tot.counted;
        tot.fair_share_sum += 1.0 / static_cast<double>(n);
        if (i != last) others_wait = SatAdd(others_wait, wait);
      }
      if (list) entry.per_rank.push_back({ranks[g[i].slot].rank, wait, transfer});
    }
    if (counted) {
      RankTotals& lt = f.totals[g[last].slot];
      ++lt.last_arrivals;
      lt.others_wait_ns = SatAdd(lt.others_wait_ns, others_wait);
      lt.lateness_sum += static_cast<__int128>(smax) - second;
    }
    if (list) {
      const OpRecord& first = *g[0].rec;
      entry.comm = first.comm;
      entry.key_kind = first.key_kind;
      entry.key_major = first.key_major;
      entry.key_minor = first.key_minor;
      entry.op = first.op;
      entry.bytes = first.bytes;
      entry.start_ns = smin;
      entry.skew_ns = skew;
      entry.last_rank = ranks[g[last].slot].rank;
      entry.plugin_timed = by_plugin;
      listed.Add(std::move(entry));
    }
  });
  f.listed = listed.TakeInTimeOrder();
  return f;
}

std::vector<ListedCollective> ListedCollectives(const std::vector<Listed>& listed, const Interner& comms,
                                                const Interner& op_names) {
  std::vector<ListedCollective> out;
  out.reserve(listed.size());
  for (const Listed& l : listed) {
    ListedCollective c;
    c.communicator = comms.Name(l.comm);
    if (l.key_kind == kKeySeq) c.seq = l.key_major;
    c.key = KeyText(l.key_kind, l.key_major, l.key_minor);
    c.op = l.op == kOpNameOverflow ? std::string("other") : op_names.Name(l.op);
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
