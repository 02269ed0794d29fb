#include "src/trace/classify.h"

#include <gtest/gtest.h>

namespace overlapprof {
namespace {

TEST(Classify, NcclKernelNamesOfBothGenerationsAreComm) {
  EXPECT_TRUE(IsCommKernelName("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"));
  EXPECT_TRUE(IsCommKernelName("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"));
  EXPECT_TRUE(IsCommKernelName("ncclDevKernel_Generic"));
  EXPECT_TRUE(IsCommKernelName("void rccl_kernel_something<float>()"));
  EXPECT_TRUE(IsCommKernelName("mscclKernel_Sum_float_LL"));
  EXPECT_TRUE(IsCommKernelName("NCCLKERNEL_upper"));
  EXPECT_FALSE(IsCommKernelName("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"));
  EXPECT_FALSE(IsCommKernelName("Cijk_Alik_Bljk_SB_MT64x16x32"));
  EXPECT_FALSE(IsCommKernelName("sm90_xmma_gemm_bf16bf16_bf16f32"));
}

TEST(Classify, IdentityBeatsNameAndMemoryIsNeither) {
  EXPECT_EQ(Classify(ActivityKind::kKernel, "gemm", false), Category::kCompute);
  EXPECT_EQ(Classify(ActivityKind::kKernel, "ncclDevKernel_AllReduce", false), Category::kComm);
  // A 1-rank NCCL all-reduce is a memcpy: with a comm-op record it is communication.
  EXPECT_EQ(Classify(ActivityKind::kMemcpy, "Memcpy DtoD", true), Category::kComm);
  EXPECT_EQ(Classify(ActivityKind::kMemcpy, "Memcpy DtoD", false), Category::kMemory);
  EXPECT_EQ(Classify(ActivityKind::kMemset, "Memset (Device)", false), Category::kMemory);
  EXPECT_EQ(Classify(ActivityKind::kSync, "Stream Sync", false), Category::kOther);
}

TEST(Classify, CollectiveNames) {
  EXPECT_EQ(NormalizeCollectiveName("allreduce"), "allreduce");
  EXPECT_EQ(NormalizeCollectiveName("all_reduce"), "allreduce");
  EXPECT_EQ(NormalizeCollectiveName("_allgather_base"), "allgather");
  EXPECT_EQ(NormalizeCollectiveName("reduce_scatter_tensor_coalesced"), "reducescatter");
  EXPECT_EQ(NormalizeCollectiveName("all_gather_into_tensor"), "allgather");
  EXPECT_EQ(NormalizeCollectiveName("ncclAllReduce"), "allreduce");
  EXPECT_EQ(NormalizeCollectiveName("Bcast"), "broadcast");
  EXPECT_EQ(CollectiveFromKernelName("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)"), "sendrecv");
  EXPECT_EQ(CollectiveFromKernelName("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"), "reducescatter");
  EXPECT_EQ(CollectiveFromKernelName("ncclDevKernel_Generic_1"), "unknown");
  EXPECT_EQ(CollectiveFromKernelName("gemm"), "unknown");
}

TEST(Classify, DtypeSizes) {
  EXPECT_EQ(DtypeSize("Float"), 4);
  EXPECT_EQ(DtypeSize("BFloat16"), 2);
  EXPECT_EQ(DtypeSize("ncclFloat32"), 4);
  EXPECT_EQ(DtypeSize("Long"), 8);
  EXPECT_EQ(DtypeSize("torch.float16"), 2);
  EXPECT_EQ(DtypeSize("Mystery"), 0);
}

}  // namespace
}  // namespace overlapprof
