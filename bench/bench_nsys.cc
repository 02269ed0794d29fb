// bench_nsys: how fast the Nsight Systems importer reads an export (figure in
// docs/performance.md).
//
//   bench_nsys [--keep] FILE.sqlite [MILLION_KERNELS=5] [PROCESSES=2]
//
// Writes FILE.sqlite unless it exists: an export with nsys' real column layout for
// CUPTI_ACTIVITY_KIND_KERNEL (40 columns, as nsys 2026.2 writes them) and
// CUPTI_ACTIVITY_KIND_RUNTIME (one launch per kernel), StringIds, and the session start,
// spread over PROCESSES processes with one GPU each; every 20th kernel is an NCCL kernel,
// kernels on two streams per GPU. Then times, single-threaded, what `analyze` does: list the
// ranks (ExpandInputs, which builds them when they fit the importer's budget), import each rank
// (ImportFile), and prints kernel rows per second (wall and CPU, listing included) and peak
// RSS. Pin it (taskset -c 0) for a per-core figure.
#include <sqlite3.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "src/cli/pipeline.h"
#include "src/importers/importer.h"

namespace {

using Clock = std::chrono::steady_clock;

bool Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::fprintf(stderr, "bench_nsys: %s\n", err ? err : "sqlite error");
    sqlite3_free(err);
    return false;
  }
  return true;
}

constexpr const char* kKernelDdl = R"(CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
  start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
  greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER,
  cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
  gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
  staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL,
  localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,
  sharedMemoryLimitConfig INTEGER, qmdBulkReleaseDone INTEGER, qmdPreexitDone INTEGER, qmdLastCtaDone INTEGER,
  graphId INTEGER, clusterX INTEGER, clusterY INTEGER, clusterZ INTEGER, clusterSchedulingPolicy INTEGER,
  maxPotentialClusterSize INTEGER, maxActiveClusters INTEGER, sharedMemoryRequestedPercentage INTEGER,
  tensorSizeMinusOneElements TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, systemClockNs INTEGER);
INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1779782330176752435, '', '', 28254349605);
)";

bool Generate(const std::string& path, int64_t kernels, int64_t processes) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return false;
  bool ok = Exec(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN") && Exec(db, kKernelDdl);
  // Names: 40 compute kernels, 2 NCCL kernels, the launch API.
  for (int i = 0; ok && i < 40; ++i)
    ok = Exec(db, ("INSERT INTO StringIds VALUES (" + std::to_string(1000 + i) +
                   ", 'void at::native::vectorized_elementwise_kernel<4, at::native::kernel_" + std::to_string(i) +
                   ">(int, float*)')")
                      .c_str());
  ok = ok && Exec(db, "INSERT INTO StringIds VALUES (2000, 'ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)'),"
                      "(2001, 'ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)'), (3000, 'cudaLaunchKernel_v7000')");
  sqlite3_stmt* k = nullptr;
  sqlite3_stmt* r = nullptr;
  ok = ok && sqlite3_prepare_v2(db,
                                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?1, ?2, ?3, 1, 0, ?4, ?5, ?6, ?7, ?7, ?7, 1, 1, "
                                "32, 1024, 1, 1, 128, 1, 1, 0, 0, 0, 0, ?5, 32768, NULL, 0, NULL, NULL, NULL, 0, 0, 0, 0, 1, "
                                "0, 0, NULL, '[]')",
                                -1, &k, nullptr) == SQLITE_OK;
  ok = ok && sqlite3_prepare_v2(db, "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?1, ?2, 0, ?3, ?4, 3000, 0, NULL)", -1,
                                &r, nullptr) == SQLITE_OK;
  for (int64_t i = 0; ok && i < kernels; ++i) {
    const int64_t proc = i % processes, n = i / processes;
    const int64_t gpid = (int64_t{1} << 48) | ((1000 + proc) << 24);
    const bool comm = n % 20 == 0;
    const int64_t start = 30000000000 + n * 1000 + (comm ? 300 : 0);
    sqlite3_bind_int64(k, 1, start);
    sqlite3_bind_int64(k, 2, start + (comm ? 1500 : 900));
    sqlite3_bind_int64(k, 3, proc);
    sqlite3_bind_int64(k, 4, comm ? 20 : 7);
    sqlite3_bind_int64(k, 5, n + 1);
    sqlite3_bind_int64(k, 6, gpid);
    sqlite3_bind_int64(k, 7, comm ? 2000 + n % 2 : 1000 + n % 40);
    ok = sqlite3_step(k) == SQLITE_DONE;
    sqlite3_reset(k);
    sqlite3_bind_int64(r, 1, start - 5000);
    sqlite3_bind_int64(r, 2, start - 3000);
    sqlite3_bind_int64(r, 3, gpid | 7);
    sqlite3_bind_int64(r, 4, n + 1);
    ok = ok && sqlite3_step(r) == SQLITE_DONE;
    sqlite3_reset(r);
  }
  sqlite3_finalize(k);
  sqlite3_finalize(r);
  ok = ok && Exec(db, "COMMIT");
  sqlite3_close(db);
  return ok;
}

// CPU seconds (user + system) of this process: the per-core figure on a shared machine.
double CpuSeconds() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

double PeakRssMb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_nsys FILE.sqlite [MILLION_KERNELS=5] [PROCESSES=2]\n");
    return 2;
  }
  const std::string path = argv[1];
  const double millions = argc > 2 ? std::atof(argv[2]) : 5;
  const int64_t processes = argc > 3 ? std::max(1, std::atoi(argv[3])) : 2;
  const int64_t kernels = static_cast<int64_t>(millions * 1e6);
  if (!std::filesystem::exists(path)) {
    auto t0 = Clock::now();
    if (!Generate(path, kernels, processes)) {
      std::fprintf(stderr, "bench_nsys: cannot write %s\n", path.c_str());
      return 1;
    }
    std::printf("generated %s: %lld kernels, %lld processes, %.1f s, %.0f MB\n", path.c_str(),
                static_cast<long long>(kernels), static_cast<long long>(processes),
                std::chrono::duration<double>(Clock::now() - t0).count(),
                std::filesystem::file_size(path) / 1e6);
  }
  using namespace overlapprof;
  auto t0 = Clock::now();
  const double cpu0 = CpuSeconds();
  ImportObserver observer;
  ImportOptions list_options;
  list_options.observer = &observer;
  StatusOr<std::vector<TraceInput>> inputs = ExpandInputs({path}, "", TraceNeeds{}, list_options);
  if (!inputs.ok()) {
    std::fprintf(stderr, "bench_nsys: %s\n", inputs.status().message().c_str());
    return 1;
  }
  const double list_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const size_t built = observer.ranks_built_while_listing;
  size_t rows = 0;
  double import_s = 0;
  for (const TraceInput& in : *inputs) {
    auto t1 = Clock::now();
    ImportOptions io;
    io.store_needs = TraceNeeds{};  // what `analyze` asks for with the default analyzers
    io.store_quick_check = std::getenv("BENCH_NSYS_NO_VERIFY") == nullptr;  // --no-verify
    StatusOr<RankTrace> t = ImportFile(in, io);
    const double s = std::chrono::duration<double>(Clock::now() - t1).count();
    if (!t.ok()) {
      std::fprintf(stderr, "bench_nsys: %s\n", t.status().message().c_str());
      return 1;
    }
    import_s += s;
    rows += t->activities.size();
    std::printf("  %s: %zu kernels, %zu comm ops, %.3f s\n", in.name.c_str(), t->activities.size(), t->comm_ops.size(), s);
  }
  const double cpu = CpuSeconds() - cpu0;
  // The listing builds the ranks when they fit its budget (src/importers/nsys/, Builders):
  // then it holds the reading and the imports only finish the ranks, so only the sum compares.
  std::printf("list ranks (%zu, %zu built while listing): %.3f s; import: %.3f s; %zu kernel rows in %.3f s = %.2f M "
              "rows/s (wall); CPU %.3f s = %.2f M rows/s per core; peak RSS %.0f MB\n",
              inputs->size(), built, list_s, import_s, rows, list_s + import_s, rows / (import_s + list_s) / 1e6, cpu,
              rows / cpu / 1e6, PeakRssMb());
  return 0;
}
