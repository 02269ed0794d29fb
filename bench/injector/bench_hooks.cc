// Cost of a hooked NCCL call on the caller's thread, and the injector writer's throughput.
//
//   bench_hooks calls N [THREADS [RATE]]
//                                   N ncclAllReduce calls per thread (RATE: paced at RATE calls
//                                   per second per thread) against the NCCL test
//                                   double; prints ns per call. Run it three ways (what
//                                   bench/injector/run.sh does): plain (the double's own
//                                   cost), preloaded but inert (no OVERLAPPROF_OUTPUT_DIR:
//                                   the disabled fast path), and recording.
//                                   When recording, it also prints how long the writer took to
//                                   store every record after the first call (its throughput),
//                                   measured at exit after the injector's final flush.
//   bench_hooks plugin N [CHANNELS] NCCL's profiler plugin callbacks per op (Coll start, CHANNELS x
//                                   KernelCh start/stop state/stop, op stop) on the calling thread,
//                                   preloaded and recording; prints ns per op.
//   bench_hooks writer N            StoreWriter kLive throughput for GPU activity records
//                                   (the CUPTI side of the writer): N activities appended
//                                   in batches of 65,536, one transaction each.
#include <dlfcn.h>
#include <nccl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sqlite3.h>

#include <filesystem>

#include "injector/nccl_profiler_abi.h"
#include "src/store/writer.h"

namespace {

using Clock = std::chrono::steady_clock;
Clock::time_point g_t0;
long long g_records = 0;

double g_rate = 0;  // calls per second per thread; 0: as fast as possible

// What the injector's file holds: stored ops and the dropped-record counter.
void StoredAndDropped(long long* stored, long long* dropped) {
  *stored = *dropped = -1;
  const char* dir = std::getenv("OVERLAPPROF_OUTPUT_DIR");
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".db") continue;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(e.path().c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
      auto one = [&](const char* sql) {
        sqlite3_stmt* st = nullptr;
        long long v = -1;
        if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
          v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return v;
      };
      *stored = one("SELECT coalesce(sum(count), 0) FROM comm_op_chunk");
      *dropped = one("SELECT value FROM stats WHERE name='records_dropped_hooks'");
    }
    sqlite3_close(db);
  }
}

void AtExit() {
  // Registered before the first NCCL call, so it runs after the injector's exit handler
  // (atexit runs handlers in reverse order): the file is closed by now.
  double s = std::chrono::duration<double>(Clock::now() - g_t0).count();
  if (!std::getenv("OVERLAPPROF_OUTPUT_DIR")) return;
  long long stored, dropped;
  StoredAndDropped(&stored, &dropped);
  std::printf("writer: %lld records issued, %lld stored, %lld dropped; all stored %.3f s after the first call "
              "(%.2f M records/s)\n",
              g_records, stored, dropped, s, stored / s / 1e6);
}

// CPU time of the calling thread, ns.
double ThreadCpuNs() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

// Minor page faults taken by the calling thread so far (first touches of memory).
long ThreadMinorFaults() {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_minflt;
}

int Calls(long long n, int threads) {
  ncclUniqueId id{};
  std::atexit(AtExit);
  static char buf[64];
  std::vector<double> ns(threads), cpu_ns(threads), faults(threads), first_ns(threads), total_cpu_ns(threads);
  g_t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      double cpu_start = ThreadCpuNs();
      ncclComm_t comm = nullptr;
      ncclUniqueId mine = id;
      mine.internal[0] = static_cast<char>(t);
      if (ncclCommInitRank(&comm, 2, mine, 0) != ncclSuccess) std::exit(1);
      auto stream = reinterpret_cast<cudaStream_t>(0x1000);
      // Warm-up: resolves the real function, activates the injector. The first call's wall time
      // is what activation costs the first caller.
      auto f0 = Clock::now();
      ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, stream);
      first_ns[t] = std::chrono::duration<double, std::nano>(Clock::now() - f0).count();
      for (int i = 1; i < 1000; ++i) ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, stream);
      auto a = Clock::now();
      double cpu_a = ThreadCpuNs();
      long flt_a = ThreadMinorFaults();
      if (g_rate > 0) {
        // Paced: call i is due at a + i / rate (busy wait), to measure whether the writer keeps
        // up with a given sustained rate (no drops with the default ring).
        for (long long i = 0; i < n; ++i) {
          auto due = a + std::chrono::nanoseconds(static_cast<long long>(i * 1e9 / g_rate));
          while (Clock::now() < due) {
          }
          ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, stream);
        }
      } else {
        for (long long i = 0; i < n; ++i) ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, stream);
      }
      auto b = Clock::now();
      double cpu_b = ThreadCpuNs();
      cpu_ns[t] = (cpu_b - cpu_a) / n;
      total_cpu_ns[t] = cpu_b - cpu_start;
      faults[t] = static_cast<double>(ThreadMinorFaults() - flt_a);
      ns[t] = std::chrono::duration<double, std::nano>(b - a).count() / n;
      ncclCommDestroy(comm);
    });
  for (auto& t : ts) t.join();
  double sum = 0, cpu_sum = 0, flt_sum = 0, first_max = 0, total_cpu = 0;
  for (double v : faults) flt_sum += v;
  for (double v : first_ns) first_max = std::max(first_max, v);
  for (double v : total_cpu_ns) total_cpu += v;
  for (double v : ns) sum += v;
  for (double v : cpu_ns) cpu_sum += v;
  g_records = (n + 1000) * threads;
  // Wall time on the calling thread (what the application sees), and its CPU time: on a
  // shared machine the latter leaves out the time other processes (and, pinned, the writer
  // thread) held the core.
  std::printf("calls: %lld per thread, %d thread(s): %.1f ns per ncclAllReduce call (mean over threads; "
              "%.1f ns on the calling thread's CPU clock; %.0f page faults on the calling thread)\n",
              n, threads, sum / threads, cpu_sum / threads, flt_sum / threads);
  // Everything the calling threads paid, activation and warm-up included (what a job pays in
  // all): the injector that moves a one-off cost out of activation into the first calls
  // shows up in the per-call figure above but not here.
  std::printf("whole thread: %.1f ns CPU per call counting activation and the 1000 warm-up calls; first call %.3f ms "
              "(slowest thread)\n",
              total_cpu / threads / (n + 1000), first_max / 1e6);
  return 0;
}

// StoreWriter kLive with NCCL op records as the injector's sink makes them (batches of
// 65,536 ops, one transaction each), without the ring: the store side of op throughput.
int WriterOps(long long n) {
  using namespace overlapprof;
  std::string path = "/tmp/bench_hooks_ops_" + std::to_string(getpid()) + ".db";
  StoreWriter w;
  StoreWriter::Options o;
  o.mode = StoreWriter::Mode::kLive;
  o.overwrite = true;
  o.row_copies = false;
  if (Status st = w.Open(path, RunMeta{}, o); !st.ok()) return 1;
  RankTrace t;
  auto a = Clock::now();
  long long done = 0;
  int64_t ts = 1'700'000'000'000'000'000;
  while (done < n) {
    t.comm_ops.clear();
    for (int i = 0; i < 65536 && done < n; ++i, ++done) {
      CommOp c;
      c.communicator = "ff691de015ac114d";
      c.comm_rank = 3;
      c.comm_nranks = 8;
      c.seq = done;
      c.op = Collective::kAllReduce;
      c.datatype = "float32";
      c.count = 1 << 20;
      c.bytes = 4 << 20;
      c.host_enter_ns = ts;
      c.host_exit_ns = ts + 3000;
      c.host_tid = 4242;
      c.source = CommSource::kNcclHook;
      c.launch_id = done + 1;
      c.stream_handle = 0x7f0000001000;
      ts += 10000;
      t.comm_ops.push_back(std::move(c));
    }
    if (Status st = w.Append(t); !st.ok()) return 1;
  }
  auto b = Clock::now();
  if (Status st = w.Finish(StatCounters{}); !st.ok()) return 1;
  auto c = Clock::now();
  double s = std::chrono::duration<double>(c - a).count();
  std::printf("writer: %lld NCCL op records in %.3f s (appends %.3f s, finish %.3f s): %.2f M records/s\n", n, s,
              std::chrono::duration<double>(b - a).count(), std::chrono::duration<double>(c - b).count(), n / s / 1e6);
  std::remove(path.c_str());
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

// NCCL's profiler plugin (injector/nccl_plugin.cc) driven as NCCL drives it, on the calling
// thread: per op a Coll startEvent, CHANNELS KernelCh start / KernelChStop state / stop, and the
// op's stopEvent (what NCCL's threads pay per collective). Needs the injector preloaded and
// recording (OVERLAPPROF_OUTPUT_DIR): otherwise its init asks for nothing, and this says so.
int Plugin(long long n, int channels) {
  namespace np = overlapprof::inject::ncclprof;
  auto* p = static_cast<const np::ProfilerV6*>(dlsym(RTLD_DEFAULT, "ncclProfiler_v6"));
  if (!p) {
    std::fprintf(stderr, "bench_hooks plugin: ncclProfiler_v6 not found (preload the injector)\n");
    return 1;
  }
  void* ctx = nullptr;
  int mask = 0;
  if (p->init(&ctx, 0x1234, &mask, "bench", 1, 1, 0, nullptr) != ncclSuccess || !(mask & np::kKernelCh)) {
    std::fprintf(stderr, "bench_hooks plugin: the plugin is not recording (mask %d): set OVERLAPPROF_OUTPUT_DIR\n", mask);
    return 1;
  }
  const double cpu0 = ThreadCpuNs();
  const auto t0 = Clock::now();
  uint64_t gpu = 1000;
  for (long long i = 0; i < n; ++i) {
    np::EventDescrV6 d{};
    d.type = np::kColl;
    d.rank = 0;
    d.coll.seqNumber = static_cast<uint64_t>(i);
    d.coll.func = "AllReduce";
    d.coll.count = 1024;
    d.coll.datatype = "ncclFloat32";
    d.coll.nChannels = static_cast<uint8_t>(channels);
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    void* op = nullptr;
    p->startEvent(ctx, &op, &d);
    for (int c = 0; c < channels && op; ++c) {
      np::EventDescrV6 k{};
      k.type = np::kKernelCh;
      k.parentObj = op;
      k.kernelCh.channelId = static_cast<uint8_t>(c);
      k.kernelCh.pTimer = gpu;
      void* ch = nullptr;
      p->startEvent(ctx, &ch, &k);
      if (!ch) continue;
      np::EventStateArgsV6 a{};
      a.kernelCh.pTimer = gpu + 5000;
      p->recordEventState(ch, np::kKernelChStop, &a);
      p->stopEvent(ch);
    }
    if (op) p->stopEvent(op);
    gpu += 10000;
  }
  const double wall = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  const double cpu = ThreadCpuNs() - cpu0;
  std::printf("%lld ops, %d channels: %.1f ns per op (calling thread CPU %.1f ns)\n", n, channels, wall / double(n),
              cpu / double(n));
  p->finalize(ctx);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "calls") == 0) {
    g_rate = argc > 4 ? std::atof(argv[4]) : 0;
    return Calls(std::atoll(argv[2]), argc > 3 ? std::atoi(argv[3]) : 1);
  }
  if (argc >= 3 && std::strcmp(argv[1], "writer") == 0) return Writer(std::atoll(argv[2]));
  if (argc >= 3 && std::strcmp(argv[1], "writer-ops") == 0) return WriterOps(std::atoll(argv[2]));
  if (argc >= 3 && std::strcmp(argv[1], "plugin") == 0) return Plugin(std::atoll(argv[2]), argc > 3 ? std::atoi(argv[3]) : 8);
  std::fprintf(stderr,
               "usage: bench_hooks calls N [THREADS [RATE]] | bench_hooks writer N | bench_hooks writer-ops N | "
               "bench_hooks plugin N [CHANNELS]\n");
  return 2;
}
