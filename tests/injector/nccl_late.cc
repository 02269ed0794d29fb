// Test program for the injector: NCCL is not loaded when the program starts (it is not
// linked) and is dlopen'ed (RTLD_LOCAL, as PyTorch does) after a first call. The calls go to
// the preloaded injector's hooks, found with dlsym: a call made before NCCL is loaded must
// fail (ncclInvalidUsage) without making the function missing for good.
// `nccl_late LIBNCCL`: prints each call's result; exit 2 when the hooks are not preloaded
// or the library cannot be opened.
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  using InitFn = ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int);
  using AllReduceFn = ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  using DestroyFn = ncclResult_t (*)(ncclComm_t);
  auto init = reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "ncclCommInitRank"));
  auto allreduce = reinterpret_cast<AllReduceFn>(dlsym(RTLD_DEFAULT, "ncclAllReduce"));
  auto destroy = reinterpret_cast<DestroyFn>(dlsym(RTLD_DEFAULT, "ncclCommDestroy"));
  if (!init || !allreduce || !destroy) {
    std::fprintf(stderr, "nccl_late: the injector's hooks are not loaded\n");
    return 2;
  }
  ncclUniqueId id = {};
  ncclComm_t comm = nullptr;
  std::printf("before load: %d\n", static_cast<int>(init(&comm, 2, id, 1)));
  if (!dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) {
    std::fprintf(stderr, "nccl_late: dlopen %s: %s\n", argv[1], dlerror());
    return 2;
  }
  std::printf("after load: %d\n", static_cast<int>(init(&comm, 2, id, 1)));
  static float buf[16];
  std::printf("allreduce: %d\n", static_cast<int>(allreduce(buf, buf, 16, ncclFloat32, ncclSum, comm, nullptr)));
  std::printf("destroy: %d\n", static_cast<int>(destroy(comm)));
  return 0;
}
