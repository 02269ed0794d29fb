// Comm ops and launch links as every importer makes them (src/trace/rank_builder.h).
#include "src/trace/rank_builder.h"

#include "src/trace/classify.h"

namespace overlapprof {

CommOp& RankTraceBuilder::NewCommOp(RankTrace& t, Activity& a, CommRule rule) {
  a.category = Category::kComm;
  a.comm_op = static_cast<uint32_t>(t.comm_ops.size());
  CommOp& op = t.comm_ops.emplace_back();
  op.stream = a.stream;
  op.source = CommSource::kKernelName;
  op.rule = rule;
  op.communicator = "unknown";
  return op;
}

void RankTraceBuilder::AddKernel(RankTrace& t, Activity& a) {
  // Kernel names are long and repeat: each distinct name is classified (and its collective
  // read) once.
  if (a.name_id >= name_is_comm_.size()) name_is_comm_.resize(t.names.size(), -1);
  int8_t& comm = name_is_comm_[a.name_id];
  if (comm < 0) comm = IsCommKernelName(t.names.Get(a.name_id)) ? 1 : 0;
  if (!comm) {
    a.category = Category::kCompute;
    return;
  }
  if (a.name_id >= name_op_.size()) name_op_.resize(t.names.size());
  auto& op = name_op_[a.name_id];
  if (!op) op = CollectiveFromKernelName(t.names.Get(a.name_id));
  NewCommOp(t, a, CommRule::kKernelName).op = *op;
}

void RankTraceBuilder::AddPeerCopy(RankTrace& t, Activity& a) {
  CommOp& op = NewCommOp(t, a, CommRule::kPeerCopy);
  op.op = Collective::kPeerCopy;
  op.bytes = a.bytes;
}

bool RankTraceBuilder::ExpectLaunches(const RankTrace& t) {
  waiting_.clear();
  waiting_.reserve(t.activities.size());
  for (uint32_t i = 0; i < t.activities.size(); ++i) {
    const Activity& a = t.activities[i];
    if (a.correlation_id != kUnknown && a.kind != ActivityKind::kSync) waiting_.emplace_back(a.correlation_id, i);
  }
  if (!std::is_sorted(waiting_.begin(), waiting_.end())) std::sort(waiting_.begin(), waiting_.end());
  linked_.assign(waiting_.size(), 0);
  hint_ = 0;
  if (waiting_.empty()) {
    lo_ = 1, hi_ = 0;
    return false;
  }
  lo_ = waiting_.front().first;
  hi_ = waiting_.back().first;
  return true;
}

size_t RankTraceBuilder::Waiting(int64_t correlation) {
  if (!InRange(correlation)) return kNotWaiting;
  const size_t n = waiting_.size();
  const size_t w = GallopLowerBound(n, [&](size_t i) { return waiting_[i].first; }, correlation, hint_);
  return w < n && waiting_[w].first == correlation ? w : kNotWaiting;
}

void RankTraceBuilder::Launch(RankTrace& t, size_t waiting, const HostCall& h) {
  if (linked_[waiting]) return;
  const int64_t id = waiting_[waiting].first;
  // Every activity with the id (they are next to each other, from the first one).
  for (size_t w = waiting; w < waiting_.size() && waiting_[w].first == id; ++w) {
    linked_[w] = 1;
    ++linked_activities_;
    t.LinkLaunch(t.activities[waiting_[w].second], h);
  }
}

void RankTraceBuilder::EndLaunches(RankTrace& t) {
  int64_t gpu = 0;
  for (const Activity& a : t.activities) gpu += a.kind != ActivityKind::kSync;
  t.stats.Add(Stat::correlations_unmatched, gpu - linked_activities_);
  std::vector<std::pair<int64_t, uint32_t>>().swap(waiting_);
  std::vector<uint8_t>().swap(linked_);
  lo_ = 1, hi_ = 0;
  linked_activities_ = 0;
}

}  // namespace overlapprof
