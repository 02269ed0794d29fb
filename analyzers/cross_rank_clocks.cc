// Clock domains and offsets (docs/cross-rank.md, "Clocks").
#include "analyzers/cross_rank_clocks.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "analyzers/overlap.h"
#include "analyzers/summary.h"

namespace overlapprof {

using cross_rank::Clamp128;
using cross_rank::kI64Max;

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

namespace cross_rank {

ClockDomains AssignClockDomains(const std::vector<RankOps>& ranks) {
  ClockDomains d;
  d.of_slot.resize(ranks.size());
  std::map<std::string, size_t> by_host;
  for (size_t slot = 0; slot < ranks.size(); ++slot) {
    const RankOps& r = ranks[slot];
    size_t dm;
    if (!r.host.empty()) {
      auto [it, fresh] = by_host.emplace(r.host, d.names.size());
      if (fresh) {
        d.names.push_back(r.host);
        d.ranks.emplace_back();
      }
      dm = it->second;
    } else {
      dm = d.names.size();
      d.names.push_back(fmt::format("rank {}", r.rank));
      d.ranks.emplace_back();
    }
    d.of_slot[slot] = dm;
    d.ranks[dm].push_back(r.rank);
  }
  d.ref = ranks.empty() ? 0 : d.of_slot[0];
  d.clocks.assign(d.size(), ClockEstimate{});
  return d;
}

MatchCounts EstimateClocks(const std::vector<RankOps>& ranks, ClockDomains& domains) {
  MatchCounts counts;
  const size_t ndom = domains.size(), ref = domains.ref;
  std::vector<DiffSampler> diffs(ndom);
  std::vector<__int128> dsum(ndom);
  std::vector<int64_t> dcnt(ndom);
  std::vector<size_t> touched;
  ForEachGroup(ranks, [&](const std::vector<Member>& g) {
    if (g.size() < 2) {
      ++counts.unmatched;
      return;
    }
    ++counts.matched;
    if (ndom < 2) return;
    const int64_t base = g[0].rec->end_ns;
    touched.clear();
    for (const Member& m : g) {
      const size_t dm = domains.of_slot[m.slot];
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
  for (size_t dm = 0; dm < ndom; ++dm) {
    if (dm == ref) continue;
    domains.clocks[dm] = EstimateClockOffset(std::move(diffs[dm].values));
    domains.clocks[dm].samples = diffs[dm].seen;
  }
  return counts;
}

std::vector<ClockDomainRow> ClockDomainRows(const ClockDomains& domains) {
  std::vector<ClockDomainRow> rows;
  rows.reserve(domains.size());
  for (size_t dm = 0; dm < domains.size(); ++dm) {
    const ClockEstimate& c = domains.clocks[dm];
    ClockDomainRow row;
    row.domain = domains.names[dm];
    row.ranks = domains.ranks[dm];
    row.reference = dm == domains.ref;
    row.offset_ns = c.offset_ns;
    if (dm != domains.ref) row.noise_ns = c.noise_ns;
    row.samples = c.samples;
    row.applied = c.applied;
    rows.push_back(std::move(row));
  }
  return rows;
}

void AddClockFindings(const ClockDomains& domains, Summary& summary) {
  constexpr std::string_view kName = "cross_rank";
  // The first few domains by name, then one line for the rest.
  constexpr int kClockLines = 3;
  const size_t ref = domains.ref;
  int applied_lines = 0, unaligned_lines = 0;
  int64_t applied_rest = 0, unaligned_rest = 0, largest_rest = 0;
  for (size_t dm = 0; dm < domains.size(); ++dm) {
    if (dm == ref) continue;
    const ClockEstimate& c = domains.clocks[dm];
    if (c.applied) {
      if (applied_lines++ >= kClockLines) {
        ++applied_rest;
        largest_rest = std::max(largest_rest, std::abs(c.offset_ns));
        continue;
      }
      summary.AddFinding(kName, kUnknown, Severity::kInfo,
                         fmt::format("the clock of {} reads {} {} that of {} (from the ends of {} collectives, noise "
                                     "{}): corrected before matching times",
                                     domains.names[dm], FormatDuration(std::abs(c.offset_ns)),
                                     c.offset_ns > 0 ? "ahead of" : "behind", domains.names[ref], c.samples,
                                     FormatDuration(c.noise_ns)));
    } else if (c.samples < kMinClockSamples) {
      if (unaligned_lines++ >= kClockLines) {
        ++unaligned_rest;
        continue;
      }
      summary.AddFinding(kName, kUnknown, Severity::kWarning,
                         fmt::format("the clock of {} could not be aligned with that of {} ({} shared collectives, "
                                     "at least {} needed): its skew and wait figures assume the clocks agree",
                                     domains.names[dm], domains.names[ref], c.samples, kMinClockSamples));
    }
  }
  if (applied_rest > 0)
    summary.AddFinding(kName, kUnknown, Severity::kInfo,
                       fmt::format("clock offsets of {} more clock domains were corrected too (the largest {}; see "
                                   "clock_offsets)",
                                   applied_rest, FormatDuration(largest_rest)));
  if (unaligned_rest > 0)
    summary.AddFinding(kName, kUnknown, Severity::kWarning,
                       fmt::format("the clocks of {} more clock domains could not be aligned (see clock_offsets)",
                                   unaligned_rest));
}

}  // namespace cross_rank
}  // namespace overlapprof
