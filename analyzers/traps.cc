// The traps that serialize or hide communication (docs/analyzers.md, "Traps"): findings with the
// evidence and the fix, over a rank's steady iterations.
//  - hardware-queue serialization: compute ready to run (launched, its stream idle) while
//    communication ran on another stream, yet started only when that communication ended, and
//    no recorded dependency made it wait (CUDA_DEVICE_MAX_CONNECTIONS=1 named when the job's
//    environment says so);
//  - waited for right after launch: the same, where the trace records the compute stream
//    waiting for the communication stream (cudaStreamWaitEvent);
//  - communication on the compute stream: nothing can overlap it;
//  - NCCL's SM budget: the job sets the channels / CTAs NCCL takes from compute.
// Reads the overlap analyzer's RankDerived (iteration windows, the communication union) and
// RankResult::overlap_env; one pass over the activities, O(n log n).
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "analyzers/analyzer.h"
#include "analyzers/overlap.h"

namespace overlapprof {
namespace {

constexpr std::string_view kName = "traps";
// A rank shows "no overlap" when under this share of its steady communication is hidden.
constexpr double kNoOverlapRatio = 0.05;
// Communication on a compute stream is a trap when at least this share of the steady
// communication time runs there and under half of it is hidden.
constexpr double kOnComputeStreamShare = 0.5;
// Blocked compute must show in at least this share of the steady windows (and at least
// kMinBlockedKernels times), so one odd launch does not make a finding.
constexpr double kBlockedWindowShare = 0.5;
constexpr int64_t kMinBlockedKernels = 3;

// The variables of the job's environment that set NCCL's SM budget (injector/overlap_env.h).
constexpr std::string_view kSmBudgetVars[] = {"NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_MAX_CTAS",
                                              "NCCL_MIN_CTAS",      "NCCL_CTA_POLICY",    "NCCL_NTHREADS"};

// What one rank's steady windows show.
struct StreamEvidence {
  int64_t windows = 0;
  int64_t comm_ns = 0, overlap_ns = 0, wall_ns = 0;  // sums over the steady windows
  int64_t comm_activity_ns = 0;                      // sum of communication activity durations
  int64_t comm_on_compute_stream_ns = 0;             // of those, on a stream that also ran compute
  std::set<uint32_t> comm_streams, compute_streams;
  // Compute kernels ready while communication ran on another stream, started when it ended.
  int64_t blocked = 0, blocked_ns = 0, blocked_windows = 0;
  int64_t waited = 0, waited_ns = 0, waited_windows = 0;  // the same, with a recorded stream wait
};

// (waiting stream, recording stream) pairs of the recorded cudaStreamWaitEvent calls.
std::set<std::pair<uint32_t, uint32_t>> RecordedStreamWaits(const RankTrace& t) {
  std::map<int64_t, uint32_t> recorded_on;  // sync id -> the stream the event was recorded on
  for (const EventLink& e : t.event_links)
    if (e.kind == EventLinkKind::kRecord && e.sync_id != kUnknown) recorded_on.emplace(e.sync_id, e.stream);
  std::set<std::pair<uint32_t, uint32_t>> waits;
  for (const EventLink& e : t.event_links) {
    if (e.kind != EventLinkKind::kStreamWait || e.sync_id == kUnknown) continue;
    if (auto it = recorded_on.find(e.sync_id); it != recorded_on.end()) waits.emplace(e.stream, it->second);
  }
  return waits;
}

StreamEvidence GatherEvidence(const RankTrace& t, const RankDerived& d) {
  StreamEvidence ev;
  std::vector<Interval> windows;
  for (const IterationWindow& w : d.iterations.windows)
    if (!w.warmup && w.end_ns > w.start_ns) windows.push_back({w.start_ns, w.end_ns});
  if (windows.empty()) return ev;  // no steady iterations: no evidence of a pattern
  std::sort(windows.begin(), windows.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  ev.windows = static_cast<int64_t>(windows.size());
  for (const Interval& w : windows) {
    const OverlapFigures f = FiguresFor(d.sets, w.start, w.end);
    ev.comm_ns += f.comm_ns;
    ev.overlap_ns += f.overlap_ns;
    ev.wall_ns += f.wall_ns;
  }
  // The findings below need under half of the communication hidden (under 5% for the blocked
  // kernels): a well-overlapped rank costs no pass over its activities.
  if (ev.comm_ns <= 0 || 2 * ev.overlap_ns >= ev.comm_ns) return ev;
  auto window_of = [&](int64_t start) -> int64_t {
    auto it = std::upper_bound(windows.begin(), windows.end(), start,
                               [](int64_t s, const Interval& w) { return s < w.start; });
    if (it == windows.begin()) return -1;
    --it;
    return start < it->end ? it - windows.begin() : -1;
  };
  // Activities of the steady windows, by stream, in start order.
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < t.activities.size(); ++i) {
    const Activity& a = t.activities[i];
    if (a.stream == kNoIndex || window_of(a.start_ns) < 0) continue;
    if (a.category == Category::kComm && a.kind != ActivityKind::kSync) {
      ev.comm_streams.insert(a.stream);
      order.push_back(i);
    } else if (a.category == Category::kCompute && a.kind == ActivityKind::kKernel) {
      ev.compute_streams.insert(a.stream);
      order.push_back(i);
    }
  }
  for (uint32_t i : order) {
    const Activity& a = t.activities[i];
    if (a.category != Category::kComm) continue;
    ev.comm_activity_ns += a.end_ns - a.start_ns;
    if (ev.compute_streams.count(a.stream)) ev.comm_on_compute_stream_ns += a.end_ns - a.start_ns;
  }
  if (static_cast<double>(ev.overlap_ns) >= kNoOverlapRatio * static_cast<double>(ev.comm_ns)) return ev;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    const Activity &a = t.activities[x], &b = t.activities[y];
    return a.stream != b.stream ? a.stream < b.stream : a.start_ns < b.start_ns;
  });
  const std::set<std::pair<uint32_t, uint32_t>> waits = RecordedStreamWaits(t);
  const std::vector<Interval>& comm = d.sets.comm.intervals();
  std::vector<uint8_t> blocked_in(windows.size(), 0), waited_in(windows.size(), 0);
  int64_t prev_end = 0;
  uint32_t prev_stream = kNoIndex;
  for (uint32_t i : order) {
    const Activity& a = t.activities[i];
    const int64_t stream_free = a.stream == prev_stream ? prev_end : 0;
    prev_end = a.stream == prev_stream ? std::max(prev_end, a.end_ns) : a.end_ns;
    prev_stream = a.stream;
    // A compute kernel on a stream that runs no communication, with a known launch.
    if (a.category != Category::kCompute || a.launch_ns == kUnknown || ev.comm_streams.count(a.stream)) continue;
    const int64_t ready = std::max(a.launch_ns, stream_free);
    if (ready >= a.start_ns) continue;  // it did not wait
    // The communication interval running when it became ready; it started once that ended.
    const size_t k = d.sets.comm.FirstEndingAfter(ready);
    if (k >= comm.size() || comm[k].start > ready || a.start_ns < comm[k].end) continue;
    const int64_t w = window_of(a.start_ns);
    if (w < 0) continue;
    bool recorded_wait = false;
    for (uint32_t s : ev.comm_streams) recorded_wait |= waits.count({a.stream, s}) > 0;
    if (recorded_wait) {
      ++ev.waited;
      ev.waited_ns += a.start_ns - ready;
      waited_in[w] = 1;
    } else {
      ++ev.blocked;
      ev.blocked_ns += a.start_ns - ready;
      blocked_in[w] = 1;
    }
  }
  for (size_t w = 0; w < windows.size(); ++w) {
    ev.blocked_windows += blocked_in[w];
    ev.waited_windows += waited_in[w];
  }
  return ev;
}

std::string StreamNames(const RankTrace& t, const std::set<uint32_t>& streams) {
  std::string out;
  size_t n = 0;
  for (uint32_t s : streams) {
    if (n == 3) {
      out += fmt::format(" and {} more", streams.size() - 3);
      break;
    }
    const int64_t id = s < t.streams.size() ? t.streams[s].native_id : kUnknown;
    out += (n++ ? ", " : "") + (id == kUnknown ? std::string("?") : std::to_string(id));
  }
  return out;
}

class TrapsAnalyzer : public Analyzer {
 public:
  std::string_view name() const override { return kName; }

  Status AnalyzeRank(const RankTrace& t, size_t rank_index, const AnalysisOptions&, Summary& summary) override {
    const RankDerived* d = summary.current.get();
    if (!d || d->rank_index != rank_index || rank_index >= summary.ranks.size())
      return MakeError(StatusCode::kInternal, "traps: no derived data");
    const RankResult& r = summary.ranks[rank_index];
    const StreamEvidence ev = GatherEvidence(t, *d);
    if (ev.windows > 0 && ev.comm_ns > 0) {
      AddSerializationFinding(t, r, ev, summary);
      AddComputeStreamFinding(t, r, ev, summary);
    }
    AddSmBudgetFinding(r, ev, summary);
    return OkStatus();
  }

 private:
  static bool Persistent(int64_t kernels, int64_t windows_with, int64_t windows) {
    return kernels >= kMinBlockedKernels && windows_with >= kBlockedWindowShare * static_cast<double>(windows);
  }

  // Hardware-queue serialization, or a wait right after launch when the trace records it.
  static void AddSerializationFinding(const RankTrace& t, const RankResult& r, const StreamEvidence& ev,
                                      Summary& summary) {
    const double hidden = static_cast<double>(ev.overlap_ns) / static_cast<double>(ev.comm_ns);
    if (hidden >= kNoOverlapRatio) return;
    const std::string per_step = FormatDuration(ev.comm_ns / ev.windows);
    if (Persistent(ev.blocked, ev.blocked_windows, ev.windows)) {
      std::string cause;
      const std::string* conn = nullptr;
      if (r.overlap_env) {
        auto it = r.overlap_env->find("CUDA_DEVICE_MAX_CONNECTIONS");
        if (it != r.overlap_env->end()) conn = &it->second;
      }
      if (conn && *conn == "1")
        cause = "the job sets CUDA_DEVICE_MAX_CONNECTIONS=1: every stream shares one hardware queue, so work "
                "launched after a collective waits for it whatever its stream; unset it (or raise it) for the "
                "data-parallel part, or launch the compute before the collective (Megatron's tensor-parallel "
                "overlap needs 1: keep it only where that overlap is used)";
      else if (r.overlap_env)
        cause = fmt::format("the job {} CUDA_DEVICE_MAX_CONNECTIONS{}, and no recorded dependency made it wait: "
                            "check for a dependency the trace does not record (a wait on the collective's work "
                            "or event right after its launch)",
                            conn ? "sets" : "does not set", conn ? "=" + *conn : std::string());
      else
        cause = "no dependency the trace records made it wait: either one hardware queue serializes the streams "
                "(CUDA_DEVICE_MAX_CONNECTIONS=1: unset or raise it unless tensor-parallel overlap needs it) or the "
                "compute waits on the collective right after its launch (work.wait() or an event): launch it "
                "later, or wait only where the result is used";
      summary.AddFinding(
          kName, r.rank, Severity::kWarning,
          fmt::format("communication and compute never run at the same time ({:.1f}% of {} communication per step "
                      "hidden) although they use different streams (communication on {}, compute on {}): {} compute "
                      "kernels in {} of {} steady iterations were launched, their stream idle, while communication "
                      "ran, and started only when it ended ({} per step waiting); {}",
                      100 * hidden, per_step, StreamNames(t, ev.comm_streams), StreamNames(t, ev.compute_streams),
                      ev.blocked, ev.blocked_windows, ev.windows, FormatDuration(ev.blocked_ns / ev.windows), cause));
    }
    if (Persistent(ev.waited, ev.waited_windows, ev.windows)) {
      summary.AddFinding(
          kName, r.rank, Severity::kWarning,
          fmt::format("communication is waited for right after its launch: {:.1f}% of {} communication per step "
                      "hidden; {} compute kernels in {} of {} steady iterations were ready while it ran but their "
                      "stream waits (cudaStreamWaitEvent, recorded) for the communication stream ({} per step "
                      "waiting): nothing can overlap it; wait only where the result is used (launch independent "
                      "compute before the wait, e.g. the next bucket's backward or the next layer's prefetch)",
                      100 * hidden, per_step, ev.waited, ev.waited_windows, ev.windows,
                      FormatDuration(ev.waited_ns / ev.windows)));
    }
  }

  // Communication on a stream that also runs compute: it cannot overlap that compute.
  static void AddComputeStreamFinding(const RankTrace& t, const RankResult& r, const StreamEvidence& ev,
                                      Summary& summary) {
    if (ev.comm_activity_ns <= 0) return;
    const double share = static_cast<double>(ev.comm_on_compute_stream_ns) / static_cast<double>(ev.comm_activity_ns);
    const double hidden = static_cast<double>(ev.overlap_ns) / static_cast<double>(ev.comm_ns);
    if (share < kOnComputeStreamShare || hidden >= 0.5) return;
    std::set<uint32_t> shared;
    std::set_intersection(ev.comm_streams.begin(), ev.comm_streams.end(), ev.compute_streams.begin(),
                          ev.compute_streams.end(), std::inserter(shared, shared.begin()));
    summary.AddFinding(
        kName, r.rank, Severity::kWarning,
        fmt::format("{:.0f}% of communication time runs on a stream that also runs compute (stream {}): a stream "
                    "runs one kernel after another, so nothing on it can overlap that communication ({:.1f}% of {} "
                    "per step hidden); launch the collectives on a separate stream (async_op=True, or the process "
                    "group's own stream) where the compute after them does not need their result",
                    100 * share, StreamNames(t, shared), 100 * hidden, FormatDuration(ev.comm_ns / ev.windows)));
  }

  // The job sets how many SMs NCCL takes from compute.
  static void AddSmBudgetFinding(const RankResult& r, const StreamEvidence& ev, Summary& summary) {
    if (!r.overlap_env) return;
    std::string set;
    for (std::string_view v : kSmBudgetVars)
      if (auto it = r.overlap_env->find(std::string(v)); it != r.overlap_env->end())
        set += fmt::format("{}{}={}", set.empty() ? "" : ", ", v, it->second);
    if (set.empty()) return;
    std::string measured = "no steady communication to weigh it against";
    if (ev.windows > 0 && ev.comm_ns > 0)
      measured = fmt::format("here communication takes {} per step, {:.1f}% of it hidden under compute",
                             FormatDuration(ev.comm_ns / ev.windows),
                             100.0 * static_cast<double>(ev.overlap_ns) / static_cast<double>(ev.comm_ns));
    summary.AddFinding(
        kName, r.rank, Severity::kInfo,
        fmt::format("the job sets NCCL's SM budget ({}): each channel is a thread block NCCL holds while a collective "
                    "runs, SMs the overlapped compute loses; fewer channels slow each collective (more exposed), "
                    "more channels slow the compute under it; {}: compare the step time across settings",
                    set, measured));
  }
};

}  // namespace

std::unique_ptr<Analyzer> MakeTrapsAnalyzer() { return std::make_unique<TrapsAnalyzer>(); }

}  // namespace overlapprof
