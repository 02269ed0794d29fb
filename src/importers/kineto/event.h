#pragma once
// One event of a PyTorch-profiler (Kineto) trace as the reader (src/importers/kineto/reader.cc) tokenizes
// it and the builder (src/importers/kineto/builder.h) turns it into the rank's trace: the fields
// the importer uses, as views into the input buffer, undecoded.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "src/common/decimal.h"  // the fields' numbers (ts, dur, ids) are read with it
#include "src/trace/model.h"

namespace overlapprof::kineto {

// The event categories the importer tells apart ("cat").
enum class Cat : uint8_t {
  kUnknown, kKernel, kMemcpy, kMemset, kSync, kRuntime, kUserAnnotation, kGpuAnnotation, kCpuOp,
  kCudaEvent,  // "cuda_event": a cudaEventRecord's stream (PyTorch's enable_cuda_sync_events)
  kOther
};

// s == lit, with the length known when compiled: a memcmp of a constant size, which the compiler
// inlines (string_view's == calls memcmp with the length as a variable: 3% of an import's CPU).
template <size_t N>
inline bool KeyIs(std::string_view s, const char (&lit)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), lit, N - 1) == 0;
}
// s starts with lit, the same way.
template <size_t N>
inline bool PrefixIs(std::string_view s, const char (&lit)[N]) {
  return s.size() >= N - 1 && std::memcmp(s.data(), lit, N - 1) == 0;
}

// The category from its lower-case name (DecodeCat's fast path).
inline Cat DecodeLowerCat(std::string_view l) {
  switch (l.size()) {
    case 6:
      if (KeyIs(l, "kernel")) return Cat::kKernel;
      if (KeyIs(l, "memcpy")) return Cat::kMemcpy;
      if (KeyIs(l, "memset")) return Cat::kMemset;
      if (KeyIs(l, "cpu_op")) return Cat::kCpuOp;
      break;
    case 7:
      if (KeyIs(l, "runtime")) return Cat::kRuntime;
      break;
    case 8:
      if (KeyIs(l, "operator")) return Cat::kCpuOp;
      break;
    case 9:
      if (KeyIs(l, "cuda_sync")) return Cat::kSync;
      break;
    case 10:
      if (KeyIs(l, "gpu_memcpy")) return Cat::kMemcpy;
      if (KeyIs(l, "gpu_memset")) return Cat::kMemset;
      if (KeyIs(l, "cuda_event")) return Cat::kCudaEvent;
      break;
    case 11:
      if (KeyIs(l, "cuda_driver")) return Cat::kRuntime;
      break;
    case 12:
      if (KeyIs(l, "cuda_runtime")) return Cat::kRuntime;
      break;
    case 15:
      if (KeyIs(l, "user_annotation")) return Cat::kUserAnnotation;
      break;
    case 19:
      if (KeyIs(l, "gpu_user_annotation")) return Cat::kGpuAnnotation;
      break;
    default:
      break;
  }
  return l.empty() ? Cat::kUnknown : Cat::kOther;
}

// Categories are matched case-insensitively: the 2021 profiler wrote "Kernel", "Operator",
// "Runtime", "Memcpy", "Memset"; today's writes "kernel", "cpu_op", "cuda_runtime", ... Called
// for every event: a name without capitals is looked up as it is, without a copy.
inline Cat DecodeCat(std::string_view c) {
  Cat cat = DecodeLowerCat(c);
  if (cat != Cat::kOther) return cat;
  char buf[20];
  if (c.size() > sizeof buf) return Cat::kOther;
  bool upper = false;
  for (size_t i = 0; i < c.size(); ++i) {
    char ch = c[i];
    upper |= ch >= 'A' && ch <= 'Z';
    buf[i] = ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch;
  }
  return upper ? DecodeLowerCat(std::string_view(buf, c.size())) : Cat::kOther;
}

// Fields of one trace event that the importer uses. Views point into the input buffer.
struct RawEvent {
  char ph = 0;
  std::string_view cat;
  std::string_view name;  // raw JSON string content (still escaped)
  bool has_name = false;
  int64_t pid = kUnknown, tid = kUnknown;
  std::string_view ts, dur;
  // args: every field from here on (the walker's WalkSlot::Clear resets them in one copy)
  int64_t device = kUnknown, stream = kUnknown, correlation = kUnknown, bytes = kUnknown;
  std::string_view coll_name, dtype, pg_name, pg_desc, pg_ranks, arg_name, arg_labels;
  int64_t in_nelems = kUnknown, out_nelems = kUnknown, group_size = kUnknown, seq = kUnknown;
  std::string_view external_id;                     // "External id" (raw JSON token): links a kernel to its host op
  int64_t src_rank = kUnknown, dst_rank = kUnknown;  // "Src Rank"/"Dst Rank" of a send/recv (global ranks)
  // A copy between two GPUs (Kineto's CUPTI MEMCPY2 records): "fromDevice", "inDevice", "toDevice".
  int64_t from_device = kUnknown, in_device = kUnknown, to_device = kUnknown;
  // A cuda_sync event waiting for a CUDA event record (PyTorch's enable_cuda_sync_events): the
  // stream the event was recorded on, and the correlation id of the cudaEventRecord call.
  int64_t wait_on_stream = kUnknown, wait_on_record = kUnknown;
};

// An integer id from its raw JSON token (a number, or a decimal string), kUnknown when it is neither.
// Decoded only where needed: most events' "External id" is never used.
int64_t IdFromToken(std::string_view tok);

// A host op that may name a SendRecv kernel's op: record_param_comms, nccl:*, c10d::*, alltoall*,
// all_to_all* (raw name). Cheap: called for every cpu_op. (Which host ops make a kernel
// communication at all is overlapprof::IsCommHostOpName, src/trace/classify.h: rule 2.)
inline bool IsNamingHostOp(std::string_view n) {
  return n == "record_param_comms" || n.rfind("nccl:", 0) == 0 || n.rfind("c10d::", 0) == 0 ||
         n.rfind("alltoall", 0) == 0 || n.rfind("all_to_all", 0) == 0;
}

// CUPTI_ACTIVITY_MEMCPY_KIND_* from a memcpy's name ("Memcpy HtoD (Pageable -> Device)"); 0 unknown.
uint8_t CopyKindFromName(std::string_view name);

// JSON string unescape (\" \\ \/ \b \f \n \r \t \uXXXX with surrogate pairs), always valid UTF-8
// when `raw` is: an escaped lone surrogate (a high one not followed by an escaped low one, or a
// low one alone) becomes U+FFFD, counted in issues->replaced. What JSON's grammar refuses (`\u`
// not followed by 4 hex digits, a backslash before any other character) sets issues->invalid
// (the text is then kept as written).
struct UnescapeIssues {
  size_t replaced = 0;
  bool invalid = false;
};
std::string Unescape(std::string_view raw, UnescapeIssues* issues = nullptr);

}  // namespace overlapprof::kineto
