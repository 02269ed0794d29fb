// Stragglers and exposed waiting (docs/cross-rank.md, "Stragglers").
#include "analyzers/cross_rank_stragglers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analyzers/overlap.h"
#include "analyzers/summary.h"

namespace overlapprof::cross_rank {

namespace {
constexpr std::string_view kName = "cross_rank";
}  // namespace

std::vector<size_t> StragglerOrder(const std::vector<RankTotals>& totals) {
  std::vector<size_t> order;
  for (size_t i = 0; i < totals.size(); ++i)
    if (totals[i].counted > 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (totals[a].others_wait_ns != totals[b].others_wait_ns) return totals[a].others_wait_ns > totals[b].others_wait_ns;
    return totals[a].last_arrivals > totals[b].last_arrivals;
  });
  return order;
}

std::vector<StragglerRow> StragglerRows(const std::vector<RankOps>& ranks, const std::vector<RankTotals>& totals,
                                        const std::vector<size_t>& order) {
  std::vector<StragglerRow> rows;
  rows.reserve(order.size());
  for (size_t i : order) {
    const RankTotals& t = totals[i];
    StragglerRow s;
    s.rank = ranks[i].rank;
    s.last_arrivals = t.last_arrivals;
    s.collectives_counted = t.counted;
    s.last_fraction = std::round(static_cast<double>(t.last_arrivals) / static_cast<double>(t.counted) * 1e4) / 1e4;
    s.others_wait_ns = t.others_wait_ns;
    if (t.last_arrivals > 0) s.mean_lateness_ns = Clamp128(t.lateness_sum / t.last_arrivals);
    rows.push_back(s);
  }
  return rows;
}

void AddStragglerFindings(const std::vector<RankOps>& ranks, const std::vector<RankTotals>& totals,
                          const std::vector<size_t>& order, Summary& summary) {
  // A rank last far more often than its fair share (1 / ranks per collective).
  int reported = 0;
  for (size_t i : order) {
    const RankTotals& t = totals[i];
    if (t.last_arrivals == 0 || t.others_wait_ns <= 0) continue;
    const double frac = static_cast<double>(t.last_arrivals) / static_cast<double>(t.counted);
    const double fair = t.fair_share_sum / static_cast<double>(t.counted);
    const double threshold = std::clamp(3.0 * fair, 0.25, 0.75);
    const bool persistent = t.last_arrivals >= 3 && frac >= threshold;
    if (!persistent && reported > 0) continue;
    summary.AddFinding(kName, ranks[i].rank, persistent ? Severity::kWarning : Severity::kInfo,
                       fmt::format("rank {} arrived last at {} of {} collectives; the other ranks lost {} waiting for "
                                   "it{}",
                                   ranks[i].rank, FormatPercent(frac), t.counted, FormatDuration(t.others_wait_ns),
                                   t.last_arrivals > 0
                                       ? fmt::format(" (it started {} after the next-latest rank on average)",
                                                     FormatDuration(Clamp128(t.lateness_sum / t.last_arrivals)))
                                       : std::string()));
    if (++reported >= 3) break;
  }
}

void AddWaitFindings(const std::vector<RankOps>& ranks, const std::vector<RankTotals>& totals, Summary& summary) {
  std::vector<size_t> by_wait;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (totals[i].exposed_wait_ns > 0 && ranks[i].exposed_comm_ns > 0) by_wait.push_back(i);
  std::stable_sort(by_wait.begin(), by_wait.end(),
                   [&](size_t a, size_t b) { return totals[a].exposed_wait_ns > totals[b].exposed_wait_ns; });
  int shown = 0;
  for (size_t i : by_wait) {
    const int64_t exposed = ranks[i].exposed_comm_ns;
    const int64_t w = std::min(totals[i].exposed_wait_ns, exposed);
    const double share = static_cast<double>(w) / static_cast<double>(exposed);
    if (share < 0.10) continue;
    summary.AddFinding(kName, ranks[i].rank, share >= 0.25 ? Severity::kWarning : Severity::kInfo,
                       fmt::format("of rank {}'s {} exposed communication, {} is waiting for other ranks to arrive "
                                   "(straggler), not transfer",
                                   ranks[i].rank, FormatDuration(exposed), FormatDuration(w)));
    if (++shown >= 5) break;
  }
}

}  // namespace overlapprof::cross_rank
