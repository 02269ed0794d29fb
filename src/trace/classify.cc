#include "src/trace/classify.h"

#include <algorithm>
#include <cctype>

namespace overlapprof {

namespace {

bool ContainsCaseInsensitive(std::string_view hay, std::string_view needle) {
  if (needle.size() > hay.size()) return false;
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == b;  // needle is lower-case
  });
  return it != hay.end();
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool IsCommKernelName(std::string_view name) {
  for (std::string_view m : kCommKernelMarkers)
    if (ContainsCaseInsensitive(name, m)) return true;
  return false;
}

Category Classify(ActivityKind kind, std::string_view name, bool has_comm_identity) {
  if (has_comm_identity) return Category::kComm;
  switch (kind) {
    case ActivityKind::kKernel: return IsCommKernelName(name) ? Category::kComm : Category::kCompute;
    case ActivityKind::kMemcpy:
    case ActivityKind::kMemset: return Category::kMemory;
    case ActivityKind::kSync: return Category::kOther;
  }
  return Category::kOther;
}

std::string NormalizeCollectiveName(std::string_view name) {
  std::string s = Lower(name);
  while (!s.empty() && s.front() == '_') s.erase(s.begin());
  // Strip wrapper suffixes repeatedly: "reduce_scatter_tensor_coalesced" -> "reduce_scatter".
  for (bool again = true; again;) {
    again = false;
    for (std::string_view sx : {"_coalesced", "_base", "_into_tensor", "_tensor", "_single"}) {
      if (s.size() > sx.size() && s.compare(s.size() - sx.size(), sx.size(), sx) == 0) {
        s.resize(s.size() - sx.size());
        again = true;
      }
    }
  }
  std::erase(s, '_');
  if (s.rfind("nccl", 0) == 0) s.erase(0, 4);  // "ncclAllReduce" -> "allreduce"
  if (s == "bcast") s = "broadcast";
  if (s == "alltoallv" || s == "alltoall") s = "alltoall";
  return s;
}

std::string CollectiveFromKernelName(std::string_view name) {
  std::string lower = Lower(name);
  for (std::string_view prefix : {"nccldevkernel_", "ncclkernel_", "rcclkernel_"}) {
    size_t pos = lower.find(prefix);
    if (pos == std::string::npos) continue;
    size_t begin = pos + prefix.size();
    size_t end = begin;
    while (end < lower.size() && std::isalnum(static_cast<unsigned char>(lower[end]))) ++end;
    std::string op = lower.substr(begin, end - begin);
    if (op.empty() || op == "generic") return "unknown";
    return op;
  }
  return "unknown";
}

int64_t DtypeSize(std::string_view dtype) {
  std::string d = Lower(dtype);
  if (d.rfind("nccl", 0) == 0) d.erase(0, 4);
  if (d.rfind("torch.", 0) == 0) d.erase(0, 6);
  static const std::pair<std::string_view, int64_t> kSizes[] = {
      {"float", 4},    {"float32", 4},  {"float16", 2}, {"half", 2},      {"bfloat16", 2},
      {"double", 8},   {"float64", 8},  {"int", 4},     {"int32", 4},     {"long", 8},
      {"int64", 8},    {"uint64", 8},   {"uint32", 4},  {"short", 2},     {"int16", 2},
      {"char", 1},     {"int8", 1},     {"uint8", 1},   {"byte", 1},      {"bool", 1},
      {"float8e4m3", 1}, {"float8e5m2", 1}, {"float8_e4m3fn", 1}, {"float8_e5m2", 1},
      {"float8_e4m3fnuz", 1}, {"float8_e5m2fnuz", 1}, {"complexfloat", 8}, {"complexdouble", 16},
  };
  for (const auto& [n, sz] : kSizes)
    if (d == n) return sz;
  return 0;
}

}  // namespace overlapprof
