#include "reports/what_if_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "analyzers/overlap.h"

namespace overlapprof {

using Json = nlohmann::ordered_json;

Json WhatIfJson(const WhatIfResult& w) {
  Json replay = Json::array();
  for (const WhatIfReplayRank& r : w.replay) {
    Json j = Json::object();
    j["rank"] = r.rank >= 0 ? Json(r.rank) : Json(nullptr);
    j["iterations"] = r.iterations;
    j["median_error_pct"] = r.iterations > 0 ? Json(r.median_error_pct) : Json(nullptr);
    j["max_error_pct"] = r.iterations > 0 ? Json(r.max_error_pct) : Json(nullptr);
    j["measured_step_ns"] = r.iterations > 0 ? Json(r.measured_step_ns) : Json(nullptr);
    j["replayed_step_ns"] = r.iterations > 0 ? Json(r.replayed_step_ns) : Json(nullptr);
    j["dependencies_inferred"] = r.dependencies_inferred;
    j["dependencies_recorded"] = r.dependencies_recorded;
    j["why_not"] = r.why_not.empty() ? Json(nullptr) : Json(r.why_not);
    replay.push_back(std::move(j));
  }
  Json scenarios = Json::array();
  for (const WhatIfScenario& sc : w.scenarios) {
    Json j = Json::object();
    j["name"] = sc.name;
    j["predicted_step_ns"] = sc.predictable ? Json(sc.predicted_step_ns) : Json(nullptr);
    j["saving_ns"] = sc.predictable ? Json(sc.saving_ns) : Json(nullptr);
    j["saving_pct"] = sc.predictable ? Json(sc.saving_pct) : Json(nullptr);
    j["predictable"] = sc.predictable;
    j["why_not"] = sc.predictable ? Json(nullptr) : Json(sc.why_not);
    j["assumptions"] = sc.assumptions;
    if (sc.custom) {
      // --scenario SPEC only, so that the section without it stays as it was.
      j["custom"] = true;
      Json per_rank = Json::array();
      for (const auto& [rank, step] : sc.rank_steps)
        per_rank.push_back(Json{{"rank", rank >= 0 ? Json(rank) : Json(nullptr)}, {"predicted_step_ns", step}});
      j["predicted_rank_steps"] = sc.predictable ? std::move(per_rank) : Json(nullptr);
    }
    scenarios.push_back(std::move(j));
  }
  Json paths = Json::array();
  static const char* const kParts[] = {"compute", "communication", "waiting", "host", "launch", "memory", "other"};
  for (const WhatIfPathRow& p : w.critical_path) {
    Json j = Json::object();
    j["rank"] = p.rank >= 0 ? Json(p.rank) : Json(nullptr);
    j["iteration"] = p.iteration;
    j["length_ns"] = p.length_ns;
    for (int i = 0; i < 7; ++i) j[kParts[i]] = p.shares[i];
    j["waiting_for"] = p.waiting_for >= 0 ? Json(p.waiting_for) : Json(nullptr);
    paths.push_back(std::move(j));
  }
  Json fit = Json::array();
  for (const WhatIfFitRow& f : w.fit) {
    Json j = Json::object();
    j["op"] = f.op;
    j["source"] = f.from_kernels ? "kernel durations" : "transfers";
    j["samples"] = f.samples;
    j["sizes"] = f.sizes;
    j["latency_ns"] = f.fitted ? Json(f.latency_ns) : Json(nullptr);
    j["bandwidth_gbps"] = f.fitted ? Json(f.bandwidth_gbps) : Json(nullptr);
    j["median_excess_pct"] = f.fitted ? Json(f.median_excess_pct) : Json(nullptr);
    j["why_not"] = f.fitted ? Json(nullptr) : Json(f.why_not);
    fit.push_back(std::move(j));
  }
  Json out = Json::object();
  out["replay"] = std::move(replay);
  out["measured_step_ns"] = w.measured_step_ns;
  out["replayed_step_ns"] = w.replayed_step_ns;
  out["scenarios"] = std::move(scenarios);
  out["critical_path"] = std::move(paths);
  out["fit"] = std::move(fit);
  return out;
}

void WriteWhatIfTable(const Summary& s, std::ostream& out) {
  if (!s.what_if) return;
  const WhatIfResult& w = *s.what_if;
  int64_t iterations = 0, ranks = 0;
  double median = 0, max = 0;  // the largest over the ranks
  for (const WhatIfReplayRank& r : w.replay) {
    if (r.iterations == 0) continue;
    iterations = std::max(iterations, r.iterations);
    ++ranks;
    median = std::max(median, r.median_error_pct);
    max = std::max(max, r.max_error_pct);
  }
  if (iterations == 0) {
    const WhatIfScenario* first = w.scenarios.empty() ? nullptr : &w.scenarios.front();
    out << "\nwhat would help: not predictable: " << (first ? first->why_not : std::string("no model")) << "\n";
    return;
  }
  out << fmt::format("\nwhat would help (model of up to {} steady iteration(s) on {} rank(s): step {}):\n", iterations,
                     ranks, FormatDuration(w.replayed_step_ns));
  // Every latency of the model is measured: a 0% replay error is by construction. It shows that no
  // measurement contradicts the model's dependencies (its structure), not that its predictions hold.
  if (max == 0)
    out << "replay error 0.00%: the replay reproduces the measured steps by construction (every latency is measured); "
           "this checks the model's structure, not its predictions\n";
  else
    out << fmt::format(
        "replay error median {:.2f}%, max {:.2f}%: where measurements contradict the model's dependencies (every "
        "latency is measured, so the error checks the model's structure, not its predictions)\n",
        median, max);
  out << fmt::format("{:>24}  {:>10}  {:>10}  {:>7}\n", "scenario", "step", "saving", "saving%");
  for (const WhatIfScenario& sc : w.scenarios) {
    if (sc.predictable)
      out << fmt::format("{:>24}  {:>10}  {:>10}  {:>6.1f}%\n", sc.name, FormatDuration(sc.predicted_step_ns),
                         FormatDuration(sc.saving_ns), sc.saving_pct);
    else
      out << fmt::format("{:>24}  not predictable: {}\n", sc.name, sc.why_not);
    if (!sc.custom) continue;
    // A custom scenario (--scenario SPEC): its assumptions and, with several ranks, each rank's step.
    if (!sc.assumptions.empty()) out << fmt::format("{:>24}  assumes: {}\n", "", sc.assumptions);
    if (sc.predictable && sc.rank_steps.size() > 1) {
      std::string per;
      for (const auto& [rank, step] : sc.rank_steps)
        per += fmt::format("{}{} {}", per.empty() ? "" : ", ", rank >= 0 ? "rank " + std::to_string(rank) : "rank ?",
                           FormatDuration(step));
      out << fmt::format("{:>24}  per rank: {}\n", "", per);
    }
  }
}

}  // namespace overlapprof
