#include "analyzers/comm_ops.h"

#include <algorithm>
#include <map>
#include <utility>

#include "src/common/memory.h"
#include "src/trace/classify.h"

namespace overlapprof {
namespace {

// An all-to-all that linking assembled from a group of sends and recvs (link.h): one span.
bool GroupedAllToAll(const RankTrace& t, const CommTiming& timing, uint32_t op) {
  return t.comm_ops[op].op == Collective::kAllToAll && timing.group_size[timing.group[op]] > 1;
}

// Spans of the ops the plugin times (CommTiming): one per comm op (per grouped all-to-all),
// from its plugin op's GPU interval; busy and covered over the union of its intervals.
void AddPluginSpans(const RankTrace& t, const IntervalSet& compute, const CommTiming& timing,
                    const std::map<uint32_t, std::pair<int64_t, int64_t>>& group_kernels, std::vector<OpSpan>& spans) {
  std::map<uint32_t, std::vector<Interval>> pieces;  // span key (comm op) -> intervals
  for (uint32_t k : timing.plugin_ops) {
    const NcclPluginOp& p = t.nccl_plugin_ops[k];
    const uint32_t key = GroupedAllToAll(t, timing, p.comm_op) ? timing.group[p.comm_op] : p.comm_op;
    pieces[key].push_back({p.start_ns, p.end_ns});
  }
  for (auto& [key, ivs] : pieces) {
    const CommOp& op = t.comm_ops[key];
    IntervalSet u = IntervalSet::Union(std::move(ivs));
    OpSpan o;
    o.op = key;
    o.collective = op.op;
    o.bytes = op.bytes;
    o.nranks = op.comm_nranks;
    o.stream = op.stream;
    o.launch_ns = op.host_enter_ns;
    o.plugin_timed = true;
    if (u.empty()) {  // zero-length ops: an empty interval at their start
      const NcclPluginOp* first = nullptr;
      for (uint32_t k : timing.plugin_ops)
        if (t.nccl_plugin_ops[k].comm_op == key && !first) first = &t.nccl_plugin_ops[k];
      o.start_ns = o.end_ns = first ? first->start_ns : 0;
    } else {
      o.start_ns = u.intervals().front().start;
      o.end_ns = u.intervals().back().end;
      o.busy_ns = u.Length();
      for (const Interval& iv : u.intervals()) o.covered_ns += compute.LengthWithin(iv.start, iv.end);
    }
    if (auto g = group_kernels.find(timing.group[key]); g != group_kernels.end()) {
      o.kernel_start_ns = g->second.first;
      o.kernel_end_ns = g->second.second;
    }
    spans.push_back(std::move(o));
  }
}

}  // namespace

CommTiming ResolveCommTiming(const RankTrace& t) {
  CommTiming c;
  c.plugin_ops_total = static_cast<int64_t>(t.nccl_plugin_ops.size());
  if (t.nccl_plugin_ops.empty()) return c;
  const size_t n = t.comm_ops.size();
  // Groups: ops sharing a launch id, represented by their lowest index.
  c.group.resize(n);
  std::map<int64_t, uint32_t> first_of_launch;
  for (uint32_t i = 0; i < n; ++i) {
    const int64_t id = t.comm_ops[i].launch_id;
    c.group[i] = id == kUnknown ? i : first_of_launch.emplace(id, i).first->second;
  }
  c.group_size.assign(n, 0);
  for (uint32_t i = 0; i < n; ++i) ++c.group_size[c.group[i]];
  std::vector<uint32_t> timed_op(n, kNoIndex);  // comm op -> its plugin op with GPU times
  for (uint32_t k = 0; k < t.nccl_plugin_ops.size(); ++k) {
    const NcclPluginOp& p = t.nccl_plugin_ops[k];
    if (!p.HasGpuTimes()) continue;
    ++c.plugin_ops_with_times;
    if (p.comm_op < n && timed_op[p.comm_op] == kNoIndex) timed_op[p.comm_op] = k;
  }
  // A group is replaced when every op of it has plugin times.
  std::vector<char> group_ok(n, 1);
  for (uint32_t i = 0; i < n; ++i)
    if (timed_op[i] == kNoIndex) group_ok[c.group[i]] = 0;
  c.replaced.assign(n, false);
  for (uint32_t i = 0; i < n; ++i) {
    if (!group_ok[c.group[i]]) continue;
    c.replaced[i] = true;
    c.plugin_ops.push_back(timed_op[i]);
  }
  // The clock check: one op in its group, one kernel for it.
  std::vector<uint32_t> kernels(n, 0);
  std::vector<int64_t> kernel_start(n, 0);
  for (const Activity& a : t.activities)
    if (a.category == Category::kComm && a.kind == ActivityKind::kKernel && a.comm_op < n) {
      ++kernels[a.comm_op];
      kernel_start[a.comm_op] = a.start_ns;
    }
  std::vector<int64_t> deltas;
  for (uint32_t i = 0; i < n; ++i) {
    if (timed_op[i] == kNoIndex || c.group_size[c.group[i]] != 1 || kernels[i] != 1) continue;
    const int64_t d = t.nccl_plugin_ops[timed_op[i]].start_ns - kernel_start[i];  // both in [0, 2^62)
    deltas.push_back(d);
    if (d > CommTiming::kKernelResidualNs || d < -CommTiming::kKernelResidualNs) ++c.kernel_mismatched;
  }
  c.kernel_checked = static_cast<int64_t>(deltas.size());
  if (!deltas.empty()) {
    std::nth_element(deltas.begin(), deltas.begin() + deltas.size() / 2, deltas.end());
    c.kernel_residual_ns = deltas[deltas.size() / 2];
  }
  c.plugin = !c.plugin_ops.empty();
  if (!c.plugin) c.replaced.clear();
  std::sort(c.plugin_ops.begin(), c.plugin_ops.end(), [&](uint32_t x, uint32_t y) {
    const NcclPluginOp &a = t.nccl_plugin_ops[x], &b = t.nccl_plugin_ops[y];
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : x < y;
  });
  return c;
}

std::vector<OpSpan> CommOpSpans(const RankTrace& t, const IntervalSet& compute, const CommTiming& timing) {
  std::vector<OpSpan> spans;
  ReserveHuge(spans, t.comm_ops.size());  // usually one span per op
  std::vector<uint32_t> span_of_op(t.comm_ops.size(), kNoIndex);
  IntervalSet::Cursor covered(compute);  // activities come in start order
  // Kernels of groups the plugin times: only their bounds are kept (OpSpan::kernel_*_ns).
  std::map<uint32_t, std::pair<int64_t, int64_t>> group_kernels;
  for (uint32_t i = 0; i < t.activities.size(); ++i) {
    const Activity& a = t.activities[i];
    if (a.kind == ActivityKind::kSync || a.category != Category::kComm) continue;
    if (timing.Replaced(a.comm_op)) {
      auto [it, fresh] = group_kernels.emplace(timing.group[a.comm_op], std::pair{a.start_ns, a.end_ns});
      if (!fresh) {
        it->second.first = std::min(it->second.first, a.start_ns);
        it->second.second = std::max(it->second.second, a.end_ns);
      }
      continue;
    }
    const bool claimed = a.comm_op != kNoIndex && a.comm_op < t.comm_ops.size();
    uint32_t s = claimed ? span_of_op[a.comm_op] : kNoIndex;
    if (s == kNoIndex) {
      s = static_cast<uint32_t>(spans.size());
      OpSpan o;
      o.first_activity = i;
      o.start_ns = a.start_ns;
      o.end_ns = a.end_ns;
      o.stream = a.stream;
      o.launch_ns = a.launch_ns;
      if (claimed) {
        const CommOp& op = t.comm_ops[a.comm_op];
        o.op = a.comm_op;
        o.collective = op.op;
        o.bytes = op.bytes;
        o.nranks = op.comm_nranks;
        if (op.host_enter_ns != kUnknown) o.launch_ns = op.host_enter_ns;
        span_of_op[a.comm_op] = s;
      }
      if (o.collective == Collective::kUnknown) o.collective = CollectiveFromKernelName(t.names.Get(a.name_id));
      spans.push_back(std::move(o));
    }
    OpSpan& o = spans[s];
    o.start_ns = std::min(o.start_ns, a.start_ns);
    o.end_ns = std::max(o.end_ns, a.end_ns);
    o.busy_ns += a.end_ns - a.start_ns;
    o.covered_ns += covered.LengthWithin(a.start_ns, a.end_ns);
  }
  if (timing.plugin) AddPluginSpans(t, compute, timing, group_kernels, spans);
  for (OpSpan& o : spans) o.family = OpFamily(o.collective);
  // Spans start at their first activity, so they are in start order already unless plugin
  // spans were added (or the activities were not sorted).
  auto by_start = [](const OpSpan& x, const OpSpan& y) { return x.start_ns < y.start_ns; };
  if (!std::is_sorted(spans.begin(), spans.end(), by_start)) std::stable_sort(spans.begin(), spans.end(), by_start);
  return spans;
}

Collective OpFamily(Collective c) {
  switch (c) {
    case Collective::kSend:
    case Collective::kRecv:
    case Collective::kSendRecv: return Collective::kSendRecv;
    default: break;  // a peer-to-peer memcpy (rule 4) is its own family, apart from p2p kernels
  }
  return c;
}

std::string_view OpFamilyName(Collective family) {
  return family == Collective::kSendRecv ? std::string_view("p2p") : CollectiveName(family);
}

int64_t SizeBytes(const RankTrace& t, const OpSpan& s) {
  if (s.bytes == kUnknown || s.bytes < 0) return kUnknown;
  const bool kineto = s.op != kNoIndex && t.comm_ops[s.op].source == CommSource::kKinetoArgs;
  int64_t n = s.nranks > 0 ? s.nranks : 1, out;
  if (s.collective == Collective::kAllGather || (s.collective == Collective::kReduceScatter && !kineto)) {
    if (__builtin_mul_overflow(s.bytes, n, &out)) return kUnknown;
    return out;
  }
  return s.bytes;
}

double BusFactor(Collective family, int64_t n) {
  if (n < 2) return 1.0;
  const double d = static_cast<double>(n);
  if (family == Collective::kAllReduce) return 2.0 * (d - 1.0) / d;
  if (family == Collective::kAllGather || family == Collective::kReduceScatter) return (d - 1.0) / d;
  return 1.0;
}

}  // namespace overlapprof
