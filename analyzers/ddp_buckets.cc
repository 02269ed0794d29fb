// DDP gradient buckets (docs/analyzers.md "DDP buckets"): each all-reduce launched during
// backward is a bucket. Per bucket: size, host launch relative to the start of backward,
// queueing (GPU start minus host launch), duration, bus bandwidth, overlapped fraction, exposed
// time. Per iteration: the tail (communication after the last backward compute kernel) and the
// time compute waits on communication before the next compute. Findings with numbers.
//
// Backward is the host range of an annotation whose name contains "backward" (PyTorch's
// "## backward ##" record_function, an NVTX range); without one, every all-reduce of an
// iteration is a bucket and launch times are relative to the iteration's first launch.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "analyzers/analyzer.h"
#include "analyzers/overlap.h"

namespace overlapprof {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kMaxBucketRows = 20000;  // JSON rows; figures use every bucket


Json R4(double v) { return std::round(v * 10000.0) / 10000.0; }
Json R3(double v) { return std::round(v * 1000.0) / 1000.0; }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Outermost host ranges named *backward*, by start: where gradient buckets are launched.
struct BackwardRanges {
  std::vector<std::pair<int64_t, int64_t>> ranges;  // host [start, end]

  bool annotated() const { return !ranges.empty(); }
  // Index of the range holding host time t, or -1.
  int64_t RangeOf(int64_t host_t) const {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), host_t,
                               [](int64_t v, const std::pair<int64_t, int64_t>& r) { return v < r.first; });
    if (it == ranges.begin()) return -1;
    --it;
    return host_t <= it->second ? it - ranges.begin() : -1;
  }
};

BackwardRanges FindBackwardRanges(const RankTrace& t) {
  BackwardRanges bwd;
  std::vector<int8_t> is_bwd(t.names.size(), -1);  // by name id: names repeat, test each once
  for (const Range& r : t.ranges) {
    if (r.kind != RangeKind::kAnnotation || r.name_id >= is_bwd.size()) continue;
    int8_t& b = is_bwd[r.name_id];
    if (b < 0) b = ContainsNoCase(t.names.Get(r.name_id), "backward");
    if (!b) continue;
    if (!bwd.ranges.empty() && r.start_ns < bwd.ranges.back().second) continue;  // nested or overlapping: keep the outer
    bwd.ranges.emplace_back(r.start_ns, r.end_ns);
  }
  return bwd;
}

// The buckets of one backward pass (annotated), or of one iteration.
struct BucketGroup {
  int64_t iteration = kUnknown;
  int64_t host_start = kUnknown, host_end = kUnknown;  // backward host range (annotated)
  std::vector<const OpSpan*> buckets;                  // by GPU start (after GroupBuckets)
  int64_t first_launch = INT64_MAX;
};

// Groups the all-reduces: by backward range when annotated (those launched outside every range
// are not buckets), else by iteration window. Key: range index, or iteration index.
std::map<int64_t, BucketGroup> GroupBuckets(const RankDerived& d, const BackwardRanges& bwd) {
  const auto& windows = d.iterations.windows;
  const bool annotated = bwd.annotated();
  std::map<int64_t, BucketGroup> groups;
  for (const OpSpan& o : d.ops) {
    if (o.collective != Collective::kAllReduce) continue;
    int64_t key;
    if (annotated) {
      if (o.launch_ns == kUnknown) continue;
      key = bwd.RangeOf(o.launch_ns);
      if (key < 0) continue;  // not launched during backward: not a gradient bucket
    } else {
      key = IterationAt(windows, o.start_ns);
      if (key == kUnknown) key = 0;
    }
    BucketGroup& g = groups[key];
    if (g.buckets.empty()) {
      g.iteration = IterationAt(windows, o.start_ns);
      if (annotated) g.host_start = bwd.ranges[key].first, g.host_end = bwd.ranges[key].second;
    }
    g.buckets.push_back(&o);
    if (o.launch_ns != kUnknown) g.first_launch = std::min(g.first_launch, o.launch_ns);
  }
  for (auto& [key, g] : groups)
    std::sort(g.buckets.begin(), g.buckets.end(),
              [](const OpSpan* a, const OpSpan* b) { return a->start_ns < b->start_ns; });
  return groups;
}

// GPU span of the compute kernels launched inside each backward host range.
struct BackwardCompute {
  int64_t first_start = INT64_MAX, last_end = INT64_MIN;
};

std::vector<BackwardCompute> FindBackwardCompute(const RankTrace& t, const BackwardRanges& bwd) {
  std::vector<BackwardCompute> bc(bwd.ranges.size());
  if (!bwd.annotated()) return bc;
  for (const Activity& a : t.activities) {
    if (a.category != Category::kCompute || a.kind != ActivityKind::kKernel || a.launch_ns == kUnknown) continue;
    int64_t k = bwd.RangeOf(a.launch_ns);
    if (k < 0) continue;
    bc[k].first_start = std::min(bc[k].first_start, a.start_ns);
    bc[k].last_end = std::max(bc[k].last_end, a.end_ns);
  }
  return bc;
}

// What the findings are decided on, over a rank's steady (non-warm-up) groups.
struct SteadyFigures {
  std::vector<double> first_fraction, tails, tail_fraction, small_counts, volume_ratio;
  double best_busbw = 0, small_busbw_sum = 0;
  int64_t small_n = 0, groups_counted = 0;
};

class DdpBucketsAnalyzer : public PreparingAnalyzer {
  struct Prepared : RankWork {
    std::shared_ptr<const RankDerived> derived;  // what `groups` point into
    BackwardRanges bwd;
    std::map<int64_t, BucketGroup> groups;
    std::vector<BackwardCompute> bc;
  };

 public:
  std::string_view name() const override { return "ddp_buckets"; }
  TraceNeeds needs(const AnalysisOptions&) const override { return {.host_calls = false, .annotations = true}; }

  // The buckets grouped, and backward's compute (a pass over every activity).
  std::unique_ptr<RankWork> PrepareRank(RankPrep& rank, const AnalysisOptions&) const override {
    if (!rank.derived || rank.derived->rank_index != rank.rank_index) return nullptr;
    auto p = std::make_unique<Prepared>();
    p->derived = rank.derived;
    p->bwd = FindBackwardRanges(rank.trace);
    p->groups = GroupBuckets(*p->derived, p->bwd);
    if (!p->groups.empty()) p->bc = FindBackwardCompute(rank.trace, p->bwd);
    return p;
  }

  Status AnalyzeRank(const RankTrace& t, size_t rank_index, const AnalysisOptions& options,
                     std::unique_ptr<RankWork> prepared, Summary& summary) override {
    const RankDerived* d = summary.current.get();
    if (!d || d->rank_index != rank_index) return MakeError(StatusCode::kInternal, "ddp_buckets: no derived data");
    auto* p = dynamic_cast<Prepared*>(prepared.get());
    if (!p || p->derived.get() != d) {  // not prepared (or from other data): now
      RankPrep rank{t, rank_index, summary.current};
      prepared = PrepareRank(rank, options);
      p = static_cast<Prepared*>(prepared.get());
    }
    const BackwardRanges& bwd = p->bwd;
    // The sections exist (possibly empty) for every run, so the JSON shape is stable.
    // (ordered_json keeps keys in a vector: create both before taking references.)
    Section(summary, "buckets");
    Section(summary, "bucket_stalls");
    const std::map<int64_t, BucketGroup>& groups = p->groups;
    if (groups.empty()) return OkStatus();
    const std::vector<BackwardCompute>& bc = p->bc;
    Json& rows = summary.Section("buckets");
    Json& stalls = summary.Section("bucket_stalls");
    SteadyFigures steady;
    for (const auto& [key, g] : groups) {
      const bool warm = g.iteration != kUnknown && d->iterations.windows[g.iteration].warmup;
      const int64_t bucket_comm = AddBucketRows(t, *d, g, bwd.annotated(), warm, rows, steady);
      stalls.push_back(StallRow(*d, g, bwd.annotated() ? &bc[key] : nullptr, bucket_comm, warm, steady));
    }
    if (dropped_rows_ > 0) summary.Section("buckets_truncated") = dropped_rows_;
    AddRankFindings(d->rank, bwd.annotated(), steady, summary);
    return OkStatus();
  }

 private:
  // One row per bucket of the group (up to kMaxBucketRows over the run); bandwidth figures and
  // the first launch into `steady` unless warm. Returns the group's bucket communication time.
  int64_t AddBucketRows(const RankTrace& t, const RankDerived& d, const BucketGroup& g, bool annotated, bool warm,
                        Json& rows, SteadyFigures& steady) {
    const Json rank_json = d.rank == kUnknown ? Json(nullptr) : Json(d.rank);
    const int64_t origin = annotated ? g.host_start : g.first_launch;
    const int64_t bwd_len = annotated ? g.host_end - g.host_start : 0;
    int64_t bucket_comm = 0, first_fraction_ns = kUnknown, small_here = 0;
    for (size_t i = 0; i < g.buckets.size(); ++i) {
      const OpSpan& o = *g.buckets[i];
      const int64_t size = SizeBytes(t, o);
      const double factor = BusFactor(Collective::kAllReduce, o.nranks);
      const double busbw = size != kUnknown && o.busy_ns > 0 ? size * factor / o.busy_ns : 0.0;
      bucket_comm += o.busy_ns;
      if (!warm && size != kUnknown && o.busy_ns > 0) {
        steady.best_busbw = std::max(steady.best_busbw, busbw);
        if (size < (int64_t{1} << 20)) ++small_here, steady.small_busbw_sum += busbw, ++steady.small_n;
      }
      const bool launched = o.launch_ns != kUnknown && origin != INT64_MAX;
      if (i == 0 && launched) first_fraction_ns = o.launch_ns - origin;
      if (rows.size() < kMaxBucketRows) {
        JsonRow j(14);
        j.Add("rank", rank_json)
            .Add("iteration", g.iteration == kUnknown ? Json(nullptr) : Json(g.iteration))
            .Add("warmup", warm)
            .Add("index", static_cast<int64_t>(i))
            .Add("op", std::string(CollectiveName(o.collective)))
            .Add("bytes", size == kUnknown ? Json(nullptr) : Json(size))
            .Add("launch_offset_ns", launched ? Json(o.launch_ns - origin) : Json(nullptr))
            .Add("launch_fraction", launched && bwd_len > 0 ? R4(double(o.launch_ns - origin) / bwd_len) : Json(nullptr))
            .Add("queue_ns", o.launch_ns != kUnknown ? Json(o.start_ns - o.launch_ns) : Json(nullptr))
            .Add("start_ns", o.start_ns)
            .Add("duration_ns", o.busy_ns)
            .Add("busbw_GBps", busbw > 0 ? R3(busbw) : Json(nullptr))
            .Add("overlap_fraction", o.busy_ns > 0 ? R4(double(o.covered_ns) / o.busy_ns) : Json(nullptr))
            .Add("exposed_ns", o.exposed_ns());
        rows.push_back(std::move(j).Take());
      } else {
        ++dropped_rows_;
      }
    }
    if (!warm) {
      ++steady.groups_counted;
      steady.small_counts.push_back(static_cast<double>(small_here));
      if (first_fraction_ns != kUnknown && bwd_len > 0)
        steady.first_fraction.push_back(double(first_fraction_ns) / bwd_len);
    }
    return bucket_comm;
  }

  // The group's `bucket_stalls` row: backward compute, the tail after the last backward compute
  // kernel (`bc`: from the annotation; null without one) and what compute then waits for.
  static Json StallRow(const RankDerived& d, const BucketGroup& g, const BackwardCompute* bc, int64_t bucket_comm,
                       bool warm, SteadyFigures& steady) {
    const IntervalSet& compute = d.sets.compute;
    const bool annotated = bc != nullptr;
    int64_t last_end = INT64_MIN;
    for (const OpSpan* o : g.buckets) last_end = std::max(last_end, o->end_ns);
    int64_t bwd_end = kUnknown, bwd_compute = kUnknown;
    if (bc && bc->last_end != INT64_MIN) {
      bwd_end = bc->last_end;
      bwd_compute = compute.LengthWithin(bc->first_start, bc->last_end);
    }
    JsonRow s(9);
    s.Add("rank", d.rank == kUnknown ? Json(nullptr) : Json(d.rank))
        .Add("iteration", g.iteration == kUnknown ? Json(nullptr) : Json(g.iteration))
        .Add("warmup", warm)
        .Add("buckets", static_cast<int64_t>(g.buckets.size()))
        .Add("bucket_comm_ns", bucket_comm)
        .Add("backward_host_ns", annotated ? Json(g.host_end - g.host_start) : Json(nullptr))
        .Add("backward_compute_ns", bwd_compute == kUnknown ? Json(nullptr) : Json(bwd_compute));
    if (bwd_end == kUnknown) {
      s.Add("tail_ns", nullptr).Add("compute_wait_ns", nullptr);
      return std::move(s).Take();
    }
    const int64_t tail = std::max<int64_t>(0, last_end - bwd_end);
    // Compute waits: from the end of backward compute to the next compute kernel, the time
    // communication runs (the optimizer, or the next forward, waits on the last buckets).
    const auto& iv = compute.intervals();
    auto nx = std::lower_bound(iv.begin(), iv.end(), bwd_end, [](const Interval& x, int64_t v) { return x.start < v; });
    const int64_t next = nx != iv.end() ? nx->start : last_end;
    const int64_t wait = next > bwd_end ? d.sets.comm.LengthWithin(bwd_end, next) : 0;
    s.Add("tail_ns", tail).Add("compute_wait_ns", wait);
    if (!warm) {
      steady.tails.push_back(static_cast<double>(tail));
      if (bucket_comm > 0) steady.tail_fraction.push_back(double(tail) / bucket_comm);
      if (bwd_compute > 0) steady.volume_ratio.push_back(double(bucket_comm) / bwd_compute);
    }
    return std::move(s).Take();
  }

  // Findings over the steady iterations (medians); the volume one waits for Finish.
  void AddRankFindings(int64_t rank, bool annotated, const SteadyFigures& f, Summary& summary) {
    if (f.groups_counted == 0) return;
    if (!annotated)
      summary.AddFinding("ddp_buckets", rank, Severity::kInfo,
                         "no backward annotation: every all-reduce is taken as a gradient bucket and launch times are "
                         "relative to the iteration's first all-reduce (wrap backward in record_function(\"## backward ##\") "
                         "or an NVTX range for launch-vs-backward figures)");
    if (!f.first_fraction.empty() && Median(f.first_fraction) > 0.5)
      summary.AddFinding("ddp_buckets", rank, Severity::kWarning,
                         fmt::format("first gradient bucket launched at {:.0f}% of backward: bucket_cap_mb is too large "
                                     "for this model, so communication starts late; try a smaller bucket_cap_mb",
                                     100 * Median(f.first_fraction)));
    const double small = Median(f.small_counts);
    if (small >= 3 && f.small_n > 0 && f.best_busbw > 0 && f.small_busbw_sum / f.small_n < 0.25 * f.best_busbw)
      summary.AddFinding("ddp_buckets", rank, Severity::kWarning,
                         fmt::format("{:.0f} buckets under 1 MiB per iteration run at latency-bound bandwidth ({:.1f} GB/s "
                                     "bus bandwidth against {:.1f} GB/s for the best bucket): fewer, larger buckets "
                                     "(bucket_cap_mb) or fusing small parameters would help",
                                     small, f.small_busbw_sum / f.small_n, f.best_busbw));
    // Volume: decided in Finish, once the cross-rank analyzer has said how much of this rank's
    // communication time is waiting for other ranks rather than transfer.
    if (!f.volume_ratio.empty()) volume_.push_back({rank, Median(f.volume_ratio)});
    if (!f.tail_fraction.empty() && Median(f.tail_fraction) > 0.1)
      summary.AddFinding("ddp_buckets", rank, Severity::kWarning,
                         fmt::format("{} of gradient communication per iteration ({:.0f}%) runs after the last backward "
                                     "kernel (tail): the optimizer waits on it; smaller last buckets or launching buckets "
                                     "earlier shorten it",
                                     FormatDuration(static_cast<int64_t>(Median(f.tails))), 100 * Median(f.tail_fraction)));
  }

 public:
  static Json& Section(Summary& s, const char* key) {
    Json& j = s.Section(key);
    if (!j.is_array()) j = Json::array();
    return j;
  }
  Status Finish(const AnalysisOptions&, Summary& summary) override {
    // Per rank: the share of its collective kernel time spent waiting for the last rank.
    std::map<int64_t, double> wait_share;
    if (summary.cross_rank) {
      for (const CrossRankRow& r : summary.cross_rank->ranks) {
        const double w = static_cast<double>(r.wait_ns), x = static_cast<double>(r.transfer_ns);
        if (w + x > 0) wait_share[r.rank] = w / (w + x);
      }
    }
    for (const auto& [rank, ratio_with_wait] : volume_) {
      auto it = wait_share.find(rank);
      const double share = it != wait_share.end() ? it->second : 0.0;
      const double ratio = ratio_with_wait * (1.0 - share);
      if (ratio <= 1.0) continue;
      summary.AddFinding(
          "ddp_buckets", rank, Severity::kWarning,
          fmt::format("gradient communication exceeds backward compute ({:.2f}x{}): overlap can hide at most {:.0f}% of "
                      "it; reduce the volume (bf16/fp16 compression hook, gradient accumulation with no_sync, a larger "
                      "batch per GPU)",
                      ratio, share >= 0.05 ? fmt::format(", not counting the {:.0f}% spent waiting for other ranks", 100 * share)
                                           : std::string(),
                      100.0 / ratio));
    }
    return OkStatus();
  }

 private:
  int64_t dropped_rows_ = 0;
  std::vector<std::pair<int64_t, double>> volume_;  // (rank, median bucket comm / backward compute)
};

}  // namespace

std::unique_ptr<Analyzer> MakeDdpBucketsAnalyzer() { return std::make_unique<DdpBucketsAnalyzer>(); }

}  // namespace overlapprof
