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

}  // namespace

std::optional<PointToPoint> PairPointToPoint(const std::vector<RankOps>& ranks, const ClockDomains& domains,
                                             const RecordCounts& counts, const Interner& comms) {
  bool any = counts.p2p_skipped > 0;
  for (const RankOps& r : ranks) any = any || !r.p2p.empty();
  if (!any) return std::nullopt;
  PointToPoint out;

  // Which trace holds each (communicator, rank in it): the first to claim it.
  std::map<std::pair<uint32_t, int64_t>, size_t> slot_of;
  int64_t conflicts = 0;
  for (size_t s = 0; s < ranks.size(); ++s)
    for (const P2pRecord& p : ranks[s].p2p) {
      auto [it, fresh] = slot_of.emplace(std::pair(p.comm, p.self), s);
      if (!fresh && it->second != s) ++conflicts;
    }
  // (communicator, source, destination) -> its sends and recvs.
  std::map<std::tuple<uint32_t, int64_t, int64_t>, PairOps> pairs;
  int64_t conflicting_ops = 0;
  for (size_t s = 0; s < ranks.size(); ++s)
    for (const P2pRecord& p : ranks[s].p2p) {
      if (slot_of[{p.comm, p.self}] != s) {
        ++conflicting_ops;
        continue;
      }
      PairOps& po = pairs[p.send ? std::tuple(p.comm, p.self, p.peer) : std::tuple(p.comm, p.peer, p.self)];
      (p.send ? po.send_slot : po.recv_slot) = s;
      (p.send ? po.sends : po.recvs).push_back(&p);
    }

  std::vector<P2pRankRow> rows(ranks.size());
  for (size_t s = 0; s < ranks.size(); ++s) rows[s].rank = ranks[s].rank;
  std::map<std::pair<size_t, int64_t>, StepAcc> steps;  // (slot, step)
  int64_t sends_no_peer = 0, recvs_no_peer = 0, surplus_sends = 0, surplus_recvs = 0;
  std::string example_missing, example_surplus;
  for (const auto& [key, po] : pairs) {
    const auto& [comm, src, dst] = key;
    if (po.recv_slot == kNoSlot || po.send_slot == kNoSlot) {
      // One side only: the peer's trace is missing (or it has no op on this pair).
      const bool peer_traced = slot_of.count({comm, po.recv_slot == kNoSlot ? dst : src}) > 0;
      (po.recv_slot == kNoSlot ? sends_no_peer : recvs_no_peer) += static_cast<int64_t>(po.sends.size() + po.recvs.size());
      if (example_missing.empty())
        example_missing = fmt::format("{} {} {} on communicator {}: {}", po.sends.size() + po.recvs.size(),
                                      po.recv_slot == kNoSlot ? "sends to rank" : "recvs from rank",
                                      po.recv_slot == kNoSlot ? dst : src, comms.Name(comm),
                                      peer_traced ? "that rank has no op on this pair" : "no trace holds that rank");
      continue;
    }
    const size_t n = std::min(po.sends.size(), po.recvs.size());
    if (po.sends.size() != po.recvs.size()) {
      surplus_sends += static_cast<int64_t>(po.sends.size() - n);
      surplus_recvs += static_cast<int64_t>(po.recvs.size() - n);
      if (example_surplus.empty())
        example_surplus = fmt::format("{} sends and {} recvs from rank {} to rank {} on communicator {}",
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
      ++rows[po.send_slot].sends;
      ++rows[po.recv_slot].recvs;
      rows[po.recv_slot].recv_wait_ns = SatAdd(rows[po.recv_slot].recv_wait_ns, wait);
      rows[po.send_slot].waited_on_ns = SatAdd(rows[po.send_slot].waited_on_ns, wait);
      StepAcc& a = steps[{po.recv_slot, rcv.step}];
      ++a.recvs;
      a.wait = SatAdd(a.wait, wait);
      if (wait > 0) a.by_peer[sender] = SatAdd(a.by_peer[sender], wait);
    }
  }
  out.unpaired_sends = sends_no_peer + surplus_sends;
  out.unpaired_recvs = recvs_no_peer + surplus_recvs;

  // The stage everyone waits on: the largest (waited on - own wait), when positive.
  int64_t best = 0;
  for (const P2pRankRow& r : rows) {
    const int64_t score = SatSub(r.waited_on_ns, r.recv_wait_ns);
    if (r.waited_on_ns > 0 && score > best) {
      best = score;
      out.bottleneck_rank = r.rank;
      out.bottleneck_waited_on_ns = r.waited_on_ns;
    }
  }
  for (const P2pRankRow& r : rows)
    if (r.sends + r.recvs > 0) out.ranks.push_back(r);
  for (const auto& [k, a] : steps) {
    P2pStepRow row;
    row.rank = ranks[k.first].rank;
    if (k.second != kUnknown) row.step = k.second;
    row.recvs = a.recvs;
    row.recv_wait_ns = a.wait;
    int64_t most = 0;
    for (const auto& [peer, w] : a.by_peer)
      if (w > most) {
        most = w;
        row.waited_most_on = peer;
      }
    out.iterations.push_back(row);
  }

  // Why ops were not paired, each reason with its count.
  if (counts.p2p_unnamed > 0)
    out.notices.push_back(fmt::format("{} point-to-point kernels (SendRecv) that neither their host op nor an NCCL "
                                      "group names (as a collective, send or recv): not matched",
                                      counts.p2p_unnamed));
  if (counts.p2p_no_peer > 0)
    out.notices.push_back(fmt::format("{} sends/recvs without their own or their peer's rank in the communicator "
                                      "(no \"Src Rank\"/\"Dst Rank\", or no injector peer): not paired",
                                      counts.p2p_no_peer));
  if (conflicting_ops > 0)
    out.notices.push_back(fmt::format("{} sends/recvs on a (communicator, rank) that another trace already holds "
                                      "({} such claims): not paired",
                                      conflicting_ops, conflicts));
  if (sends_no_peer + recvs_no_peer > 0)
    out.notices.push_back(fmt::format("{} sends and {} recvs whose peer has no matching op: not paired (e.g. {})",
                                      sends_no_peer, recvs_no_peer, example_missing));
  if (surplus_sends + surplus_recvs > 0)
    out.notices.push_back(fmt::format("{} sends and {} recvs left over after pairing in order: the pair's counts "
                                      "differ (profiling windows that differ), e.g. {}",
                                      surplus_sends, surplus_recvs, example_surplus));
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
