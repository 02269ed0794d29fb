#include "src/trace/model.h"

#include <algorithm>

namespace overlapprof {

std::string_view ActivityKindName(ActivityKind k) {
  switch (k) {
    case ActivityKind::kKernel: return "kernel";
    case ActivityKind::kMemcpy: return "memcpy";
    case ActivityKind::kMemset: return "memset";
    case ActivityKind::kSync: return "sync";
  }
  return "unknown";
}

std::string_view CategoryName(Category c) {
  switch (c) {
    case Category::kCompute: return "compute";
    case Category::kComm: return "comm";
    case Category::kMemory: return "memory";
    case Category::kOther: return "other";
  }
  return "unknown";
}

std::string_view RangeKindName(RangeKind k) {
  switch (k) {
    case RangeKind::kStep: return "step";
    case RangeKind::kAnnotation: return "annotation";
    case RangeKind::kGpuAnnotation: return "gpu_annotation";
  }
  return "unknown";
}

std::string_view CommRuleName(CommRule r) {
  switch (r) {
    case CommRule::kIdentity: return "identity";
    case CommRule::kHostOp: return "host_op";
    case CommRule::kKernelName: return "kernel_name";
    case CommRule::kPeerCopy: return "peer_copy";
    case CommRule::kUserPattern: return "user_pattern";
  }
  return "unknown";
}

std::string_view CommSourceName(CommSource s) {
  switch (s) {
    case CommSource::kNcclHook: return "nccl_hook";
    case CommSource::kKinetoArgs: return "kineto_args";
    case CommSource::kKernelName: return "kernel_name";
  }
  return "unknown";
}

uint32_t StringTable::Intern(std::string_view s) {
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(s);
  index_.emplace(std::string_view(strings_.back()), id);
  return id;
}

uint32_t StringTable::Find(std::string_view s) const {
  auto it = index_.find(s);
  return it == index_.end() ? kNoIndex : it->second;
}

uint32_t RankTrace::StreamIndex(int64_t device, int64_t native_id) {
  auto [it, inserted] = stream_index_.try_emplace({device, native_id}, static_cast<uint32_t>(streams.size()));
  if (inserted) streams.push_back(Stream{device, native_id, {}});
  return it->second;
}

void RankTrace::Finalize() {
  auto by_time = [](const auto& a, const auto& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns < b.end_ns;
  };
  auto sort_if_needed = [&](auto& v) {
    if (!std::is_sorted(v.begin(), v.end(), by_time)) std::stable_sort(v.begin(), v.end(), by_time);
  };
  sort_if_needed(activities);
  sort_if_needed(host_calls);
  sort_if_needed(ranges);
}

}  // namespace overlapprof
