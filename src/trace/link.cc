#include "src/trace/link.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace overlapprof {

void LinkInjectorRecords(RankTrace& t) {
  std::unordered_map<int64_t, int64_t> launch_of;  // correlation id -> host call start
  launch_of.reserve(t.host_calls.size());
  for (const HostCall& h : t.host_calls)
    if (h.correlation_id != kUnknown) launch_of.emplace(h.correlation_id, h.start_ns);
  std::unordered_map<int64_t, int64_t> external_of;  // correlation id -> external id
  external_of.reserve(t.external_correlations.size());
  for (const auto& [correlation, external] : t.external_correlations) external_of.emplace(correlation, external);
  std::unordered_map<int64_t, uint32_t> op_of;  // launch id -> first comm op with it
  for (size_t i = 0; i < t.comm_ops.size(); ++i)
    if (t.comm_ops[i].launch_id != kUnknown) op_of.emplace(t.comm_ops[i].launch_id, static_cast<uint32_t>(i));

  std::vector<bool> linked(t.comm_ops.size(), false);
  int64_t unmatched = 0;
  for (Activity& a : t.activities) {
    if (a.comm_op != kNoIndex && a.comm_op < linked.size()) linked[a.comm_op] = true;
    if (a.correlation_id == kUnknown) continue;
    if (a.launch_ns == kUnknown) {
      auto it = launch_of.find(a.correlation_id);
      if (it != launch_of.end()) a.launch_ns = it->second;
      else if (!t.host_calls.empty() && a.kind != ActivityKind::kSync) ++unmatched;
    }
    if (a.comm_op == kNoIndex && !op_of.empty()) {
      auto ext = external_of.find(a.correlation_id);
      if (ext == external_of.end()) continue;
      auto op = op_of.find(ext->second);
      if (op == op_of.end()) continue;
      a.comm_op = op->second;
      if (a.kind != ActivityKind::kSync) a.category = Category::kComm;
      linked[op->second] = true;
      CommOp& c = t.comm_ops[op->second];
      if (c.stream == kNoIndex) c.stream = a.stream;
    }
  }
  // Ops of a group share their kernel: every op with a linked op's launch id is linked.
  std::vector<bool> launch_linked_any(t.comm_ops.size(), false);
  for (size_t i = 0; i < t.comm_ops.size(); ++i) {
    int64_t id = t.comm_ops[i].launch_id;
    if (id == kUnknown || linked[i]) continue;
    auto op = op_of.find(id);
    if (op != op_of.end() && linked[op->second]) {
      linked[i] = true;
      if (t.comm_ops[i].stream == kNoIndex) t.comm_ops[i].stream = t.comm_ops[op->second].stream;
    }
  }
  t.stats.Add(Stat::correlations_unmatched, unmatched);
  if (!t.activities.empty())
    t.stats.Add(Stat::comm_ops_without_gpu_activity, std::count(linked.begin(), linked.end(), false));
}

}  // namespace overlapprof
