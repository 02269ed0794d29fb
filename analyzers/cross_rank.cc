#include "analyzers/cross_rank.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "analyzers/comm_ops.h"
#include "analyzers/cross_rank_clocks.h"
#include "analyzers/cross_rank_figures.h"
#include "analyzers/cross_rank_match.h"
#include "analyzers/cross_rank_p2p.h"
#include "analyzers/cross_rank_stragglers.h"
#include "analyzers/iterations.h"
#include "analyzers/overlap.h"

// The cross-rank analyzer: what each rank contributes is recorded in AnalyzeRank
// (cross_rank_match.*); Finish runs the phases: clock domains and offsets (cross_rank_clocks.*),
// per-collective figures (cross_rank_figures.*), stragglers (cross_rank_stragglers.*), then
// builds the typed result (Summary::cross_rank) and the findings.
namespace overlapprof {

namespace {

using namespace cross_rank;  // NOLINT: the analyzer's own parts

class CrossRankAnalyzer : public PreparingAnalyzer {
  struct Prepared : RankWork {
    std::shared_ptr<const RankDerived> derived;  // what it was prepared from
    PreparedRankOps ops;
  };

 public:
  std::string_view name() const override { return "cross_rank"; }

  // The rank's op records, with its own interned names (PrepareRankOps).
  std::unique_ptr<RankWork> PrepareRank(RankPrep& rank, const AnalysisOptions&) const override {
    if (rank.trace.meta.rank == kUnknown || !rank.derived || rank.derived->rank_index != rank.rank_index)
      return nullptr;
    auto p = std::make_unique<Prepared>();
    p->derived = rank.derived;
    p->ops = PrepareRankOps(rank.trace, *rank.derived);
    return p;
  }

  Status AnalyzeRank(const RankTrace& t, size_t rank_index, const AnalysisOptions& options,
                     std::unique_ptr<RankWork> prepared, Summary& summary) override {
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
      own->ops = CommOpSpans(t, own->sets.compute, own->sets.timing);
      StatCounters scratch;
      own->iterations = FindIterations(t, scratch, options.step_range);
      d = std::move(own);
    }
    auto* p = dynamic_cast<Prepared*>(prepared.get());
    RankOps r = p && p->derived == d ? AddRankOps(std::move(p->ops), comms_, record_counts_)
                                           : RecordRankOps(t, *d, comms_, record_counts_);
    r.exposed_comm_ns = have_result ? summary.ranks[rank_index].whole.exposed_comm_ns : 0;
    ranks_.push_back(std::move(r));
    return OkStatus();
  }

  Status Finish(const AnalysisOptions&, Summary& summary) override {
    std::sort(ranks_.begin(), ranks_.end(), [](const RankOps& a, const RankOps& b) { return a.rank < b.rank; });
    ClockDomains domains = AssignClockDomains(ranks_);
    const MatchCounts counts = EstimateClocks(ranks_, domains);  // pass 1: counts, clock offsets
    const std::map<uint32_t, int64_t> comm_size = CommunicatorSizes(ranks_);
    const CollectiveFigures figures = MeasureCollectives(ranks_, domains, comm_size, counts.matched);  // pass 2
    const std::vector<size_t> order = StragglerOrder(figures.totals);
    CrossRankResult result = BuildResult(domains, counts, comm_size, figures, order);
    result.point_to_point = PairPointToPoint(ranks_, domains, record_counts_, comms_);  // offsets applied
    const std::optional<PointToPoint> p2p = result.point_to_point;
    summary.SetCrossRank(std::move(result));
    if (counts.matched > 0) AddFindings(domains, counts, figures, order, summary);
    if (p2p) AddPointToPointFindings(*p2p, summary);
    return OkStatus();
  }

 private:
  // collectives_summary: always.
  CollectivesSummary Summarize(const MatchCounts& counts, const std::map<uint32_t, int64_t>& comm_size,
                               const CollectiveFigures& f) const {
    CollectivesSummary cs;
    cs.matched = counts.matched;
    cs.unmatched = counts.unmatched;
    cs.listed = static_cast<int64_t>(f.listed.size());
    cs.mismatched = f.mismatched;
    cs.ranks = static_cast<int64_t>(ranks_.size());
    for (const RankOps& r : ranks_) cs.ops += static_cast<int64_t>(r.ops.size());
    cs.p2p_skipped = record_counts_.p2p_skipped;
    cs.duplicate_keys = record_counts_.duplicate_keys;
    cs.matched_by_seq = f.by_kind[kKeySeq];
    cs.matched_by_step_ordinal = f.by_kind[kKeyStepOrdinal];
    cs.matched_by_ordinal = f.by_kind[kKeyOrdinal];
    if (!f.skews.empty()) {
      const Spread sp = SpreadOf(f.skews);
      cs.skew_ns = SkewStats{std::llround(sp.median), std::llround(sp.p90),
                             std::llround(*std::max_element(f.skews.begin(), f.skews.end()))};
    }
    cs.straggler_threshold_ns = kStragglerSkewNs;
    cs.ends_before_last_arrival = f.ends_before_last;
    cs.plugin_timing = f.any_plugin;
    cs.timed_by_nccl_profiler = f.timed_by_plugin;
    cs.timed_by_kernels_fallback = f.kernel_fallback;
    if (f.kernel_fallback > 0)
      cs.notices.push_back(fmt::format("{} matched collectives were timed by their kernels although some ranks had NCCL "
                                       "profiler plugin times: not every rank had them (plugin off, or ops dropped)",
                                       f.kernel_fallback));
    // Communicators with fewer ranks present than their size (partial traces).
    std::map<uint32_t, int64_t> present;  // communicator -> ranks with an op on it (and a size)
    for (const RankOps& r : ranks_)
      for (const auto& [c, n] : r.comm_nranks) ++present[c];
    for (const auto& [c, size] : comm_size)
      if (present[c] < size && cs.partial_communicators.size() < 100)
        cs.partial_communicators.push_back({comms_.Name(c), size, present[c]});
    cs.notices = notices_;
    if (ranks_.size() < 2)
      cs.notices.push_back(ranks_.empty() ? "no rank with a known rank id: nothing to match"
                                          : "a single rank: nothing to match across ranks");
    else if (counts.matched == 0)
      cs.notices.push_back("no communication op was found on two or more ranks under the same communicator and key");
    if (ranks_.size() >= 2 && counts.unmatched > 0) {
      // Why collectives were found on one rank only: a communicator no other rank has, or keys
      // the others lack. Ops are sorted by communicator first: one linear pass per rank.
      std::map<uint32_t, std::pair<int64_t, int64_t>> per_comm;  // communicator -> (ranks holding it, last rank)
      std::map<uint32_t, int64_t> ops_on;                         // communicator -> ops (all ranks)
      for (const RankOps& r : ranks_)
        for (size_t i = 0; i < r.ops.size();) {
          size_t j = i;
          while (j < r.ops.size() && r.ops[j].comm == r.ops[i].comm) ++j;
          auto& pc = per_comm[r.ops[i].comm];
          ++pc.first;
          pc.second = r.rank;
          ops_on[r.ops[i].comm] += static_cast<int64_t>(j - i);
          i = j;
        }
      int64_t lone = 0;
      for (const auto& [c, pc] : per_comm) {
        if (pc.first != 1) continue;
        lone += ops_on[c];
        if (cs.notices.size() < 20)
          cs.notices.push_back(fmt::format("{} ops on communicator {} were not matched: only rank {} has that "
                                           "communicator (the other members' traces are missing, or name it differently)",
                                           ops_on[c], comms_.Name(c), pc.second));
      }
      if (counts.unmatched > lone)
        cs.notices.push_back(fmt::format("{} ops were not matched: their key (seq, step and ordinal, or ordinal) is on "
                                         "one rank only although other ranks share the communicator (profiling windows "
                                         "or op sequences that differ across ranks)",
                                         counts.unmatched - lone));
    }
    if (record_counts_.p2p_skipped > 0)
      cs.notices.push_back(fmt::format("{} point-to-point ops (send, recv, unnamed SendRecv kernels) are not "
                                       "collectives: sends are paired with recvs in point_to_point, which says why "
                                       "any were not",
                                       record_counts_.p2p_skipped));
    if (f.over_full > 0)
      cs.notices.push_back(fmt::format("{} collectives had more ranks than their communicator's size: different "
                                       "groups may share a communicator name, and were matched together",
                                       f.over_full));
    return cs;
  }

  CrossRankResult BuildResult(const ClockDomains& domains, const MatchCounts& counts,
                              const std::map<uint32_t, int64_t>& comm_size, const CollectiveFigures& f,
                              const std::vector<size_t>& straggler_order) const {
    CrossRankResult result;
    result.summary = Summarize(counts, comm_size, f);
    if (counts.matched == 0) return result;
    result.any_matched = true;
    result.collectives = ListedCollectives(f.listed, comms_);
    result.stragglers = StragglerRows(ranks_, f.totals, straggler_order);
    result.clock_offsets = ClockDomainRows(domains);
    result.ranks.reserve(ranks_.size());
    for (size_t i = 0; i < ranks_.size(); ++i) {
      const RankTotals& t = f.totals[i];
      CrossRankRow row{ranks_[i].rank, domains.names[domains.of_slot[i]], t.collectives, t.wait_ns,
                       t.transfer_ns, t.exposed_wait_ns, ranks_[i].exposed_comm_ns, t.exposed_wait_by_window, {}};
      row.waited_for.assign(t.exposed_wait_for.begin(), t.exposed_wait_for.end());
      std::stable_sort(row.waited_for.begin(), row.waited_for.end(),
                       [](const auto& a, const auto& b) { return a.second > b.second; });
      result.ranks.push_back(std::move(row));
    }
    return result;
  }

  // First the warning that makes the figures doubtful, then stragglers, waiting, clocks, matching.
  void AddFindings(const ClockDomains& domains, const MatchCounts& counts, const CollectiveFigures& f,
                   const std::vector<size_t>& straggler_order, Summary& summary) const {
    if (f.ends_before_last * 20 >= f.memberships && f.ends_before_last > 0)
      summary.AddFinding(name(), kUnknown, Severity::kWarning,
                         fmt::format("in {} of {} rank-collectives the rank's kernel ended before the last rank's "
                                     "began, impossible on one clock: the ranks' clocks disagree (or matching is off); "
                                     "waits are capped at the kernel ends",
                                     f.ends_before_last, f.memberships));
    AddStragglerFindings(ranks_, f.totals, straggler_order, summary);
    AddWaitFindings(ranks_, f.totals, summary);
    AddClockFindings(domains, summary);
    if (f.mismatched > 0)
      summary.AddFinding(name(), kUnknown, Severity::kWarning,
                         fmt::format("{} of {} matched collectives disagree across ranks on op or size: matching by "
                                     "order may be off (profiling windows or communicators that differ across ranks)",
                                     f.mismatched, counts.matched));
    if (counts.unmatched > 0 && counts.unmatched * 10 >= counts.matched)
      summary.AddFinding(name(), kUnknown, Severity::kInfo,
                         fmt::format("{} communication ops were found on one rank only ({} matched across ranks): "
                                     "the ranks' profiling windows or communicators differ",
                                     counts.unmatched, counts.matched));
  }

  std::vector<RankOps> ranks_;
  std::set<int64_t> seen_ranks_;
  Interner comms_;
  std::vector<std::string> notices_;
  RecordCounts record_counts_;
};

}  // namespace

std::unique_ptr<Analyzer> MakeCrossRankAnalyzer() { return std::make_unique<CrossRankAnalyzer>(); }

}  // namespace overlapprof
