// libFuzzer target: the streaming Kineto reader (src/importers/kineto/reader.cc) with small windows, checked against
// itself with a window that holds the whole document.
//
// Input: two control bytes, then the file (gzip when it starts 1f 8b, inflated as it is read,
// as the importer does; otherwise plain, a UTF-8 BOM skipped).
//  byte 0: bits 0-5 pick the window, 16 + 7 * k bytes (16 .. 457), so that batch edges, window
//          growth for elements larger than the window and compaction (re-anchoring the batch at
//          the window's start) happen within a few hundred bytes; bit 6 caps one element at 4x
//          the window (so the refusal is reached), else the default cap (256 MiB); bit 7: the
//          stream lends its bytes in blocks (of the read size below, 4096 when unlimited) with the
//          window's size of room before them, and the window is in those blocks (as with the
//          threaded gzip stream: src/io/input_stream.h NextBlock), not of its own.
//  byte 1: the most bytes one read of the stream returns: 1 + (b % 61), or unlimited for b >= 244;
//          its bit 0 also picks the walker of the streaming parse: set, the index walker
//          (simdjson's stage 1 of each region of the window) before the walker over the bytes;
//          clear, the walker over the bytes alone (ImportOptions::kineto.index_walk 1 / 0).
// Checks: (1) a trace that parses satisfies trace_checks.h and the analyzers run on it;
// (2) differential: a 1 MiB window (inputs are smaller, inflated ones nearly always: one batch,
// the whole traceEvents array parsed by simdjson as one document) gives the same result: both
// fail with the same status code, or both succeed with identical traces (DumpTrace). With the
// cap (bit 6), the small window may instead refuse an element larger than the cap. (3) The walker
// (the fast path for events, src/importers/kineto/walk.h, index_walk.h) against simdjson On-Demand
// reading every event, through the same window and reads: the same trace, or the same error message
// (each walker in half the inputs: byte 1).
// (4) For gzip input, the inflater (ISA-L's igzip when built with it) against zlib: the same.
//
// Run: tests/fuzz/run_fuzzers.sh (FUZZ_TARGETS="kineto_stream"); see tests/fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "src/importers/importer.h"
#include "src/importers/kineto/kineto.h"
#include "src/io/input_stream.h"
#include "tests/fuzz/trace_checks.h"
#include "tests/fuzz/trace_dump.h"

namespace {

using overlapprof::ImportOptions;
using overlapprof::RankTrace;
using overlapprof::StatusOr;

StatusOr<RankTrace> Parse(std::string_view doc, size_t window, size_t max_event, size_t max_read, bool lend,
                          bool on_demand_only = false, bool zlib_only = false, int index_walk = -1) {
  ImportOptions o;
  o.kineto.window_bytes = window;
  o.kineto.max_event_bytes = max_event;
  o.kineto.on_demand_only = on_demand_only;
  o.kineto.index_walk = index_walk;
  std::unique_ptr<overlapprof::ByteStream> in =
      overlapprof::MemoryStream(doc, lend && max_read == SIZE_MAX ? 4096 : max_read, /*gunzip=*/true, UINT64_MAX,
                                zlib_only, lend ? window : 0);
  return overlapprof::ParseKinetoStream(*in, o, /*skip_bom=*/true);
}

[[noreturn]] void Differ(const char* what, const StatusOr<RankTrace>& small, const StatusOr<RankTrace>& whole,
                         size_t window, size_t max_event, size_t max_read) {
  std::fprintf(stderr,
               "overlapprof fuzz: the streaming reader differs from a whole-document parse: %s\n"
               "  window %zu, max event %zu, max read %zu\n  small: %s\n  whole: %s\n",
               what, window, max_event, max_read, small.ok() ? "ok" : small.status().message().c_str(),
               whole.ok() ? "ok" : whole.status().message().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;  // two control bytes and a file that is not empty (empty files are refused before parsing)
  const size_t window = 16 + 7 * size_t{data[0] & 0x3fu};
  const size_t max_event = (data[0] & 0x40u) ? 4 * window : 0;
  const size_t max_read = data[1] >= 244 ? SIZE_MAX : 1 + data[1] % 61;
  const bool lend = (data[0] & 0x80u) != 0;
  const std::string_view doc(reinterpret_cast<const char*>(data) + 2, size - 2);
  if (doc.size() > (size_t{8} << 20)) return 0;  // the reference must fit its window

  const int index_walk = data[1] & 1;
  StatusOr<RankTrace> small = Parse(doc, window, max_event, max_read, lend, false, false, index_walk);
  if (small.ok()) {
    overlapprof::fuzz::CheckTrace(*small);
    overlapprof::fuzz::AnalyzeTrace(*small);
  }
  StatusOr<RankTrace> od = Parse(doc, window, max_event, max_read, lend, /*on_demand_only=*/true);
  if (small.ok() != od.ok()) Differ("walker and On-Demand: one parses, the other does not", small, od, window, max_event, max_read);
  if (!small.ok() && (small.status().code() != od.status().code() || small.status().message() != od.status().message()))
    Differ("walker and On-Demand: the errors", small, od, window, max_event, max_read);
  if (small.ok() && overlapprof::testing::DumpTrace(*small) != overlapprof::testing::DumpTrace(*od))
    Differ("walker and On-Demand: the traces", small, od, window, max_event, max_read);
  if (overlapprof::IsGzip(doc.substr(0, 2))) {  // igzip (when built with ISA-L) against zlib
    StatusOr<RankTrace> z = Parse(doc, window, max_event, max_read, lend, false, /*zlib_only=*/true, index_walk);
    if (small.ok() != z.ok() ||
        (!small.ok() && (small.status().code() != z.status().code() || small.status().message() != z.status().message())) ||
        (small.ok() && overlapprof::testing::DumpTrace(*small) != overlapprof::testing::DumpTrace(*z)))
      Differ("igzip and zlib", small, z, window, max_event, max_read);
  }
  StatusOr<RankTrace> whole = Parse(doc, size_t{1} << 20, 0, SIZE_MAX, false);
  if (!small.ok() && whole.ok() && max_event != 0 &&
      small.status().message().find("larger than") != std::string::npos &&
      small.status().message().find(": refused") != std::string::npos)
    return 0;  // the cap, which the reference does not have
  if (small.ok() != whole.ok()) Differ("one parses, the other does not", small, whole, window, max_event, max_read);
  if (!small.ok()) {
    if (small.status().code() != whole.status().code()) Differ("status codes", small, whole, window, max_event, max_read);
    return 0;
  }
  if (overlapprof::testing::DumpTrace(*small) != overlapprof::testing::DumpTrace(*whole))
    Differ("the traces", small, whole, window, max_event, max_read);
  return 0;
}
