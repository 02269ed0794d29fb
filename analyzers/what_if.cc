// The what-if analyzer (docs/what-if.md): builds each rank's causal model of its steady
// iterations (analyzers/what_if_model.h) on the thread that read it, joins the ranks by their
// collectives at Finish, checks that the replay gives back the measured steps, and predicts the
// step of each scenario. Fills Summary::what_if.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "analyzers/analyzer.h"
#include "analyzers/overlap.h"
#include "analyzers/what_if_model.h"
#include "analyzers/what_if_result.h"
#include "analyzers/what_if_scenarios.h"

namespace overlapprof {

namespace {

struct PreparedModel : RankWork {
  whatif::RankModel model;
  whatif::ScenarioRankInputs inputs;  // only with --scenario
};

double Round2(double v) { return std::round(v * 100.0) / 100.0; }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

int64_t Mean(const std::vector<int64_t>& v) {
  if (v.empty()) return 0;
  __int128 sum = 0;
  for (int64_t x : v) sum += x;
  return static_cast<int64_t>(sum / static_cast<__int128>(v.size()));
}

class WhatIfAnalyzer : public PreparingAnalyzer {
 public:
  std::string_view name() const override { return "what_if"; }
  TraceNeeds needs(const AnalysisOptions& options) const override { return {.host_calls = options.what_if}; }

  std::unique_ptr<RankWork> PrepareRank(RankPrep& rank, const AnalysisOptions& options) const override {
    if (!rank.derived || !options.what_if) return nullptr;
    auto p = std::make_unique<PreparedModel>();
    p->model = whatif::BuildRankModel(rank.trace, rank.derived->iterations.windows);
    if (!options.scenarios.empty() && p->model.why_not.empty())
      p->inputs = whatif::GatherScenarioInputs(rank.trace, p->model, options.scenarios);
    return p;
  }

  using PreparingAnalyzer::AnalyzeRank;
  Status AnalyzeRank(const RankTrace& trace, size_t rank_index, const AnalysisOptions& options,
                     std::unique_ptr<RankWork> prepared, Summary& summary) override {
    if (!options.what_if) return OkStatus();
    if (rank_index >= summary.ranks.size())
      return MakeError(StatusCode::kInternal, "what_if: unknown rank {}", rank_index);
    if (!prepared) {
      const std::shared_ptr<const RankDerived>& d = summary.current;
      if (!d || d->rank_index != rank_index)
        return MakeError(StatusCode::kInternal, "what_if needs the overlap analyzer's rank {}", rank_index);
      RankPrep prep{trace, rank_index, d};
      prepared = PrepareRank(prep, options);
    }
    auto* p = dynamic_cast<PreparedModel*>(prepared.get());
    if (!p) return MakeError(StatusCode::kInternal, "what_if: rank {} not prepared", rank_index);
    const size_t input = summary.ranks[rank_index].input_index;
    if (models_.size() <= input) models_.resize(input + 1);
    summary.ranks[rank_index].stats.Add(Stat::dependencies_inferred, p->model.dependencies_inferred);
    models_[input] = std::move(p->model);
    if (inputs_.size() <= input) inputs_.resize(input + 1);
    inputs_[input] = std::move(p->inputs);
    summary.NoteSection("what_if");
    return OkStatus();
  }

  Status Finish(const AnalysisOptions& options, Summary& summary) override {
    if (!options.what_if || summary.ranks.empty()) return OkStatus();
    // Slots in Summary::ranks order; clock offsets of the domains the cross-rank analyzer applied.
    std::map<int64_t, int64_t> offset_of;
    if (summary.cross_rank)
      for (const ClockDomainRow& d : summary.cross_rank->clock_offsets)
        if (d.applied)
          for (int64_t r : d.ranks) offset_of[r] = d.offset_ns;
    std::vector<whatif::RankModel> slots;
    std::vector<int64_t> offsets, rank_numbers;
    std::vector<whatif::ScenarioRankInputs> inputs;
    for (const RankResult& r : summary.ranks) {
      whatif::RankModel m;
      if (r.input_index < models_.size()) m = std::move(models_[r.input_index]);
      else m.why_not = "not modeled";
      inputs.push_back(r.input_index < inputs_.size() ? std::move(inputs_[r.input_index]) : whatif::ScenarioRankInputs{});
      rank_numbers.push_back(r.rank);
      auto it = offset_of.find(r.rank);
      offsets.push_back(it != offset_of.end() ? it->second : 0);
      slots.push_back(std::move(m));
    }
    models_.clear();
    inputs_.clear();
    const whatif::RunGraph graph(std::move(slots), offsets);
    auto result = std::make_shared<WhatIfResult>();
    std::vector<std::vector<whatif::PathSplit>> paths;
    const std::vector<std::vector<int64_t>> base = graph.Replay({}, &paths);
    std::string why_none;
    int64_t measured_run = 0, replayed_run = 0;
    bool any = false;
    for (size_t s = 0; s < graph.ranks().size(); ++s) {
      const whatif::RankModel& m = graph.ranks()[s];
      WhatIfReplayRank row;
      row.rank = summary.ranks[s].rank;
      row.dependencies_inferred = m.dependencies_inferred;
      row.dependencies_recorded = m.dependencies_recorded;
      row.why_not = m.why_not;
      if (m.why_not.empty()) {
        std::vector<double> err;
        for (size_t k = 0; k < m.measured_steps.size(); ++k) {
          const int64_t meas = m.measured_steps[k];
          err.push_back(meas > 0 ? 100.0 * std::fabs(static_cast<double>(base[s][k] - meas)) / static_cast<double>(meas)
                                 : 0.0);
        }
        row.iterations = static_cast<int64_t>(m.measured_steps.size());
        row.median_error_pct = Round2(Median(err));
        row.max_error_pct = Round2(err.empty() ? 0 : *std::max_element(err.begin(), err.end()));
        row.measured_step_ns = Mean(m.measured_steps);
        row.replayed_step_ns = Mean(base[s]);
        for (size_t k = 0; k < paths[s].size(); ++k) {
          const whatif::PathSplit& p = paths[s][k];
          WhatIfPathRow path;
          path.rank = row.rank;
          path.iteration = static_cast<int64_t>(k);
          path.length_ns = p.length_ns;
          int64_t total = 0;
          for (int64_t ns : p.part_ns) total += ns;
          for (int i = 0; i < whatif::kPathParts && total > 0; ++i)
            path.shares[i] = std::round(10000.0 * static_cast<double>(p.part_ns[i]) / static_cast<double>(total)) / 10000.0;
          if (p.waited_slot >= 0 && path.shares[whatif::kPathWaiting] > 0)
            path.waiting_for = summary.ranks[static_cast<size_t>(p.waited_slot)].rank;
          result->critical_path.push_back(path);
        }
        measured_run = std::max(measured_run, row.measured_step_ns);
        replayed_run = std::max(replayed_run, row.replayed_step_ns);
        any = true;
      } else if (why_none.empty()) {
        why_none = m.why_not;
      }
      result->replay.push_back(std::move(row));
    }
    for (const whatif::TransferFit& f : whatif::FitTransfers(graph.transfer_samples())) {
      WhatIfFitRow row;
      row.op = std::string(CollectiveName(f.op));
      row.from_kernels = f.from_kernels;
      row.samples = f.samples;
      row.sizes = f.sizes;
      row.fitted = f.fitted;
      row.why_not = f.why_not;
      row.latency_ns = std::llround(f.latency_ns);
      row.bandwidth_gbps = Round2(f.bytes_per_ns);
      row.median_excess_pct = Round2(f.median_excess_pct);
      result->fit.push_back(std::move(row));
    }
    result->measured_step_ns = measured_run;
    result->replayed_step_ns = replayed_run;
    AddScenarios(graph, any, why_none, replayed_run, summary, *result);
    const whatif::ScenarioRun run{graph, inputs, offsets, rank_numbers};
    const std::string blocked = BlockedReason(graph, any, why_none);
    for (const whatif::ScenarioSpec& spec : options.scenarios) {
      OVERLAPPROF_ASSIGN_OR_RETURN(whatif::ScenarioPlan plan, whatif::PlanScenario(spec, run));
      WhatIfScenario sc;
      sc.name = spec.text;
      sc.custom = true;
      sc.assumptions = plan.assumptions;
      sc.why_not = !blocked.empty() ? blocked : plan.why_not;
      if (sc.why_not.empty()) Predict(graph, plan.changes, plan.weights, replayed_run, summary, sc);
      result->scenarios.push_back(std::move(sc));
    }
    summary.what_if = std::move(result);
    return OkStatus();
  }

 private:
  // Fills `sc`'s prediction: per modeled slot the weighted sum of its mean steps under each change;
  // the run's is the slowest slot's.
  static void Predict(const whatif::RunGraph& graph, const std::vector<whatif::Change>& changes,
                      const std::vector<double>& weights, int64_t replayed, const Summary& summary, WhatIfScenario& sc) {
    std::vector<double> per_slot(graph.ranks().size(), 0.0);
    for (size_t c = 0; c < changes.size(); ++c) {
      const std::vector<std::vector<int64_t>> steps = graph.Replay(changes[c]);
      for (size_t s = 0; s < steps.size(); ++s) per_slot[s] += weights[c] * static_cast<double>(Mean(steps[s]));
    }
    int64_t run = 0;
    for (size_t s = 0; s < per_slot.size(); ++s) {
      if (!graph.ranks()[s].why_not.empty()) continue;
      const int64_t step = static_cast<int64_t>(std::llround(per_slot[s]));
      sc.rank_steps.emplace_back(summary.ranks[s].rank, step);
      run = std::max(run, step);
    }
    sc.predictable = true;
    sc.predicted_step_ns = run;
    sc.saving_ns = replayed - run;
    sc.saving_pct = replayed > 0 ? Round2(100.0 * static_cast<double>(sc.saving_ns) / static_cast<double>(replayed)) : 0.0;
  }

  // Why no scenario can be predicted on this run, or empty.
  static std::string BlockedReason(const whatif::RunGraph& graph, bool any, const std::string& why_none) {
    if (!any) return "no rank could be modeled: " + why_none;
    // A rank whose GPU tasks wait, for a share of its steps, on something the model does not see
    // makes every prediction rest on that unknown: none is given.
    std::string unexplained;
    for (size_t s = 0; s < graph.ranks().size() && unexplained.empty(); ++s) {
      const whatif::RankModel& m = graph.ranks()[s];
      if (!m.why_not.empty() || m.Iterations() == 0) continue;
      int64_t measured = 0;
      for (int64_t x : m.measured_steps) measured += x;
      if (measured > 0 && static_cast<double>(m.unexplained_ns) > whatif::kMaxUnexplainedShare * static_cast<double>(measured))
        unexplained = fmt::format(
            "rank {}: its GPU tasks start {} per step (summed over streams; step {}) later than their stream, launch "
            "and known dependencies allow, waiting for something the trace does not record (docs/what-if.md)",
            m.rank == kUnknown ? std::string("?") : std::to_string(m.rank),
            FormatDuration(m.unexplained_ns / static_cast<int64_t>(m.Iterations())),
            FormatDuration(measured / static_cast<int64_t>(m.Iterations())));
    }
    return unexplained;
  }

  static void AddScenarios(const whatif::RunGraph& graph, bool any, const std::string& why_none, int64_t replayed,
                           const Summary& summary, WhatIfResult& out) {
    const std::string unexplained = any ? BlockedReason(graph, any, why_none) : std::string();
    auto add = [&](std::string name, std::string assumptions, std::string why_not, const whatif::Change* change) {
      WhatIfScenario sc;
      sc.name = std::move(name);
      sc.assumptions = std::move(assumptions);
      if (!any) why_not = "no rank could be modeled: " + why_none;
      else if (why_not.empty() && !unexplained.empty()) why_not = unexplained;
      if (why_not.empty() && change) {
        Predict(graph, {*change}, {1.0}, replayed, summary, sc);
      } else {
        sc.why_not = why_not;
      }
      out.scenarios.push_back(std::move(sc));
    };
    bool comm = graph.matched_collectives() > 0;
    for (const whatif::RankModel& m : graph.ranks())
      for (const whatif::Edge& e : m.edges) comm = comm || e.kind == whatif::EdgeKind::kComm;
    const std::string no_comm = comm ? "" : "no communication in the modeled iterations";
    whatif::Change free_comm;
    free_comm.comm_factor = 0.0;
    add("communication free",
        "every transfer takes 0; matched collectives still wait for the last rank to arrive; unmatched "
        "communication kernels take 0",
        no_comm, &free_comm);
    whatif::Change faster;
    faster.comm_factor = 0.5;
    add("communication 2x faster",
        "every transfer (and unmatched communication kernel) takes half its measured time: uniform scaling, "
        "no latency/bandwidth fit",
        no_comm, &faster);
    // Ranks together: ranks whose compute per step exceeds the median rank's run at its pace.
    std::vector<double> per_step;
    const std::vector<int64_t> compute = graph.ComputeTime();
    std::vector<size_t> modeled;
    for (size_t s = 0; s < graph.ranks().size(); ++s) {
      const whatif::RankModel& m = graph.ranks()[s];
      if (!m.why_not.empty() || m.Iterations() == 0) continue;
      modeled.push_back(s);
      per_step.push_back(static_cast<double>(compute[s]) / static_cast<double>(m.window_first.size() - 1));
    }
    std::string why_together;
    if (modeled.size() < 2) why_together = "fewer than two modeled ranks";
    else if (graph.matched_collectives() == 0) why_together = "no collective matched across the modeled ranks";
    whatif::Change together;
    together.compute_factor.assign(graph.ranks().size(), 1.0);
    const double median = Median(per_step);
    for (size_t i = 0; i < modeled.size(); ++i)
      if (per_step[i] > median && per_step[i] > 0) together.compute_factor[modeled[i]] = median / per_step[i];
    add("ranks arrive together",
        "ranks whose compute per step exceeds the median rank's run their compute kernels and the host work "
        "between their launches at the median's pace (the median over ranks of compute per step)",
        why_together, &together);
    whatif::Change host;
    host.host_free = true;
    add("host overhead gone",
        "launch calls, host gaps between launches and launch latency take 0 (as with CUDA graphs); host "
        "synchronizations and the host time after them (data loading) kept",
        "", &host);
  }

  std::vector<whatif::RankModel> models_;  // by input index
  std::vector<whatif::ScenarioRankInputs> inputs_;  // by input index (--scenario)
};

}  // namespace

std::unique_ptr<Analyzer> MakeWhatIfAnalyzer() { return std::make_unique<WhatIfAnalyzer>(); }

}  // namespace overlapprof
