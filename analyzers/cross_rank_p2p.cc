// Point-to-point across ranks: pairing sends with recvs (docs/cross-rank.md, "Point-to-point").
#include "analyzers/cross_rank_p2p.h"

#include <fmt/format.h>

#include <map>
#include <tuple>

#include "analyzers/overlap.h"
#include "analyzers/summary.h"

namespace overlapprof::cross_rank {

namespace {

constexpr size_t kNoSlot = static_cast<size_t>(-1);

struct PairOps {
  size_t send_slot = kNoSlot, recv_slot = kNoSlot;
  std::vector<const P2pRecord*> sends, recvs;  // in start order
};

struct StepAcc {
  int64_t recvs = 0, wait = 0;
  std::map<int64_t, int64_t> by_peer;  // peer's global rank -> wait
};

// Every send and recv by (communicator, source, destination), each (communicator, rank in it)
// held by the first trace that claims it; ops of a later claimant are counted, not paired.
struct Grouped {
  std::map<std::pair<uint32_t, int64_t>, size_t> slot_of;  // (communicator, rank in it) -> slot
  std::map<std::tuple<uint32_t, int64_t, int64_t>, PairOps> pairs;
  int64_t conflicts = 0, conflicting_ops = 0;
};

Grouped GroupPairs(const std::vector<RankOps>& ranks) {
  Grouped g;
  for (size_t s = 0; s < ranks.size(); ++s)
    for (const P2pRecord& p : ranks[s].p2p) {
      auto [it, fresh] = g.slot_of.emplace(std::pair(p.comm, p.self), s);
      if (!fresh && it->second != s) ++g.conflicts;
    }
  for (size_t s = 0; s < ranks.size(); ++s)
    for (const P2pRecord& p : ranks[s].p2p) {
      if (g.slot_of[{p.comm, p.self}] != s) {
        ++g.conflicting_ops;
        continue;
      }
      PairOps& po = g.pairs[p.send ? std::tuple(p.comm, p.self, p.peer) : std::tuple(p.comm, p.peer, p.self)];
      (p.send ? po.send_slot : po.recv_slot) = s;
      (p.send ? po.sends : po.recvs).push_back(&p);
    }
  return g;
}

// What pairing left over: ops whose peer has no op on the pair, and surplus ops of a pair whose
// counts differ, with one example of each for the notices.
struct Unpaired {
  int64_t sends_no_peer = 0, recvs_no_peer = 0, surplus_sends = 0, surplus_recvs = 0;
  std::string example_missing, example_surplus;
};

// The waits in one clock (and their per-rank and per-step sums) as the header describes:
// each pair's i-th send with its i-th recv.
struct Waits {
  std::vector<P2pRankRow> rows;                          // by slot
  std::map<std::pair<size_t, int64_t>, StepAcc> steps;  // (slot, step)
  Unpaired unpaired;
};

Waits PairInOrder(const Grouped& g, const std::vector<RankOps>& ranks, const ClockDomains& domains,
                  const Interner& comms, PointToPoint& out) {
  Waits w;
  w.rows.resize(ranks.size());
  for (size_t s = 0; s < ranks.size(); ++s) w.rows[s].rank = ranks[s].rank;
  Unpaired& u = w.unpaired;
  for (const auto& [key, po] : g.pairs) {
    const auto& [comm, src, dst] = key;
    if (po.recv_slot == kNoSlot || po.send_slot == kNoSlot) {
      // One side only: the peer's trace is missing (or it has no op on this pair).
      const bool peer_traced = g.slot_of.count({comm, po.recv_slot == kNoSlot ? dst : src}) > 0;
      (po.recv_slot == kNoSlot ? u.sends_no_peer : u.recvs_no_peer) += static_cast<int64_t>(po.sends.size() + po.recvs.size());
      if (u.example_missing.empty())
        u.example_missing = fmt::format("{} {} {} on communicator {}: {}", po.sends.size() + po.recvs.size(),
                                        po.recv_slot == kNoSlot ? "sends to rank" : "recvs from rank",
                                        po.recv_slot == kNoSlot ? dst : src, comms.Name(comm),
                                        peer_traced ? "that rank has no op on this pair" : "no trace holds that rank");
      continue;
    }
    const size_t n = std::min(po.sends.size(), po.recvs.size());
    if (po.sends.size() != po.recvs.size()) {
      u.surplus_sends += static_cast<int64_t>(po.sends.size() - n);
      u.surplus_recvs += static_cast<int64_t>(po.recvs.size() - n);
      if (u.example_surplus.empty())
        u.example_surplus = fmt::format("{} sends and {} recvs from rank {} to rank {} on communicator {}",
                                        po.sends.size(), po.recvs.size(), src, dst, comms.Name(comm));
    }
    const int64_t sender = ranks[po.send_slot].rank;
    for (size_t i = 0; i < n; ++i) {
      const P2pRecord& snd = *po.sends[i];
      const P2pRecord& rcv = *po.recvs[i];
      const int64_t ss = domains.Adjust(po.send_slot, snd.start_ns);
      const int64_t rs = domains.Adjust(po.recv_slot, rcv.start_ns);
      const int64_t wait = std::clamp(SatSub(ss, rs), int64_t{0}, rcv.end_ns - rcv.start_ns);
      ++out.pairs;
      out.recv_wait_ns = SatAdd(out.recv_wait_ns, wait);
      ++w.rows[po.send_slot].sends;
      ++w.rows[po.recv_slot].recvs;
      w.rows[po.recv_slot].recv_wait_ns = SatAdd(w.rows[po.recv_slot].recv_wait_ns, wait);
      w.rows[po.send_slot].waited_on_ns = SatAdd(w.rows[po.send_slot].waited_on_ns, wait);
      StepAcc& a = w.steps[{po.recv_slot, rcv.step}];
      ++a.recvs;
      a.wait = SatAdd(a.wait, wait);
      if (wait > 0) a.by_peer[sender] = SatAdd(a.by_peer[sender], wait);
    }
  }
  out.unpaired_sends = u.sends_no_peer + u.surplus_sends;
  out.unpaired_recvs = u.recvs_no_peer + u.surplus_recvs;
  return w;
}

// The stage everyone waits on (the largest positive waited-on minus own wait), the ranks with
// any pair, and one row per (rank, step).
void Summarize(const Waits& w, const std::vector<RankOps>& ranks, PointToPoint& out) {
  int64_t best = 0;
  for (const P2pRankRow& r : w.rows) {
    const int64_t score = SatSub(r.waited_on_ns, r.recv_wait_ns);
    if (r.waited_on_ns > 0 && score > best) {
      best = score;
      out.bottleneck_rank = r.rank;
      out.bottleneck_waited_on_ns = r.waited_on_ns;
    }
  }
  for (const P2pRankRow& r : w.rows)
    if (r.sends + r.recvs > 0) out.ranks.push_back(r);
  for (const auto& [k, a] : w.steps) {
    P2pStepRow row;
    row.rank = ranks[k.first].rank;
    if (k.second != kUnknown) row.step = k.second;
    row.recvs = a.recvs;
    row.recv_wait_ns = a.wait;
    int64_t most = 0;
    for (const auto& [peer, wait] : a.by_peer)
      if (wait > most) {
        most = wait;
        row.waited_most_on = peer;
      }
    out.iterations.push_back(row);
  }
}

// Why ops were not paired, each reason with its count.
void AddNotices(const RecordCounts& counts, const Grouped& g, const Unpaired& u, PointToPoint& out) {
  if (counts.p2p_unnamed > 0)
    out.notices.push_back(fmt::format("{} point-to-point kernels (SendRecv) that neither their host op nor an NCCL "
                                      "group names (as a collective, send or recv): not matched",
                                      counts.p2p_unnamed));
  if (counts.p2p_no_peer > 0)
    out.notices.push_back(fmt::format("{} sends/recvs without their own or their peer's rank in the communicator "
                                      "(no \"Src Rank\"/\"Dst Rank\", or no injector peer): not paired",
                                      counts.p2p_no_peer));
  if (g.conflicting_ops > 0)
    out.notices.push_back(fmt::format("{} sends/recvs on a (communicator, rank) that another trace already holds "
                                      "({} such claims): not paired",
                                      g.conflicting_ops, g.conflicts));
  if (u.sends_no_peer + u.recvs_no_peer > 0)
    out.notices.push_back(fmt::format("{} sends and {} recvs whose peer has no matching op: not paired (e.g. {})",
                                      u.sends_no_peer, u.recvs_no_peer, u.example_missing));
  if (u.surplus_sends + u.surplus_recvs > 0)
    out.notices.push_back(fmt::format("{} sends and {} recvs left over after pairing in order: the pair's counts "
                                      "differ (profiling windows that differ), e.g. {}",
                                      u.surplus_sends, u.surplus_recvs, u.example_surplus));
}

}  // namespace

std::optional<PointToPoint> PairPointToPoint(const std::vector<RankOps>& ranks, const ClockDomains& domains,
                                             const RecordCounts& counts, const Interner& comms) {
  bool any = counts.p2p_skipped > 0;
  for (const RankOps& r : ranks) any = any || !r.p2p.empty();
  if (!any) return std::nullopt;
  PointToPoint out;
  const Grouped g = GroupPairs(ranks);
  const Waits w = PairInOrder(g, ranks, domains, comms, out);
  Summarize(w, ranks, out);
  AddNotices(counts, g, w.unpaired, out);
  return out;
}

void AddPointToPointFindings(const PointToPoint& p, Summary& summary) {
  if (!p.bottleneck_rank) return;
  double share = p.recv_wait_ns > 0 ? static_cast<double>(p.bottleneck_waited_on_ns) / static_cast<double>(p.recv_wait_ns) : 0;
  summary.AddFinding("cross_rank", *p.bottleneck_rank, Severity::kWarning,
                     fmt::format("rank {} is the pipeline stage the others wait on: recvs waited {} for its sends "
                                 "({} of all recv wait, {} over {} send/recv pairs)",
                                 *p.bottleneck_rank, FormatDuration(p.bottleneck_waited_on_ns), FormatPercent(share),
                                 FormatDuration(p.recv_wait_ns), p.pairs));
}

}  // namespace overlapprof::cross_rank
