#include "analyzers/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace overlapprof {
namespace {

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n1 = a.size(), n2 = b.size(), n = n1 + n2;
  if (n1 == 0 || n2 == 0) return 1.0;
  std::vector<std::pair<double, int>> all;
  all.reserve(n);
  for (double x : a) all.emplace_back(x, 0);
  for (double x : b) all.emplace_back(x, 1);
  std::sort(all.begin(), all.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
  double rank_sum_a = 0, tie_term = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && all[j].first == all[i].first) ++j;
    const double avg_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;  // ranks i+1..j
    for (size_t k = i; k < j; ++k)
      if (all[k].second == 0) rank_sum_a += avg_rank;
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    i = j;
  }
  const double dn1 = static_cast<double>(n1), dn2 = static_cast<double>(n2), dn = static_cast<double>(n);
  const double u = rank_sum_a - dn1 * (dn1 + 1) / 2;
  const double mean = dn1 * dn2 / 2;
  const double var = dn1 * dn2 / 12 * ((dn + 1) - tie_term / (dn * (dn - 1)));
  if (var <= 0) return 1.0;
  const double diff = std::fabs(u - mean);
  const double z = std::max(0.0, diff - 0.5) / std::sqrt(var);  // continuity correction
  return std::min(1.0, std::erfc(z / std::sqrt(2.0)));
}

std::string ChangeText(const MetricResult& m) {
  // A relative change from zero has no percentage: say what happened instead.
  if (m.change_unit == "%" && m.base == 0 && m.next != 0) return "new";
  return fmt::format("{:+.2f} {}", m.change, m.change_unit);
}
const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kUnchanged: return "unchanged";
    case Verdict::kImproved: return "improved";
    case Verdict::kRegressed: return "regressed";
    case Verdict::kInconclusive: return "inconclusive";
  }
  return "?";
}

namespace {

// `higher_is_better`: the direction of an improvement. `relative`: change in % of base
// (else in the unit's own points, for ratios).
MetricResult Decide(std::string name, std::string unit, bool gated, double base, double next, bool relative,
                    bool higher_is_better, double threshold, const std::vector<double>& sb,
                    const std::vector<double>& sn, double alpha) {
  MetricResult m;
  m.name = std::move(name);
  m.unit = std::move(unit);
  m.gated = gated;
  m.base = base;
  m.next = next;
  m.delta = next - base;
  m.threshold = threshold;
  m.change_unit = relative ? "%" : "pp";
  if (relative)
    m.change = base != 0 ? 100 * (next - base) / std::fabs(base) : (next == 0 ? 0 : (next > 0 ? 1e9 : -1e9));
  else
    m.change = next - base;
  m.n_base = sb.size();
  m.n_next = sn.size();
  const bool better = higher_is_better ? m.change > 0 : m.change < 0;
  const bool big = std::fabs(m.change) >= threshold && m.change != 0;
  const Verdict direction = better ? Verdict::kImproved : Verdict::kRegressed;
  const std::string change_text = ChangeText(m);
  if (sb.size() >= Policy::kMinSamples && sn.size() >= Policy::kMinSamples) {
    m.p = MannWhitneyP(sb, sn);
    if (!big) {
      m.verdict = Verdict::kUnchanged;
      m.why = fmt::format("{} is within the threshold of {} {}", change_text, threshold, m.change_unit);
    } else if (*m.p < alpha) {
      m.verdict = direction;
      m.why = fmt::format("{} (threshold {} {}) and significant: Mann-Whitney p = {:.3g} < {} over {} vs {} iterations",
                          change_text, threshold, m.change_unit, *m.p, alpha, sb.size(), sn.size());
    } else {
      m.verdict = Verdict::kInconclusive;
      m.why = fmt::format("{} exceeds {} {} but is not significant (Mann-Whitney p = {:.3g} >= {}): too noisy to decide",
                          change_text, threshold, m.change_unit, *m.p, alpha);
    }
  } else {
    m.verdict = big ? direction : Verdict::kUnchanged;
    m.why = fmt::format("{} against a threshold of {} {}; no statistical test possible ({} vs {} iterations, "
                        "{} needed on each side)",
                        change_text, threshold, m.change_unit, sb.size(), sn.size(), Policy::kMinSamples);
  }
  return m;
}

std::vector<double> Scaled(const std::vector<double>& v, double k) {
  std::vector<double> out(v);
  for (double& x : out) x *= k;
  return out;
}

// Per-iteration mean when there are iterations, else the per-rank mean of the whole trace.
double PerIteration(const RunView& v, const std::vector<double>& samples, int64_t total_ns) {
  if (!samples.empty()) return Mean(samples);
  return v.ranks > 0 ? static_cast<double>(total_ns) / static_cast<double>(v.ranks) : 0;
}

// The absolute floor: a gated change whose effect per iteration (`effect_ms`) is below
// p.min_effect_ms or 1% of the base step time is unchanged, whatever its p-value.
// p.min_effect_ms 0 switches the floor off, the 1% of the step with it.
void ApplyFloor(MetricResult& m, double effect_ms, double step_ms, const Policy& p) {
  if (m.verdict == Verdict::kUnchanged || p.min_effect_ms <= 0) return;
  const double floor_ms = std::max(p.min_effect_ms, 0.01 * step_ms);
  if (std::fabs(effect_ms) >= floor_ms) return;
  m.verdict = Verdict::kUnchanged;
  m.why = fmt::format("{} but only {:.3f} ms per iteration: below the minimum effect of {:.3f} ms (the larger of "
                      "--min-effect-ms {} and 1% of the {:.2f} ms step)",
                      ChangeText(m), std::fabs(effect_ms), floor_ms, p.min_effect_ms, step_ms);
}

// A per-iteration metric with no steady iteration on a side compares per-rank figures of the
// whole trace, which grow with the number of steps the trace holds: a move beyond the threshold
// is then inconclusive, never regressed or improved (docs/ci-gate.md, "Without iterations").
void WithoutIterations(MetricResult& m, const RunView& b, const RunView& n, bool has_b, bool has_n) {
  if (has_b && has_n) return;
  if (m.verdict != Verdict::kRegressed && m.verdict != Verdict::kImproved) return;
  m.verdict = Verdict::kInconclusive;
  const char* side = !has_b && !has_n ? "neither run has" : !has_b ? "the base run has no" : "the new run has no";
  m.why += fmt::format("; inconclusive: {} steady iterations ({} vs {}), so these are whole-trace figures per rank, "
                       "which depend on how many steps each trace holds (mark steps: ProfilerStep#N, or --step-range "
                       "NAME)",
                       side, b.iterations - b.warmup_iterations, n.iterations - n.warmup_iterations);
}

}  // namespace

Comparison Compare(const RunView& b, const RunView& n, const Policy& p) {
  Comparison c;
  constexpr double kMs = 1e-6;
  const double exposed_b = PerIteration(b, b.iter_exposed_ns, b.exposed_comm_ns) * kMs;
  const double exposed_n = PerIteration(n, n.iter_exposed_ns, n.exposed_comm_ns) * kMs;
  // Step time: only with steady iterations on both sides (a whole trace's length is no step).
  const bool steps = !b.iter_wall_ns.empty() && !n.iter_wall_ns.empty();
  const double step_b = Mean(b.iter_wall_ns) * kMs, step_n = Mean(n.iter_wall_ns) * kMs;
  if (steps) {
    // Gated only on marked iterations (ProfilerStep, --step-range): windows detected from the
    // communication pattern may be cut differently in the two runs (another period), and a
    // "step" of a different cut is no step time.
    const bool marked = b.marked_iterations && n.marked_iterations;
    MetricResult m = Decide("step_time", "ms", marked, step_b, step_n, true, false, p.max_step_time_increase_pct,
                            Scaled(b.iter_wall_ns, kMs), Scaled(n.iter_wall_ns, kMs), p.alpha);
    ApplyFloor(m, step_n - step_b, step_b, p);
    if (!marked) m.why += "; not gated: iterations detected from the communication pattern, not marked (ProfilerStep#N, --step-range)";
    c.metrics.push_back(std::move(m));
  }
  auto ratio = [](const RunView& v) { return v.comm_ns > 0 ? 100.0 * static_cast<double>(v.overlap_ns) / static_cast<double>(v.comm_ns) : 0.0; };
  MetricResult overlap = Decide("overlap_ratio", "%", true, ratio(b), ratio(n), false, true, p.max_overlap_drop_pp,
                                Scaled(b.iter_overlap_ratio, 100), Scaled(n.iter_overlap_ratio, 100), p.alpha);
  // The overlap ratio's effect in time is the change of exposed communication it stands for.
  if (steps) ApplyFloor(overlap, exposed_n - exposed_b, step_b, p);
  c.metrics.push_back(std::move(overlap));
  MetricResult exposed = Decide("exposed_comm_per_iter", "ms", true, exposed_b, exposed_n, true, false,
                                p.max_exposed_comm_increase_pct, Scaled(b.iter_exposed_ns, kMs),
                                Scaled(n.iter_exposed_ns, kMs), p.alpha);
  if (steps) ApplyFloor(exposed, exposed_n - exposed_b, step_b, p);
  else ApplyFloor(exposed, exposed_n - exposed_b, 0, p);
  const bool iters_b = !b.iter_exposed_ns.empty(), iters_n = !n.iter_exposed_ns.empty();
  WithoutIterations(exposed, b, n, iters_b, iters_n);
  c.metrics.push_back(std::move(exposed));
  c.metrics.push_back(Decide("comm_per_iter", "ms", false, PerIteration(b, b.iter_comm_ns, b.comm_ns) * kMs,
                             PerIteration(n, n.iter_comm_ns, n.comm_ns) * kMs, true, false, p.info_threshold_pct,
                             Scaled(b.iter_comm_ns, kMs), Scaled(n.iter_comm_ns, kMs), p.alpha));
  WithoutIterations(c.metrics.back(), b, n, iters_b, iters_n);
  c.metrics.push_back(Decide("compute_per_iter", "ms", false, PerIteration(b, b.iter_compute_ns, b.compute_ns) * kMs,
                             PerIteration(n, n.iter_compute_ns, n.compute_ns) * kMs, true, false, p.info_threshold_pct,
                             Scaled(b.iter_compute_ns, kMs), Scaled(n.iter_compute_ns, kMs), p.alpha));
  WithoutIterations(c.metrics.back(), b, n, iters_b, iters_n);
  // Exposed time per op type, per iteration, for information. The summary's op_types cover the
  // whole trace (warm-up and the edges included), so each op type's share of that exposed time
  // is applied to the gated exposed figure above: the rows then use the same (steady) iterations
  // as the gated metrics and never exceed it.
  auto per_op = [&](const RunView& v, const std::string& op, double exposed_per_iter) {
    __int128 total = 0;  // of non-negative 64-bit sums: cannot overflow
    for (const auto& entry : v.op_time_exposed_ns) total += entry.second.second;
    auto it = v.op_time_exposed_ns.find(op);
    if (it == v.op_time_exposed_ns.end() || total <= 0) return 0.0;
    return exposed_per_iter * static_cast<double>(it->second.second) / static_cast<double>(total);
  };
  std::set<std::string> ops;
  for (const auto& entry : b.op_time_exposed_ns) ops.insert(entry.first);
  for (const auto& entry : n.op_time_exposed_ns) ops.insert(entry.first);
  for (const std::string& op : ops) {
    c.metrics.push_back(Decide("exposed_" + op + "_per_iter", "ms", false, per_op(b, op, exposed_b),
                               per_op(n, op, exposed_n), true, false, p.info_threshold_pct, {}, {}, p.alpha));
    WithoutIterations(c.metrics.back(), b, n, iters_b, iters_n);
  }
  for (const MetricResult& m : c.metrics) {
    if (!m.gated) continue;
    if (m.verdict == Verdict::kRegressed) c.gate = Verdict::kRegressed;
    else if (m.verdict == Verdict::kInconclusive && c.gate != Verdict::kRegressed) c.gate = Verdict::kInconclusive;
    else if (m.verdict == Verdict::kImproved && c.gate == Verdict::kUnchanged) c.gate = Verdict::kImproved;
  }
  if (n.data_lost > p.max_data_loss) {
    c.data_lost = true;
    std::string list;
    for (const std::string& s : n.data_lost_counters) list += (list.empty() ? "" : "; ") + s;
    c.data_lost_why = fmt::format("the new run lost data: error-severity counters total {} > allowed {} ({})",
                                  n.data_lost, p.max_data_loss, list);
  }
  return c;
}

std::vector<std::string> Differences(const RunView& b, const RunView& n, const Policy& p) {
  std::vector<std::string> d;
  if (b.world_size >= 0 && n.world_size >= 0 && b.world_size != n.world_size)
    d.push_back(fmt::format("world size {} vs {}", b.world_size, n.world_size));
  auto join = [](const std::vector<std::string>& v) {
    std::string o;
    for (const std::string& x : v) o += (o.empty() ? "" : ",") + x;
    return o;
  };
  std::vector<std::string> rb = b.rank_ids, rn = n.rank_ids;
  std::sort(rb.begin(), rb.end());
  std::sort(rn.begin(), rn.end());
  if (rb.size() == 1 && rn.size() == 1 && rb != rn)
    d.push_back(fmt::format("this compares rank {} of the base with rank {} of the new run, another rank", rb[0], rn[0]));
  else if (rb != rn)
    d.push_back(fmt::format("rank set {} ({} rank(s)) vs {} ({} rank(s))", join(rb), rb.size(), join(rn), rn.size()));
  // Op mix, per iteration (per rank when there are no iterations).
  const bool per_iteration = b.marked_iterations && n.marked_iterations && b.iterations > 0 && n.iterations > 0;
  const char* unit = per_iteration ? "iteration" : "rank";
  auto per = [&](const RunView& v, int64_t x) {
    const double div = per_iteration ? static_cast<double>(v.iterations) : static_cast<double>(std::max<int64_t>(1, v.ranks));
    return static_cast<double>(x) / div;
  };
  auto differ = [&](double x, double y) {
    const double m = std::max(std::fabs(x), std::fabs(y));
    return m > 0 && 100 * std::fabs(x - y) / m > p.op_mix_tolerance_pct;
  };
  std::set<std::string> ops;
  for (const auto& e : b.op_count_bytes) ops.insert(e.first);
  for (const auto& e : n.op_count_bytes) ops.insert(e.first);
  for (const std::string& op : ops) {
    auto ib = b.op_count_bytes.find(op), in = n.op_count_bytes.find(op);
    const std::pair<int64_t, int64_t> zero{0, 0};
    const auto& xb = ib == b.op_count_bytes.end() ? zero : ib->second;
    const auto& xn = in == n.op_count_bytes.end() ? zero : in->second;
    if (xb.first == 0 || xn.first == 0) {
      if (xb.first != xn.first) d.push_back(fmt::format("{} only in the {} run", op, xb.first ? "base" : "new"));
      continue;
    }
    const double cb = per(b, xb.first), cn = per(n, xn.first);
    if (differ(cb, cn)) {
      d.push_back(fmt::format("{} ops per {} {:.1f} vs {:.1f}", op, unit, cb, cn));
    } else if (xb.second >= 0 && xn.second >= 0 && differ(per(b, xb.second), per(n, xn.second))) {
      d.push_back(fmt::format("{} bytes per {} {:.0f} vs {:.0f}", op, unit, per(b, xb.second), per(n, xn.second)));
    }
  }
  return d;
}

}  // namespace overlapprof
