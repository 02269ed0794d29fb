#pragma once
// One event of a PyTorch-profiler (Kineto) trace as the reader (src/importers/kineto.cc) tokenizes
// it and the builder (src/importers/kineto_builder.h) turns it into the rank's trace: the fields
// the importer uses, as views into the input buffer, undecoded.
#include <cstdint>
#include <string>
#include <string_view>

#include "src/trace/model.h"

namespace overlapprof::kineto {

// The event categories the importer tells apart ("cat").
enum class Cat : uint8_t {
  kUnknown, kKernel, kMemcpy, kMemset, kSync, kRuntime, kUserAnnotation, kGpuAnnotation, kCpuOp, kOther
};

inline Cat DecodeCat(std::string_view c) {
  switch (c.size()) {
    case 6:
      if (c == "kernel" || c == "Kernel") return Cat::kKernel;
      if (c == "Memcpy") return Cat::kMemcpy;
      if (c == "Memset") return Cat::kMemset;
      if (c == "cpu_op") return Cat::kCpuOp;
      break;
    case 7:
      if (c == "Runtime") return Cat::kRuntime;
      if (c == "Operator") return Cat::kCpuOp;
      break;
    case 9:
      if (c == "cuda_sync") return Cat::kSync;
      break;
    case 10:
      if (c == "gpu_memcpy") return Cat::kMemcpy;
      if (c == "gpu_memset") return Cat::kMemset;
      break;
    case 11:
      if (c == "cuda_driver") return Cat::kRuntime;
      break;
    case 12:
      if (c == "cuda_runtime") return Cat::kRuntime;
      break;
    case 15:
      if (c == "user_annotation") return Cat::kUserAnnotation;
      break;
    case 19:
      if (c == "gpu_user_annotation") return Cat::kGpuAnnotation;
      break;
    default:
      break;
  }
  return c.empty() ? Cat::kUnknown : Cat::kOther;
}

// Fields of one trace event that the importer uses. Views point into the input buffer.
struct RawEvent {
  char ph = 0;
  std::string_view cat;
  std::string_view name;  // raw JSON string content (still escaped)
  bool has_name = false;
  int64_t pid = kUnknown, tid = kUnknown;
  std::string_view ts, dur;
  // args
  int64_t device = kUnknown, stream = kUnknown, correlation = kUnknown, bytes = kUnknown;
  std::string_view coll_name, dtype, pg_name, pg_desc, pg_ranks, arg_name, arg_labels;
  int64_t in_nelems = kUnknown, out_nelems = kUnknown, group_size = kUnknown, seq = kUnknown;
  std::string_view external_id;                     // "External id" (raw JSON token): links a kernel to its host op
  int64_t src_rank = kUnknown, dst_rank = kUnknown;  // "Src Rank"/"Dst Rank" of a send/recv (global ranks)
};

// An integer id from its raw JSON token (a number, or a decimal string), kUnknown when it is neither.
// Decoded only where needed: most events' "External id" is never used.
int64_t IdFromToken(std::string_view tok);

// A host op that may name a communication op: record_param_comms, nccl:*, c10d::*, alltoall*,
// all_to_all* (raw name). Cheap: called for every cpu_op.
inline bool IsCommHostOpName(std::string_view n) {
  return n == "record_param_comms" || n.rfind("nccl:", 0) == 0 || n.rfind("c10d::", 0) == 0 ||
         n.rfind("alltoall", 0) == 0 || n.rfind("all_to_all", 0) == 0;
}

// CUPTI_ACTIVITY_MEMCPY_KIND_* from a memcpy's name ("Memcpy HtoD (Pageable -> Device)"); 0 unknown.
uint8_t CopyKindFromName(std::string_view name);

// JSON string unescape (\" \\ \/ \b \f \n \r \t \uXXXX with surrogate pairs).
std::string Unescape(std::string_view raw);

}  // namespace overlapprof::kineto
