// libFuzzer target: the trace-store reader (ReadStore), which opens untrusted SQLite
// files.
//
// ReadStore takes a path, so each input is written to one temporary file per process
// (created at start-up with mkstemp, reused across inputs, removed at exit) and read
// twice: with PRAGMA quick_check (the default, what `overlapprof analyze` does) and
// without it (--no-quick-check style), which lets corrupt pages reach the reader's own
// queries. Whatever the result, a RankTrace that reads must satisfy trace_checks.h.
//
// The temporary file lives in $OVERLAPPROF_FUZZ_TMPDIR, else $TMPDIR, else /dev/shm
// (when writable), else /tmp. A crash leaves it behind (no atexit then); the run script
// points OVERLAPPROF_FUZZ_TMPDIR at a scratch folder that it deletes.
//
// SQLite files that are not stores (application_id other than 'OVLP') also go through the
// Nsight Systems importer the way the CLI reads them: ExpandInputs (Importer::Units lists the
// ranks and builds them) and ImportFile for each rank, with and without quick_check. The
// seeds include small Nsight Systems exports (tests/fuzz/seeds/store/nsys_*.sqlite,
// make_nsys_seeds.py).
//
// Note: SQLite itself is the system library and is not coverage-instrumented, so the
// coverage feedback comes from overlapprof's reader code only.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "src/io/input_file.h"
#include "src/cli/pipeline.h"
#include "src/store/reader.h"
#include "tests/fuzz/trace_checks.h"

namespace {

std::string g_path;

void RemoveSideFiles() {
  // A read-only connection should never create these, but a file that claims WAL mode
  // or a leftover journal must not carry state from one input to the next.
  for (const char* suffix : {"-journal", "-wal", "-shm"}) ::unlink((g_path + suffix).c_str());
}

void Cleanup() {
  if (g_path.empty()) return;
  RemoveSideFiles();
  ::unlink(g_path.c_str());
}

std::string TempDir() {
  for (const char* var : {"OVERLAPPROF_FUZZ_TMPDIR", "TMPDIR"}) {
    const char* v = std::getenv(var);
    if (v && *v) return v;
  }
  if (::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  return "/tmp";
}

void WriteInput(const uint8_t* data, size_t size) {
  int fd = ::open(g_path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) {
    std::fprintf(stderr, "store_fuzzer: cannot open %s: %s\n", g_path.c_str(), std::strerror(errno));
    std::exit(2);  // a harness problem, not a finding
  }
  size_t done = 0;
  while (done < size) {
    ssize_t w = ::write(fd, data + done, size - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      std::fprintf(stderr, "store_fuzzer: cannot write %s: %s\n", g_path.c_str(), std::strerror(errno));
      std::exit(2);
    }
    done += static_cast<size_t>(w);
  }
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  std::string tmpl = TempDir() + "/overlapprof-store-fuzz-XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    std::fprintf(stderr, "store_fuzzer: mkstemp(%s): %s\n", tmpl.c_str(), std::strerror(errno));
    std::exit(2);
  }
  ::close(fd);
  g_path = tmpl;
  std::atexit(Cleanup);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RemoveSideFiles();
  WriteInput(data, size);
  for (bool quick_check : {true, false}) {
    overlapprof::StoreReadOptions options;
    options.quick_check = quick_check;
    auto trace = overlapprof::ReadStore(g_path, options);
    if (trace.ok()) {
      overlapprof::fuzz::CheckTrace(*trace);
      overlapprof::fuzz::AnalyzeTrace(*trace);
    }
  }
  const std::string_view head(reinterpret_cast<const char*>(data), size);
  if (overlapprof::IsSqlite(head) && overlapprof::SqliteApplicationId(head) != 0x4F564C50u) {
    auto inputs = overlapprof::ExpandInputs({g_path});
    if (inputs.ok()) {
      for (const std::string& input : *inputs) {
        // First as `analyze` reads (no host calls: the rank built while listing is taken),
        // then as `import` does (host calls: the tables are read again), without quick_check.
        for (bool quick_check : {true, false}) {
          overlapprof::ImportOptions options;
          options.store_quick_check = quick_check;
          if (quick_check) options.store_needs = overlapprof::TraceNeeds{};
          auto trace = overlapprof::ImportFile(input, options);
          if (trace.ok()) {
            overlapprof::fuzz::CheckTrace(*trace);
            overlapprof::fuzz::AnalyzeTrace(*trace);
          }
        }
      }
    }
  }
  return 0;
}
