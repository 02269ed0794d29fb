#include "src/trace/classify.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <set>
#include <utility>

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

int CommKernelFamilyOf(std::string_view name) {
  int i = 0;
  for (const CommKernelFamily& f : kCommKernelFamilies) {
    if (ContainsCaseInsensitive(name, f.needle) && (f.needle2.empty() || ContainsCaseInsensitive(name, f.needle2)))
      return i;
    ++i;
  }
  return -1;
}

bool IsCommKernelName(std::string_view name) { return CommKernelFamilyOf(name) >= 0; }

// Called for every host op of a Kineto trace (the reader decides from it whether to parse the
// op's args): most names fail on their first character ("aten::..."), without a loop.
bool IsCommHostOpName(std::string_view op) {
  static const std::array<bool, 256> kFirst = [] {
    std::array<bool, 256> a{};
    for (std::string_view p : kCommHostOpPrefixes) {
      a[static_cast<unsigned char>(p[0])] = true;
      a[static_cast<unsigned char>(std::toupper(static_cast<unsigned char>(p[0])))] = true;
    }
    return a;
  }();
  if (op.empty() || !kFirst[static_cast<unsigned char>(op[0])]) return false;
  for (std::string_view p : kCommHostOpPrefixes) {
    if (op.size() < p.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < p.size() && eq; ++i) {
      char c = op[i];
      eq = (c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) == p[i];
    }
    if (eq) return true;
  }
  return false;
}

Collective CollectiveFromHostOp(std::string_view op) {
  std::string lower = Lower(op);
  // The last "::" or ":" separated word, with trailing '_' (in-place ops) removed.
  size_t colon = lower.rfind(':');
  std::string word = colon == std::string::npos ? lower : lower.substr(colon + 1);
  while (!word.empty() && word.back() == '_') word.pop_back();
  // Fused async-TP ops ("fused_all_gather_matmul", "fused_matmul_reduce_scatter") and
  // symmetric-memory variants ("multimem_all_reduce", "one_shot_all_reduce"): the collective.
  static constexpr std::pair<std::string_view, Collective> kOps[] = {
      {"all_reduce", Collective::kAllReduce},         {"allreduce", Collective::kAllReduce},
      {"all_gather", Collective::kAllGather},         {"allgather", Collective::kAllGather},
      {"reduce_scatter", Collective::kReduceScatter}, {"reducescatter", Collective::kReduceScatter},
      {"all_to_all", Collective::kAllToAll},          {"alltoall", Collective::kAllToAll},
      {"broadcast", Collective::kBroadcast},          {"barrier", Collective::kBarrier},
      {"send", Collective::kSend},                    {"recv", Collective::kRecv},
      {"dispatch", Collective::kDispatch},            {"combine", Collective::kCombine},
      {"reduce", Collective::kReduce},
  };
  for (const auto& [needle, c] : kOps)
    if (word.find(needle) != std::string::npos) return c;
  return Collective::kUnknown;
}

bool LooksLikeCommKernelName(std::string_view name) {
  static constexpr std::string_view kLike[] = {
      "allreduce", "all_reduce", "allgather", "all_gather", "reducescatter", "reduce_scatter", "alltoall",
      "all_to_all", "sendrecv", "nvshmem", "moe_dispatch", "moe_combine", "ep_dispatch", "ep_combine",
      "::dispatch<", "::combine<", "multimem", "cross_device_reduce",
  };
  for (std::string_view m : kLike)
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

bool IsPeerCopy(uint8_t copy_kind, int64_t src_device, int64_t dst_device) {
  if (copy_kind == kCopyKindPeer) return true;
  return copy_kind == 8 /* DtoD */ && src_device != kUnknown && dst_device != kUnknown && src_device != dst_device;
}

Collective NormalizeCollectiveName(std::string_view name) {
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
  if (s == "bcast") return Collective::kBroadcast;
  if (s == "alltoallv") return Collective::kAllToAll;
  return ParseCollective(s);
}

Collective CollectiveFromKernelName(std::string_view name) {
  std::string lower = Lower(name);
  for (std::string_view prefix : {"nccldevkernel_", "ncclkernel_", "rcclkernel_"}) {
    size_t pos = lower.find(prefix);
    if (pos == std::string::npos) continue;
    size_t begin = pos + prefix.size();
    size_t end = begin;
    while (end < lower.size() && std::isalnum(static_cast<unsigned char>(lower[end]))) ++end;
    // The word after the prefix ("allgather", "sendrecv"); "generic" names none.
    return ParseCollective(std::string_view(lower).substr(begin, end - begin));
  }
  int f = CommKernelFamilyOf(name);
  return f >= 0 ? kCommKernelFamilies[f].op : Collective::kUnknown;
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

StatusOr<std::shared_ptr<const CommPatterns>> CommPatterns::Make(const std::vector<std::string>& comm_kernel,
                                                                const std::vector<std::string>& not_comm) {
  auto p = std::make_shared<CommPatterns>();
  auto compile = [](const std::string& re, std::vector<std::regex>& out, const char* flag) -> Status {
    try {
      out.emplace_back(re, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      return MakeError(StatusCode::kInvalidArgument, "{} '{}': not a valid regular expression ({})", flag, re, e.what());
    }
    return OkStatus();
  };
  for (const std::string& r : comm_kernel) OVERLAPPROF_RETURN_IF_ERROR(compile(r, p->add_, "--comm-kernel"));
  for (const std::string& r : not_comm) OVERLAPPROF_RETURN_IF_ERROR(compile(r, p->veto_, "--not-comm"));
  return std::shared_ptr<const CommPatterns>(std::move(p));
}

bool CommPatterns::Adds(std::string_view name) const {
  for (const std::regex& r : add_)
    if (std::regex_search(name.begin(), name.end(), r)) return true;
  return false;
}

bool CommPatterns::Vetoes(std::string_view name) const {
  for (const std::regex& r : veto_)
    if (std::regex_search(name.begin(), name.end(), r)) return true;
  return false;
}

void CommPatterns::Apply(RankTrace& t) const {
  if (empty()) return;
  // Per distinct name: 0 = no pattern, 1 = added, 2 = vetoed (matched once per name).
  std::vector<int8_t> verdict(t.names.size(), -1);
  std::vector<bool> drop(t.comm_ops.size(), false);
  bool any_drop = false;
  for (Activity& a : t.activities) {
    if (a.kind != ActivityKind::kKernel) continue;
    if (a.name_id >= verdict.size()) verdict.resize(a.name_id + 1, -1);
    int8_t& v = verdict[a.name_id];
    if (v < 0) {
      std::string_view name = t.names.Get(a.name_id);
      v = Vetoes(name) ? 2 : Adds(name) ? 1 : 0;
    }
    if (v == 2 && a.category == Category::kComm) {
      const bool identity = a.comm_op != kNoIndex && a.comm_op < t.comm_ops.size() &&
                            t.comm_ops[a.comm_op].rule == CommRule::kIdentity;
      if (identity) continue;
      if (a.comm_op != kNoIndex && a.comm_op < drop.size()) drop[a.comm_op] = any_drop = true;
      a.comm_op = kNoIndex;
      a.category = Category::kCompute;
    } else if (v == 1 && a.category == Category::kCompute) {
      CommOp op;
      op.stream = a.stream;
      op.source = CommSource::kKernelName;
      op.rule = CommRule::kUserPattern;
      op.op = CollectiveFromKernelName(t.names.Get(a.name_id));
      op.communicator = "unknown";
      a.category = Category::kComm;
      a.comm_op = static_cast<uint32_t>(t.comm_ops.size());
      t.comm_ops.push_back(std::move(op));
    }
  }
  if (!any_drop) return;
  // Remove the vetoed ops, remapping the activities' indices.
  std::vector<uint32_t> remap(t.comm_ops.size(), kNoIndex);
  std::vector<CommOp> kept;
  kept.reserve(t.comm_ops.size());
  for (size_t i = 0; i < t.comm_ops.size(); ++i) {
    if (i < drop.size() && drop[i]) continue;
    remap[i] = static_cast<uint32_t>(kept.size());
    kept.push_back(std::move(t.comm_ops[i]));
  }
  t.comm_ops = std::move(kept);
  for (Activity& a : t.activities)
    if (a.comm_op != kNoIndex) a.comm_op = a.comm_op < remap.size() ? remap[a.comm_op] : kNoIndex;
}

int64_t CountCommLikeUnclassified(const RankTrace& t, std::vector<std::string>* names) {
  std::vector<int8_t> like(t.names.size(), -1);
  std::set<uint32_t> ids;
  int64_t n = 0;
  for (const Activity& a : t.activities) {
    if (a.kind != ActivityKind::kKernel || a.category == Category::kComm) continue;
    if (a.name_id >= like.size()) continue;
    int8_t& l = like[a.name_id];
    if (l < 0) l = LooksLikeCommKernelName(t.names.Get(a.name_id)) ? 1 : 0;
    if (l == 1) {
      ++n;
      ids.insert(a.name_id);
    }
  }
  if (names) {
    names->clear();
    for (uint32_t id : ids) names->emplace_back(t.names.Get(id));
    std::sort(names->begin(), names->end());
  }
  return n;
}

}  // namespace overlapprof
