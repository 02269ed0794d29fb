// Test program for the injector: calls the NCCL API (against the test double fake_nccl.cc,
// or a real NCCL) in the patterns the tests check. `nccl_driver MODE [ARGS]`; exit code 0
// on success, 1 on a failed NCCL call (with a line naming it on stderr), 2 on bad usage.
//
// Communicator unique ids are derived from $UID_SEED (default 1) so every rank of a
// multi-process test builds the same id without exchanging it (the double does not talk).
#include <dlfcn.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define NCCL_CHECK(call)                                                                       \
  do {                                                                                         \
    ncclResult_t _r = (call);                                                                  \
    if (_r != ncclSuccess && _r != ncclInProgress) {                                           \
      std::fprintf(stderr, "nccl_driver: %s failed: %d (%s)\n", #call, static_cast<int>(_r),   \
                   ncclGetErrorString(_r));                                                    \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

ncclUniqueId MakeId(int salt) {
  ncclUniqueId id;
  unsigned seed = static_cast<unsigned>(EnvInt("UID_SEED", 1) * 7919 + salt);
  for (char& b : id.internal) {
    seed = seed * 1103515245u + 12345u;
    b = static_cast<char>(seed >> 16);
  }
  return id;
}

cudaStream_t Stream(uintptr_t v) { return reinterpret_cast<cudaStream_t>(v); }
char g_buf[1 << 16];

ncclComm_t InitWorld() {
  int nranks = EnvInt("WORLD_SIZE", 4);
  int rank = EnvInt("RANK", 0);
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommInitRank(&comm, nranks, MakeId(0), rank));
  return comm;
}

// Every op type once, a group of point-to-point calls, nested groups, a split.
// The expectations in tests/e2e/injector_test.py follow this sequence exactly.
int Ops() {
  ncclComm_t comm = InitWorld();
  int nranks = EnvInt("WORLD_SIZE", 4);
  int rank = EnvInt("RANK", 0);
  cudaStream_t s = Stream(0x5100);
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 1024, ncclFloat32, ncclSum, comm, s));           // seq 0
  NCCL_CHECK(ncclBroadcast(g_buf, g_buf, 10, ncclInt64, 1, comm, s));                     // seq 1
  NCCL_CHECK(ncclBcast(g_buf, 20, ncclUint8, 0, comm, s));                                // seq 2
  NCCL_CHECK(ncclReduce(g_buf, g_buf, 300, ncclFloat16, ncclMax, 2 % nranks, comm, s));   // seq 3
  NCCL_CHECK(ncclAllGather(g_buf, g_buf, 256, ncclBfloat16, comm, s));                    // seq 4
  NCCL_CHECK(ncclReduceScatter(g_buf, g_buf, 128, ncclFloat32, ncclSum, comm, s));        // seq 5
  NCCL_CHECK(ncclAlltoAll(g_buf, g_buf, 64, ncclInt8, comm, s));                          // seq 6
  NCCL_CHECK(ncclGather(g_buf, g_buf, 16, ncclFloat64, 0, comm, s));                      // seq 7
  NCCL_CHECK(ncclScatter(g_buf, g_buf, 16, ncclInt32, 0, comm, s));                       // seq 8
  NCCL_CHECK(ncclGroupStart());
  NCCL_CHECK(ncclSend(g_buf, 32, ncclFloat32, (rank + 1) % nranks, comm, Stream(0x5200)));           // seq 9
  NCCL_CHECK(ncclRecv(g_buf, 32, ncclFloat32, (rank + nranks - 1) % nranks, comm, Stream(0x5200)));  // seq 10
  NCCL_CHECK(ncclGroupEnd());
  NCCL_CHECK(ncclGroupStart());
  NCCL_CHECK(ncclGroupStart());
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 8, ncclFloat32, ncclSum, comm, s));  // seq 11, group 2
  NCCL_CHECK(ncclGroupEnd());
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 9, ncclFloat32, ncclSum, comm, s));  // seq 12, group 2
  NCCL_CHECK(ncclGroupEnd());
  ncclComm_t child = nullptr;
  NCCL_CHECK(ncclCommSplit(comm, rank % 2, rank, &child, nullptr));
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 77, ncclFloat32, ncclSum, child, Stream(0x5300)));  // child seq 0
  NCCL_CHECK(ncclCommDestroy(child));
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

// N all-reduces, `sleep_us` apart. Prints "pid P" first, then "progress K" after every
// `every`-th op returned (flushed), so a test can signal it at a known point.
int Loop(int n, int sleep_us, int every) {
  std::printf("pid %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  ncclComm_t comm = InitWorld();
  for (int i = 0; i < n; ++i) {
    NCCL_CHECK(ncclAllReduce(g_buf, g_buf, i + 1, ncclFloat32, ncclSum, comm, Stream(0x5100)));
    if ((i + 1) % every == 0) {
      std::printf("progress %d\n", i + 1);
      std::fflush(stdout);
    }
    if (sleep_us > 0) usleep(sleep_us);
  }
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

// T threads, each with its own communicator, K all-reduces each.
int Threads(int t, int k) {
  std::vector<std::thread> threads;
  for (int i = 0; i < t; ++i)
    threads.emplace_back([i, k] {
      ncclComm_t comm = nullptr;
      NCCL_CHECK(ncclCommInitRank(&comm, 2, MakeId(100 + i), 0));
      for (int j = 0; j < k; ++j)
        NCCL_CHECK(ncclAllReduce(g_buf, g_buf, j + 1, ncclFloat32, ncclSum, comm, Stream(0x6000 + i)));
      NCCL_CHECK(ncclCommDestroy(comm));
    });
  for (auto& th : threads) th.join();
  return 0;
}

// A forked child (a DataLoader worker) calls NCCL and exits through exit() (atexit
// handlers run): it must write nothing. The parent goes on recording.
int Fork() {
  ncclComm_t comm = InitWorld();
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 1, ncclFloat32, ncclSum, comm, Stream(0x5100)));
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    for (int i = 0; i < 5; ++i) ncclAllReduce(g_buf, g_buf, 1000 + i, ncclFloat32, ncclSum, comm, Stream(0x5100));
    std::exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 2, ncclFloat32, ncclSum, comm, Stream(0x5100)));
  NCCL_CHECK(ncclCommDestroy(comm));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

// A non-blocking communicator: init returns ncclInProgress until polled.
int Nonblocking() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, 2, MakeId(7), 1, &config);
  if (r != ncclSuccess && r != ncclInProgress) return 1;
  ncclResult_t state = ncclInProgress;
  int polls = 0;
  while (state == ncclInProgress && polls < 1000) {
    NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
    ++polls;
  }
  std::printf("init: %d polls: %d\n", static_cast<int>(r), polls);
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 5, ncclFloat32, ncclSum, comm, Stream(0x5100)));
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

// Calls ncclAlltoAll and prints the code it returned (the "old" double lacks it).
int Missing() {
  ncclComm_t comm = InitWorld();
  ncclResult_t r = ncclAlltoAll(g_buf, g_buf, 4, ncclFloat32, comm, Stream(0x5100));
  std::printf("ncclAlltoAll: %d\n", static_cast<int>(r));
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 3, ncclFloat32, ncclSum, comm, Stream(0x5100)));
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

// NCCL reached only through a library loaded with RTLD_LOCAL (as PyTorch loads it).
int Local(const char* lib) {
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "nccl_driver: dlopen %s: %s\n", lib, dlerror());
    return 1;
  }
  auto run = reinterpret_cast<int (*)(int)>(dlsym(h, "run_local_ops"));
  return run ? run(3) : 1;
}

// NVTX ranges around NCCL calls: ProfilerStep#N push/pop, a start/end range, a marker and
// a name longer than the injector's inline buffer.
int Nvtx() {
  ncclComm_t comm = InitWorld();
  for (int step = 1; step <= 3; ++step) {
    std::string name = "ProfilerStep#" + std::to_string(step);
    nvtxRangePushA(name.c_str());
    nvtxRangePushA("forward");
    nvtxRangePop();
    NCCL_CHECK(ncclAllReduce(g_buf, g_buf, step, ncclFloat32, ncclSum, comm, Stream(0x5100)));
    nvtxRangePop();
  }
  nvtxRangeId_t id = nvtxRangeStartA("checkpoint");
  nvtxMarkA("marker");
  nvtxRangePushA("a-range-name-that-is-much-longer-than-forty-seven-bytes-in-total");
  nvtxRangePop();
  // 45 ASCII bytes, then "€" (3 bytes) across the 47-byte cut: stored as the 45 bytes only.
  nvtxRangePushA("utf8-cut-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\xe2\x82\xac-tail");
  nvtxRangePop();
  nvtxRangeEnd(id);
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

// GPU activity through the CUPTI double: the program calls InitializeInjection as libcuda
// would, "launches" GEMMs itself and lets the NCCL double launch the collectives' kernels at
// set GPU times. Per iteration i (ProfilerStep#i, 10 ms apart): a GEMM on stream 7 over
// [0, 6) ms and an all-reduce kernel on stream 20 over [4, 8) ms: 2 of 4 ms hidden. Then a
// grouped send/recv whose one kernel [52, 53) ms does not overlap the GEMM [50, 51) ms, and
// a memcpy [60, 61) ms. Expected: comm 21 ms, compute 31 ms, overlap 10 ms, memory 1 ms.
// The CUPTI double's entry points (dlopen'ed globally so the injector's CUPTI calls resolve
// to it) and the injector's InitializeInjection; false (said on stderr) when one is missing.
struct CuptiDouble {
  int (*init)() = nullptr;
  void (*launch)(const char*, uint32_t, uint64_t, uint64_t, uint64_t, int) = nullptr;
  void (*next)(uint64_t, uint64_t) = nullptr;  // the NCCL double's next kernel times
  bool Load(const char* fake_cupti) {
    if (!dlopen(fake_cupti, RTLD_NOW | RTLD_GLOBAL)) {
      std::fprintf(stderr, "nccl_driver: dlopen %s: %s\n", fake_cupti, dlerror());
      return false;
    }
    init = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "InitializeInjection"));
    launch = reinterpret_cast<decltype(launch)>(dlsym(RTLD_DEFAULT, "fake_cupti_launch"));
    next = reinterpret_cast<decltype(next)>(dlsym(RTLD_DEFAULT, "fake_nccl_next_kernel"));
    if (init && launch && next) return true;
    std::fprintf(stderr, "nccl_driver: the injector or a double is missing\n");
    return false;
  }
};

// A launcher's shape (torchrun's agent): CUDA initialized with the injector in the process, then
// neither GPU work nor NCCL.
int CudaOnly(const char* fake_cupti) {
  CuptiDouble d;
  if (!d.Load(fake_cupti)) return 1;
  d.init();
  return 0;
}

int Cupti(const char* fake_cupti) {
  CuptiDouble d;
  if (!d.Load(fake_cupti)) return 1;
  auto init = d.init;
  auto launch = d.launch;
  auto next = d.next;
  init();  // what libcuda does at cuInit when CUDA_INJECTION64_PATH names the injector
  ncclComm_t comm = InitWorld();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const uint64_t ms = 1000000, base = uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec) + 100 * ms;
  auto now = [] {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
  };
  for (int i = 0; i < 5; ++i) {
    std::string step = "ProfilerStep#" + std::to_string(i);
    nvtxRangePushA(step.c_str());
    uint64_t t = base + i * 10 * ms;
    launch("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm>(Params)", 7, t, t + 6 * ms, now(), 0);
    next(t + 4 * ms, t + 8 * ms);
    NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 1 << 20, ncclFloat32, ncclSum, comm, Stream(0x5100)));
    nvtxRangePop();
  }
  uint64_t t = base + 50 * ms;
  launch("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm>(Params)", 7, t, t + 1 * ms, now(), 0);
  next(t + 2 * ms, t + 3 * ms);
  NCCL_CHECK(ncclGroupStart());
  NCCL_CHECK(ncclSend(g_buf, 32, ncclFloat32, 1, comm, Stream(0x5200)));
  NCCL_CHECK(ncclRecv(g_buf, 32, ncclFloat32, 1, comm, Stream(0x5200)));
  NCCL_CHECK(ncclGroupEnd());
  launch("", 7, base + 60 * ms, base + 61 * ms, now(), 1);
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

// A job that runs for a while (`overlapprof run --watch-*`, tests/e2e/watch_test.py): `steps`
// iterations 10 ms apart on the GPU clock, each a ProfilerStep#i range around a 6 ms GEMM and a
// 4 ms all-reduce kernel from 4 ms (2 ms hidden, 2 ms exposed), `sleep_ms` of real time apart.
int CuptiSteps(const char* fake_cupti, int steps, int sleep_ms) {
  CuptiDouble d;
  if (!d.Load(fake_cupti)) return 1;
  d.init();
  ncclComm_t comm = InitWorld();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const uint64_t ms = 1000000, base = uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec) + 100 * ms;
  for (int i = 0; i < steps; ++i) {
    std::string step = "ProfilerStep#" + std::to_string(i);
    nvtxRangePushA(step.c_str());
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    const uint64_t t = base + uint64_t(i) * 10 * ms;
    d.launch("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm>(Params)", 7, t, t + 6 * ms,
             uint64_t(now.tv_sec) * 1000000000u + uint64_t(now.tv_nsec), 0);
    d.next(t + 4 * ms, t + 8 * ms);
    NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 1 << 20, ncclFloat32, ncclSum, comm, Stream(0x5100)));
    nvtxRangePop();
    struct timespec sl {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
    nanosleep(&sl, nullptr);
  }
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

// Peer copies: a GEMM [0, 2) ms on stream 7 and a copy from device 0 to device 1 [1, 4) ms on
// stream 9 (CUPTI's MEMCPY2 record). Expected: the copy is communication (kind p2p_copy), named
// with both devices in the store; comm 3 ms, compute 2 ms, overlap 1 ms.
int CuptiPeer(const char* fake_cupti) {
  CuptiDouble d;
  if (!d.Load(fake_cupti)) return 1;
  auto launch = d.launch;
  d.init();
  ncclComm_t comm = InitWorld();  // the rank file's rank comes from the communicator
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const uint64_t ms = 1000000, base = uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec) + 100 * ms;
  launch("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm>(Params)", 7, base, base + 2 * ms, base - ms, 0);
  launch("", 9, base + 1 * ms, base + 4 * ms, base - ms, 2);
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

// Event dependencies (CUPTI 12.8+ records): a GEMM [0, 2) ms on stream 7, cudaEventRecord on
// stream 7 (sync id 42), cudaStreamWaitEvent of stream 9 on it, a kernel [2, 3) ms on stream 9,
// cudaEventRecord on stream 9 (43) and cudaEventSynchronize on it. Expected in the store: the
// records, the stream wait and the host wait, joined by sync id.
int CuptiEvents(const char* fake_cupti) {
  CuptiDouble d;
  if (!d.Load(fake_cupti)) return 1;
  auto event = reinterpret_cast<void (*)(int, uint32_t, uint64_t, uint64_t, uint64_t, uint64_t)>(
      dlsym(RTLD_DEFAULT, "fake_cupti_event"));
  if (!event) return 1;
  d.init();
  ncclComm_t comm = InitWorld();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const uint64_t ms = 1000000, base = uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec) + 100 * ms;
  d.launch("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm>(Params)", 7, base, base + 2 * ms, base - 5 * ms, 0);
  event(1, 7, 42, base - 4 * ms, 0, 0);
  event(2, 9, 42, base - 3 * ms, base - 3 * ms, base - 3 * ms);
  d.launch("elementwise_kernel", 9, base + 2 * ms, base + 3 * ms, base - 2 * ms, 0);
  event(1, 9, 43, base - 1 * ms, 0, 0);
  event(3, 0, 43, base - ms / 2, base - ms / 2, base + 3 * ms);
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

// CUDA initializes (InitializeInjection) on the main thread while two threads that started
// before it call NCCL, with nothing else ordering them (the flag is relaxed): the hooks see
// CUPTI become active and read its API table concurrently with its publication. For
// ThreadSanitizer (tests/injector/tsan_test.py); the file's content is not checked.
int CuptiRace(const char* fake_cupti) {
  // RTLD_LOCAL: the NCCL double then launches nothing through the CUPTI double, whose lock
  // would otherwise order the threads (and hide a race from ThreadSanitizer).
  if (!dlopen(fake_cupti, RTLD_NOW | RTLD_LOCAL)) {
    std::fprintf(stderr, "nccl_driver: dlopen %s: %s\n", fake_cupti, dlerror());
    return 1;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "InitializeInjection"));
  if (!init) return 1;
  ncclComm_t comm = InitWorld();
  std::atomic<bool> initialized{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      int after = 0;
      while (after < 2000) {
        if (initialized.load(std::memory_order_relaxed)) ++after;
        NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 1, ncclFloat32, ncclSum, comm, Stream(0x8000 + i)));
      }
    });
  usleep(20000);
  init();
  initialized.store(true, std::memory_order_relaxed);
  for (auto& th : threads) th.join();
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

int InitAll() {
  ncclComm_t comms[2] = {nullptr, nullptr};
  NCCL_CHECK(ncclCommInitAll(comms, 2, nullptr));
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < 2; ++i)
    NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 10, ncclFloat32, ncclSum, comms[i], Stream(0x7000 + i)));
  NCCL_CHECK(ncclGroupEnd());
  for (auto* c : comms) NCCL_CHECK(ncclCommDestroy(c));
  return 0;
}


// ---- A hostile host process -------------------------------------------------------

// Records, then closes every descriptor >= 3 (as a daemonizing program or a sandbox does),
// opens VICTIM and puts it under every number from 3 to 4095 (so whatever number the
// recorder kept, it now names the program's file), and keeps calling NCCL across several
// flush periods. The recorder must write nothing into VICTIM and must not spin: prints the
// CPU time this process used while idle afterwards ("idle_cpu_ms N").
int CloseFds(const char* victim) {
  ncclComm_t comm = InitWorld();
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 1, ncclFloat32, ncclSum, comm, Stream(0x5100)));
  usleep(200 * 1000);  // at least one commit
  struct rlimit lim;
  getrlimit(RLIMIT_NOFILE, &lim);
  int top = lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur > 65536 ? 65536 : static_cast<int>(lim.rlim_cur);
  for (int fd = 3; fd < top; ++fd) close(fd);
  int v = open(victim, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (v < 0) return 1;
  int last = top < 4096 ? top : 4096;
  for (int fd = 3; fd < last; ++fd)
    if (fd != v && dup2(v, fd) < 0) return 1;
  for (int i = 0; i < 20; ++i) {
    ncclAllReduce(g_buf, g_buf, 2 + i, ncclFloat32, ncclSum, comm, Stream(0x5100));
    usleep(20 * 1000);
  }
  struct rusage a, b;
  getrusage(RUSAGE_SELF, &a);
  usleep(500 * 1000);
  getrusage(RUSAGE_SELF, &b);
  auto ms = [](const struct rusage& r) {
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000.0 + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1000.0;
  };
  std::printf("idle_cpu_ms %.0f\n", ms(b) - ms(a));
  std::fflush(stdout);
  return 0;  // the exit path (final flush) runs after this, still against VICTIM
}

// One thread starts the recorder (its first NCCL call) while the main thread forks; the
// child calls NCCL and exits. A child that inherited "activating" must not wait for an
// activation no thread of it will finish. Exit 1 when the child hangs (it is killed).
int ForkRace() {
  std::atomic<bool> go{false};
  std::thread t([&] {
    go.store(true);
    InitWorld();
  });
  while (!go.load()) {
  }
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    ncclComm_t c = nullptr;
    ncclCommInitRank(&c, 2, MakeId(3), 0);
    _exit(0);
  }
  t.join();
  for (int i = 0; i < 500; ++i) {  // 5 s
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    usleep(10 * 1000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  std::fprintf(stderr, "nccl_driver: the forked child hung\n");
  return 1;
}

std::atomic<int> g_sigint_calls{0};
void OnSigint(int) { g_sigint_calls.fetch_add(1); }

// The program's signal semantics survive the recorder: SIGINT installed without SA_RESTART,
// with SA_RESETHAND, SA_ONSTACK and a mask; SIGTERM ignored. After activation the flags and
// mask are the program's, SIGTERM is still ignored, and a SIGINT reaches the program's
// handler once, then the disposition is the default (SA_RESETHAND). Exit 1 with a line per
// difference.
int SigFlags() {
  struct sigaction a;
  std::memset(&a, 0, sizeof a);
  a.sa_handler = OnSigint;
  a.sa_flags = SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&a.sa_mask);
  sigaddset(&a.sa_mask, SIGUSR2);
  sigaction(SIGINT, &a, nullptr);
  signal(SIGTERM, SIG_IGN);
  ncclComm_t comm = InitWorld();
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 1, ncclFloat32, ncclSum, comm, Stream(0x5100)));
  int bad = 0;
  auto fail = [&](const char* what) {
    std::fprintf(stderr, "nccl_driver: %s\n", what);
    ++bad;
  };
  struct sigaction now;
  sigaction(SIGINT, nullptr, &now);
  if (now.sa_flags & SA_RESTART) fail("SIGINT: SA_RESTART added");
  if (!(now.sa_flags & SA_ONSTACK)) fail("SIGINT: SA_ONSTACK lost");
  if (!(now.sa_flags & SA_RESETHAND)) fail("SIGINT: SA_RESETHAND lost");
  if (!sigismember(&now.sa_mask, SIGUSR2)) fail("SIGINT: sa_mask lost");
  sigaction(SIGTERM, nullptr, &now);
  if (now.sa_handler != SIG_IGN) fail("SIGTERM: no longer ignored");
  raise(SIGINT);
  if (g_sigint_calls.load() != 1) fail("SIGINT: the program's handler did not run once");
  sigaction(SIGINT, nullptr, &now);
  if (now.sa_handler != SIG_DFL) fail("SIGINT: not reset to the default (SA_RESETHAND)");
  raise(SIGTERM);  // ignored: we go on
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 2, ncclFloat32, ncclSum, comm, Stream(0x5100)));
  NCCL_CHECK(ncclCommDestroy(comm));
  return bad ? 1 : 0;
}

// Polls a non-blocking communicator until it is ready (bounded: 1000 polls).
void WaitReady(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int polls = 0; state == ncclInProgress && polls < 1000; ++polls) NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
}

// Non-blocking communicators all the way: a world communicator (rank 2 of 4), a split of it
// and a shrink of it, each in progress at creation (FAKE_NCCL_INPROGRESS), one op on each
// child once ready. The double's split with color 0 gives rank 1 of 2; the shrink without
// rank 0 gives rank 1 of 3.
int NonblockingSplit() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t world = nullptr, child = nullptr, shrunk = nullptr;
  NCCL_CHECK(ncclCommInitRankConfig(&world, 4, MakeId(8), 2, &config));
  WaitReady(world);
  NCCL_CHECK(ncclCommSplit(world, 0, 0, &child, &config));
  WaitReady(child);
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 6, ncclFloat32, ncclSum, child, Stream(0x5100)));
  int exclude[1] = {0};
  NCCL_CHECK(ncclCommShrink(world, exclude, 1, &shrunk, &config, NCCL_SHRINK_DEFAULT));
  WaitReady(shrunk);
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 7, ncclFloat32, ncclSum, shrunk, Stream(0x5100)));
  NCCL_CHECK(ncclCommDestroy(shrunk));
  NCCL_CHECK(ncclCommDestroy(child));
  NCCL_CHECK(ncclCommDestroy(world));
  return 0;
}

// Communicators that must not set the process's rank (no RANK in the environment): a split
// of a single-process ncclCommInitAll (a helper, not a rank), a small 2-rank communicator
// (rank 1), then the world (rank 5 of 8), which wins. Then, with "sub": the only
// communicator the injector sees is a split (rank 1 of 2) of a parent created through
// pncclCommInitRank (bypassing the hooks, as a library calling NCCL's p-aliases does): its
// rank is uncertain.
int Ranks(bool sub) {
  if (sub) {
    using InitFn = ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int);
    auto pinit = reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "pncclCommInitRank"));
    if (!pinit) return 1;
    ncclComm_t parent = nullptr, child = nullptr;
    NCCL_CHECK(pinit(&parent, 4, MakeId(9), 3));
    NCCL_CHECK(ncclCommSplit(parent, 1, 0, &child, nullptr));
    NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 8, ncclFloat32, ncclSum, child, Stream(0x5100)));
    NCCL_CHECK(ncclCommDestroy(child));
    return 0;
  }
  ncclComm_t all[4] = {}, helper_child = nullptr, small = nullptr, world = nullptr;
  NCCL_CHECK(ncclCommInitAll(all, 4, nullptr));
  NCCL_CHECK(ncclCommSplit(all[2], 0, 0, &helper_child, nullptr));  // rank 1 of 2
  NCCL_CHECK(ncclCommInitRank(&small, 2, MakeId(10), 1));
  NCCL_CHECK(ncclCommInitRank(&world, 8, MakeId(11), 5));
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 9, ncclFloat32, ncclSum, world, Stream(0x5100)));
  for (ncclComm_t c : {helper_child, small, world, all[0], all[1], all[2], all[3]}) NCCL_CHECK(ncclCommDestroy(c));
  return 0;
}

// A simulated group (ncclGroupSimulateEnd: nothing launched) of three ops, then a real
// group of one allreduce. Prints the simulation's result and estimate.
// With the NCCL double's profiler mode (FAKE_NCCL_PROFILER=1): single collectives, a fused
// group of collectives (one launch), an all-to-all as grouped send/recv, a split with an op
// on the child, threads, then destruction. tests/e2e/injector_test.py follows this sequence.
int Plugin(int threads) {
  ncclComm_t comm = InitWorld();
  int nranks = EnvInt("WORLD_SIZE", 4);
  int rank = EnvInt("RANK", 0);
  cudaStream_t s = Stream(0x7100);
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 1024, ncclFloat32, ncclSum, comm, s));       // seq 0
  NCCL_CHECK(ncclBroadcast(g_buf, g_buf, 10, ncclInt64, 1 % nranks, comm, s));        // seq 1
  NCCL_CHECK(ncclAllGather(g_buf, g_buf, 256, ncclBfloat16, comm, s));                // seq 2
  NCCL_CHECK(ncclReduceScatter(g_buf, g_buf, 128, ncclFloat32, ncclSum, comm, s));    // seq 3
  NCCL_CHECK(ncclGroupStart());  // a fused group: three allreduces, one launch
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 100, ncclFloat32, ncclSum, comm, s));        // seq 4
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 200, ncclFloat32, ncclSum, comm, s));        // seq 5
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 300, ncclFloat32, ncclSum, comm, s));        // seq 6
  NCCL_CHECK(ncclGroupEnd());
  NCCL_CHECK(ncclGroupStart());  // all-to-all as grouped send/recv (seq 7-14)
  for (int p = 0; p < nranks; ++p) {
    NCCL_CHECK(ncclSend(g_buf, 32 + p, ncclInt8, p, comm, s));
    NCCL_CHECK(ncclRecv(g_buf, 32 + p, ncclInt8, p, comm, s));
  }
  NCCL_CHECK(ncclGroupEnd());
  ncclComm_t child = nullptr;
  NCCL_CHECK(ncclCommSplit(comm, rank % 2, rank, &child, nullptr));
  if (child) NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 64, ncclFloat16, ncclSum, child, s));
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([t] {
      ncclComm_t c = nullptr;
      NCCL_CHECK(ncclCommInitRank(&c, 1, MakeId(100 + t), 0));
      for (int i = 0; i < 50; ++i) NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 16 + i, ncclFloat32, ncclSum, c, Stream(1)));
      NCCL_CHECK(ncclCommDestroy(c));
    });
  for (auto& t : ts) t.join();
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 4096, ncclFloat32, ncclSum, comm, s));       // seq 15 (NCCL: AllReduce 4)
  if (child) NCCL_CHECK(ncclCommDestroy(child));
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

// The CUPTI double and the NCCL double's profiler mode together (FAKE_NCCL_PROFILER=1,
// NCCL_PROFILER_PLUGIN = the injector): per iteration i (ProfilerStep#i, 20 ms apart) a GEMM
// on stream 7 over [0, 6) ms, a fused group of three all-reduces whose one kernel runs over
// [4, 10) ms (the plugin times them [4, 5.8), [6, 7.8), [8, 9.8) ms), and a lone all-reduce
// whose kernel (and plugin op) runs over [12, 14) ms. Three iterations. Expected per
// iteration: by kernels comm 8 ms and overlap 2 ms; by the plugin comm 7.4 ms, overlap 1.8 ms.
// For several ranks on one timeline: FAKE_BASE_NS (CLOCK_REALTIME ns, in the future) is the first
// iteration's start instead of now + 50 ms, and FAKE_FUSED_DELAY_US delays the fused kernel.
int CuptiPlugin(const char* fake_cupti) {
  CuptiDouble d;
  if (!d.Load(fake_cupti)) return 1;
  d.init();
  ncclComm_t comm = InitWorld();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const uint64_t ms = 1000000;
  const char* fixed = std::getenv("FAKE_BASE_NS");
  const uint64_t base = fixed ? std::strtoull(fixed, nullptr, 10)
                              : uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec) + 50 * ms;
  const uint64_t delay = uint64_t(EnvInt("FAKE_FUSED_DELAY_US", 0)) * 1000;
  auto now = [] {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
  };
  cudaStream_t s = Stream(0x5100);
  for (int i = 0; i < 3; ++i) {
    std::string step = "ProfilerStep#" + std::to_string(i);
    nvtxRangePushA(step.c_str());
    const uint64_t t = base + i * 20 * ms;
    d.launch("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm>(Params)", 7, t, t + 6 * ms, now(), 0);
    d.next(t + 4 * ms + delay, t + 10 * ms + delay);
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 100, ncclFloat32, ncclSum, comm, s));
    NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 200, ncclFloat32, ncclSum, comm, s));
    NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 300, ncclFloat32, ncclSum, comm, s));
    NCCL_CHECK(ncclGroupEnd());
    d.next(t + 12 * ms, t + 14 * ms);
    NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 400, ncclFloat32, ncclSum, comm, s));
    nvtxRangePop();
  }
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

int Simulate() {
  ncclComm_t comm = InitWorld();
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  NCCL_CHECK(ncclGroupStart());
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 11, ncclFloat32, ncclSum, comm, Stream(0x5100)));
  NCCL_CHECK(ncclSend(g_buf, 12, ncclFloat32, 1, comm, Stream(0x5100)));
  NCCL_CHECK(ncclRecv(g_buf, 13, ncclFloat32, 1, comm, Stream(0x5100)));
  ncclResult_t r = ncclGroupSimulateEnd(&sim);
  std::printf("simulate: %d %.1f\n", static_cast<int>(r), sim.estimatedTime);
  NCCL_CHECK(ncclGroupStart());
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 14, ncclFloat32, ncclSum, comm, Stream(0x5100)));
  NCCL_CHECK(ncclGroupEnd());
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

int64_t NowNs() {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// ncclCommFinalize then (100 ms later) ncclCommDestroy; ncclCommRevoke then Destroy. Prints
// the realtime ns just before each Destroy ("destroy_ns A B") and Revoke's result.
int Finalize() {
  ncclComm_t a = InitWorld(), b = nullptr;
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 15, ncclFloat32, ncclSum, a, Stream(0x5100)));
  NCCL_CHECK(ncclCommFinalize(a));
  usleep(100000);
  int64_t destroy_a = NowNs();
  NCCL_CHECK(ncclCommDestroy(a));
  NCCL_CHECK(ncclCommInitRank(&b, 2, MakeId(12), 1));
  ncclResult_t r = ncclCommRevoke(b, NCCL_REVOKE_DEFAULT);
  std::printf("revoke: %d\n", static_cast<int>(r));
  usleep(100000);
  int64_t destroy_b = NowNs();
  NCCL_CHECK(ncclCommDestroy(b));
  std::printf("destroy_ns %lld %lld\n", static_cast<long long>(destroy_a), static_cast<long long>(destroy_b));
  return 0;
}

// Buffer registration and windows (a symmetric one, a plain one, one NCCL refuses), each
// deregistered. Prints "handles_ok 1" when every handle NCCL handed back reached the caller
// unchanged, and the refused call's result ("bad_window: N").
int Register() {
  ncclComm_t a = InitWorld();
  alignas(4096) static char bufs[3][8192];
  void* h = nullptr;
  ncclWindow_t w1 = nullptr, w2 = nullptr, w3 = nullptr;
  NCCL_CHECK(ncclCommRegister(a, bufs[0], 8192, &h));
  NCCL_CHECK(ncclCommWindowRegister(a, bufs[1], 8192, &w1, NCCL_WIN_COLL_SYMMETRIC));
  NCCL_CHECK(ncclCommWindowRegister(a, bufs[2], 4096, &w2, NCCL_WIN_DEFAULT));
  ncclResult_t bad = ncclCommWindowRegister(a, bufs[2] + 1, 4096, &w3, NCCL_WIN_DEFAULT);  // misaligned
  bool ok = h == bufs[0] + 1 && reinterpret_cast<char*>(w1) == bufs[1] + 1 &&
            reinterpret_cast<char*>(w2) == bufs[2] + 1 && w3 == nullptr;
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 15, ncclFloat32, ncclSum, a, Stream(0x5200)));
  NCCL_CHECK(ncclCommWindowDeregister(a, w1));
  NCCL_CHECK(ncclCommWindowDeregister(a, w2));
  NCCL_CHECK(ncclCommDeregister(a, h));
  NCCL_CHECK(ncclCommDestroy(a));
  std::printf("handles_ok %d\nbad_window: %d\n", ok ? 1 : 0, static_cast<int>(bad));
  return 0;
}

// Resident memory growth across the first NCCL call (the recorder's activation), printed as
// "rss_growth_kib N".
long RssKib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  std::fclose(f);
  return kib;
}
// A full disk, as the recording process sees it: RLIMIT_FSIZE = LIMIT bytes (SIGXFSZ
// ignored, so a write past it fails with EFBIG). Phase 1 (PHASE1_MS, default 1000): NCCL calls and CUPTI
// launches until the rank file cannot grow; phase 2 (2 + 2 s): CUPTI launches only (paced), with the
// heap in use measured across the second 2 s. Prints "launches N" and "heap_growth_kib K" (phase 2).
// Bytes the process's allocator has handed out and not had back (every arena, plus mmapped
// blocks): unlike RSS, memory freed but kept by the allocator does not count.
long long HeapInUse() {
  struct mallinfo2 m = mallinfo2();
  return static_cast<long long>(m.uordblks + m.hblkhd);
}

int FullFile(const char* fake_cupti, long limit, long phase1_ms) {
  if (!dlopen(fake_cupti, RTLD_NOW | RTLD_GLOBAL)) return 1;
  auto init = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "InitializeInjection"));
  auto launch = reinterpret_cast<void (*)(const char*, uint32_t, uint64_t, uint64_t, uint64_t, int)>(
      dlsym(RTLD_DEFAULT, "fake_cupti_launch"));
  if (!init || !launch) return 1;
  init();
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl = {static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0) return 1;
  ncclComm_t comm = InitWorld();
  auto now = [] {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
  };
  const uint64_t start = now();
  // kind 1 (a memcpy): the double keeps nothing per launch (kernels keep their name).
  while (now() - start < uint64_t(phase1_ms) * 1000000u) {
    for (int i = 0; i < 100; ++i) {
      NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 1024 + i, ncclFloat32, ncclSum, comm, Stream(0x5100)));
      uint64_t t = now();
      launch("", 7, t, t + 1000, t, 1);
    }
  }
  usleep(200000);  // the writer's failed commit and what follows it
  // Paced (at most 100 launches per ms) so the double's own queue between two flushes
  // stays small next to what a recorder that kept the records would grow by. A first 2 s
  // is not measured: under load the failed commit, the CUPTI pool's last buffers and the
  // queue's high-water mark can land after the 200 ms above. A recorder that kept the
  // records would at least double what it kept across the measured window (as long as all
  // the time since the failure before it), so a vector of them reallocates in it at least once.
  auto paced = [&](uint64_t ns) {
    uint64_t n = 0;
    const uint64_t t0 = now();
    while (now() - t0 < ns) {
      for (int i = 0; i < 100; ++i, ++n) {
        uint64_t t = now();
        launch("", 7, t, t + 1000, t, 1);
      }
      usleep(1000);
    }
    return n;
  };
  paced(2000000000u);
  long long before = HeapInUse();
  uint64_t launches = paced(2000000000u);
  usleep(200000);
  long long after = HeapInUse();
  std::printf("launches %llu\nheap_growth_kib %lld\n", static_cast<unsigned long long>(launches), (after - before) / 1024);
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

// ---- Dying jobs: signals, a full disk, _exit, forks, closed standard descriptors --------

std::atomic<int> g_own_handler_calls{0};
void OwnHandler(int) { g_own_handler_calls.fetch_add(1); }

int SignalNumber(const char* name) {
  static const struct {
    const char* name;
    int sig;
  } kSignals[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"TERM", SIGTERM}, {"USR1", SIGUSR1},
                  {"USR2", SIGUSR2}, {"ALRM", SIGALRM}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"XCPU", SIGXCPU},
                  {"XFSZ", SIGXFSZ}, {"PIPE", SIGPIPE}, {"PWR", SIGPWR}};
  for (const auto& s : kSignals)
    if (std::strcmp(s.name, name) == 0) return s.sig;
  return 0;
}

// The job handles SIG itself: its handler installed before the recorder starts ("early")
// or after ("late"). Prints "pid P", then "progress I" after each op; after each signal it
// handled it prints "handled N"; after the first it does 20 more ops and exits 0. Exit 1
// when the handler in place after activation is not the job's.
int OwnSignal(const char* name, bool late) {
  int sig = SignalNumber(name);
  if (!sig) return 2;
  struct sigaction a;
  std::memset(&a, 0, sizeof a);
  a.sa_handler = OwnHandler;
  sigemptyset(&a.sa_mask);
  if (!late) sigaction(sig, &a, nullptr);
  std::printf("pid %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  ncclComm_t comm = InitWorld();
  if (late) sigaction(sig, &a, nullptr);
  struct sigaction now;
  sigaction(sig, nullptr, &now);
  if (now.sa_handler != OwnHandler) {
    std::fprintf(stderr, "nccl_driver: the job's handler of %s was replaced\n", name);
    return 1;
  }
  int seen = 0, after = 0;
  for (int i = 0; i < 100000 && after < 20; ++i) {
    NCCL_CHECK(ncclAllReduce(g_buf, g_buf, i + 1, ncclFloat32, ncclSum, comm, Stream(0x5100)));
    std::printf("progress %d\n", i + 1);
    int calls = g_own_handler_calls.load();
    if (calls != seen) std::printf("handled %d\n", seen = calls);
    std::fflush(stdout);
    if (seen) ++after;
    usleep(1000);
  }
  NCCL_CHECK(ncclCommDestroy(comm));
  return seen ? 0 : 1;
}

// Ops (and, with FAKE_CUPTI, one GPU launch each) for MS milliseconds, then _exit(0): no
// exit handler, no final flush. Prints "op I T" (T: CLOCK_REALTIME ns when op I returned).
int QuickExit(long ms, const char* fake_cupti) {
  using Launch = void (*)(const char*, uint32_t, uint64_t, uint64_t, uint64_t, int);
  Launch launch = nullptr;
  if (fake_cupti) {
    if (!dlopen(fake_cupti, RTLD_NOW | RTLD_GLOBAL)) return 1;
    auto init = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "InitializeInjection"));
    launch = reinterpret_cast<Launch>(dlsym(RTLD_DEFAULT, "fake_cupti_launch"));
    if (!init || !launch) return 1;
    init();
  }
  ncclComm_t comm = InitWorld();
  const uint64_t start = uint64_t(NowNs());
  for (int i = 1; uint64_t(NowNs()) - start < uint64_t(ms) * 1000000u; ++i) {
    NCCL_CHECK(ncclAllReduce(g_buf, g_buf, i, ncclFloat32, ncclSum, comm, Stream(0x5100)));
    uint64_t t = uint64_t(NowNs());
    if (launch) launch("", 7, t, t + 1000, t, 1);
    std::printf("op %d %llu\n", i, static_cast<unsigned long long>(t));
    usleep(2000);
  }
  std::fflush(stdout);
  _exit(0);
}

// A full disk as the process sees it (RLIMIT_FSIZE LIMIT bytes, SIGXFSZ ignored), set
// before the recorder starts ("early": its file cannot even be created; CUDA, i.e. the CUPTI
// double, initializes 200 ms after the first NCCL call) or after its first commit ("late");
// then N all-reduces in bursts of 1000 (paced: the ring never fills), with
// one GPU launch each when FAKE_CUPTI is given, and a normal exit. Prints "ops N",
// "launches N" and "heap_growth_kib K" (the heap in use after the ops, less before them).
int FullDiskOps(bool early, long limit, int n, const char* fake_cupti) {
  using Launch = void (*)(const char*, uint32_t, uint64_t, uint64_t, uint64_t, int);
  Launch launch = nullptr;
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl = {static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
  if (early && setrlimit(RLIMIT_FSIZE, &rl) != 0) return 1;
  ncclComm_t comm = InitWorld();  // the recorder starts: "early", its file cannot be created
  if (early) usleep(200 * 1000);  // CUDA initializes after that failure
  if (fake_cupti) {
    if (!dlopen(fake_cupti, RTLD_NOW | RTLD_GLOBAL)) return 1;
    auto init = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "InitializeInjection"));
    launch = reinterpret_cast<Launch>(dlsym(RTLD_DEFAULT, "fake_cupti_launch"));
    if (!init || !launch) return 1;
    init();
  }
  if (!early) {
    usleep(300 * 1000);  // the first commits
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) return 1;
  }
  uint64_t launches = 0;
  const long long heap_before = HeapInUse();
  for (int i = 0; i < n; ++i) {
    NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 1024 + i, ncclFloat32, ncclSum, comm, Stream(0x5100)));
    if (launch) {
      uint64_t t = uint64_t(NowNs());
      // "late": a kernel (its name is cached by the decoder across the failure); "early": a
      // copy (the double keeps nothing per copy, so the heap measures the recorder).
      launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 7, t, t + 1000, t, early ? 1 : 0);
      ++launches;
    }
    if ((i + 1) % 1000 == 0) usleep(2000);
  }
  usleep(200 * 1000);  // the writer's last drain before the measure
  const long long heap_after = HeapInUse();
  NCCL_CHECK(ncclCommDestroy(comm));
  std::printf("ops %d\nlaunches %llu\nheap_growth_kib %lld\n", n, static_cast<unsigned long long>(launches),
              (heap_after - heap_before) / 1024);
  return 0;
}

// After its first NCCL call the job closes every descriptor 0..1023 (the recorder's high
// ones among them) and opens its own files: VICTIM.0 as fd 0, .1 as 1, .2 as 2, and .3
// under every other number up to 1023. Then more ops and a normal exit.
int CloseLow(const char* victim) {
  ncclComm_t comm = InitWorld();
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 1, ncclFloat32, ncclSum, comm, Stream(0x5100)));
  usleep(200 * 1000);  // at least one commit
  for (int fd = 0; fd < 1024; ++fd) close(fd);
  for (int k = 0; k < 4; ++k) {
    std::string path = std::string(victim) + "." + std::to_string(k);
    if (open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644) != k) return 1;
  }
  for (int fd = 4; fd < 1024; ++fd)
    if (dup2(3, fd) < 0) return 1;
  for (int i = 0; i < 20; ++i) {
    ncclAllReduce(g_buf, g_buf, 2 + i, ncclFloat32, ncclSum, comm, Stream(0x5100));
    usleep(20 * 1000);
  }
  ncclCommDestroy(comm);
  return 0;
}

int Rss() {
  long before = RssKib();
  ncclComm_t comm = InitWorld();
  NCCL_CHECK(ncclAllReduce(g_buf, g_buf, 1, ncclFloat32, ncclSum, comm, Stream(0x5100)));
  long after = RssKib();
  std::printf("rss_growth_kib %ld\n", after - before);
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "ops") return Ops();
  if (mode == "loop" && argc > 3)
    return Loop(std::atoi(argv[2]), std::atoi(argv[3]), argc > 4 ? std::max(1, std::atoi(argv[4])) : 100);
  if (mode == "threads" && argc > 3) return Threads(std::atoi(argv[2]), std::atoi(argv[3]));
  if (mode == "fork") return Fork();
  if (mode == "nonblocking") return Nonblocking();
  if (mode == "missing") return Missing();
  if (mode == "local" && argc > 2) return Local(argv[2]);
  if (mode == "nvtx") return Nvtx();
  if (mode == "initall") return InitAll();
  if (mode == "cupti" && argc > 2) return Cupti(argv[2]);
  if (mode == "cupti_steps" && argc > 4) return CuptiSteps(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
  if (mode == "cupti_race" && argc > 2) return CuptiRace(argv[2]);
  if (mode == "cupti_peer" && argc > 2) return CuptiPeer(argv[2]);
  if (mode == "cupti_events" && argc > 2) return CuptiEvents(argv[2]);
  if (mode == "cupti_plugin" && argc > 2) return CuptiPlugin(argv[2]);
  if (mode == "none") return 0;
  if (mode == "cuda_only" && argc > 2) return CudaOnly(argv[2]);
  if (mode == "nonblocking_split") return NonblockingSplit();
  if (mode == "ranks") return Ranks(false);
  if (mode == "ranks_sub") return Ranks(true);
  if (mode == "simulate") return Simulate();
  if (mode == "plugin") return Plugin(argc > 2 ? std::atoi(argv[2]) : 0);
  if (mode == "finalize") return Finalize();
  if (mode == "register") return Register();
  if (mode == "fullfile" && argc > 3) return FullFile(argv[2], std::atol(argv[3]), argc > 4 ? std::atol(argv[4]) : 1000);
  if (mode == "closefds" && argc > 2) return CloseFds(argv[2]);
  if (mode == "forkrace") return ForkRace();
  if (mode == "sigflags") return SigFlags();
  if (mode == "rss") return Rss();
  if ((mode == "ownsignal" || mode == "ownsignal_late") && argc > 2) return OwnSignal(argv[2], mode == "ownsignal_late");
  if (mode == "quickexit" && argc > 2) return QuickExit(std::atol(argv[2]), argc > 3 ? argv[3] : nullptr);
  if ((mode == "fulldisk_early" || mode == "fulldisk_late") && argc > 3)
    return FullDiskOps(mode == "fulldisk_early", std::atol(argv[2]), std::atoi(argv[3]), argc > 4 ? argv[4] : nullptr);
  if (mode == "closelow" && argc > 2) return CloseLow(argv[2]);
  std::fprintf(stderr,
               "usage: nccl_driver ops|loop N SLEEP_US [EVERY]|threads T K|fork|nonblocking|missing|local LIB|nvtx|initall|cupti FAKE_CUPTI|cupti_steps FAKE_CUPTI STEPS SLEEP_MS|cupti_race FAKE_CUPTI|cupti_peer FAKE_CUPTI|cupti_events FAKE_CUPTI|none|nonblocking_split|ranks|ranks_sub|simulate|finalize|fullfile FAKE_CUPTI LIMIT [PHASE1_MS]\n");
  return 2;
}
