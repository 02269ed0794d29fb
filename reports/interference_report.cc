#include "reports/interference_report.h"

#include <fmt/format.h>

#include <cmath>

#include "analyzers/overlap.h"
#include "reports/terminal.h"

namespace overlapprof {

using Json = nlohmann::ordered_json;

namespace {

// Fractions rounded to 4 decimals, so summaries stay stable across platforms.
Json Fraction(const std::optional<double>& v) {
  return v ? Json(std::round(*v * 10000.0) / 10000.0) : Json(nullptr);
}
Json Fraction(double v) { return Fraction(std::optional<double>(v)); }
Json OptInt(int64_t v) { return v == kUnknown ? Json(nullptr) : Json(v); }
Json OptInt(const std::optional<int64_t>& v) { return v ? Json(*v) : Json(nullptr); }

// The figures of a set of windows; taxes null where nothing of that kind was measurable.
void PutTotals(const InterferenceTotals& t, Json& j) {
  j["wall_ns"] = t.wall_ns;
  j["comm_ns"] = t.comm_ns;
  j["hidden_comm_ns"] = t.hidden_ns;
  j["compute_tax_ns"] = t.ComputeMeasurable() ? Json(t.compute_tax_ns) : Json(nullptr);
  j["comm_tax_ns"] = t.CommMeasurable() ? Json(t.comm_tax_ns) : Json(nullptr);
  j["overlapped_compute_ns"] = t.compute_overlapped_ns;
  j["measured_compute_ns"] = t.compute_measured_ns;
  j["measurable_share"] = Fraction(t.ComputeMeasuredShare());
  j["overlapped_comm_ns"] = t.comm_overlapped_ns;
  j["measured_comm_ns"] = t.comm_measured_ns;
  j["comm_measurable_share"] = Fraction(t.CommMeasuredShare());
  j["net_gain_ns"] = OptInt(t.NetGainNs());
  j["tax_share_of_step"] = Fraction(t.TaxShareOfStep());
  j["hidden_share"] = Fraction(t.HiddenShare());
  j["overlap_efficiency"] = Fraction(t.OverlapEfficiency());
}

}  // namespace

Json InterferenceJson(const InterferenceResult& r) {
  Json ranks = Json::array();
  for (const InterferenceRank& x : r.ranks) {
    Json j = Json::object();
    j["rank"] = OptInt(x.rank);
    j["iterations"] = x.iterations;
    j["measurable"] = x.why_not.empty();
    j["why_not"] = x.why_not.empty() ? Json(nullptr) : Json(x.why_not);
    PutTotals(x.totals, j);
    ranks.push_back(std::move(j));
  }
  Json kernels = Json::array();
  for (const InterferenceKernel& k : r.kernels) {
    Json j = Json::object();
    j["rank"] = OptInt(k.rank);
    j["kind"] = std::string(WorkKindName(k.kind));
    j["name"] = k.name;
    j["position"] = OptInt(k.position);
    j["op"] = k.op.empty() ? Json(nullptr) : Json(k.op);
    j["bytes"] = OptInt(k.bytes);
    j["communicator"] = k.communicator.empty() ? Json(nullptr) : Json(k.communicator);
    j["alone"] = k.alone;
    j["overlapped"] = k.overlapped;
    j["alone_median_ns"] = k.estimate.alone_median_ns;
    j["slowdown"] = Fraction(k.estimate.slowdown);
    j["slowdown_low"] = Fraction(k.estimate.low);
    j["slowdown_high"] = Fraction(k.estimate.high);
    j["tax_ns"] = k.tax_ns;
    kernels.push_back(std::move(j));
  }
  // Iteration rows are as many as the iterations: built field by field (JsonRow), and only the
  // figures of this section (wall, comm and hidden are the iteration's own row's in `iterations`).
  Json iterations = Json::array();
  iterations.get_ref<Json::array_t&>().reserve(r.iterations.size());
  for (const InterferenceIteration& it : r.iterations) {
    const InterferenceTotals& t = it.totals;
    JsonRow j(9);
    j.Add("rank", OptInt(it.rank))
        .Add("index", it.index)
        .Add("step", OptInt(it.step))
        .Add("compute_tax_ns", t.ComputeMeasurable() ? Json(t.compute_tax_ns) : Json(nullptr))
        .Add("comm_tax_ns", t.CommMeasurable() ? Json(t.comm_tax_ns) : Json(nullptr))
        .Add("overlapped_compute_ns", t.compute_overlapped_ns)
        .Add("measured_compute_ns", t.compute_measured_ns)
        .Add("net_gain_ns", OptInt(t.NetGainNs()))
        .Add("overlap_efficiency", Fraction(t.OverlapEfficiency()));
    iterations.push_back(std::move(j).Take());
  }
  Json out = Json::object();
  out["method"] = "hodges_lehmann_mann_whitney_95";
  out["min_samples"] = kInterferenceMinSamples;
  out["min_cover"] = kInterferenceMinCover;
  Json run = Json::object();
  PutTotals(r.run, run);
  out["run"] = std::move(run);
  out["ranks"] = std::move(ranks);
  out["kernels"] = std::move(kernels);
  out["iterations"] = std::move(iterations);
  return out;
}

std::optional<std::string> InterferenceLine(const Summary& s) {
  if (!s.interference) return std::nullopt;
  const InterferenceTotals& t = s.interference->run;
  const std::optional<double> share = t.TaxShareOfStep();
  if (!share || *share < 0.01) return std::nullopt;
  const double slowdown = static_cast<double>(t.compute_tax_ns) /
                          static_cast<double>(std::max<int64_t>(1, t.compute_measured_ns - t.compute_tax_ns));
  // Per step: over every rank's steady iterations.
  int64_t steps = 0;
  for (const InterferenceRank& r : s.interference->ranks) steps += r.iterations;
  steps = std::max<int64_t>(1, steps);
  return fmt::format(
      "overlap tax: overlapped compute {:.1f}% slower under communication ({:.1f}% of it measurable), tax {:.1f}% "
      "of the step; net gain of overlap {} per step of {} hidden; overlap efficiency {} (hidden share {})",
      100.0 * slowdown, 100.0 * t.ComputeMeasuredShare().value_or(0), 100.0 * *share,
      FormatDuration(*t.NetGainNs() / steps), FormatDuration(t.hidden_ns / steps), FormatPercent(t.OverlapEfficiency()),
      FormatPercent(t.HiddenShare()));
}

void WriteInterferenceSection(const TerminalPage& page) {
  const std::optional<std::string> line = InterferenceLine(page.s);
  if (!line) return;
  page.out << "\n";
  page.Wrap(*line, 0, 2);
}

}  // namespace overlapprof
