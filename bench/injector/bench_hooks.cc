// Cost of a hooked NCCL call on the caller's thread, and the injector writer's throughput.
//
//   bench_hooks calls N [THREADS]   N ncclAllReduce calls per thread against the NCCL test
//                                   double; prints ns per call. Run it three ways (what
//                                   bench/injector/run.sh does): plain (the double's own
//                                   cost), preloaded but inert (no OVERLAPPROF_OUTPUT_DIR:
//                                   the disabled fast path), and recording.
//                                   When recording, it also prints how long the writer took to
//                                   store every record after the first call (its throughput),
//                                   measured at exit after the injector's final flush.
//   bench_hooks writer N            StoreWriter kLive throughput for GPU activity records
//                                   (the CUPTI side of the writer): N activities appended
//                                   in batches of 65,536, one transaction each.
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/store/writer.h"

namespace {

using Clock = std::chrono::steady_clock;
Clock::time_point g_t0;
long long g_records = 0;

void AtExit() {
  // Registered before the first NCCL call, so it runs after the injector's exit handler
  // (atexit runs handlers in reverse order): the file is closed by now.
  double s = std::chrono::duration<double>(Clock::now() - g_t0).count();
  if (std::getenv("OVERLAPPROF_OUTPUT_DIR"))
    std::printf("writer: %lld records stored in %.3f s after the first call: %.2f M records/s\n", g_records, s,
                g_records / s / 1e6);
}

int Calls(long long n, int threads) {
  ncclUniqueId id{};
  std::atexit(AtExit);
  static char buf[64];
  std::vector<double> ns(threads);
  g_t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      ncclComm_t comm = nullptr;
      ncclUniqueId mine = id;
      mine.internal[0] = static_cast<char>(t);
      if (ncclCommInitRank(&comm, 2, mine, 0) != ncclSuccess) std::exit(1);
      auto stream = reinterpret_cast<cudaStream_t>(0x1000);
      // Warm-up: resolves the real function, activates the injector.
      for (int i = 0; i < 1000; ++i) ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, stream);
      auto a = Clock::now();
      for (long long i = 0; i < n; ++i) ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, stream);
      auto b = Clock::now();
      ns[t] = std::chrono::duration<double, std::nano>(b - a).count() / n;
      ncclCommDestroy(comm);
    });
  for (auto& t : ts) t.join();
  double sum = 0;
  for (double v : ns) sum += v;
  g_records = (n + 1000) * threads;
  std::printf("calls: %lld per thread, %d thread(s): %.1f ns per ncclAllReduce call (mean over threads)\n", n,
              threads, sum / threads);
  return 0;
}

int Writer(long long n) {
  using namespace overlapprof;
  std::string path = "/tmp/bench_hooks_writer_" + std::to_string(getpid()) + ".db";
  StoreWriter w;
  StoreWriter::Options o;
  o.mode = StoreWriter::Mode::kLive;
  o.overwrite = true;
  o.row_copies = false;  // as the injector writes
  RunMeta meta;
  if (Status st = w.Open(path, meta, o); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  RankTrace t;
  uint32_t name = t.names.Intern("void at::native::vectorized_elementwise_kernel<4, ...>(...)");
  uint32_t stream = t.StreamIndex(0, 7);
  auto a = Clock::now();
  long long done = 0;
  int64_t ts = 1'700'000'000'000'000'000;
  while (done < n) {
    t.activities.clear();
    for (int i = 0; i < 65536 && done < n; ++i, ++done) {
      Activity x;
      x.start_ns = ts;
      x.end_ns = ts + 5000 + (done % 977);
      ts += 7000;
      x.correlation_id = done;
      x.name_id = name;
      x.stream = stream;
      t.activities.push_back(x);
    }
    if (Status st = w.Append(t); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 1;
    }
  }
  if (Status st = w.Finish(StatCounters{}); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  double s = std::chrono::duration<double>(Clock::now() - a).count();
  std::printf("writer: %lld GPU activity records in %.3f s: %.2f M records/s (kLive, chunks only, batches of 65,536)\n", n, s,
              n / s / 1e6);
  std::remove(path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "calls") == 0)
    return Calls(std::atoll(argv[2]), argc > 3 ? std::atoi(argv[3]) : 1);
  if (argc >= 3 && std::strcmp(argv[1], "writer") == 0) return Writer(std::atoll(argv[2]));
  std::fprintf(stderr, "usage: bench_hooks calls N [THREADS] | bench_hooks writer N\n");
  return 2;
}
