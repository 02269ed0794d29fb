// The overlap tax analyzer (analyzers/interference.h, docs/interference.md): per rank, the
// slowdown of identical work alone vs under the other kind of work, and what it costs per step.
#include "analyzers/interference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "analyzers/analyzer.h"

namespace overlapprof {

std::string_view WorkKindName(WorkKind k) { return k == WorkKind::kComm ? "comm" : "compute"; }

namespace {

// Up to `cap` of `v`, evenly spaced in its order (all of it when it is no longer).
std::vector<double> LogSample(const std::vector<int64_t>& v, size_t cap) {
  std::vector<double> out;
  const size_t n = v.size(), take = std::min(n, cap);
  out.reserve(take);
  for (size_t i = 0; i < take; ++i) out.push_back(std::log(static_cast<double>(v[i * n / take])));
  return out;
}

// The k-th smallest (0-based) of `v` (reorders it).
double KthSmallest(std::vector<double>& v, size_t k) {
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(k), v.end());
  return v[k];
}

int64_t MedianNs(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

std::optional<double> Ratio(int64_t num, int64_t den) {
  if (den <= 0) return std::nullopt;
  return static_cast<double>(num) / static_cast<double>(den);
}

}  // namespace

std::optional<SlowdownEstimate> EstimateSlowdown(const std::vector<int64_t>& alone, const std::vector<int64_t>& under) {
  const auto min = static_cast<size_t>(kInterferenceMinSamples);
  if (alone.size() < min || under.size() < min) return std::nullopt;
  for (const std::vector<int64_t>* side : {&alone, &under})
    for (int64_t d : *side)
      if (d <= 0) return std::nullopt;
  const std::vector<double> la = LogSample(alone, kInterferenceMaxSamples);
  const std::vector<double> lu = LogSample(under, kInterferenceMaxSamples);
  const size_t m = la.size(), n = lu.size(), mn = m * n;
  std::vector<double> diffs;
  diffs.reserve(mn);
  for (double u : lu)
    for (double a : la) diffs.push_back(u - a);
  // Mann-Whitney U's spread under no shift: sd = sqrt(mn(m+n+1)/12); 1.959964 = z of 97.5%.
  const double sd = std::sqrt(static_cast<double>(mn) * static_cast<double>(m + n + 1) / 12.0);
  const double k_real = std::floor(static_cast<double>(mn) / 2.0 - 1.959964 * sd);
  const size_t k = static_cast<size_t>(std::max(1.0, k_real));
  SlowdownEstimate e;
  double mid = KthSmallest(diffs, mn / 2);
  if (mn % 2 == 0) mid = (mid + KthSmallest(diffs, mn / 2 - 1)) / 2.0;
  e.slowdown = std::exp(mid) - 1.0;
  e.low = std::exp(KthSmallest(diffs, k - 1)) - 1.0;
  e.high = std::exp(KthSmallest(diffs, mn - k)) - 1.0;
  e.alone_median_ns = MedianNs(alone);
  return e;
}

void InterferenceTotals::Add(const InterferenceTotals& o) {
  wall_ns += o.wall_ns;
  comm_ns += o.comm_ns;
  hidden_ns += o.hidden_ns;
  compute_overlapped_ns += o.compute_overlapped_ns;
  compute_measured_ns += o.compute_measured_ns;
  compute_tax_ns += o.compute_tax_ns;
  comm_overlapped_ns += o.comm_overlapped_ns;
  comm_measured_ns += o.comm_measured_ns;
  comm_tax_ns += o.comm_tax_ns;
}

std::optional<double> InterferenceTotals::ComputeMeasuredShare() const {
  return Ratio(compute_measured_ns, compute_overlapped_ns);
}
std::optional<double> InterferenceTotals::CommMeasuredShare() const {
  return Ratio(comm_measured_ns, comm_overlapped_ns);
}
std::optional<double> InterferenceTotals::HiddenShare() const { return Ratio(hidden_ns, comm_ns); }

std::optional<int64_t> InterferenceTotals::NetGainNs() const {
  if (!ComputeMeasurable()) return std::nullopt;
  return hidden_ns - compute_tax_ns;
}

std::optional<double> InterferenceTotals::OverlapEfficiency() const {
  if (!ComputeMeasurable()) return std::nullopt;
  return Ratio(hidden_ns - compute_tax_ns - comm_tax_ns, comm_ns - comm_tax_ns);
}

std::optional<double> InterferenceTotals::TaxShareOfStep() const {
  if (!ComputeMeasurable()) return std::nullopt;
  return Ratio(compute_tax_ns, wall_ns);
}

namespace {

// One identity of work and its instances' durations in the steady iterations.
struct Identity {
  WorkKind kind = WorkKind::kCompute;
  uint32_t name_id = 0;
  int64_t position = kUnknown;
  uint32_t comm_op = kNoIndex;  // keyed by op: one op of it, for its description
  std::vector<int64_t> alone, under;
};

// An instance under the other kind of work: the tax is counted once its identity is measurable.
struct UnderInstance {
  uint32_t identity = 0;
  uint32_t slot = 0;  // index among the steady windows
  int64_t dur_ns = 0;
};

// Walks a rank's kernels once and files each steady-iteration instance under its identity.
class InstanceCollector {
 public:
  InstanceCollector(const RankTrace& t, const RankDerived& d, const std::vector<size_t>& steady)
      : t_(t), d_(d), slot_of_(d.iterations.windows.size(), kNoIndex) {
    for (size_t s = 0; s < steady.size(); ++s) slot_of_[steady[s]] = static_cast<uint32_t>(s);
    totals_.resize(steady.size());
    seen_slot_.assign(t.names.size(), kNoIndex);
    seen_count_.assign(t.names.size(), 0);
    compute_by_position_.resize(t.names.size());
    comm_by_position_.resize(t.names.size());
  }

  void CollectInstances() {
    const std::vector<IterationWindow>& w = d_.iterations.windows;
    IntervalSet::Cursor comm(d_.sets.comm), compute(d_.sets.compute);
    size_t wi = 0;
    for (const Activity& a : t_.activities) {
      if (a.kind != ActivityKind::kKernel || a.end_ns <= a.start_ns) continue;
      if (a.category != Category::kCompute && a.category != Category::kComm) continue;
      if (a.name_id >= seen_slot_.size()) continue;  // not a name of this trace's table
      if (wi < w.size() && a.start_ns < w[wi].start_ns) {
        const int64_t at = IterationAt(w, a.start_ns);  // activities out of start order
        wi = at == kUnknown ? 0 : static_cast<size_t>(at);
      }
      while (wi + 1 < w.size() && w[wi + 1].start_ns <= a.start_ns) ++wi;
      if (wi >= w.size() || a.start_ns < w[wi].start_ns || a.start_ns >= w[wi].end_ns) continue;
      const uint32_t slot = slot_of_[wi];
      if (slot == kNoIndex) continue;  // a warm-up iteration
      const bool is_comm = a.category == Category::kComm;
      const int64_t dur = a.end_ns - a.start_ns;
      const int64_t cover =
          is_comm ? compute.LengthWithin(a.start_ns, a.end_ns) : comm.LengthWithin(a.start_ns, a.end_ns);
      const uint32_t id = IdentityOf(a, slot, is_comm);
      InterferenceTotals& tot = totals_[slot];
      if (cover > 0) (is_comm ? tot.comm_overlapped_ns : tot.compute_overlapped_ns) += dur;
      if (cover == 0) {
        ids_[id].alone.push_back(dur);
      } else if (static_cast<double>(cover) >= kInterferenceMinCover * static_cast<double>(dur)) {
        ids_[id].under.push_back(dur);
        under_.push_back({id, slot, dur});
      }
    }
  }

  std::vector<Identity>& identities() { return ids_; }
  const std::vector<UnderInstance>& under() const { return under_; }
  std::vector<InterferenceTotals>& totals() { return totals_; }

 private:
  // The k-th launch of the kernel's name in its iteration (`name_id` < the trace's names).
  int64_t PositionOf(uint32_t name_id, uint32_t slot) {
    if (seen_slot_[name_id] != slot) {
      seen_slot_[name_id] = slot;
      seen_count_[name_id] = 0;
    }
    return seen_count_[name_id]++;
  }

  uint32_t IdentityOf(const Activity& a, uint32_t slot, bool is_comm) {
    const int64_t position = PositionOf(a.name_id, slot);
    const CommOp* op = is_comm && a.comm_op < t_.comm_ops.size() ? &t_.comm_ops[a.comm_op] : nullptr;
    if (op && op->bytes != kUnknown) {
      const OpKey key{a.name_id, op->op, op->bytes, op->communicator};
      auto [it, fresh] = by_op_.try_emplace(key, static_cast<uint32_t>(ids_.size()));
      if (fresh) ids_.push_back({WorkKind::kComm, a.name_id, kUnknown, a.comm_op, {}, {}});
      return it->second;
    }
    // By name, then position: plain vectors (one lookup per kernel of the trace).
    std::vector<uint32_t>& at = (is_comm ? comm_by_position_ : compute_by_position_)[a.name_id];
    const auto k = static_cast<size_t>(position);
    if (at.size() <= k) at.resize(k + 1, kNoIndex);
    if (at[k] == kNoIndex) {
      at[k] = static_cast<uint32_t>(ids_.size());
      ids_.push_back({is_comm ? WorkKind::kComm : WorkKind::kCompute, a.name_id, position, kNoIndex, {}, {}});
    }
    return at[k];
  }

  // A communication kernel's identity by its op (the communicator viewed in the trace's op).
  struct OpKey {
    uint32_t name_id;
    Collective op;
    int64_t bytes;
    std::string_view communicator;
    bool operator==(const OpKey&) const = default;
  };
  struct OpKeyHash {
    size_t operator()(const OpKey& k) const {
      size_t h = std::hash<std::string_view>()(k.communicator);
      for (uint64_t v : {uint64_t{k.name_id}, static_cast<uint64_t>(k.op), static_cast<uint64_t>(k.bytes)})
        h = (h ^ v) * 0x100000001b3ull;
      return h;
    }
  };

  const RankTrace& t_;
  const RankDerived& d_;
  std::vector<uint32_t> slot_of_;  // by window: its index among the steady ones, kNoIndex for warm-up
  std::vector<InterferenceTotals> totals_;
  std::vector<uint32_t> seen_slot_, seen_count_;  // by name id: the slot last counted in, launches there
  std::vector<Identity> ids_;
  // By name id: the identity of each position (kNoIndex: none yet).
  std::vector<std::vector<uint32_t>> compute_by_position_, comm_by_position_;
  std::unordered_map<OpKey, uint32_t, OpKeyHash> by_op_;
  std::vector<UnderInstance> under_;
};

std::string WhyNotMeasurable(const std::vector<Identity>& ids, const InterferenceTotals& totals, size_t steady) {
  if (totals.comm_ns == 0) return "not measurable in this trace: no communication in the steady iterations";
  int64_t under = 0, both = 0;
  for (const Identity& i : ids) {
    if (i.under.empty()) continue;
    ++under;
    if (!i.alone.empty()) ++both;
  }
  if (under == 0)
    return "not measurable in this trace: no kernel of the steady iterations ran at least 90% under the other kind of "
           "work";
  std::string why = fmt::format(
      "not measurable in this trace: of the {} kernel identities that ran under the other kind of work, {} also ran "
      "alone, none at least {} times each way",
      under, both, kInterferenceMinSamples);
  // A compute kernel's identity occurs once per iteration.
  if (steady < static_cast<size_t>(2 * kInterferenceMinSamples))
    why += fmt::format(" (only {} steady iterations: a kernel identified by its position in the step needs {})",
                       steady, 2 * kInterferenceMinSamples);
  return why;
}

}  // namespace

InterferenceRankWork MeasureInterference(const RankTrace& t, const RankDerived& d, bool per_iteration) {
  InterferenceRankWork out;
  out.rank.rank = d.rank;
  const std::vector<IterationWindow>& w = d.iterations.windows;
  std::vector<size_t> steady;
  for (size_t i = 0; i < w.size(); ++i)
    if (!w[i].warmup) steady.push_back(i);
  out.rank.iterations = static_cast<int64_t>(steady.size());
  if (steady.empty()) {
    out.rank.why_not = w.empty() ? "not measurable in this trace: no iterations, so identical work cannot be matched "
                                   "by its position in the step"
                                 : "not measurable in this trace: no steady iterations";
    return out;
  }
  InstanceCollector c(t, d, steady);
  c.CollectInstances();
  std::vector<InterferenceTotals>& totals = c.totals();
  for (size_t s = 0; s < steady.size(); ++s) {
    const OverlapFigures f = FiguresFor(d.sets, w[steady[s]].start_ns, w[steady[s]].end_ns);
    totals[s].wall_ns = f.wall_ns;
    totals[s].comm_ns = f.comm_ns;
    totals[s].hidden_ns = f.overlap_ns;
  }
  // Estimates of the measurable identities, then the tax of their instances under the other work.
  std::vector<Identity>& ids = c.identities();
  std::vector<std::optional<SlowdownEstimate>> est(ids.size());
  std::vector<int64_t> tax(ids.size(), 0);
  for (size_t i = 0; i < ids.size(); ++i) est[i] = EstimateSlowdown(ids[i].alone, ids[i].under);
  for (const UnderInstance& u : c.under()) {
    if (!est[u.identity]) continue;
    const int64_t extra = u.dur_ns - est[u.identity]->alone_median_ns;
    InterferenceTotals& tot = totals[u.slot];
    if (ids[u.identity].kind == WorkKind::kComm) {
      tot.comm_measured_ns += u.dur_ns;
      tot.comm_tax_ns += extra;
    } else {
      tot.compute_measured_ns += u.dur_ns;
      tot.compute_tax_ns += extra;
    }
    tax[u.identity] += extra;
  }
  for (size_t s = 0; s < steady.size(); ++s) {
    out.rank.totals.Add(totals[s]);
    if (per_iteration)
      out.iterations.push_back({d.rank, 0, static_cast<int64_t>(steady[s]), w[steady[s]].step, totals[s]});
  }
  if (!out.rank.totals.ComputeMeasurable() && !out.rank.totals.CommMeasurable())
    out.rank.why_not = WhyNotMeasurable(ids, out.rank.totals, steady.size());
  // The measurable identities of each kind, largest tax first (ties: first seen).
  for (WorkKind kind : {WorkKind::kCompute, WorkKind::kComm}) {
    std::vector<size_t> order;
    for (size_t i = 0; i < ids.size(); ++i)
      if (est[i] && ids[i].kind == kind) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tax[a] > tax[b]; });
    if (order.size() > kInterferenceMaxKernels) order.resize(kInterferenceMaxKernels);
    for (size_t i : order) {
      const Identity& id = ids[i];
      InterferenceKernel k;
      k.rank = d.rank;
      k.kind = kind;
      k.name = std::string(t.names.Get(id.name_id));
      k.position = id.position;
      if (id.comm_op != kNoIndex) {
        const CommOp& op = t.comm_ops[id.comm_op];
        k.op = std::string(CollectiveName(op.op));
        k.bytes = op.bytes;
        k.communicator = op.communicator;
      }
      k.alone = static_cast<int64_t>(id.alone.size());
      k.overlapped = static_cast<int64_t>(id.under.size());
      k.estimate = *est[i];
      k.tax_ns = tax[i];
      out.kernels.push_back(std::move(k));
    }
  }
  return out;
}

namespace {

std::string Percent(double r) { return fmt::format("{:.1f}%", 100.0 * r); }

class InterferenceAnalyzer : public PreparingAnalyzer {
  struct Prepared : RankWork {
    InterferenceRankWork work;
  };

 public:
  std::string_view name() const override { return "interference"; }

  std::unique_ptr<RankWork> PrepareRank(RankPrep& rank, const AnalysisOptions& options) const override {
    if (!rank.derived) return nullptr;
    auto p = std::make_unique<Prepared>();
    p->work = MeasureInterference(rank.trace, *rank.derived, options.per_iteration);
    return p;
  }

  using PreparingAnalyzer::AnalyzeRank;
  Status AnalyzeRank(const RankTrace& trace, size_t rank_index, const AnalysisOptions& options,
                     std::unique_ptr<RankWork> prepared, Summary& summary) override {
    if (rank_index >= summary.ranks.size())
      return MakeError(StatusCode::kInternal, "interference: unknown rank {}", rank_index);
    if (!prepared) {
      const std::shared_ptr<const RankDerived>& d = summary.current;
      if (!d || d->rank_index != rank_index)
        return MakeError(StatusCode::kInternal, "interference needs the overlap analyzer's rank {}", rank_index);
      RankPrep prep{trace, rank_index, d};
      prepared = PrepareRank(prep, options);
    }
    auto* p = dynamic_cast<Prepared*>(prepared.get());
    if (!p) return MakeError(StatusCode::kInternal, "interference: rank {} not prepared", rank_index);
    const size_t input = summary.ranks[rank_index].input_index;
    if (inputs_.size() <= input) inputs_.resize(input + 1);
    inputs_[input] = std::move(p->work);
    summary.NoteSection("interference");
    return OkStatus();
  }

  Status Finish(const AnalysisOptions&, Summary& summary) override {
    if (summary.ranks.empty()) return OkStatus();
    auto result = std::make_shared<InterferenceResult>();
    for (size_t ri = 0; ri < summary.ranks.size(); ++ri) {
      const size_t input = summary.ranks[ri].input_index;
      if (input >= inputs_.size()) return MakeError(StatusCode::kInternal, "interference: unknown input");
      InterferenceRankWork& w = inputs_[input];
      AddFinding(w.rank, summary);
      result->run.Add(w.rank.totals);
      result->ranks.push_back(std::move(w.rank));
      for (InterferenceKernel& k : w.kernels) result->kernels.push_back(std::move(k));
      for (InterferenceIteration& it : w.iterations) {
        it.rank_index = ri;
        result->iterations.push_back(it);
      }
    }
    inputs_.clear();
    summary.interference = std::move(result);
    return OkStatus();
  }

 private:
  // A finding on a rank whose measured compute tax is at least 1% of its steps.
  static void AddFinding(const InterferenceRank& r, Summary& summary) {
    const InterferenceTotals& t = r.totals;
    const std::optional<double> share = t.TaxShareOfStep();
    if (!share || *share < 0.01 || r.iterations <= 0) return;
    const int64_t n = r.iterations;
    const double slowdown = static_cast<double>(t.compute_tax_ns) /
                            static_cast<double>(std::max<int64_t>(1, t.compute_measured_ns - t.compute_tax_ns));
    const int64_t net = *t.NetGainNs();
    std::string msg = fmt::format(
        "overlapped compute ran {} slower under communication ({} of the overlapped compute time measurable): a tax "
        "of {} per step ({} of the step) against {} of communication hidden, net gain of overlap {} per step",
        Percent(slowdown), Percent(t.ComputeMeasuredShare().value_or(0)), FormatDuration(t.compute_tax_ns / n),
        Percent(*share), FormatDuration(t.hidden_ns / n), FormatDuration(net / n));
    msg += "; it is traded by NCCL's SM budget (NCCL_MAX_NCHANNELS / NCCL_MIN_NCHANNELS: fewer channels take fewer "
           "SMs but move data slower), NCCL_CTA_POLICY, and stream priorities (compute on a higher-priority stream)";
    summary.AddFinding("interference", r.rank, net < 0 ? Severity::kWarning : Severity::kInfo, std::move(msg));
  }

  std::vector<InterferenceRankWork> inputs_;  // by input index
};

}  // namespace

std::unique_ptr<Analyzer> MakeInterferenceAnalyzer() { return std::make_unique<InterferenceAnalyzer>(); }

}  // namespace overlapprof
