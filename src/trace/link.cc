#include "src/trace/link.h"

#include "src/trace/classify.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace overlapprof {

void NameGroupedAllToAll(RankTrace& t) {
  // Ops by launch id (ops of one NCCL group share it), in record order.
  std::vector<std::pair<int64_t, uint32_t>> by_launch;
  for (size_t i = 0; i < t.comm_ops.size(); ++i)
    if (t.comm_ops[i].launch_id != kUnknown) by_launch.emplace_back(t.comm_ops[i].launch_id, static_cast<uint32_t>(i));
  std::stable_sort(by_launch.begin(), by_launch.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<bool> to, from;
  for (size_t b = 0; b < by_launch.size();) {
    size_t e = b;
    while (e < by_launch.size() && by_launch[e].first == by_launch[b].first) ++e;
    const CommOp& first = t.comm_ops[by_launch[b].second];
    const int64_t n = first.comm_nranks;
    bool all = e - b >= 2 && n >= 2 && n <= 1 << 20 && first.comm_rank >= 0 && first.comm_rank < n;
    int64_t bytes = 0;
    bool bytes_known = true;
    if (all) {
      to.assign(static_cast<size_t>(n), false);
      from.assign(static_cast<size_t>(n), false);
    }
    for (size_t k = b; all && k < e; ++k) {
      const CommOp& c = t.comm_ops[by_launch[k].second];
      const bool send = c.op == Collective::kSend, recv = c.op == Collective::kRecv;
      if ((!send && !recv) || c.communicator != first.communicator || c.comm_rank != first.comm_rank ||
          c.root_peer < 0 || c.root_peer >= n) {
        all = false;
        break;
      }
      (send ? to : from)[static_cast<size_t>(c.root_peer)] = true;
      if (send) {
        if (c.bytes == kUnknown || __builtin_add_overflow(bytes, c.bytes, &bytes)) bytes_known = false;
      }
    }
    for (int64_t p = 0; all && p < n; ++p)
      if (p != first.comm_rank && !(to[static_cast<size_t>(p)] && from[static_cast<size_t>(p)])) all = false;
    if (all) {
      for (size_t k = b; k < e; ++k) t.comm_ops[by_launch[k].second].op = Collective::kAllToAll;
      // The group's first op carries its kernel (LinkInjectorRecords): the bytes it sends in all.
      t.comm_ops[by_launch[b].second].bytes = bytes_known ? bytes : kUnknown;
    }
    b = e;
  }
}

void LinkInjectorRecords(RankTrace& t) {
  NameGroupedAllToAll(t);
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
  // Copies between two GPUs (the recorder stores them as copy kind PtoP, docs/classification.md
  // rule 4) are communication no NCCL call announced: each becomes its own p2p_copy op, as the
  // Kineto and nsys importers make them.
  for (size_t i = 0; i < t.activities.size(); ++i) {
    Activity& a = t.activities[i];
    if (a.kind != ActivityKind::kMemcpy || a.comm_op != kNoIndex || !IsPeerCopy(a.copy_kind)) continue;
    CommOp op;
    op.source = CommSource::kKernelName;
    op.rule = CommRule::kPeerCopy;
    op.op = Collective::kPeerCopy;
    op.bytes = a.bytes;
    op.communicator = "unknown";
    op.stream = a.stream;
    a.category = Category::kComm;
    a.comm_op = static_cast<uint32_t>(t.comm_ops.size());
    t.comm_ops.push_back(std::move(op));
  }
}

}  // namespace overlapprof
