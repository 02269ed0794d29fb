#include "analyzers/step_breakdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "analyzers/overlap.h"

namespace overlapprof {

StepSplit SplitOf(const OverlapFigures& f) {
  StepSplit s;
  s.wall_ns = f.wall_ns;
  s.comm_hidden_ns = f.overlap_ns;
  s.compute_only_ns = f.compute_ns - f.overlap_ns;  // |compute \ comm|
  s.comm_exposed_ns = f.comm_ns - f.overlap_ns;     // |comm \ compute|
  // busy = |compute ∪ comm ∪ memory| = |compute ∪ comm| + |memory \ (compute ∪ comm)|.
  s.memory_only_ns = f.busy_ns - (f.compute_ns + s.comm_exposed_ns);
  s.idle_ns = f.wall_ns - f.busy_ns;
  return s;
}

StepSplit WithWaiting(StepSplit s, int64_t exposed_wait_ns) {
  const int64_t w = std::clamp<int64_t>(exposed_wait_ns, 0, s.comm_exposed_ns);
  s.comm_waiting_ns += w;
  s.comm_exposed_ns -= w;
  return s;
}

namespace {

// The overlap figures a split implies (for RankVerdict's sentence on communication).
OverlapFigures FiguresOf(const StepSplit& s) {
  OverlapFigures f;
  f.wall_ns = s.wall_ns;
  f.compute_ns = s.compute_only_ns + s.comm_hidden_ns;
  f.comm_ns = s.comm_hidden_ns + s.comm_exposed_ns + s.comm_waiting_ns;
  f.overlap_ns = s.comm_hidden_ns;
  f.exposed_comm_ns = s.comm_exposed_ns + s.comm_waiting_ns;
  if (f.comm_ns > 0) {
    f.overlap_ratio = static_cast<double>(f.overlap_ns) / static_cast<double>(f.comm_ns);
    f.achievable_ratio = std::min(1.0, static_cast<double>(f.compute_ns) / static_cast<double>(f.comm_ns));
  }
  return f;
}

}  // namespace

std::string StepVerdict(const StepSplit& s, const std::vector<std::pair<int64_t, int64_t>>& waited_for) {
  const OverlapFigures f = FiguresOf(s);
  if (s.wall_ns <= 0 || s.idle_ns >= s.wall_ns) return "no GPU activity in the trace: nothing to analyze";
  auto share = [&](int64_t ns) { return FormatPercent(static_cast<double>(ns) / static_cast<double>(s.wall_ns)); };
  // 128-bit products: trace timestamps are file-controlled and ns * 100 overflows int64 near 9.2e16 ns.
  auto counts = [&](int64_t ns) {
    return static_cast<__int128>(ns) * 100 >= static_cast<__int128>(kVerdictSharePercent) * s.wall_ns;
  };
  const int64_t exposed = s.comm_exposed_ns + s.comm_waiting_ns;
  // "exposed communication X of the step[, of which Y is waiting for rank R]"
  auto exposed_text = [&] {
    std::string t = fmt::format("exposed communication {} of the step", share(exposed));
    if (s.comm_waiting_ns > 0) {
      __int128 total = 0;
      for (const auto& [rank, ns] : waited_for) total += ns;
      if (!waited_for.empty() && static_cast<__int128>(waited_for[0].second) * 2 >= total)
        t += fmt::format(", of which {} is waiting for rank {}", share(s.comm_waiting_ns), waited_for[0].first);
      else if (!waited_for.empty())
        t += fmt::format(", of which {} is waiting for other ranks (most for rank {})", share(s.comm_waiting_ns),
                         waited_for[0].first);
      else
        t += fmt::format(", of which {} is waiting for other ranks", share(s.comm_waiting_ns));
    }
    return t;
  };
  const std::string memory_text =
      fmt::format("memory copies and sets hidden by neither compute nor communication {} of the step",
                  share(s.memory_only_ns));
  // The recoverable shares, largest first (ties: idle, exposed, memory). Idle leads only when it
  // is a large share of the step and clearly the largest (kIdleLeadPercent, kIdleLeadMargin).
  const int64_t other = std::max(exposed, s.memory_only_ns);
  const bool idle_leads =
      static_cast<__int128>(s.idle_ns) * 100 >= static_cast<__int128>(kIdleLeadPercent) * s.wall_ns &&
      static_cast<double>(s.idle_ns) >= kIdleLeadMargin * static_cast<double>(other);
  const int64_t largest = idle_leads ? s.idle_ns : other;
  // Most communication hidden: only then is it not what limits the job.
  const bool mostly_hidden = f.comm_ns > 0 && *f.overlap_ratio >= 0.5;
  std::string v;
  if (!counts(largest) && counts(s.idle_ns) && !idle_leads) {
    v = fmt::format("GPU idle {} of the step, in gaps (a secondary share: under {}% of the step or not clearly the "
                    "largest); compute {} of the step, exposed communication {} ({} of communication hidden), memory "
                    "only {}",
                    share(s.idle_ns), kIdleLeadPercent, share(f.compute_ns), share(exposed),
                    FormatPercent(f.overlap_ratio), share(s.memory_only_ns));
    return v;
  }
  if (!counts(largest)) {
    // "Well overlapped" only when most communication is hidden (as RankVerdict's "well hidden").
    if (f.comm_ns == 0)
      v = fmt::format("the GPU is busy: compute {} of the step (no communication on the GPU timeline), ",
                      share(f.compute_ns));
    else if (*f.overlap_ratio >= 0.9)
      v = fmt::format("well overlapped: {} of communication hidden; compute {} of the step, ",
                      FormatPercent(f.overlap_ratio), share(f.compute_ns));
    else
      v = fmt::format("no recoverable share reaches {}% of the step ({} of communication hidden); compute {} of the "
                      "step, ",
                      kVerdictSharePercent, FormatPercent(f.overlap_ratio), share(f.compute_ns));
    v += fmt::format("exposed communication {}, memory only {}, GPU idle {}", share(exposed), share(s.memory_only_ns),
                     share(s.idle_ns));
    return v;
  }
  if (idle_leads) {
    v = fmt::format("GPU idle {} of the step: the job is input- or CPU-bound", share(s.idle_ns));
    if (f.comm_ns == 0) v += " (no communication on the GPU timeline)";
    else if (mostly_hidden) v += "; hidden communication is not what limits it";
    if (counts(exposed))
      v += "; then " + exposed_text() + " (" + FormatPercent(f.overlap_ratio) + " of communication hidden)";
    if (counts(s.memory_only_ns)) v += "; then " + memory_text;
  } else if (exposed == largest) {
    v = exposed_text() + ": " + RankVerdict(f);
    if (counts(s.idle_ns)) v += fmt::format("; GPU idle {} of the step", share(s.idle_ns));
  } else {
    v = memory_text + ": overlap them with compute (pinned memory, non-blocking copies on their own stream) or "
                      "avoid them";
    if (counts(exposed)) v += "; then " + exposed_text();
    if (counts(s.idle_ns)) v += fmt::format("; GPU idle {} of the step", share(s.idle_ns));
  }
  return v;
}

namespace {

struct WindowSplit {
  int64_t index = 0, step = kUnknown;
  bool warmup = false;
  StepSplit split;  // no waiting yet
};

// What AnalyzeRank keeps of one input (a few words per iteration window).
struct InputSplits {
  int64_t rank = kUnknown;
  std::vector<WindowSplit> windows;
  StepSplit whole;  // the whole trace, no waiting
};

class StepBreakdownAnalyzer : public Analyzer {
 public:
  std::string_view name() const override { return "step_breakdown"; }

  Status AnalyzeRank(const RankTrace& t, size_t rank_index, const AnalysisOptions& options,
                     Summary& summary) override {
    const std::shared_ptr<const RankDerived>& d = summary.current;
    if (!d || d->rank_index != rank_index || rank_index >= summary.ranks.size())
      return MakeError(StatusCode::kInternal, "step_breakdown needs the overlap analyzer's rank {}", rank_index);
    if (inputs_.size() <= rank_index) inputs_.resize(rank_index + 1);
    InputSplits& in = inputs_[rank_index];
    in.rank = t.meta.rank;
    in.whole = SplitOf(summary.ranks[rank_index].whole);
    const std::vector<IterationWindow>& w = d->iterations.windows;
    in.windows.reserve(w.size());
    // The overlap analyzer's figures of these windows when it wrote them (the last w.size() rows).
    const IterationResult* done = nullptr;
    if (options.per_iteration && summary.iterations.size() >= w.size() && !w.empty()) {
      const IterationResult* first = &summary.iterations[summary.iterations.size() - w.size()];
      if (first->rank_index == rank_index && first->index == 0) done = first;
    }
    for (size_t i = 0; i < w.size(); ++i) {
      const OverlapFigures f = done ? done[i].figures : FiguresFor(d->sets, w[i].start_ns, w[i].end_ns);
      in.windows.push_back({static_cast<int64_t>(i), w[i].step, w[i].warmup, SplitOf(f)});
    }
    return OkStatus();
  }

  Status Finish(const AnalysisOptions& options, Summary& summary) override {
    // The cross-rank analyzer's exposed waiting of each rank id, which is the first input
    // (lowest input index) with that rank.
    std::map<int64_t, const CrossRankRow*> waits;
    if (summary.cross_rank)
      for (const CrossRankRow& row : summary.cross_rank->ranks) waits[row.rank] = &row;
    std::map<int64_t, size_t> first_input;
    for (const RankResult& r : summary.ranks)
      if (r.rank != kUnknown) {
        auto [it, fresh] = first_input.try_emplace(r.rank, r.input_index);
        if (!fresh) it->second = std::min(it->second, r.input_index);
      }

    StepBreakdown b;
    std::map<int64_t, int64_t> run_waited;
    for (size_t ri = 0; ri < summary.ranks.size(); ++ri) {
      RankResult& r = summary.ranks[ri];
      if (r.input_index >= inputs_.size()) return MakeError(StatusCode::kInternal, "step_breakdown: unknown input");
      const InputSplits& in = inputs_[r.input_index];
      const CrossRankRow* xr = nullptr;
      if (r.rank != kUnknown && first_input[r.rank] == r.input_index) {
        auto it = waits.find(r.rank);
        // Windows indexed alike (the cross-rank analyzer read the overlap analyzer's windows).
        if (it != waits.end() && it->second->exposed_wait_by_window.size() == in.windows.size()) xr = it->second;
      }
      StepBreakdownRank row;
      row.rank = r.rank;
      for (const WindowSplit& w : in.windows) {
        const StepSplit split = WithWaiting(w.split, xr ? xr->exposed_wait_by_window[w.index] : 0);
        if (!w.warmup) {
          row.split.Add(split);
          ++row.iterations;
        }
        if (options.per_iteration) b.iterations.push_back({r.rank, ri, w.index, w.step, w.warmup, split});
      }
      if (row.iterations > 0) {
        row.basis = "steady iterations";
      } else {
        row.basis = "whole trace";
        int64_t wait = 0;
        if (xr) wait = xr->exposed_wait_ns;
        row.split = WithWaiting(in.whole, wait);
      }
      if (xr) {
        row.waited_for = xr->waited_for;
        for (const auto& [rank, ns] : xr->waited_for) run_waited[rank] += ns;
      }
      r.verdict = StepVerdict(row.split, row.waited_for);
      b.run.Add(row.split);
      b.ranks.push_back(std::move(row));
    }
    b.run_waited_for.assign(run_waited.begin(), run_waited.end());
    std::stable_sort(b.run_waited_for.begin(), b.run_waited_for.end(),
                     [](const auto& x, const auto& y) { return x.second > y.second; });
    if (summary.ranks.size() == 1) {
      summary.verdict = summary.ranks[0].verdict;
    } else if (summary.ranks.size() > 1) {
      summary.verdict = fmt::format("over {} ranks: {}", summary.ranks.size(), StepVerdict(b.run, b.run_waited_for));
    }
    summary.NoteSection("step_breakdown");
    summary.step_breakdown = std::move(b);
    return OkStatus();
  }

 private:
  std::vector<InputSplits> inputs_;  // by input index
};

}  // namespace

std::unique_ptr<Analyzer> MakeStepBreakdownAnalyzer() { return std::make_unique<StepBreakdownAnalyzer>(); }

}  // namespace overlapprof
