#include "src/trace/model.h"

#include <algorithm>
#include <cstdint>
#include <utility>

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
    case CommRule::kCopyEngine: return "copy_engine";
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

namespace {

// Sorts v as std::stable_sort(v, by_time) does (by_time: by start_ns, then end_ns; equal
// elements keep their order), in fewer passes over less memory when v is large: an LSD radix
// sort of (start - min start, index) pairs on the bits in which the starts differ, 12 at a time
// (a histogram of 16 KB); runs of equal starts then by end, stably; and the records moved in
// place. Half a million 56-byte activities: 3 passes over 8 MB, where the merge sort made ~16
// over 30 MB (35 -> ~10 ms, on the critical path of every import: docs/performance.md,
// Streaming import).
template <typename T, typename Less>
void StableSortByTime(std::vector<T>& v, Less by_time) {
  const size_t n = v.size();
  if (n < (size_t{1} << 14) || n > UINT32_MAX) {
    std::stable_sort(v.begin(), v.end(), by_time);
    return;
  }
  int64_t lo = v[0].start_ns, hi = lo;
  for (const T& x : v) {
    lo = std::min(lo, x.start_ns);
    hi = std::max(hi, x.start_ns);
  }
  struct Item {
    uint64_t key;  // start_ns - lo (unsigned: any two int64 differ by less than 2^64)
    uint32_t index;
  };
  std::vector<Item> a(n), b(n);
  for (size_t i = 0; i < n; ++i)
    a[i] = {static_cast<uint64_t>(v[i].start_ns) - static_cast<uint64_t>(lo), static_cast<uint32_t>(i)};
  constexpr int kBits = 12;
  constexpr size_t kBuckets = size_t{1} << kBits;
  const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  const int bits = range ? 64 - __builtin_clzll(range) : 0;
  std::vector<uint32_t> count(kBuckets);
  for (int shift = 0; shift < bits; shift += kBits) {
    std::fill(count.begin(), count.end(), 0);
    for (const Item& x : a) ++count[(x.key >> shift) & (kBuckets - 1)];
    uint32_t sum = 0;
    for (uint32_t& c : count) sum += std::exchange(c, sum);
    for (const Item& x : a) b[count[(x.key >> shift) & (kBuckets - 1)]++] = x;  // stable
    a.swap(b);
  }
  std::vector<Item>().swap(b);
  for (size_t i = 0; i < n;) {  // equal starts, still in input order: by end
    size_t j = i + 1;
    while (j < n && a[j].key == a[i].key) ++j;
    if (j - i > 1)
      std::stable_sort(a.begin() + static_cast<ptrdiff_t>(i), a.begin() + static_cast<ptrdiff_t>(j),
                       [&](const Item& x, const Item& y) { return v[x.index].end_ns < v[y.index].end_ns; });
    i = j;
  }
  // v[k] = old v[a[k].index], in place, cycle by cycle (a copy of v would be the largest block
  // of the import's peak memory); a[k].index = k marks a place done.
  for (size_t k = 0; k < n; ++k) {
    if (a[k].index == k) continue;
    T held = std::move(v[k]);
    size_t j = k;
    for (;;) {
      const size_t from = a[j].index;
      a[j].index = static_cast<uint32_t>(j);
      if (from == k) {
        v[j] = std::move(held);
        break;
      }
      v[j] = std::move(v[from]);
      j = from;
    }
  }
}

}  // namespace

void RankTrace::Finalize() {
  auto by_time = [](const auto& a, const auto& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns < b.end_ns;
  };
  auto sort_if_needed = [&](auto& v) {
    if (!std::is_sorted(v.begin(), v.end(), by_time)) StableSortByTime(v, by_time);
  };
  sort_if_needed(activities);
  sort_if_needed(host_calls);
  sort_if_needed(ranges);
}

}  // namespace overlapprof
