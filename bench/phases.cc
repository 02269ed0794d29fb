// bench_phases: where import and analysis time goes, phase by phase, for trace files.
//
//   bench_phases [--store-dir DIR] FILE...
//
// For each Kineto JSON file (plain or .gz), times with a monotonic clock:
//   read+gunzip     ReadInputFile (the whole file into memory, decompressed)
//   parse           ParseKinetoJson (simdjson walk, interning, classification, correlation,
//                   Finalize's sort)
//   analyze         every registered analyzer on the RankTrace (what `analyze` runs)
//   store write     WriteStore (what `import` runs after parsing), when --store-dir is given
//   store read      ReadStore with and without quick_check, then analyze again
// and prints one line per phase: seconds, GPU activities per second, current and peak RSS.
// Single-threaded; pin it (taskset -c 0) for figures comparable with the CLI's.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analyzers/analyzer.h"
#include "analyzers/summary.h"
#include "src/importers/importer.h"
#include "src/importers/kineto/kineto.h"
#include "src/io/input_file.h"
#include "src/cli/registry.h"
#include "src/store/reader.h"
#include "src/store/writer.h"

namespace overlapprof {
namespace {

using Clock = std::chrono::steady_clock;

// Current and peak resident set size of this process in MB (10^6 bytes), from /proc/self/status.
void Rss(double* now_mb, double* peak_mb) {
  *now_mb = *peak_mb = 0;
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    long kb = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %ld kB", &kb) == 1) *now_mb = static_cast<double>(kb) * 1024.0 / 1e6;
    if (std::sscanf(line.c_str(), "VmHWM: %ld kB", &kb) == 1) *peak_mb = static_cast<double>(kb) * 1024.0 / 1e6;
  }
}

struct Phase {
  const char* name;
  Clock::time_point start = Clock::now();
  void Done(size_t gpu_events, size_t rows = 0) const {
    double s = std::chrono::duration<double>(Clock::now() - start).count();
    double now_mb, peak_mb;
    Rss(&now_mb, &peak_mb);
    std::printf("  %-26s %8.3f s  %12.0f GPU events/s", name, s, s > 0 ? static_cast<double>(gpu_events) / s : 0.0);
    if (rows) std::printf("  %12.0f rows/s", s > 0 ? static_cast<double>(rows) / s : 0.0);
    std::printf("  rss %7.1f MB  peak %7.1f MB\n", now_mb, peak_mb);
    std::fflush(stdout);
  }
};

Status Analyze(const RankTrace& t) {
  Summary summary;
  AnalysisOptions ao;
  for (auto& a : MakeAnalyzers()) {
    OVERLAPPROF_RETURN_IF_ERROR(a->AnalyzeRank(t, 0, ao, summary));
    OVERLAPPROF_RETURN_IF_ERROR(a->Finish(ao, summary));
  }
  return OkStatus();
}

int Run(int argc, char** argv) {
  std::string store_dir;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--store-dir") == 0 && i + 1 < argc) store_dir = argv[++i];
    else files.push_back(argv[i]);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: bench_phases [--store-dir DIR] TRACE.json[.gz]...\n");
    return 2;
  }
  for (const std::string& path : files) {
    std::printf("%s\n", path.c_str());
    size_t n = 0, rows = 0;
    std::string store_path;
    {
      Phase p{"read+gunzip"};
      StatusOr<InputBuffer> buf = ReadInputFile(path);
      if (!buf.ok()) {
        std::fprintf(stderr, "%s: %s\n", path.c_str(), buf.status().message().c_str());
        return 1;
      }
      p.Done(0);
      std::printf("  %-26s %8.1f MB JSON (%.1f MB on disk)\n", "size", static_cast<double>(buf->size()) / 1e6,
                  static_cast<double>(buf->was_compressed() ? buf->compressed_size() : buf->size()) / 1e6);
      Phase q{"parse (ParseKinetoJson)"};
      StatusOr<RankTrace> t = ParseKinetoJson(buf->data(), buf->size(), buf->capacity(), ImportOptions{});
      if (!t.ok()) {
        std::fprintf(stderr, "%s: %s\n", path.c_str(), t.status().message().c_str());
        return 1;
      }
      n = t->activities.size();
      rows = t->activities.size() + t->host_calls.size() + t->ranges.size();
      q.Done(n);
      std::printf("  %-26s %zu GPU activities, %zu host calls, %zu ranges, %zu names\n", "trace",
                  t->activities.size(), t->host_calls.size(), t->ranges.size(), t->names.size());
      *buf = InputBuffer();  // what `analyze` frees before analysis: nothing; shown for clarity
      Phase a{"analyze (analyzers)"};
      if (Status st = Analyze(*t); !st.ok()) {
        std::fprintf(stderr, "%s: %s\n", path.c_str(), st.message().c_str());
        return 1;
      }
      a.Done(n);
      if (!store_dir.empty()) {
        std::filesystem::create_directories(store_dir);
        store_path = (std::filesystem::path(store_dir) / (std::filesystem::path(path).filename().string() + ".db")).string();
        Phase w{"store write (WriteStore)"};
        if (Status st = WriteStore(*t, store_path, true); !st.ok()) {
          std::fprintf(stderr, "%s: %s\n", store_path.c_str(), st.message().c_str());
          return 1;
        }
        w.Done(n, rows);
      }
    }
    if (store_path.empty()) continue;
    std::printf("  %-26s %8.1f MB\n", "store size", static_cast<double>(std::filesystem::file_size(store_path)) / 1e6);
    for (bool check : {true, false}) {
      Phase r{check ? "store read (quick_check)" : "store read (no verify)"};
      StoreReadOptions o;
      o.quick_check = check;
      StatusOr<RankTrace> t = ReadStore(store_path, o);
      if (!t.ok()) {
        std::fprintf(stderr, "%s: %s\n", store_path.c_str(), t.status().message().c_str());
        return 1;
      }
      r.Done(n, rows);
      Phase a{"analyze (from store)"};
      if (Status st = Analyze(*t); !st.ok()) return 1;
      a.Done(n);
    }
  }
  return 0;
}

}  // namespace
}  // namespace overlapprof

int main(int argc, char** argv) { return overlapprof::Run(argc, argv); }
