#pragma once
// How activities are classified as compute, communication or memory: an evidence chain,
// tried in order, the first link that applies wins and is recorded in CommOp::rule
// (docs/classification.md):
//  1. identity: an activity linked to a communication-op record (injector NCCL hook) or
//     carrying NCCL metadata (Kineto "Collective name" arg) is communication.
//  2. host op: a kernel or memcpy launched by a host op of kCommHostOpPrefixes (Kineto
//     "External id" of the innermost op) is communication.
//  3. kernel name: a kernel whose name matches one of kCommKernelFamilies is communication.
//  4. peer copy: a peer-to-peer memcpy (CUPTI copy kind PtoP) is communication, op kPeerCopy.
// User patterns (CommPatterns: --comm-kernel / --not-comm) then add or veto kernels by name;
// every other kernel is compute, memcpy and memset are memory, sync is other.
#include <cstdint>
#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/status.h"
#include "src/trace/model.h"

namespace overlapprof {

// A family of communication kernels recognised by name: the kernel is one of it when its
// name contains, case-insensitively, every non-empty needle (needles are lower-case).
// `op` is the collective the family runs (kUnknown: read it from the NCCL-style name, or unknown).
struct CommKernelFamily {
  std::string_view family;
  std::string_view needle;
  std::string_view needle2;  // "" = no second condition
  Collective op = Collective::kUnknown;
};

// The one table of kernel-name families (rule 3). First match wins. Tested one by one in
// tests/unit/classify_test.cc.
inline constexpr CommKernelFamily kCommKernelFamilies[] = {
    // Collective libraries: NVIDIA NCCL (ncclKernel_*, ncclDevKernel_*), AMD RCCL,
    // Microsoft MSCCL / MSCCL++, Huawei HCCL, Intel oneCCL.
    {"nccl", "nccl", "", Collective::kUnknown},
    // NCCL's kernel for a reduction on a 1-rank communicator (onerank.cu: oneRankReduce<...>,
    // "oneRankReduce" as Nsight Systems' short name), launched by the collective in place of a
    // ncclDevKernel_*: seen on an H100 with NCCL 2.28 (tests/data/nsys/h100_gemm1.sqlite).
    {"nccl", "onerankreduce", "", Collective::kUnknown},
    {"rccl", "rccl", "", Collective::kUnknown},
    {"msccl", "msccl", "", Collective::kUnknown},
    {"hccl", "hccl", "", Collective::kUnknown},
    {"oneccl", "oneccl", "", Collective::kUnknown},
    // PyTorch symmetric memory (CUDASymmetricMemoryOps.cu): multimem (NVLink SHARP),
    // one-shot / two-shot all-reduce, all-gather, reduce-scatter.
    {"symm_mem", "multimem_all_reduce", "", Collective::kAllReduce},
    {"symm_mem", "multimem_one_shot_all_reduce", "", Collective::kAllReduce},
    {"symm_mem", "multimem_all_gather", "", Collective::kAllGather},
    {"symm_mem", "multimem_reduce_scatter", "", Collective::kReduceScatter},
    {"symm_mem", "one_shot_all_reduce", "", Collective::kAllReduce},
    {"symm_mem", "two_shot_all_reduce", "", Collective::kAllReduce},
    {"symm_mem", "symmetric_memory::", "", Collective::kUnknown},  // c10d::symmetric_memory:: barrier, put/wait_signal, ...
    // DeepEP (MoE expert parallelism over NVLink / NVSHMEM): intranode, internode and
    // low-latency (internode_ll) dispatch, combine, notify_dispatch.
    {"deepep", "deep_ep::", "notify_dispatch", Collective::kNotifyDispatch},
    {"deepep", "deep_ep::", "dispatch", Collective::kDispatch},
    {"deepep", "deep_ep::", "combine", Collective::kCombine},
    {"deepep", "ep::internode", "", Collective::kUnknown},
    {"deepep", "ep::intranode", "", Collective::kUnknown},
    {"deepep", "deep_ep::", "", Collective::kUnknown},
    // NVSHMEM device kernels and collectives (nvshmemi_*, nvshmemx_*).
    {"nvshmem", "nvshmem", "", Collective::kUnknown},
    // vLLM custom all-reduce (csrc/custom_all_reduce.cuh): cross_device_reduce_1stage/2stage.
    {"vllm_custom_ar", "cross_device_reduce", "", Collective::kAllReduce},
    // TensorRT-LLM all-reduce kernels (oneShotAllReduceKernel, twoShotAllReduceKernel,
    // allreduce_fusion_kernel_*, lamport variants).
    {"trtllm_allreduce", "tensorrt_llm", "allreduce", Collective::kAllReduce},
    {"trtllm_allreduce", "oneshotallreduce", "", Collective::kAllReduce},
    {"trtllm_allreduce", "twoshotallreduce", "", Collective::kAllReduce},
    {"trtllm_allreduce", "allreduce_fusion_kernel", "", Collective::kAllReduce},
};

// Index into kCommKernelFamilies of the first family `kernel_name` belongs to, or -1.
int CommKernelFamilyOf(std::string_view kernel_name);
bool IsCommKernelName(std::string_view kernel_name);

// Host ops (PyTorch profiler cpu_op names) that launch communication (rule 2): a name that
// starts with one of these prefixes.
inline constexpr std::string_view kCommHostOpPrefixes[] = {
    "nccl:",              // record_function of ProcessGroupNCCL ("nccl:all_reduce")
    "c10d::",             // c10d dispatcher ops (c10d::allreduce_, c10d::_allgather_base_)
    "_c10d_functional::", // functional collectives (all_reduce, all_gather_into_tensor, ...)
    "c10d_functional::",
    "symm_mem::",         // symmetric memory ops, async-TP fused ops (fused_all_gather_matmul, ...)
    "vllm::all_reduce", "vllm::all_gather", "vllm::reduce_scatter",
    "_c_custom_ar::",     // vLLM custom all-reduce (matched case-insensitively: _C_custom_ar::)
    "deep_ep::",          // DeepEP ops when recorded
    "trtllm::allreduce",  // TensorRT-LLM torch op
    "nvshmem",
};
bool IsCommHostOpName(std::string_view host_op);
// The collective a communication host op runs ("symm_mem::multimem_all_reduce_" -> kAllReduce,
// "c10d::_allgather_base_" -> kAllGather); kUnknown when it cannot tell.
Collective CollectiveFromHostOp(std::string_view host_op);

// A kernel name that looks like communication ("allreduce", "all_gather", "reduce_scatter",
// "alltoall", "sendrecv", "nvshmem", "dispatch"/"combine" of an MoE, ...): when such a kernel
// is not classified as communication, the report warns (Stat::comm_like_kernels_unclassified).
bool LooksLikeCommKernelName(std::string_view kernel_name);

// Category of an activity from its kind, name and whether it has comm identity (rules 1, 3;
// memcpy of copy kind PtoP is rule 4 and handled by ClassifyMemcpy).
Category Classify(ActivityKind kind, std::string_view name, bool has_comm_identity);

// CUPTI_ACTIVITY_MEMCPY_KIND_PTOP.
inline constexpr uint8_t kCopyKindPeer = 10;
// True for a memcpy that moves data between two GPUs: copy kind PtoP, or a device-to-device
// copy whose source and destination devices are known and differ (kUnknown: not known).
bool IsPeerCopy(uint8_t copy_kind, int64_t src_device = kUnknown, int64_t dst_device = kUnknown);

// A source's name of a collective: "AllReduce", "all_reduce", "_allgather_base",
// "reduce_scatter_tensor_coalesced", "ncclBcast" -> kAllReduce, kAllGather, kReduceScatter,
// kBroadcast. Lower-cased, leading '_', wrapper suffixes (_coalesced, _base, _tensor, ...),
// '_' and an "nccl" prefix removed, then ParseCollective; kUnknown for a name not in
// src/trace/collective.def.
Collective NormalizeCollectiveName(std::string_view name);

// The collective from a communication kernel name ("ncclDevKernel_AllGather_RING_LL" ->
// kAllGather, "ncclKernel_SendRecv_..." -> kSendRecv, "multimem_all_reduce_kernel" ->
// kAllReduce); kUnknown when it cannot tell.
Collective CollectiveFromKernelName(std::string_view kernel_name);

// Size in bytes of a PyTorch ("Float", "BFloat16") or NCCL ("ncclFloat32") dtype name,
// or 0 when unknown.
int64_t DtypeSize(std::string_view dtype);

// User additions and vetoes of kernel names (--comm-kernel REGEX, --not-comm REGEX, and the
// policy file's "comm_kernel" / "not_comm" keys). ECMAScript regexes, searched anywhere in
// the name; compiled once (Make), matched once per distinct name (Apply).
class CommPatterns {
 public:
  // Errors (kInvalidArgument) name the pattern that does not compile.
  static StatusOr<std::shared_ptr<const CommPatterns>> Make(const std::vector<std::string>& comm_kernel,
                                                            const std::vector<std::string>& not_comm);
  bool empty() const { return add_.empty() && veto_.empty(); }
  bool Adds(std::string_view name) const;
  bool Vetoes(std::string_view name) const;
  // Applies them to a trace: a kernel matching a --not-comm pattern is compute unless it has
  // identity (rule 1: an NCCL record is exact); its comm op is removed. Otherwise a compute
  // kernel matching a --comm-kernel pattern becomes communication (CommRule::kUserPattern).
  void Apply(RankTrace& t) const;

 private:
  std::vector<std::regex> add_, veto_;
};

// Kernels whose name looks like communication (LooksLikeCommKernelName) but that no rule
// classified: the number of such activities, and their distinct names (sorted) in `names`.
int64_t CountCommLikeUnclassified(const RankTrace& t, std::vector<std::string>* names);

}  // namespace overlapprof
