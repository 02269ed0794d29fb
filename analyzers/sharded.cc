// FSDP and tensor-parallel patterns (docs/analyzers.md "FSDP and TP").
//
// FSDP: parameter all-gathers (forward and backward) and gradient reduce-scatters on a
// communication stream. Per all-gather: exposed time; an all-gather more than half exposed is a
// prefetch stall (compute had nothing to do but wait for the parameters). Phase: the host range of
// an annotation named *forward* / *backward* containing the launch, else before / after the
// iteration's first reduce-scatter.
// TP: all-gathers / reduce-scatters / all-reduces issued on a stream that also runs compute
// kernels: serialized with the matmuls around them, so all their time is exposed unless another
// stream computes meanwhile.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "analyzers/analyzer.h"
#include "analyzers/overlap.h"

namespace overlapprof {
namespace {

using Json = nlohmann::ordered_json;
constexpr size_t kMaxRows = 20000;


// Streams that run compute kernels.
std::set<uint32_t> ComputeStreams(const RankTrace& t) {
  std::set<uint32_t> compute_streams;
  uint32_t last_stream = kNoIndex;
  for (const Activity& a : t.activities)
    if (a.category == Category::kCompute && a.kind == ActivityKind::kKernel && a.stream != last_stream)
      compute_streams.insert(last_stream = a.stream);
  return compute_streams;
}

// Host ranges of annotations named *forward* / *backward*, by start.
struct PhaseRanges {
  std::vector<std::tuple<int64_t, int64_t, int>> ranges;  // start, end, 0 forward / 1 backward

  // The phase of the innermost range holding a host launch time, or -1.
  int PhaseOf(int64_t launch) const {
    if (launch == kUnknown) return -1;
    int found = -1;
    // Innermost containing range wins (ranges sorted by start; later starts are inner).
    auto end = std::upper_bound(ranges.begin(), ranges.end(), std::make_tuple(launch, INT64_MAX, 2));
    for (auto it = ranges.begin(); it != end; ++it)
      if (launch <= std::get<1>(*it)) found = std::get<2>(*it);
    return found;
  }
};

PhaseRanges FindPhaseRanges(const RankTrace& t) {
  PhaseRanges phases;
  std::vector<int8_t> phase_of_name(t.names.size(), -2);  // by name id: -1 none, 0 forward, 1 backward
  for (const Range& r : t.ranges) {
    if (r.kind != RangeKind::kAnnotation || r.name_id >= phase_of_name.size()) continue;
    int8_t& ph = phase_of_name[r.name_id];
    if (ph == -2) {
      std::string_view n = t.names.Get(r.name_id);
      ph = ContainsNoCase(n, "backward") ? 1 : ContainsNoCase(n, "forward") ? 0 : -1;
    }
    if (ph >= 0) phases.ranges.emplace_back(r.start_ns, r.end_ns, ph);
  }
  std::sort(phases.ranges.begin(), phases.ranges.end());
  return phases;
}

struct Agg {
  int64_t count = 0, time_ns = 0, exposed_ns = 0, stalls = 0, stall_ns = 0;
};

// Per rank: FSDP ops by (phase, op), TP ops (on compute streams) by op.
struct ShardedOps {
  std::map<std::pair<std::string, std::string>, Agg> fsdp;
  std::map<std::string, Agg> tp;
  bool any_fsdp = false;
  std::map<int64_t, int64_t> first_rs;  // iteration -> GPU start of its first reduce-scatter
  int64_t compute_ns[2] = {0, 0};       // compute busy time (union) in forward / backward
};

// The phase (0 forward, 1 backward) of work launched at `launch` and started on the GPU at
// `gpu_start` in iteration `it`: the innermost forward/backward host range of the launch, else
// before / after the iteration's first reduce-scatter.
int PhaseAt(const PhaseRanges& phases, const std::map<int64_t, int64_t>& first_rs, int64_t launch, int64_t it,
            int64_t gpu_start) {
  int ph = phases.PhaseOf(launch);
  if (ph >= 0) return ph;
  auto rs = first_rs.find(it);
  return rs != first_rs.end() && gpu_start >= rs->second ? 1 : 0;
}

// The union of the compute kernels' time per phase (activities come sorted by start).
void ComputeByPhase(const RankTrace& t, const RankDerived& d, const PhaseRanges& phases, ShardedOps& ops) {
  const auto& windows = d.iterations.windows;
  int64_t cur_start[2] = {0, 0}, cur_end[2] = {INT64_MIN, INT64_MIN};
  for (const Activity& a : t.activities) {
    if (a.category != Category::kCompute || a.kind != ActivityKind::kKernel) continue;
    const int64_t it = windows.empty() ? 0 : IterationAt(windows, a.start_ns);
    const int ph = PhaseAt(phases, ops.first_rs, a.launch_ns, it, a.start_ns);
    if (a.start_ns > cur_end[ph]) {
      if (cur_end[ph] > cur_start[ph]) ops.compute_ns[ph] += cur_end[ph] - cur_start[ph];
      cur_start[ph] = a.start_ns;
      cur_end[ph] = a.end_ns;
    } else {
      cur_end[ph] = std::max(cur_end[ph], a.end_ns);
    }
  }
  for (int ph : {0, 1})
    if (cur_end[ph] > cur_start[ph]) ops.compute_ns[ph] += cur_end[ph] - cur_start[ph];
}

class ShardedAnalyzer : public PreparingAnalyzer {
  struct Prepared : RankWork {
    std::set<uint32_t> compute_streams;
    PhaseRanges phases;
  };

 public:
  std::string_view name() const override { return "sharded"; }
  TraceNeeds needs(const AnalysisOptions&) const override { return {.host_calls = false, .annotations = true}; }

  // The streams that run compute (a pass over every activity) and the phase ranges.
  std::unique_ptr<RankWork> PrepareRank(RankPrep& rank, const AnalysisOptions&) const override {
    auto p = std::make_unique<Prepared>();
    p->compute_streams = ComputeStreams(rank.trace);
    p->phases = FindPhaseRanges(rank.trace);
    return p;
  }

  Status AnalyzeRank(const RankTrace& t, size_t rank_index, const AnalysisOptions& options,
                     std::unique_ptr<RankWork> prepared, Summary& summary) override {
    const RankDerived* d = summary.current.get();
    if (!d || d->rank_index != rank_index) return MakeError(StatusCode::kInternal, "sharded: no derived data");
    auto* p = dynamic_cast<Prepared*>(prepared.get());
    if (!p) {
      RankPrep rank{t, rank_index, summary.current};
      prepared = PrepareRank(rank, options);
      p = static_cast<Prepared*>(prepared.get());
    }
    const Json rank_json = d->rank == kUnknown ? Json(nullptr) : Json(d->rank);
    ShardedOps ops = Aggregate(t, *d, p->compute_streams, p->phases, rank_json, summary);
    if (ops.any_fsdp) ComputeByPhase(t, *d, p->phases, ops);
    AddAggregateRows(ops, rank_json, summary);
    AddFindings(ops, d->rank, summary);
    return OkStatus();
  }

 private:
  // Sorts the rank's all-gathers, reduce-scatters and all-reduces into FSDP (phase from the launch's
  // host range, else before / after the iteration's first reduce-scatter) and TP (on a compute
  // stream), adding a `fsdp_allgathers` row per FSDP all-gather.
  static ShardedOps Aggregate(const RankTrace& t, const RankDerived& d, const std::set<uint32_t>& compute_streams,
                              const PhaseRanges& phases, const Json& rank_json, Summary& summary) {
    const auto& windows = d.iterations.windows;
    auto iteration_of = [&](int64_t gpu_t) { return windows.empty() ? int64_t{0} : IterationAt(windows, gpu_t); };
    // First reduce-scatter start per iteration (fallback phase split).
    ShardedOps out;
    std::map<int64_t, int64_t>& first_rs = out.first_rs;
    for (const OpSpan& o : d.ops)
      if (o.collective == Collective::kReduceScatter && !compute_streams.count(o.stream)) {
        int64_t it = iteration_of(o.start_ns);
        if (!first_rs.count(it)) first_rs[it] = o.start_ns;
      }
    auto& rows = summary.Section("fsdp_allgathers");
    if (!rows.is_array()) rows = Json::array();
    for (const OpSpan& o : d.ops) {
      const Collective c = o.collective;
      if (c != Collective::kAllGather && c != Collective::kReduceScatter && c != Collective::kAllReduce) continue;
      const std::string fam(OpFamilyName(o.family));  // the rows' name of the op
      if (compute_streams.count(o.stream)) {
        Agg& a = out.tp[fam];
        ++a.count;
        a.time_ns += o.busy_ns;
        a.exposed_ns += o.exposed_ns();
        continue;
      }
      if (c == Collective::kAllReduce) continue;  // DDP's buckets (ddp_buckets)
      out.any_fsdp = true;
      const int64_t it = iteration_of(o.start_ns);
      const int ph = PhaseAt(phases, first_rs, o.launch_ns, it, o.start_ns);
      const std::string phase = ph == 1 ? "backward" : "forward";
      Agg& a = out.fsdp[{phase, fam}];
      ++a.count;
      a.time_ns += o.busy_ns;
      a.exposed_ns += o.exposed_ns();
      const bool stall = c == Collective::kAllGather && o.busy_ns > 0 && 2 * o.exposed_ns() > o.busy_ns;
      if (stall) ++a.stalls, a.stall_ns += o.exposed_ns();
      if (c == Collective::kAllGather) {
        if (rows.size() < kMaxRows) {
          JsonRow j(8);
          j.Add("rank", rank_json)
              .Add("iteration", windows.empty() ? Json(nullptr) : Json(it))
              .Add("phase", phase)
              .Add("bytes", SizeBytes(t, o) == kUnknown ? Json(nullptr) : Json(SizeBytes(t, o)))
              .Add("start_ns", o.start_ns)
              .Add("duration_ns", o.busy_ns)
              .Add("exposed_ns", o.exposed_ns())
              .Add("prefetched", !stall);
          rows.push_back(std::move(j).Take());
        }
      }
    }
    return out;
  }

  // The rank's `fsdp` and `tp` rows.
  static void AddAggregateRows(const ShardedOps& ops, const Json& rank_json, Summary& summary) {
    auto& fs = summary.Section("fsdp");
    if (!fs.is_array()) fs = Json::array();
    for (const auto& [k, a] : ops.fsdp) {
      Json j;
      j["rank"] = rank_json;
      j["phase"] = k.first;
      j["op"] = k.second;
      j["count"] = a.count;
      j["time_ns"] = a.time_ns;
      j["exposed_ns"] = a.exposed_ns;
      j["prefetch_stalls"] = a.stalls;
      j["prefetch_stall_ns"] = a.stall_ns;
      fs.push_back(std::move(j));
    }
    auto& tj = summary.Section("tp");
    if (!tj.is_array()) tj = Json::array();
    for (const auto& [op, a] : ops.tp) {
      Json j;
      j["rank"] = rank_json;
      j["op"] = op;
      j["count"] = a.count;
      j["time_ns"] = a.time_ns;
      j["exposed_ns"] = a.exposed_ns;
      j["on_compute_stream"] = true;
      tj.push_back(std::move(j));
    }
  }

  // Prefetch stalls per FSDP phase; TP collectives serialized on a compute stream.
  //
  // Prefetching hides an all-gather behind compute, so the phase's FSDP collectives (its
  // all-gathers and reduce-scatters, which take turns on one communicator) can hide behind at most
  // the phase's compute: of their time Y against the phase's compute Z, with H already hidden, a
  // better prefetch recovers at most min(Y, Z) - H, and Y - Z stays exposed whatever the
  // schedule. When what prefetch could recover is under a quarter of the stalls, the finding says
  // the all-gathers are bandwidth-bound instead of advising prefetch (seen on an H100, FSDP2 with
  // 2 ranks over sockets, prefetch on: backward all-gathers 2.86 s and reduce-scatters 5.48 s
  // against 2.71 s of compute, 2.70 s of it already covering communication; it was told to turn
  // prefetch on).
  static void AddFindings(const ShardedOps& ops, int64_t rank, Summary& summary) {
    if (ops.any_fsdp) {
      for (const char* phase : {"forward", "backward"}) {
        auto it = ops.fsdp.find({phase, "allgather"});
        if (it == ops.fsdp.end() || it->second.stalls < 2 || it->second.stalls * 5 < it->second.count) continue;
        const Agg& a = it->second;
        const bool fwd = std::string_view(phase) == "forward";
        const int64_t z = ops.compute_ns[fwd ? 0 : 1];
        int64_t y = 0, hidden = 0;
        for (const auto& [key, agg] : ops.fsdp)
          if (key.first == phase) y += agg.time_ns, hidden += agg.time_ns - agg.exposed_ns;
        const int64_t recoverable = std::max<int64_t>(0, std::min(y, z) - hidden);
        const int64_t irreducible = std::max<int64_t>(0, y - z);
        const std::string budget = fmt::format(
            "the {} all-gathers{} take {} against {} of {} compute, {} of them already hidden", phase,
            y > a.time_ns ? " and reduce-scatters" : "", FormatDuration(y), FormatDuration(z), phase,
            FormatDuration(hidden));
        if (4 * recoverable < a.stall_ns && irreducible > 0) {
          summary.AddFinding(
              "sharded", rank, Severity::kWarning,
              fmt::format("{} of {} parameter all-gathers in {} are exposed ({} in total), and prefetching cannot "
                          "hide them: {}, so a better prefetch hides at most {} more and {} stays exposed: the "
                          "all-gathers are bandwidth-bound: gather less ({}HSDP to keep the all-gathers within a "
                          "node, lower-precision parameters) or speed up the interconnect",
                          a.stalls, a.count, phase, FormatDuration(a.stall_ns), budget, FormatDuration(recoverable),
                          FormatDuration(irreducible), fwd ? "" : "reshard_after_forward=False skips them, "));
          continue;
        }
        summary.AddFinding(
            "sharded", rank, Severity::kWarning,
            fmt::format("{} of {} parameter all-gathers in {} are exposed (prefetch stalls, {} in total): {}{}", a.stalls,
                        a.count, phase, FormatDuration(a.stall_ns),
                        fwd ? "prefetch the next layer's parameters (FSDP1 forward_prefetch=True; FSDP2 "
                              "set_modules_to_forward_prefetch); costs one more layer of unsharded parameters in memory"
                            : "prefetch in backward (FSDP1 backward_prefetch=BackwardPrefetch.BACKWARD_PRE; FSDP2 "
                              "set_modules_to_backward_prefetch), or reshard_after_forward=False to skip the backward "
                              "all-gathers at the cost of keeping parameters unsharded between forward and backward",
                        irreducible > 0 ? fmt::format(" ({}: even fully prefetched, {} stays exposed)", budget,
                                                      FormatDuration(irreducible))
                                        : std::string()));
      }
    }
    int64_t tp_count = 0, tp_exposed = 0;
    for (const auto& [op, a] : ops.tp)
      if (op != "allreduce") tp_count += a.count, tp_exposed += a.exposed_ns;
    if (tp_count >= 2 && tp_exposed > 0)
      summary.AddFinding("sharded", rank, Severity::kWarning,
                         fmt::format("{} all-gather/reduce-scatter ops run on a compute stream, serialized with the "
                                     "matmuls around them ({} exposed): overlap them with independent compute (async "
                                     "tensor parallel / collective-matmul decomposition, a separate communication stream)",
                                     tp_count, FormatDuration(tp_exposed)));
  }
};

}  // namespace

std::unique_ptr<Analyzer> MakeShardedAnalyzer() { return std::make_unique<ShardedAnalyzer>(); }

}  // namespace overlapprof
