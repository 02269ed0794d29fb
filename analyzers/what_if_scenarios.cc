#include "analyzers/what_if_scenarios.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <regex>

namespace overlapprof::whatif {

namespace {

constexpr std::string_view kForms =
    "expected comm*K, host*K, kernel~REGEX*K, rank=R:median or KNOB=VALUE with KNOB one of ddp.bucket_cap_mb, "
    "ddp.compress, ddp.accumulate, fsdp.prefetch, pp.slowest (docs/what-if.md)";

Status Bad(std::string_view spec, std::string_view what) {
  return MakeError(StatusCode::kInvalidArgument, "--scenario '{}': {}", spec, what);
}

// A finite decimal number, the whole of `s`.
bool ParseNumber(std::string_view s, double& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end && std::isfinite(out);
}

bool ParseInt(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end;
}

Status ParseFactor(std::string_view spec, std::string_view k, double& out) {
  if (!ParseNumber(k, out) || out < 0)
    return Bad(spec, fmt::format("'{}' is not a factor K (a number >= 0, e.g. 0.5)", k));
  return OkStatus();
}

}  // namespace

StatusOr<ScenarioSpec> ParseScenario(std::string_view text) {
  ScenarioSpec sc;
  sc.text = std::string(text);
  if (text.empty()) return MakeError(StatusCode::kInvalidArgument, "--scenario: empty SPEC ({})", kForms);
  if (text.find_first_of(" \t\n\r") != std::string_view::npos) return Bad(text, "spaces are not allowed");
  auto starts = [&](std::string_view p) { return text.substr(0, p.size()) == p; };
  if (starts("comm*")) {
    sc.kind = ScenarioKind::kCommScale;
    OVERLAPPROF_RETURN_IF_ERROR(ParseFactor(text, text.substr(5), sc.factor));
    return sc;
  }
  if (starts("host*")) {
    sc.kind = ScenarioKind::kHostScale;
    OVERLAPPROF_RETURN_IF_ERROR(ParseFactor(text, text.substr(5), sc.factor));
    return sc;
  }
  if (starts("kernel~")) {
    sc.kind = ScenarioKind::kKernelScale;
    const std::string_view rest = text.substr(7);
    const size_t star = rest.rfind('*');
    if (star == std::string_view::npos) return Bad(text, "kernel~REGEX*K: no '*K' after the regex");
    sc.pattern = std::string(rest.substr(0, star));
    if (sc.pattern.empty()) return Bad(text, "kernel~REGEX*K: empty REGEX");
    try {
      std::regex re(sc.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return Bad(text, fmt::format("'{}' is not a valid regex ({})", sc.pattern, e.what()));
    }
    OVERLAPPROF_RETURN_IF_ERROR(ParseFactor(text, rest.substr(star + 1), sc.factor));
    return sc;
  }
  if (starts("rank=")) {
    sc.kind = ScenarioKind::kRankMedian;
    const std::string_view rest = text.substr(5);
    const size_t colon = rest.find(':');
    const std::string_view r = rest.substr(0, colon);
    if (!ParseInt(r, sc.rank) || sc.rank < 0) return Bad(text, fmt::format("'{}' is not a rank (an integer >= 0)", r));
    if (colon == std::string_view::npos) return Bad(text, "rank=R:median: missing ':median'");
    if (rest.substr(colon + 1) != "median")
      return Bad(text, fmt::format("'{}' is not a pace: only 'median' (rank=R:median)", rest.substr(colon + 1)));
    return sc;
  }
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || text.substr(0, eq).find('.') == std::string_view::npos)
    return Bad(text, fmt::format("not a scenario ({})", kForms));
  const std::string_view knob = text.substr(0, eq), value = text.substr(eq + 1);
  if (knob == "ddp.bucket_cap_mb") {
    sc.kind = ScenarioKind::kDdpBucketCap;
    if (!ParseNumber(value, sc.bucket_cap_mb) || sc.bucket_cap_mb <= 0)
      return Bad(text, fmt::format("'{}' is not a bucket size in MiB (a number > 0)", value));
    return sc;
  }
  if (knob == "ddp.compress") {
    sc.kind = ScenarioKind::kDdpCompress;
    if (value == "bf16") sc.compress = CompressType::kBf16;
    else if (value == "fp16") sc.compress = CompressType::kFp16;
    else return Bad(text, fmt::format("'{}' is not a compression: bf16 or fp16", value));
    return sc;
  }
  if (knob == "ddp.accumulate") {
    sc.kind = ScenarioKind::kDdpAccumulate;
    if (!ParseInt(value, sc.accumulate) || sc.accumulate < 1 || sc.accumulate > 1000000)
      return Bad(text, fmt::format("'{}' is not a number of micro-steps (an integer >= 1)", value));
    return sc;
  }
  if (knob == "fsdp.prefetch") {
    sc.kind = ScenarioKind::kFsdpPrefetch;
    if (value != "+1") return Bad(text, fmt::format("'{}' is not a prefetch change: only +1 (one block deeper)", value));
    sc.prefetch_deeper = 1;
    return sc;
  }
  if (knob == "pp.slowest") {
    sc.kind = ScenarioKind::kPpSlowest;
    if (value != "median") return Bad(text, fmt::format("'{}' is not a pace: only 'median' (pp.slowest=median)", value));
    return sc;
  }
  return Bad(text, fmt::format("unknown knob '{}' ({})", knob, kForms));
}

StatusOr<std::vector<ScenarioSpec>> ParseScenarios(const std::vector<std::string>& texts) {
  std::vector<ScenarioSpec> out;
  for (const std::string& t : texts) {
    OVERLAPPROF_ASSIGN_OR_RETURN(ScenarioSpec sc, ParseScenario(t));
    out.push_back(std::move(sc));
  }
  return out;
}

}  // namespace overlapprof::whatif

namespace overlapprof::whatif {

namespace {

bool IsPointToPointOp(Collective op) {
  return op == Collective::kSend || op == Collective::kRecv || op == Collective::kSendRecv || op == Collective::kPeerCopy;
}

// A 32-bit float datatype, as NCCL, PyTorch or the stores name it.
bool IsWideFloat(std::string_view dt) {
  std::string l;
  for (char c : dt) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return l == "float" || l == "float32" || l == "fp32" || l == "f32" || l == "ncclfloat" || l == "ncclfloat32" ||
         l == "torch.float32" || l == "c10::float";
}

int64_t MedianOf(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double MedianOfD(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// A matched collective: its members (slot, task), one per slot, and the last arrival on the
// reference clock.
struct Group {
  std::vector<std::pair<uint32_t, uint32_t>> members;
  int64_t last_ns = 0;
};

// The collectives matched across modeled slots, as RunGraph joins them.
std::vector<Group> MatchedGroups(const ScenarioRun& run) {
  std::map<std::pair<std::string, int64_t>, Group> by_key;
  const auto& ranks = run.graph.ranks();
  for (uint32_t s = 0; s < ranks.size(); ++s) {
    if (!ranks[s].why_not.empty()) continue;
    for (const CollectiveMember& c : ranks[s].collectives) {
      Group& g = by_key[{c.communicator, c.key}];
      if (g.members.empty() || g.members.back().first != s) g.members.emplace_back(s, c.task);
    }
  }
  std::vector<Group> out;
  for (auto& [key, g] : by_key) {
    if (g.members.size() < 2) continue;
    g.last_ns = std::numeric_limits<int64_t>::min();
    for (const auto& [s, t] : g.members) g.last_ns = std::max(g.last_ns, ranks[s].tasks[t].start_ns - run.offsets[s]);
    out.push_back(std::move(g));
  }
  return out;
}

// latency + bytes / bandwidth, fitted by least squares on (bytes, transfer) samples: the MEAN
// transfer at a size, which is what a regrouped bucket's all-reduce is predicted to take (what_if_fit.h's
// fit is the lower envelope, the network's best, used to rescale measured transfers).
struct MeanTransferFit {
  double latency_ns = 0;
  double ns_per_byte = 0;
  size_t samples = 0;
  bool latency_separated = false;  // bytes varied enough to tell latency from bandwidth
  std::string Describe() const {
    const double gbps = ns_per_byte > 0 ? 1.0 / ns_per_byte : 0;  // bytes/ns = GB/s
    if (!latency_separated)
      return fmt::format("bandwidth {:.1f} GB/s fitted on {} all-reduce(s) of one size (latency not separable: 0)",
                         gbps, samples);
    return fmt::format("latency {:.1f} us + bytes / {:.1f} GB/s fitted on {} all-reduce(s)", latency_ns / 1000.0, gbps,
                       samples);
  }
  double Predict(double bytes) const { return latency_ns + bytes * ns_per_byte; }
};

MeanTransferFit FitMeanTransfers(const std::vector<std::pair<double, double>>& xy) {
  MeanTransferFit f;
  f.samples = xy.size();
  if (xy.empty()) return f;
  double mx = 0, my = 0, lo = xy[0].first, hi = xy[0].first;
  for (const auto& [x, y] : xy) {
    mx += x;
    my += y;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  mx /= static_cast<double>(xy.size());
  my /= static_cast<double>(xy.size());
  if (xy.size() >= 2 && hi > 1.1 * lo) {
    double sxx = 0, sxy = 0;
    for (const auto& [x, y] : xy) {
      sxx += (x - mx) * (x - mx);
      sxy += (x - mx) * (y - my);
    }
    const double slope = sxx > 0 ? sxy / sxx : 0;
    if (slope > 0) {
      f.ns_per_byte = slope;
      f.latency_ns = std::max(0.0, my - slope * mx);
      f.latency_separated = true;
      return f;
    }
  }
  f.ns_per_byte = mx > 0 ? my / mx : 0;
  return f;
}

// The modeled slots.
std::vector<uint32_t> Modeled(const ScenarioRun& run) {
  std::vector<uint32_t> out;
  const auto& ranks = run.graph.ranks();
  for (uint32_t s = 0; s < ranks.size(); ++s)
    if (ranks[s].why_not.empty() && ranks[s].Iterations() > 0 && s < run.inputs.size() &&
        run.inputs[s].op.size() == ranks[s].gpu_activity.size())
      out.push_back(s);
  return out;
}

// Per slot: the window index of each GPU task (-1 outside the modeled windows).
size_t WindowOf(const RankModel& m, uint32_t task) {
  auto it = std::upper_bound(m.window_first.begin(), m.window_first.end(), task);
  return static_cast<size_t>(it - m.window_first.begin()) - 1;
}

// One collective kind's members per slot per modeled step (windows 0..steps-1), in start order, and
// each member's transfer (matched: end - last arrival on the reference clock; unmatched: duration).
struct OpTable {
  // [step][slot index in `slots`] -> tasks
  std::vector<std::vector<std::vector<uint32_t>>> tasks;
  std::map<std::pair<uint32_t, uint32_t>, int64_t> transfer;  // (slot, task) -> ns
  std::map<std::pair<uint32_t, uint32_t>, bool> matched;
  std::vector<std::pair<double, double>> samples;  // (bytes, median transfer) per matched group
  size_t count = 0;
};

OpTable TableOf(const ScenarioRun& run, const std::vector<uint32_t>& slots, Collective op) {
  OpTable t;
  const auto& ranks = run.graph.ranks();
  size_t steps = std::numeric_limits<size_t>::max();
  for (uint32_t s : slots) steps = std::min(steps, ranks[s].Iterations());
  if (slots.empty()) steps = 0;
  t.tasks.assign(steps, std::vector<std::vector<uint32_t>>(slots.size()));
  for (size_t i = 0; i < slots.size(); ++i) {
    const uint32_t s = slots[i];
    const RankModel& m = ranks[s];
    const ScenarioRankInputs& in = run.inputs[s];
    for (uint32_t g = 0; g < in.op.size(); ++g) {
      if (in.op[g] != op) continue;
      ++t.count;
      const size_t w = WindowOf(m, g);
      if (w < steps) t.tasks[w][i].push_back(g);
      t.transfer[{s, g}] = m.tasks[g].end_ns - m.tasks[g].start_ns;
    }
  }
  for (const Group& g : MatchedGroups(run)) {
    const auto [s0, t0] = g.members.front();
    if (run.inputs[s0].op.size() <= t0 || run.inputs[s0].op[t0] != op) continue;
    std::vector<int64_t> tr;
    for (const auto& [s, task] : g.members) {
      const int64_t x = std::max<int64_t>(0, ranks[s].tasks[task].end_ns - run.offsets[s] - g.last_ns);
      t.transfer[{s, task}] = x;
      t.matched[{s, task}] = true;
      tr.push_back(x);
    }
    if (run.inputs[s0].bytes[t0] > 0)
      t.samples.emplace_back(static_cast<double>(run.inputs[s0].bytes[t0]), static_cast<double>(MedianOf(tr)));
  }
  if (t.samples.empty())  // nothing matched (one rank): its kernels' durations
    for (uint32_t s : slots)
      for (uint32_t g = 0; g < run.inputs[s].op.size(); ++g)
        if (run.inputs[s].op[g] == op && run.inputs[s].bytes[g] > 0)
          t.samples.emplace_back(static_cast<double>(run.inputs[s].bytes[g]),
                                 static_cast<double>(t.transfer[{s, g}]));
  return t;
}

Status Unsupported(const ScenarioSpec& spec, std::string_view what) {
  return MakeError(StatusCode::kInvalidArgument, "--scenario '{}': {}", spec.text, what);
}

std::vector<std::vector<TaskChange>> EmptyTasks(const ScenarioRun& run) {
  std::vector<std::vector<TaskChange>> t(run.graph.ranks().size());
  for (size_t s = 0; s < t.size(); ++s) t[s].resize(run.graph.ranks()[s].tasks.size());
  return t;
}

// Compute per step of each modeled slot (the sum of its compute durations over its modeled windows).
std::vector<double> ComputePerStep(const ScenarioRun& run, const std::vector<uint32_t>& slots) {
  const std::vector<int64_t> compute = run.graph.ComputeTime();
  std::vector<double> out;
  for (uint32_t s : slots)
    out.push_back(static_cast<double>(compute[s]) / static_cast<double>(run.graph.ranks()[s].window_first.size() - 1));
  return out;
}

// The end time of the backward compute task at which a `frac` share of the step's backward compute
// time is done (rank clock); kUnknown when the step has none.
int64_t BackwardDoneAt(const RankModel& m, const ScenarioRankInputs& in, size_t step, double frac) {
  int64_t total = 0;
  std::vector<uint32_t> bw;
  for (uint32_t g = m.window_first[step]; g < m.window_first[step + 1]; ++g)
    if (g < in.backward.size() && in.backward[g]) {
      bw.push_back(g);
      total += m.tasks[g].end_ns - m.tasks[g].start_ns;
    }
  if (bw.empty()) return kUnknown;
  const double target = frac * static_cast<double>(total) * (1.0 - 1e-9);
  int64_t cum = 0;
  for (uint32_t g : bw) {
    cum += m.tasks[g].end_ns - m.tasks[g].start_ns;
    if (static_cast<double>(cum) >= target) return m.tasks[g].end_ns;
  }
  return m.tasks[bw.back()].end_ns;
}

StatusOr<ScenarioPlan> PlanBucketCap(const ScenarioSpec& spec, const ScenarioRun& run,
                                     const std::vector<uint32_t>& slots) {
  ScenarioPlan plan;
  const OpTable ar = TableOf(run, slots, Collective::kAllReduce);
  if (ar.count == 0) return Unsupported(spec, "the modeled iterations hold no all-reduce (no DDP gradient buckets)");
  const MeanTransferFit fit = FitMeanTransfers(ar.samples);
  if (fit.ns_per_byte <= 0) {
    plan.why_not = "the all-reduces' bytes are not recorded (no latency/bandwidth fit)";
    return plan;
  }
  const auto& ranks = run.graph.ranks();
  Change ch;
  ch.tasks = EmptyTasks(run);
  const double cap = spec.bucket_cap_mb * 1024.0 * 1024.0;
  size_t buckets_new = 0, buckets_old = 0;
  for (size_t k = 0; k < ar.tasks.size(); ++k) {
    const auto& per_slot = ar.tasks[k];
    size_t n = per_slot[0].size();
    for (const auto& v : per_slot)
      if (v.size() != n) {
        plan.why_not = fmt::format("the ranks' modeled step {} holds different numbers of all-reduces", k);
        return plan;
      }
    if (n == 0) continue;
    double total = 0;
    for (uint32_t g : per_slot[0]) {
      const int64_t b = run.inputs[slots[0]].bytes[g];
      if (b <= 0) {
        plan.why_not = "an all-reduce's bytes are not recorded";
        return plan;
      }
      total += static_cast<double>(b);
    }
    // Per slot: the delay from readiness to start (the least over its all-reduces: hook and launch).
    std::vector<int64_t> delay(slots.size(), 0);
    for (size_t i = 0; i < slots.size(); ++i) {
      int64_t d = std::numeric_limits<int64_t>::max();
      for (uint32_t g : per_slot[i]) d = std::min(d, ranks[slots[i]].tasks[g].start_ns - run.inputs[slots[i]].ready_ns[g]);
      delay[i] = std::max<int64_t>(0, d);
      if (BackwardDoneAt(ranks[slots[i]], run.inputs[slots[i]], k, 1.0) == kUnknown) {
        plan.why_not = fmt::format(
            "rank {}: no GPU compute launched inside a host annotation named *backward* (PyTorch's '## backward ##'): "
            "the gradients cannot be placed on the backward kernels",
            run.ranks[slots[i]]);
        return plan;
      }
    }
    // The new buckets in backward order, each ready when its last byte's backward kernel ended on
    // every rank, in FIFO order on the communication stream.
    double prev_end = -1e300, at = 0;
    size_t nb = 0;
    while (at < total) {
      const double next = std::min(total, at + cap);
      double arrive = -1e300;
      for (size_t i = 0; i < slots.size(); ++i) {
        const int64_t done = BackwardDoneAt(ranks[slots[i]], run.inputs[slots[i]], k, next / total);
        arrive = std::max(arrive, static_cast<double>(done + delay[i] - run.offsets[slots[i]]));
      }
      prev_end = std::max(arrive, prev_end) + fit.Predict(next - at);
      at = next;
      ++nb;
    }
    buckets_new += nb;
    buckets_old += n;
    // The trace's all-reduces of this step take 0 but the last, which ends at the new chain's end:
    // its replayed arrival (every rank ready, the earlier ones no longer in the way) is estimated by
    // its readiness.
    double last_ready = -1e300;
    for (size_t i = 0; i < slots.size(); ++i) {
      const uint32_t g = per_slot[i].back();
      last_ready = std::max(
          last_ready, static_cast<double>(run.inputs[slots[i]].ready_ns[g] + delay[i] - run.offsets[slots[i]]));
    }
    for (size_t i = 0; i < slots.size(); ++i)
      for (uint32_t g : per_slot[i]) {
        TaskChange& tc = ch.tasks[slots[i]][g];
        tc.factor = 0;
        if (g == per_slot[i].back()) tc.extra_ns = static_cast<int64_t>(std::llround(prev_end - last_ready));
      }
  }
  if (buckets_old == 0) {
    plan.why_not = "no all-reduce in the modeled steps";
    return plan;
  }
  plan.changes.push_back(std::move(ch));
  plan.weights.push_back(1.0);
  plan.assumptions = fmt::format(
      "gradient all-reduces regrouped in backward order into buckets of {} MiB ({:.1f} per step instead of {:.1f}); "
      "a bucket is ready when the backward compute holding its last byte is done (bytes spread over the backward "
      "kernels in proportion to their time); each timed by {}; the rest of the step unchanged",
      spec.bucket_cap_mb, static_cast<double>(buckets_new) / static_cast<double>(ar.tasks.size()),
      static_cast<double>(buckets_old) / static_cast<double>(ar.tasks.size()), fit.Describe());
  return plan;
}

}  // namespace

ScenarioRankInputs GatherScenarioInputs(const RankTrace& trace, const RankModel& model,
                                        const std::vector<ScenarioSpec>& specs) {
  ScenarioRankInputs in;
  for (const CommOp& op : trace.comm_ops) in.point_to_point = in.point_to_point || IsPointToPointOp(op.op);
  const size_t G = model.gpu_activity.size();
  if (G == 0) return in;
  in.op.assign(G, Collective::kUnknown);
  in.bytes.assign(G, -1);
  in.wide.assign(G, 0);
  in.ready_ns.assign(G, kUnknown);
  in.backward.assign(G, 0);
  const std::vector<Activity>& acts = trace.activities;
  for (size_t g = 0; g < G; ++g) {
    const Activity& a = acts[model.gpu_activity[g]];
    if (a.comm_op == kNoIndex || a.comm_op >= trace.comm_ops.size()) continue;
    const CommOp& op = trace.comm_ops[a.comm_op];
    in.op[g] = op.op;
    in.bytes[g] = op.bytes == kUnknown ? -1 : op.bytes;
    in.wide[g] = IsWideFloat(op.datatype) ? 1 : 0;
  }
  // Readiness of communication tasks: the last non-communication task launched before each.
  std::vector<uint32_t> by_launch;
  for (uint32_t g = 0; g < G; ++g)
    if (acts[model.gpu_activity[g]].launch_ns != kUnknown) by_launch.push_back(g);
  std::stable_sort(by_launch.begin(), by_launch.end(), [&](uint32_t x, uint32_t y) {
    return acts[model.gpu_activity[x]].launch_ns < acts[model.gpu_activity[y]].launch_ns;
  });
  int64_t last_end = kUnknown;
  for (uint32_t g : by_launch) {
    const Activity& a = acts[model.gpu_activity[g]];
    if (a.category == Category::kComm) {
      in.ready_ns[g] = last_end == kUnknown ? a.launch_ns : std::max(a.launch_ns, last_end);
    } else {
      last_end = model.tasks[g].end_ns;
    }
  }
  for (uint32_t g = 0; g < G; ++g)
    if (in.ready_ns[g] == kUnknown) in.ready_ns[g] = model.tasks[g].start_ns;
  // Backward: compute launched inside a host annotation named *backward* (the union of such ranges).
  std::vector<std::pair<int64_t, int64_t>> bw;
  {
    std::map<uint32_t, bool> is_bwd;
    for (const Range& r : trace.ranges) {
      if (r.kind != RangeKind::kAnnotation) continue;
      auto it = is_bwd.find(r.name_id);
      if (it == is_bwd.end()) it = is_bwd.emplace(r.name_id, ContainsNoCase(trace.names.Get(r.name_id), "backward")).first;
      if (it->second) bw.emplace_back(r.start_ns, r.end_ns);
    }
    std::sort(bw.begin(), bw.end());
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (const auto& r : bw) {
      if (!merged.empty() && r.first <= merged.back().second) merged.back().second = std::max(merged.back().second, r.second);
      else merged.push_back(r);
    }
    bw = std::move(merged);
  }
  for (uint32_t g = 0; g < G && !bw.empty(); ++g) {
    const Activity& a = acts[model.gpu_activity[g]];
    if (a.category != Category::kCompute || a.launch_ns == kUnknown) continue;
    auto it = std::upper_bound(bw.begin(), bw.end(), std::make_pair(a.launch_ns, std::numeric_limits<int64_t>::max()));
    if (it != bw.begin() && a.launch_ns <= std::prev(it)->second) in.backward[g] = 1;
  }
  for (const ScenarioSpec& spec : specs) {
    if (spec.kind != ScenarioKind::kKernelScale || in.kernel_match.count(spec.pattern)) continue;
    const std::regex re(spec.pattern, std::regex::ECMAScript);
    std::map<uint32_t, uint8_t> by_name;
    std::vector<uint8_t>& match = in.kernel_match[spec.pattern];
    match.assign(G, 0);
    for (size_t g = 0; g < G; ++g) {
      const uint32_t id = acts[model.gpu_activity[g]].name_id;
      auto it = by_name.find(id);
      if (it == by_name.end()) {
        const std::string_view name = trace.names.Get(id);
        it = by_name.emplace(id, std::regex_search(name.begin(), name.end(), re) ? 1 : 0).first;
      }
      match[g] = it->second;
    }
  }
  return in;
}

StatusOr<ScenarioPlan> PlanScenario(const ScenarioSpec& spec, const ScenarioRun& run) {
  ScenarioPlan plan;
  const auto& ranks = run.graph.ranks();
  if (spec.kind == ScenarioKind::kRankMedian &&
      std::find(run.ranks.begin(), run.ranks.end(), spec.rank) == run.ranks.end()) {
    std::string known;
    for (int64_t r : run.ranks) known += (known.empty() ? "" : ", ") + (r >= 0 ? std::to_string(r) : std::string("?"));
    return Unsupported(spec, fmt::format("rank {} is not in the run (ranks: {})", spec.rank, known));
  }
  const std::vector<uint32_t> slots = Modeled(run);
  if (slots.empty()) {
    plan.why_not = "no rank could be modeled";
    return plan;
  }
  auto one = [&](Change ch) {
    plan.changes.push_back(std::move(ch));
    plan.weights.push_back(1.0);
  };
  auto any_op = [&](Collective op) {
    for (uint32_t s : slots)
      for (Collective c : run.inputs[s].op)
        if (c == op) return true;
    return false;
  };
  switch (spec.kind) {
    case ScenarioKind::kCommScale: {
      bool comm = run.graph.matched_collectives() > 0;
      for (uint32_t s : slots)
        for (const Edge& e : ranks[s].edges) comm = comm || e.kind == EdgeKind::kComm;
      if (!comm) return Unsupported(spec, "the modeled iterations hold no communication");
      Change ch;
      ch.comm_factor = spec.factor;
      one(std::move(ch));
      plan.assumptions = fmt::format(
          "every transfer (and unmatched communication kernel) takes {}x its measured time (uniform scaling); "
          "arrivals at collectives unchanged",
          spec.factor);
      return plan;
    }
    case ScenarioKind::kHostScale: {
      Change ch;
      ch.host_factor = spec.factor;
      one(std::move(ch));
      plan.assumptions = fmt::format(
          "host calls and host gaps between launches take {}x their time; launch latency, synchronizations and the "
          "host time after them kept",
          spec.factor);
      return plan;
    }
    case ScenarioKind::kKernelScale: {
      Change ch;
      ch.tasks = EmptyTasks(run);
      size_t matched = 0;
      for (uint32_t s : slots) {
        auto it = run.inputs[s].kernel_match.find(spec.pattern);
        if (it == run.inputs[s].kernel_match.end()) continue;
        for (size_t g = 0; g < it->second.size() && g < ch.tasks[s].size(); ++g)
          if (it->second[g]) {
            ch.tasks[s][g].factor = spec.factor;
            ++matched;
          }
      }
      if (matched == 0)
        return Unsupported(spec, fmt::format("'{}' matches no GPU task of the modeled iterations", spec.pattern));
      one(std::move(ch));
      plan.assumptions = fmt::format(
          "the {} GPU task(s) whose name matches '{}' take {}x their measured time (a matched collective: its "
          "transfer); what depends on them moves with them",
          matched, spec.pattern, spec.factor);
      return plan;
    }
    case ScenarioKind::kRankMedian:
    case ScenarioKind::kPpSlowest: {
      if (spec.kind == ScenarioKind::kPpSlowest) {
        bool p2p = false;
        for (const ScenarioRankInputs& in : run.inputs) p2p = p2p || in.point_to_point;
        if (!p2p) return Unsupported(spec, "the trace has no point-to-point (send/recv) operations: no pipeline stages");
        plan.why_not =
            "point-to-point sends and receives are not matched across ranks in the model yet: a receive's wait for "
            "the slower stage is kept as measured";
        return plan;
      }
      if (slots.size() < 2) {
        plan.why_not = "fewer than two modeled ranks (no median pace)";
        return plan;
      }
      size_t mine = slots.size();
      for (size_t i = 0; i < slots.size(); ++i)
        if (run.ranks[slots[i]] == spec.rank) mine = i;
      if (mine == slots.size()) {
        plan.why_not = fmt::format("rank {} is not modeled", spec.rank);
        for (uint32_t s = 0; s < ranks.size(); ++s)
          if (run.ranks[s] == spec.rank && !ranks[s].why_not.empty()) plan.why_not += ": " + ranks[s].why_not;
        return plan;
      }
      const std::vector<double> per_step = ComputePerStep(run, slots);
      const double median = MedianOfD(per_step);
      Change ch;
      ch.compute_factor.assign(ranks.size(), 1.0);
      if (per_step[mine] > median && per_step[mine] > 0) ch.compute_factor[slots[mine]] = median / per_step[mine];
      one(std::move(ch));
      plan.assumptions = fmt::format(
          "rank {}'s compute kernels and the host work between its launches at the median rank's pace (compute per "
          "step {:.3f} ms vs the median's {:.3f} ms{}); the others unchanged",
          spec.rank, per_step[mine] / 1e6, median / 1e6, per_step[mine] > median ? "" : ": already no slower");
      return plan;
    }
    case ScenarioKind::kDdpBucketCap:
      return PlanBucketCap(spec, run, slots);
    case ScenarioKind::kDdpCompress: {
      if (!any_op(Collective::kAllReduce)) return Unsupported(spec, "the modeled iterations hold no all-reduce");
      const OpTable ar = TableOf(run, slots, Collective::kAllReduce);
      const MeanTransferFit fit = FitMeanTransfers(ar.samples);
      Change ch;
      ch.tasks = EmptyTasks(run);
      size_t halved = 0;
      for (const auto& [key, transfer] : ar.transfer) {
        const auto [s, g] = key;
        if (!run.inputs[s].wide[g]) continue;
        const double lat = std::min(fit.latency_ns, static_cast<double>(transfer));
        ch.tasks[s][g].extra_ns = -static_cast<int64_t>(std::llround((static_cast<double>(transfer) - lat) / 2));
        ++halved;
      }
      if (halved == 0) {
        plan.why_not = "no all-reduce of 32-bit floats in the modeled iterations (nothing to halve)";
        return plan;
      }
      one(std::move(ch));
      plan.assumptions = fmt::format(
          "the {} all-reduce(s) of 32-bit floats carry half the bytes as {} (transfer = latency + half its bytes' time; "
          "{}); compression kernels not modeled",
          halved, spec.compress == CompressType::kBf16 ? "bf16" : "fp16", fit.Describe());
      return plan;
    }
    case ScenarioKind::kDdpAccumulate: {
      if (!any_op(Collective::kAllReduce)) return Unsupported(spec, "the modeled iterations hold no all-reduce");
      Change without;
      without.tasks = EmptyTasks(run);
      for (uint32_t s : slots)
        for (size_t g = 0; g < run.inputs[s].op.size(); ++g)
          if (run.inputs[s].op[g] == Collective::kAllReduce) {
            without.tasks[s][g].detached = true;
            without.tasks[s][g].factor = 0;  // an unmatched one takes 0
          }
      const double n = static_cast<double>(spec.accumulate);
      plan.changes.push_back(std::move(without));
      plan.weights.push_back((n - 1) / n);
      plan.changes.push_back(Change{});
      plan.weights.push_back(1 / n);
      plan.assumptions = fmt::format(
          "the mean of {} micro-steps: {} without the all-reduces (no transfer, no waiting for the other ranks; the "
          "rest, optimizer included, as measured) and one as measured",
          spec.accumulate, spec.accumulate - 1);
      return plan;
    }
    case ScenarioKind::kFsdpPrefetch: {
      if (!any_op(Collective::kAllGather))
        return Unsupported(spec, "the modeled iterations hold no all-gather (no FSDP parameter prefetch)");
      const OpTable ag = TableOf(run, slots, Collective::kAllGather);
      Change ch;
      ch.tasks = EmptyTasks(run);
      size_t moved = 0;
      for (size_t k = 0; k < ag.tasks.size(); ++k) {
        const auto& per_slot = ag.tasks[k];
        for (size_t i = 0; i < slots.size(); ++i) {
          // Issued one block earlier, all-gather j is issued with all-gather j-1: what held its
          // launch and what it waited for (the compute before it) are then past when j-1 was issued,
          // so it waits only for its stream (all-gather j-1 or what follows it there). The step's
          // first all-gather keeps its place.
          std::vector<uint8_t> has_stream(ranks[slots[i]].tasks.size(), 0);
          for (const Edge& e : ranks[slots[i]].edges)
            if (e.kind == EdgeKind::kStream && e.dst % 2 == 0 && e.dst / 2 < has_stream.size()) has_stream[e.dst / 2] = 1;
          for (size_t j = 1; j < per_slot[i].size(); ++j)
            if (has_stream[per_slot[i][j]]) {
              ch.tasks[slots[i]][per_slot[i][j]].stream_only = true;
              ++moved;
            }
        }
      }
      if (moved == 0) {
        plan.why_not = "no modeled step holds two or more all-gathers";
        return plan;
      }
      one(std::move(ch));
      plan.assumptions =
          "each all-gather but a step's first issued one block earlier: it waits only for its stream (its launch and "
          "the compute before it no longer hold it), keeping its place in the stream's order (behind a reduce-scatter "
          "issued before it) and its measured transfer; the compute waiting for it moves with it";
      return plan;
    }
  }
  return MakeError(StatusCode::kInternal, "--scenario '{}': unknown kind", spec.text);
}

}  // namespace overlapprof::whatif
