#include "analyzers/overlap.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analyzers/analyzer.h"
#include "analyzers/iterations.h"
#include "src/common/memory.h"
#include "src/trace/classify.h"

namespace overlapprof {

TimelineSets BuildTimelineSets(const RankTrace& t) {
  TimelineSets s;
  // RankTrace::Finalize sorts activities by start, so one pass builds every union
  // directly. (A trace not finalized is sorted here, on a copy of the order only.)
  std::vector<uint32_t> order;
  auto by_start = [](const Activity& a, const Activity& b) { return a.start_ns < b.start_ns; };
  if (!std::is_sorted(t.activities.begin(), t.activities.end(), by_start)) {
    order.resize(t.activities.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t x, uint32_t y) { return t.activities[x].start_ns < t.activities[y].start_ns; });
  }
  s.timing = ResolveCommTiming(t);
  const CommTiming& timing = s.timing;
  // The plugin's op intervals, merged into the walk below in start order (they are sorted).
  const std::vector<uint32_t>& pops = timing.plugin_ops;
  size_t next_pop = 0;
  IntervalSet::Builder compute, comm, memory, busy;
  std::vector<int64_t> op_first(t.comm_ops.size(), INT64_MAX);
  // Room for every activity (address space only: pages never written are never touched),
  // so that no union grows by copying.
  const size_t n = t.activities.size();
  for (IntervalSet::Builder* b : {&compute, &comm, &memory, &busy}) b->Reserve(n);
  ReserveHuge(s.kernel_starts, n);
  bool any = false;
  int64_t first_start = 0, last_end = 0;
  auto add_plugin_ops_before = [&](int64_t limit) {
    for (; next_pop < pops.size() && t.nccl_plugin_ops[pops[next_pop]].start_ns <= limit; ++next_pop) {
      const NcclPluginOp& p = t.nccl_plugin_ops[pops[next_pop]];
      comm.Add(p.start_ns, p.end_ns);
      busy.Add(p.start_ns, p.end_ns);
      op_first[p.comm_op] = std::min(op_first[p.comm_op], p.start_ns);
    }
  };
  for (size_t k = 0; k < n; ++k) {
    const Activity& a = order.empty() ? t.activities[k] : t.activities[order[k]];
    if (a.kind == ActivityKind::kSync) continue;
    if (!any) {
      first_start = a.start_ns;
      last_end = a.end_ns;
      any = true;
    }
    last_end = std::max(last_end, a.end_ns);
    add_plugin_ops_before(a.start_ns);
    // A kernel of a group the plugin times: counted as a kernel, its time taken from the ops.
    const bool replaced = a.category == Category::kComm && timing.Replaced(a.comm_op);
    switch (a.category) {
      case Category::kCompute: compute.Add(a.start_ns, a.end_ns); break;
      case Category::kComm:
        if (!replaced) comm.Add(a.start_ns, a.end_ns);
        break;
      case Category::kMemory: memory.Add(a.start_ns, a.end_ns); break;
      case Category::kOther: break;
    }
    if (a.category != Category::kOther && !replaced) busy.Add(a.start_ns, a.end_ns);
    if (a.kind == ActivityKind::kKernel) {
      s.kernel_starts.push_back(a.start_ns);
      if (a.category == Category::kComm) s.comm_kernel_starts.push_back(a.start_ns);
    } else if (a.kind == ActivityKind::kMemcpy) {
      s.memcpy_starts.push_back(a.start_ns);
    } else if (a.kind == ActivityKind::kMemset) {
      s.memset_starts.push_back(a.start_ns);
    }
    if (replaced) {
      // the op's start is its plugin op's (add_plugin_ops_before)
    } else if (a.comm_op != kNoIndex && a.comm_op < op_first.size()) {
      op_first[a.comm_op] = std::min(op_first[a.comm_op], a.start_ns);
    } else if (a.category == Category::kComm) {
      // A comm activity that no op record claims counts as one op.
      s.comm_op_starts.push_back(a.start_ns);
    }
  }
  add_plugin_ops_before(INT64_MAX);
  if (any && !pops.empty()) {  // the window stays first to last GPU activity, plugin ops included
    for (uint32_t k : pops) {
      first_start = std::min(first_start, t.nccl_plugin_ops[k].start_ns);
      last_end = std::max(last_end, t.nccl_plugin_ops[k].end_ns);
    }
  }
  s.any_activity = any;
  s.first_start = any ? first_start : 0;
  s.last_end = any ? last_end : 0;
  for (int64_t v : op_first)
    if (v != INT64_MAX) s.comm_op_starts.push_back(v);
  std::sort(s.comm_op_starts.begin(), s.comm_op_starts.end());  // the others are in start order already
  s.compute = std::move(compute).Build();
  s.comm = std::move(comm).Build();
  s.memory = std::move(memory).Build();
  s.busy = std::move(busy).Build();
  s.overlap = IntervalSet::Intersect(s.compute, s.comm);
  return s;
}

namespace {
int64_t CountIn(const std::vector<int64_t>& sorted, int64_t lo, int64_t hi) {
  return std::lower_bound(sorted.begin(), sorted.end(), hi) - std::lower_bound(sorted.begin(), sorted.end(), lo);
}
}  // namespace

OverlapFigures FiguresFor(const TimelineSets& s, int64_t lo, int64_t hi) {
  OverlapFigures f;
  f.start_ns = lo;
  f.end_ns = hi;
  f.wall_ns = hi - lo;
  f.compute_ns = s.compute.LengthWithin(lo, hi);
  f.comm_ns = s.comm.LengthWithin(lo, hi);
  f.memory_ns = s.memory.LengthWithin(lo, hi);
  f.overlap_ns = s.overlap.LengthWithin(lo, hi);
  f.busy_ns = s.busy.LengthWithin(lo, hi);
  f.idle_ns = f.wall_ns - f.busy_ns;
  f.exposed_comm_ns = f.comm_ns - f.overlap_ns;
  f.kernels = CountIn(s.kernel_starts, lo, hi);
  f.comm_kernels = CountIn(s.comm_kernel_starts, lo, hi);
  f.memcpys = CountIn(s.memcpy_starts, lo, hi);
  f.memsets = CountIn(s.memset_starts, lo, hi);
  f.comm_ops = CountIn(s.comm_op_starts, lo, hi);
  if (f.comm_ns > 0) {
    f.overlap_ratio = static_cast<double>(f.overlap_ns) / static_cast<double>(f.comm_ns);
    f.achievable_ratio = std::min(1.0, static_cast<double>(f.compute_ns) / static_cast<double>(f.comm_ns));
  } else {
    f.ratio_reason = "no communication";
  }
  return f;
}

OverlapFigures WholeTraceFigures(const TimelineSets& s) {
  if (!s.any_activity) {
    OverlapFigures f;
    f.ratio_reason = "no GPU activity";
    return f;
  }
  // hi is exclusive; last_end is the end of the last interval, so [first, last_end) covers all.
  return FiguresFor(s, s.first_start, s.last_end);
}

Spread SpreadOf(std::vector<double> v) {
  Spread s;
  s.n = static_cast<int64_t>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto q = [&](double p) {
    const double pos = p * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(pos);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  s.median = q(0.5);
  s.p10 = q(0.1);
  s.p90 = q(0.9);
  return s;
}

std::string FormatDuration(int64_t ns) {
  double a = std::abs(static_cast<double>(ns));
  if (a >= 1e9) return fmt::format("{:.2f} s", ns / 1e9);
  if (a >= 1e6) return fmt::format("{:.2f} ms", ns / 1e6);
  if (a >= 1e3) return fmt::format("{:.1f} µs", ns / 1e3);
  return fmt::format("{} ns", ns);
}

std::string FormatPercent(const std::optional<double>& r) {
  if (!r) return "n/a";
  return fmt::format("{:.1f}%", *r * 100.0);
}

std::string RankVerdict(const OverlapFigures& f) {
  if (f.wall_ns == 0 && f.comm_ns == 0 && f.compute_ns == 0) return "no GPU activity in the trace: nothing to analyze";
  if (!f.overlap_ratio) return "no communication on the GPU timeline: nothing to overlap";
  double r = *f.overlap_ratio, b = *f.achievable_ratio;
  std::string exposed = FormatDuration(f.exposed_comm_ns);
  if (r >= 0.9)
    return fmt::format("communication is well hidden: {} overlapped, {} exposed", FormatPercent(r), exposed);
  if (b < 0.999 && r >= 0.9 * b)
    return fmt::format(
        "volume is the problem: compute ({}) can hide at most {} of communication ({}) and {} is already hidden; "
        "reduce communication volume or speed up the collectives ({} exposed)",
        FormatDuration(f.compute_ns), FormatPercent(b), FormatDuration(f.comm_ns), FormatPercent(r), exposed);
  // What a perfect schedule would still hide, against what no schedule can: when the second is
  // larger, more overlap is not the answer (seen on an H100: DDP with 1.4% hidden of an
  // achievable 2.5%, where "overlap is the problem" sent the user after 1.1% of the time).
  const double recoverable = b - r, irreducible = 1.0 - b;
  if (b < 0.999 && recoverable < irreducible)
    return fmt::format(
        "volume is the problem: compute ({}) can hide at most {} of communication ({}); {} is hidden, so a "
        "better schedule would hide at most {} more ({}) and {} stays exposed whatever the schedule: reduce "
        "communication volume or speed up the collectives ({} exposed)",
        FormatDuration(f.compute_ns), FormatPercent(b), FormatDuration(f.comm_ns), FormatPercent(r),
        FormatDuration(static_cast<int64_t>(recoverable * static_cast<double>(f.comm_ns))),
        FormatPercent(recoverable),
        FormatDuration(static_cast<int64_t>(irreducible * static_cast<double>(f.comm_ns))), exposed);
  return fmt::format(
      "overlap is the problem: only {} of communication is hidden although compute could hide {}; {} of "
      "communication is exposed",
      FormatPercent(r), FormatPercent(b), exposed);
}

namespace {

// meta `overlap_env` into RankResult::overlap_env. A value that is not a JSON object of strings
// (a damaged or forged store) is left out with a notice, never guessed at.
void ReadOverlapEnv(const RunMeta& m, RankResult& r) {
  if (m.overlap_env_json.empty()) return;
  const nlohmann::json j = nlohmann::json::parse(m.overlap_env_json, nullptr, false);
  std::map<std::string, std::string> env;
  bool ok = j.is_object();
  if (ok) {
    for (const auto& [name, value] : j.items()) {
      if (!value.is_string()) {
        ok = false;
        break;
      }
      env.emplace(name, value.get<std::string>());
    }
  }
  if (!ok) {
    r.notices.push_back("the store's meta overlap_env is not a JSON object of strings: the job's environment is ignored");
    return;
  }
  r.overlap_env = std::move(env);
}

// The rank's identity and inputs as the trace states them: rank, source, device, counters,
// notices, the rules that classified its comm ops, and a notice naming kernels that look like
// communication but that no rule classified.
void DescribeRank(const RankTrace& t, size_t rank_index, RankResult& r) {
  r.input_index = rank_index;
  r.rank = t.meta.rank;
  r.world_size = t.meta.world_size;
  r.source_path = t.meta.source_path;
  r.source_format = t.meta.source_format;
  r.host = t.meta.host;
  r.streams = static_cast<int64_t>(t.streams.size());
  for (const Device& d : t.devices) {
    if (!d.name.empty()) {
      r.device = d.name;
      break;
    }
  }
  r.stats = t.stats;
  r.extra_stats = t.extra_stats;
  r.notices = t.notices;
  for (const CommOp& op : t.comm_ops) ++r.comm_rules[std::string(CommRuleName(op.rule))];
  ReadOverlapEnv(t.meta, r);
  // A kernel that looks like communication but that no rule classified: a new library shows
  // up as a warning naming it, never as a silent 0 (docs/classification.md).
  std::vector<std::string> comm_like;
  if (int64_t n = CountCommLikeUnclassified(t, &comm_like); n > 0) {
    r.stats.Set(Stat::comm_like_kernels_unclassified, n);
    std::string names;
    for (size_t i = 0; i < comm_like.size() && i < 3; ++i)
      names += fmt::format("{}'{}'", i ? ", " : "", comm_like[i].substr(0, 120));
    if (comm_like.size() > 3) names += fmt::format(" and {} more", comm_like.size() - 3);
    r.notices.push_back(fmt::format("{} kernel(s) look like communication but no rule classified them (counted as "
                                    "compute): {}; --comm-kernel REGEX counts them as communication",
                                    n, names));
  }
}

// With NCCL's profiler plugin in the trace: what communication is timed by, how many of its ops,
// and notices when its clock disagrees with CUPTI or it timed nothing usable.
void NoteTimingSource(const RankTrace& t, const CommTiming& timing, RankResult& r) {
  if (t.meta.nccl_profiler_json.empty() && t.nccl_plugin_ops.empty()) return;
  r.timing_source = std::string(timing.source());
  r.nccl_profiler_ops = timing.plugin_ops_total;
  r.nccl_profiler_timed_ops = static_cast<int64_t>(timing.plugin_ops.size());
  if (timing.kernel_mismatched > 0) {
    r.stats.Set(Stat::nccl_plugin_kernel_time_mismatch, timing.kernel_mismatched);
    r.notices.push_back(fmt::format(
        "{} of {} NCCL operations alone in their kernel start more than {} apart by NCCL's profiler plugin and "
        "by CUPTI (median difference {}): the plugin's clock offset is off, its per-operation times are shifted",
        timing.kernel_mismatched, timing.kernel_checked, FormatDuration(CommTiming::kKernelResidualNs),
        FormatDuration(timing.kernel_residual_ns)));
  }
  if (!timing.plugin)
    r.notices.push_back(
        t.nccl_plugin_ops.empty()
            ? "NCCL's profiler plugin was loaded but timed no operation: communication timed by its kernels"
            : fmt::format("none of the {} operations NCCL's profiler plugin timed could time a whole NCCL launch "
                          "(joined to every call of it, with GPU times): communication timed by its kernels",
                          t.nccl_plugin_ops.size()));
}

// The iteration windows (markers or a step range, else the pattern of the comm ops, as
// --iterations says), the warm-up flagged.
void FindRankIterations(const RankTrace& t, const AnalysisOptions& options, RankResult& r, RankDerived& d) {
  const TimelineSets& sets = d.sets;
  const IterationInfo* carried = nullptr;  // planned across ranks (the pipeline's second pass)
  if (options.carried_windows)
    if (auto c = options.carried_windows->find(d.rank_index); c != options.carried_windows->end()) carried = &c->second;
  if (carried) d.iterations = *carried;
  else if (options.iterations != IterationMode::kPattern) d.iterations = FindIterations(t, r.stats, options.step_range);
  if (options.iterations == IterationMode::kMarkers && d.iterations.windows.empty() && d.iterations.notice.empty())
    d.iterations.notice = "no iteration markers (ProfilerStep#N), and --iterations markers: whole-trace figures only";
  if (!carried && d.iterations.windows.empty() && options.iterations != IterationMode::kMarkers &&
      (options.step_range.empty() || options.iterations == IterationMode::kPattern) && sets.any_activity)
    d.iterations = DetectIterations(d.ops, sets.busy, sets.first_start, sets.last_end, GatherIterationEvidence(t));
  if (d.iterations.source.empty()) d.iterations.source = "none";
  FlagWarmup(d.ops, d.iterations);
  r.iteration_source = d.iterations.source;
  r.iteration_count = static_cast<int64_t>(d.iterations.windows.size());
}

// Each window's figures: the spread over the windows after warm-up, and (per_iteration) one
// result per window.
void IterationFiguresAndSpread(const RankDerived& d, const AnalysisOptions& options, RankResult& r,
                               std::vector<IterationResult>& iterations) {
  const IterationInfo& it = d.iterations;
  std::vector<double> ratios, exposed, walls;
  for (size_t i = 0; i < it.windows.size(); ++i) {
    OverlapFigures f = FiguresFor(d.sets, it.windows[i].start_ns, it.windows[i].end_ns);
    if (it.windows[i].warmup) {
      ++r.warmup_iterations;
    } else {
      if (f.overlap_ratio) ratios.push_back(*f.overlap_ratio);
      exposed.push_back(static_cast<double>(f.exposed_comm_ns));
      walls.push_back(static_cast<double>(f.wall_ns));
    }
    if (options.per_iteration) {
      IterationResult ir;
      ir.rank = r.rank;
      ir.rank_index = d.rank_index;
      ir.index = static_cast<int64_t>(i);
      ir.step = it.windows[i].step;
      ir.warmup = it.windows[i].warmup;
      ir.figures = std::move(f);
      iterations.push_back(std::move(ir));
    }
  }
  r.spread_overlap_ratio = SpreadOf(std::move(ratios));
  r.spread_exposed_comm_ns = SpreadOf(std::move(exposed));
  r.spread_wall_ns = SpreadOf(std::move(walls));
}

// What the reader should know about this rank's figures: unknown rank, no GPU activity, how
// the iterations were found (or that none were), warm-up left out.
void AddRankNotices(const RankTrace& t, const TimelineSets& sets, const IterationInfo& it, RankResult& r) {
  if (t.meta.rank == kUnknown)
    r.notices.push_back(t.meta.source_format == "nsys"
                            ? "the export does not say its rank (no RANK in the environment nsys started in: "
                              "one nsys per rank under the launcher records it; on one node, --rank-by-gpu numbers ranks by "
                              "GPU; docs/nsys.md): rank shown as unknown"
                            : "the trace does not say its rank (no distributedInfo): rank shown as unknown");
  if (!sets.any_activity) r.notices.push_back("no GPU activity (kernels, memcpy, memset) in this trace");
  if (it.windows.empty())
    r.notices.push_back(!it.notice.empty() ? it.notice
                                            : "no iteration markers (ProfilerStep#N): whole-trace figures only");
  else if (!it.notice.empty() && it.source != "ProfilerStep" && it.source != "step range")
    r.notices.push_back(it.notice);
  if (r.warmup_iterations > 0)
    r.notices.push_back(fmt::format("{} warm-up iteration(s) left out of the iteration spread", r.warmup_iterations));
}

class OverlapAnalyzer : public Analyzer {
  struct Prepared : RankWork {
    RankResult result;
    std::vector<IterationResult> iterations;  // when options.per_iteration
    std::shared_ptr<RankDerived> derived;
  };

 public:
  std::string_view name() const override { return "overlap"; }

  // All of the rank's figures: they need the rank alone (AnalyzeRank only adds them).
  std::unique_ptr<RankWork> PrepareRank(RankPrep& rank, const AnalysisOptions& options) const override {
    const RankTrace& t = rank.trace;
    auto work = std::make_unique<Prepared>();
    RankResult& r = work->result;
    DescribeRank(t, rank.rank_index, r);
    auto d = std::make_shared<RankDerived>();
    d->rank = r.rank;
    d->rank_index = rank.rank_index;
    d->sets = BuildTimelineSets(t);
    d->ops = CommOpSpans(t, d->sets.compute, d->sets.timing);
    r.whole = WholeTraceFigures(d->sets);
    NoteTimingSource(t, d->sets.timing, r);
    FindRankIterations(t, options, r, *d);
    IterationFiguresAndSpread(*d, options, r, work->iterations);
    AddRankNotices(t, d->sets, d->iterations, r);
    r.verdict = RankVerdict(r.whole);
    rank.derived = d;
    work->derived = std::move(d);
    return work;
  }

  Status AnalyzeRank(const RankTrace& t, size_t rank_index, const AnalysisOptions& options,
                     Summary& summary) override {
    RankPrep rank{t, rank_index, nullptr};
    return AnalyzeRank(t, rank_index, options, PrepareRank(rank, options), summary);
  }

  Status AnalyzeRank(const RankTrace&, size_t rank_index, const AnalysisOptions&, std::unique_ptr<RankWork> prepared,
                     Summary& summary) override {
    if (rank_index != summary.ranks.size())
      return MakeError(StatusCode::kInternal, "overlap analyzer must create rank {}", rank_index);
    auto* work = dynamic_cast<Prepared*>(prepared.get());
    if (!work || !work->derived || work->derived->rank_index != rank_index)
      return MakeError(StatusCode::kInternal, "overlap analyzer: rank {} was not prepared", rank_index);
    summary.iterations.insert(summary.iterations.end(), std::make_move_iterator(work->iterations.begin()),
                              std::make_move_iterator(work->iterations.end()));
    summary.current = std::move(work->derived);
    summary.ranks.push_back(std::move(work->result));
    return OkStatus();
  }

  Status Finish(const AnalysisOptions&, Summary& summary) override {
    // The run verdict speaks of the rank with the most exposed communication.
    const RankResult* worst = nullptr;
    int64_t exposed_total = 0, comm_total = 0, overlap_total = 0;
    for (const RankResult& r : summary.ranks) {
      exposed_total += r.whole.exposed_comm_ns;
      comm_total += r.whole.comm_ns;
      overlap_total += r.whole.overlap_ns;
      if (r.whole.overlap_ratio && (!worst || r.whole.exposed_comm_ns > worst->whole.exposed_comm_ns)) worst = &r;
    }
    if (summary.ranks.empty()) {
      summary.verdict = "no traces analyzed";
    } else if (!worst) {
      summary.verdict = summary.ranks.size() == 1 ? summary.ranks[0].verdict
                                                  : "no communication on any rank's GPU timeline: nothing to overlap";
    } else if (summary.ranks.size() == 1) {
      summary.verdict = worst->verdict;
    } else {
      double mean = comm_total > 0 ? static_cast<double>(overlap_total) / static_cast<double>(comm_total) : 0.0;
      std::string who = worst->rank == kUnknown ? std::string("rank ?") : fmt::format("rank {}", worst->rank);
      summary.verdict = fmt::format("{} of communication hidden over {} ranks ({} exposed in total); worst is {}: {}",
                                    FormatPercent(mean), summary.ranks.size(), FormatDuration(exposed_total), who,
                                    worst->verdict);
    }
    return OkStatus();
  }
};

}  // namespace

std::unique_ptr<Analyzer> MakeOverlapAnalyzer() { return std::make_unique<OverlapAnalyzer>(); }

}  // namespace overlapprof
