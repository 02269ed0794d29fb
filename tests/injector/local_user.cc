// A library that uses NCCL, loaded by nccl_driver with dlopen(RTLD_LOCAL), as PyTorch loads
// libtorch_cuda and its NCCL: the injector must still find the real NCCL behind its hooks.
#include <nccl.h>

static char g_buf[4096];

extern "C" __attribute__((visibility("default"))) int run_local_ops(int n) {
  ncclUniqueId id = {};
  id.internal[0] = 42;
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, 2, id, 0) != ncclSuccess) return 1;
  for (int i = 0; i < n; ++i)
    if (ncclAllReduce(g_buf, g_buf, 4, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) return 1;
  return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
}
