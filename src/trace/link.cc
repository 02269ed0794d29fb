#include "src/trace/link.h"

#include <algorithm>
#include <vector>

#include "src/trace/classify.h"
#include "src/trace/rank_builder.h"

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

namespace {

// (key, index) of the entries with a key, sorted: the first entry with a key comes first among
// those with it. A sorted vector, not a hash map: the keys come from the file.
using FirstByKey = std::vector<std::pair<int64_t, uint32_t>>;

// The index of the first entry with `key`, or kNoIndex; asked in about increasing key order.
uint32_t FindFirst(const FirstByKey& v, int64_t key, size_t& hint) {
  const size_t i = RankTraceBuilder::GallopLowerBound(v.size(), [&](size_t k) { return v[k].first; }, key, hint);
  return i < v.size() && v[i].first == key ? v[i].second : kNoIndex;
}

}  // namespace

namespace {

// Copy-engine collectives (NCCL 2.29+): an NCCL call whose GPU work is copies only (every
// activity linked to its launch is a memcpy; the ops of its group with it), or that NCCL's
// profiler plugin reported as a copy-engine op (CeColl, joined to the call), is communication by
// rule copy_engine instead of identity.
void MarkCopyEngineOps(RankTrace& t) {
  // Per op: 1 = a memcpy linked to it, 2 = a kernel (not copies only).
  std::vector<uint8_t> seen(t.comm_ops.size(), 0);
  for (const Activity& a : t.activities) {
    if (a.comm_op == kNoIndex || a.comm_op >= seen.size() || a.kind == ActivityKind::kSync) continue;
    seen[a.comm_op] |= a.kind == ActivityKind::kMemcpy ? 1 : 2;
  }
  std::vector<int64_t> copy_launches;  // launch ids of the copy-only ops
  for (size_t i = 0; i < t.comm_ops.size(); ++i) {
    CommOp& c = t.comm_ops[i];
    if (seen[i] != 1 || c.rule != CommRule::kIdentity || c.op == Collective::kPeerCopy) continue;
    c.rule = CommRule::kCopyEngine;
    if (c.launch_id != kUnknown) copy_launches.push_back(c.launch_id);
  }
  std::sort(copy_launches.begin(), copy_launches.end());
  for (size_t i = 0; i < t.comm_ops.size(); ++i) {
    CommOp& c = t.comm_ops[i];
    if (seen[i] == 0 && c.rule == CommRule::kIdentity && c.launch_id != kUnknown &&
        std::binary_search(copy_launches.begin(), copy_launches.end(), c.launch_id))
      c.rule = CommRule::kCopyEngine;
  }
  for (const NcclPluginOp& p : t.nccl_plugin_ops)
    if ((p.flags & NcclPluginOp::kCopyEngine) && p.comm_op < t.comm_ops.size() && seen[p.comm_op] != 2 &&
        t.comm_ops[p.comm_op].rule == CommRule::kIdentity)
      t.comm_ops[p.comm_op].rule = CommRule::kCopyEngine;
}

}  // namespace

void LinkInjectorRecords(RankTrace& t) {
  NameGroupedAllToAll(t);
  // Launch times (no host calls, nothing to link: not counted as unmatched).
  if (!t.host_calls.empty()) RankTraceBuilder().LinkLaunches(t, t.host_calls, LaunchLink::kRecorded);
  FirstByKey external_of;  // correlation id -> index of its first external correlation record
  external_of.reserve(t.external_correlations.size());
  for (size_t i = 0; i < t.external_correlations.size(); ++i)
    if (t.external_correlations[i].first != kUnknown)
      external_of.emplace_back(t.external_correlations[i].first, static_cast<uint32_t>(i));
  std::sort(external_of.begin(), external_of.end());
  FirstByKey op_of;  // launch id -> first comm op with it
  for (size_t i = 0; i < t.comm_ops.size(); ++i)
    if (t.comm_ops[i].launch_id != kUnknown) op_of.emplace_back(t.comm_ops[i].launch_id, static_cast<uint32_t>(i));
  std::sort(op_of.begin(), op_of.end());

  std::vector<bool> linked(t.comm_ops.size(), false);
  size_t external_hint = 0, op_hint = 0;
  for (Activity& a : t.activities) {
    if (a.comm_op != kNoIndex && a.comm_op < linked.size()) linked[a.comm_op] = true;
    if (a.correlation_id == kUnknown || a.comm_op != kNoIndex || op_of.empty()) continue;
    const uint32_t e = FindFirst(external_of, a.correlation_id, external_hint);
    if (e == kNoIndex) continue;
    const uint32_t op = FindFirst(op_of, t.external_correlations[e].second, op_hint);
    if (op == kNoIndex) continue;
    a.comm_op = op;
    if (a.kind != ActivityKind::kSync) a.category = Category::kComm;
    linked[op] = true;
    CommOp& c = t.comm_ops[op];
    if (c.stream == kNoIndex) c.stream = a.stream;
  }
  // Ops of a group share their kernel: every op with a linked op's launch id is linked.
  op_hint = 0;
  for (size_t i = 0; i < t.comm_ops.size(); ++i) {
    int64_t id = t.comm_ops[i].launch_id;
    if (id == kUnknown || linked[i]) continue;
    const uint32_t op = FindFirst(op_of, id, op_hint);
    if (op != kNoIndex && linked[op]) {
      linked[i] = true;
      if (t.comm_ops[i].stream == kNoIndex) t.comm_ops[i].stream = t.comm_ops[op].stream;
    }
  }
  if (!t.activities.empty())
    t.stats.Add(Stat::comm_ops_without_gpu_activity, std::count(linked.begin(), linked.end(), false));
  MarkCopyEngineOps(t);
  // Copies between two GPUs (the recorder stores them as copy kind PtoP, docs/classification.md
  // rule 4) are communication no NCCL call announced: each becomes its own p2p_copy op.
  for (Activity& a : t.activities)
    if (a.kind == ActivityKind::kMemcpy && a.comm_op == kNoIndex && IsPeerCopy(a.copy_kind))
      RankTraceBuilder::AddPeerCopy(t, a);
}

}  // namespace overlapprof
