#include "src/trace/classify.h"

#include <gtest/gtest.h>

#include <string>

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

// One test per family of kCommKernelFamilies (src/trace/classify.h), with real kernel names.
std::string FamilyOf(std::string_view name) {
  int f = CommKernelFamilyOf(name);
  return f < 0 ? "" : std::string(kCommKernelFamilies[f].family);
}

TEST(ClassifyFamilies, CollectiveLibraries) {
  EXPECT_EQ(FamilyOf("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"), "nccl");
  EXPECT_EQ(FamilyOf("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"), "nccl");
  // NCCL's 1-rank reduction, as CUPTI names it (mangled) and as Nsight Systems shortens it (H100, NCCL 2.28).
  EXPECT_EQ(FamilyOf("__nv_static_32__b4148644_10_onerank_cu_fdf47990__ZN43_GLOBAL__N__b4148644_10_onerank_cu_"
                     "fdf4799013oneRankReduceI13FuncPreMulSumIfEEEvPvS3_mmb"),
            "nccl");
  EXPECT_EQ(FamilyOf("oneRankReduce"), "nccl");
  EXPECT_EQ(FamilyOf("oneRankCopy"), "");  // no such NCCL kernel: the family is the reduction only
  EXPECT_EQ(FamilyOf("void rccl_kernel_something<float>()"), "rccl");
  EXPECT_EQ(FamilyOf("mscclKernel_Sum_float_LL"), "msccl");
  EXPECT_EQ(FamilyOf("void mscclpp::allreduce6<__nv_bfloat16>(...)"), "msccl");
  EXPECT_EQ(FamilyOf("HcclAllReduceKernel"), "hccl");
  EXPECT_EQ(FamilyOf("oneccl_allreduce_kernel"), "oneccl");
}

TEST(ClassifyFamilies, PyTorchSymmetricMemory) {
  const char* k = "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, "
                  "unsigned long, unsigned int**, unsigned long, unsigned long)";
  EXPECT_EQ(FamilyOf(k), "symm_mem");
  EXPECT_EQ(CollectiveFromKernelName(k), Collective::kAllReduce);
  EXPECT_EQ(FamilyOf("void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 16, 8>(...)"), "symm_mem");
  EXPECT_EQ(CollectiveFromKernelName("void c10d::symmetric_memory::two_shot_all_reduce_kernel<float, 16, 8>(...)"),
            Collective::kAllReduce);
  EXPECT_EQ(CollectiveFromKernelName("multimem_all_gather_kernel<16>"), Collective::kAllGather);
  EXPECT_EQ(FamilyOf("void c10d::symmetric_memory::barrier_kernel(unsigned int**, int, int, int)"), "symm_mem");
}

TEST(ClassifyFamilies, DeepEpDispatchCombine) {
  EXPECT_EQ(FamilyOf("void deep_ep::internode::dispatch<true, 8, 2, 16>(int4*, float*, ...)"), "deepep");
  EXPECT_EQ(CollectiveFromKernelName("void deep_ep::internode::dispatch<true, 8, 2, 16>(int4*)"), Collective::kDispatch);
  EXPECT_EQ(CollectiveFromKernelName("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(...)"), Collective::kCombine);
  EXPECT_EQ(CollectiveFromKernelName("void deep_ep::intranode::notify_dispatch<8>(int const*, int*)"),
            Collective::kNotifyDispatch);
  EXPECT_EQ(CollectiveFromKernelName("void deep_ep::internode_ll::dispatch<false, 3, 7168>(void*)"), Collective::kDispatch);
  EXPECT_EQ(CollectiveFromKernelName("void deep_ep::internode_ll::combine<3, 7168, 128>(void*)"), Collective::kCombine);
  EXPECT_EQ(FamilyOf("void ep::internode::cached_notify(int, int)"), "deepep");
}

TEST(ClassifyFamilies, Nvshmem) {
  EXPECT_EQ(FamilyOf("nvshmemi_proxy_progress_kernel"), "nvshmem");
  EXPECT_EQ(FamilyOf("void nvshmemx_barrier_all_on_stream_kernel()"), "nvshmem");
}

TEST(ClassifyFamilies, VllmCustomAllReduce) {
  const char* k = "void vllm::cross_device_reduce_1stage<c10::BFloat16, 8>(vllm::RankData*, vllm::RankSignals, "
                  "vllm::Signal*, c10::BFloat16*, int, int)";
  EXPECT_EQ(FamilyOf(k), "vllm_custom_ar");
  EXPECT_EQ(CollectiveFromKernelName(k), Collective::kAllReduce);
  EXPECT_EQ(FamilyOf("void vllm::cross_device_reduce_2stage<float, 8>(...)"), "vllm_custom_ar");
}

TEST(ClassifyFamilies, TensorRtLlmAllReduce) {
  EXPECT_EQ(FamilyOf("void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>(AllReduceParams)"),
            "trtllm_allreduce");
  EXPECT_EQ(FamilyOf("void tensorrt_llm::kernels::twoShotAllReduceKernel<half, 4>(AllReduceParams)"),
            "trtllm_allreduce");
  EXPECT_EQ(FamilyOf("void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<...>()"),
            "trtllm_allreduce");
  EXPECT_EQ(CollectiveFromKernelName("void tensorrt_llm::kernels::oneShotAllReduceKernel<half, 8>()"), Collective::kAllReduce);
}

TEST(ClassifyFamilies, ComputeKernelsStayCompute) {
  for (const char* k : {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
                        "sm90_xmma_gemm_bf16bf16_bf16f32", "void flash_fwd_splitkv_combine_kernel<...>",
                        "void at::native::index_elementwise_kernel<128, 4>", "Cijk_Alik_Bljk_SB_MT64x16x32",
                        "void fused_moe_kernel<...>"}) {
    EXPECT_EQ(FamilyOf(k), "") << k;
    EXPECT_FALSE(LooksLikeCommKernelName(k)) << k;
  }
}

TEST(ClassifyHostOps, CommunicationHostOps) {
  for (const char* op : {"nccl:all_reduce", "c10d::allreduce_", "c10d::_allgather_base_",
                         "_c10d_functional::all_gather_into_tensor", "symm_mem::multimem_all_reduce_",
                         "symm_mem::fused_all_gather_matmul", "vllm::all_reduce", "_C_custom_ar::all_reduce",
                         "deep_ep::dispatch", "trtllm::allreduce"})
    EXPECT_TRUE(IsCommHostOpName(op)) << op;
  for (const char* op : {"aten::mm", "vllm::moe_forward", "vllm::unified_attention_with_output", "aten::copy_"})
    EXPECT_FALSE(IsCommHostOpName(op)) << op;
  EXPECT_EQ(CollectiveFromHostOp("symm_mem::multimem_all_reduce_"), Collective::kAllReduce);
  EXPECT_EQ(CollectiveFromHostOp("c10d::_allgather_base_"), Collective::kAllGather);
  EXPECT_EQ(CollectiveFromHostOp("_c10d_functional::reduce_scatter_tensor"), Collective::kReduceScatter);
  EXPECT_EQ(CollectiveFromHostOp("symm_mem::fused_matmul_reduce_scatter"), Collective::kReduceScatter);
  EXPECT_EQ(CollectiveFromHostOp("c10d::alltoall_base_"), Collective::kAllToAll);
  EXPECT_EQ(CollectiveFromHostOp("nccl:all_reduce"), Collective::kAllReduce);
  EXPECT_EQ(CollectiveFromHostOp("vllm::something"), Collective::kUnknown);
}

TEST(ClassifyPeerCopies, PtoPOrDeviceToDeviceAcrossDevices) {
  EXPECT_TRUE(IsPeerCopy(10));
  EXPECT_TRUE(IsPeerCopy(8, 0, 1));   // DtoD between two GPUs
  EXPECT_FALSE(IsPeerCopy(8, 1, 1));  // DtoD on one GPU
  EXPECT_FALSE(IsPeerCopy(8));        // devices unknown
  EXPECT_FALSE(IsPeerCopy(1));        // HtoD
}

TEST(ClassifyLooksLike, CommLikeNamesAreFlagged) {
  for (const char* k : {"my_allreduce_kernel", "custom_all_gather<float>", "fancy_reduce_scatter_v2",
                        "ep_dispatch_kernel", "moe_combine_kernel", "alltoall_kernel", "nvshmem_put_kernel",
                        "SendRecvKernel"})
    EXPECT_TRUE(LooksLikeCommKernelName(k)) << k;
}

TEST(ClassifyUserPatterns, AddAndVeto) {
  auto bad = CommPatterns::Make({"("}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--comm-kernel '('"), std::string::npos);

  RankTrace t;
  auto add = [&](const char* name, Category c, CommRule rule) {
    Activity a;
    a.name_id = t.names.Intern(name);
    a.category = c;
    if (c == Category::kComm) {
      CommOp op;
      op.rule = rule;
      a.comm_op = static_cast<uint32_t>(t.comm_ops.size());
      t.comm_ops.push_back(op);
    }
    t.activities.push_back(a);
  };
  add("my_ring_kernel", Category::kCompute, CommRule::kKernelName);
  add("ncclDevKernel_AllReduce", Category::kComm, CommRule::kKernelName);
  add("ncclDevKernel_AllReduce", Category::kComm, CommRule::kIdentity);  // NCCL record: kept
  add("gemm", Category::kCompute, CommRule::kKernelName);
  add("my_ring_kernel", Category::kCompute, CommRule::kKernelName);
  auto p = CommPatterns::Make({"^my_ring"}, {"nccl"});
  ASSERT_TRUE(p.ok());
  (*p)->Apply(t);
  EXPECT_EQ(t.activities[0].category, Category::kComm);
  EXPECT_EQ(t.activities[1].category, Category::kCompute);
  EXPECT_EQ(t.activities[1].comm_op, kNoIndex);
  EXPECT_EQ(t.activities[2].category, Category::kComm);
  EXPECT_EQ(t.activities[3].category, Category::kCompute);
  EXPECT_EQ(t.activities[4].category, Category::kComm);
  ASSERT_EQ(t.comm_ops.size(), 3u);  // the vetoed op is gone, indices remapped
  EXPECT_EQ(t.comm_ops[t.activities[0].comm_op].rule, CommRule::kUserPattern);
  EXPECT_EQ(t.comm_ops[t.activities[2].comm_op].rule, CommRule::kIdentity);
  EXPECT_EQ(t.comm_ops[t.activities[4].comm_op].rule, CommRule::kUserPattern);
  // The vetoed kernel still looks like communication: the warning keeps saying what was left out.
  std::vector<std::string> names;
  EXPECT_EQ(CountCommLikeUnclassified(t, &names), 1);
  EXPECT_EQ(names, std::vector<std::string>{"ncclDevKernel_AllReduce"});
}

TEST(Classify, CollectiveNames) {
  EXPECT_EQ(NormalizeCollectiveName("allreduce"), Collective::kAllReduce);
  EXPECT_EQ(NormalizeCollectiveName("all_reduce"), Collective::kAllReduce);
  EXPECT_EQ(NormalizeCollectiveName("_allgather_base"), Collective::kAllGather);
  EXPECT_EQ(NormalizeCollectiveName("reduce_scatter_tensor_coalesced"), Collective::kReduceScatter);
  EXPECT_EQ(NormalizeCollectiveName("all_gather_into_tensor"), Collective::kAllGather);
  EXPECT_EQ(NormalizeCollectiveName("ncclAllReduce"), Collective::kAllReduce);
  EXPECT_EQ(NormalizeCollectiveName("Bcast"), Collective::kBroadcast);
  EXPECT_EQ(CollectiveFromKernelName("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)"), Collective::kSendRecv);
  EXPECT_EQ(CollectiveFromKernelName("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"), Collective::kReduceScatter);
  EXPECT_EQ(CollectiveFromKernelName("ncclDevKernel_Generic_1"), Collective::kUnknown);
  EXPECT_EQ(CollectiveFromKernelName("gemm"), Collective::kUnknown);
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
