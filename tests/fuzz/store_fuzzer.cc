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
// Nsight Systems importer the way the CLI reads them: ExpandInputs (ImportSession::Units lists the
// ranks and builds them) and ImportFile for each rank, with and without quick_check. The
// seeds include small Nsight Systems exports (tests/fuzz/seeds/store/nsys_*.sqlite,
// make_nsys_seeds.py).
//
// Half the mutations keep the file's pages in place (LLVMFuzzerCustomMutator): one page
// mutated within its own bytes, a page number or a 2-byte count/offset written into a page,
// or a page copied over another. Those reach the B-tree structure that the direct page reader
// of Nsight Systems exports (src/io/sqlite_table_scan.h) and SQLite check, where a byte
// inserted or removed anywhere shifts every page after it.
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
#include <random>
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

// The page size of a SQLite file (its header, bytes 16-17; 1 means 65536), 0 when not one.
size_t PageSize(const uint8_t* data, size_t size) {
  constexpr size_t kPageSizeAt = 16, kHeaderBytes = 100;
  if (size < kHeaderBytes || std::memcmp(data, "SQLite format 3", 16) != 0) return 0;
  size_t page = (size_t{data[kPageSizeAt]} << 8) | data[kPageSizeAt + 1];
  if (page == 1) page = 65536;
  if (page < 512 || page > 65536 || (page & (page - 1)) != 0) return 0;
  return page;
}

}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::minstd_rand rng(seed);
  const size_t page = PageSize(data, size);
  if (page == 0 || size < 2 * page || rng() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  const size_t pages = size / page;
  uint8_t* p = data + (rng() % pages) * page;  // page 1 too: the schema
  switch (rng() % 4) {
    case 0:  // the page's own bytes, mutated in place (the page keeps its size)
      LLVMFuzzerMutate(p, page, page);
      break;
    case 1: {  // a page number (one of the file's, or just past it) at any offset
      const uint32_t pgno = static_cast<uint32_t>(rng() % (pages + 3));
      const size_t at = rng() % (page - 3);
      for (int i = 0; i < 4; ++i) p[at + static_cast<size_t>(i)] = static_cast<uint8_t>(pgno >> (24 - 8 * i));
      break;
    }
    case 2: {  // a 2-byte count, offset or size: one off, or any
      const size_t at = rng() % (page - 1);
      uint32_t v = (uint32_t{p[at]} << 8) | p[at + 1];
      v = rng() % 2 ? v + (rng() % 2 ? 1 : 0xffff) : static_cast<uint32_t>(rng());
      p[at] = static_cast<uint8_t>(v >> 8);
      p[at + 1] = static_cast<uint8_t>(v);
      break;
    }
    default:  // another page copied over this one: a page reached twice
      std::memmove(p, data + (rng() % pages) * page, page);
      break;
  }
  return size;
}

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
      for (const overlapprof::TraceInput& input : *inputs) {
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
