#pragma once
// How activities are classified as compute, communication or memory. The rule, in
// order (docs/classification.md):
//  1. An activity linked to a communication-op record (injector NCCL hook) or carrying
//     NCCL metadata (Kineto "Collective name" arg) is communication, whatever it is.
//  2. Otherwise a kernel whose name contains one of kCommKernelMarkers (case-insensitive)
//     is communication; every other kernel is compute.
//  3. Otherwise memcpy and memset are memory (neither compute nor comm); sync is other.
#include <cstdint>
#include <string>
#include <string_view>

#include "src/trace/model.h"

namespace overlapprof {

// Substrings that mark a collective-communication kernel of a vendor library:
// NVIDIA NCCL (ncclKernel_*, ncclDevKernel_*), AMD RCCL, Microsoft MSCCL, Huawei HCCL,
// Intel oneCCL.
inline constexpr std::string_view kCommKernelMarkers[] = {"nccl", "rccl", "msccl", "hccl",
                                                          "oneccl"};

bool IsCommKernelName(std::string_view kernel_name);

// Category of an activity from its kind, name and whether it has comm identity.
Category Classify(ActivityKind kind, std::string_view name, bool has_comm_identity);

// "AllReduce", "all_reduce", "_allgather_base", "reduce_scatter_tensor_coalesced" ->
// "allreduce", "allgather", "reducescatter". Unknown names are lower-cased as they are.
std::string NormalizeCollectiveName(std::string_view name);

// The collective from an NCCL/RCCL kernel name ("ncclDevKernel_AllGather_RING_LL" ->
// "allgather", "ncclKernel_SendRecv_..." -> "sendrecv"); "unknown" when it cannot tell.
std::string CollectiveFromKernelName(std::string_view kernel_name);

// Size in bytes of a PyTorch ("Float", "BFloat16") or NCCL ("ncclFloat32") dtype name,
// or 0 when unknown.
int64_t DtypeSize(std::string_view dtype);

}  // namespace overlapprof
