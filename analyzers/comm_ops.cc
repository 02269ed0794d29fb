#include "analyzers/comm_ops.h"

#include <algorithm>

#include "src/trace/classify.h"

namespace overlapprof {

std::vector<OpSpan> CommOpSpans(const RankTrace& t, const IntervalSet& compute) {
  std::vector<OpSpan> spans;
  std::vector<uint32_t> span_of_op(t.comm_ops.size(), kNoIndex);
  for (uint32_t i = 0; i < t.activities.size(); ++i) {
    const Activity& a = t.activities[i];
    if (a.kind == ActivityKind::kSync || a.category != Category::kComm) continue;
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
        o.op_name = op.op;
        o.bytes = op.bytes;
        o.nranks = op.comm_nranks;
        if (op.host_enter_ns != kUnknown) o.launch_ns = op.host_enter_ns;
        span_of_op[a.comm_op] = s;
      }
      if (o.op_name.empty()) o.op_name = CollectiveFromKernelName(t.names.Get(a.name_id));
      spans.push_back(std::move(o));
    }
    OpSpan& o = spans[s];
    o.start_ns = std::min(o.start_ns, a.start_ns);
    o.end_ns = std::max(o.end_ns, a.end_ns);
    o.busy_ns += a.end_ns - a.start_ns;
    o.covered_ns += compute.LengthWithin(a.start_ns, a.end_ns);
  }
  // Family per distinct op name (a handful per trace), not per op.
  std::string last_name, last_family;
  for (OpSpan& o : spans) {
    if (o.op_name != last_name || last_family.empty()) {
      last_name = o.op_name;
      last_family = OpFamily(o.op_name);
    }
    o.family = last_family;
  }
  std::stable_sort(spans.begin(), spans.end(), [](const OpSpan& x, const OpSpan& y) { return x.start_ns < y.start_ns; });
  return spans;
}

std::string OpFamily(std::string_view n) {
  auto has = [&](std::string_view k) { return n.find(k) != std::string_view::npos; };
  if (n == "p2p_copy") return "p2p_copy";  // a peer-to-peer memcpy (rule 4), shown apart from p2p kernels
  if (has("allreduce") || has("all_reduce")) return "allreduce";
  if (has("allgather") || has("all_gather")) return "allgather";
  if (has("reducescatter") || has("reduce_scatter")) return "reducescatter";
  if (has("alltoall") || has("all_to_all")) return "alltoall";
  if (has("broadcast") || has("bcast")) return "broadcast";
  if (has("send") || has("recv") || has("sendrecv") || has("p2p")) return "p2p";
  if (has("reduce")) return "reduce";
  return n.empty() ? "other" : std::string(n);
}

int64_t SizeBytes(const RankTrace& t, const OpSpan& s) {
  if (s.bytes == kUnknown || s.bytes < 0) return kUnknown;
  const std::string& fam = s.family.empty() ? OpFamily(s.op_name) : s.family;
  const bool kineto = s.op != kNoIndex && t.comm_ops[s.op].source == CommSource::kKinetoArgs;
  int64_t n = s.nranks > 0 ? s.nranks : 1, out;
  if (fam == "allgather" || (fam == "reducescatter" && !kineto)) {
    if (__builtin_mul_overflow(s.bytes, n, &out)) return kUnknown;
    return out;
  }
  return s.bytes;
}

double BusFactor(std::string_view family, int64_t n) {
  if (n < 2) return 1.0;
  const double d = static_cast<double>(n);
  if (family == "allreduce") return 2.0 * (d - 1.0) / d;
  if (family == "allgather" || family == "reducescatter") return (d - 1.0) / d;
  return 1.0;
}

}  // namespace overlapprof
