// libFuzzer target: the rocprofv3 JSON importer (src/importers/rocprof/, docs/rocprof.md).
//
// Each input is a whole file as the importer would read it: gzip (starts 1f 8b) is inflated
// (GunzipBuffer, as ReadInputFile does), anything else copied with kInputPadding zero bytes after
// it; the importer's probe runs on the raw head, and the document is parsed whatever the probe
// says (the parser must refuse what is not rocprofv3 JSON). The file name given is "fuzz_rank1.json"
// (the rank's last source). A trace that parses must satisfy trace_checks.h and go through every
// analyzer.
//
// Run: FUZZ_TARGETS=rocprof tests/fuzz/run_fuzzers.sh (see tests/fuzz/README.md).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "src/importers/rocprof/rocprof.h"
#include "src/io/input_file.h"
#include "tests/fuzz/trace_checks.h"

namespace {

void ParseDocument(const char* data, size_t size, size_t capacity) {
  overlapprof::ImportOptions options;
  auto trace = overlapprof::rocprof::ParseRocprofJson(data, size, capacity, "fuzz_rank1.json", options);
  if (trace.ok()) {
    overlapprof::fuzz::CheckTrace(*trace);
    overlapprof::fuzz::AnalyzeTrace(*trace);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  (void)overlapprof::rocprof::ProbeRocprof(raw.substr(0, 4096));
  if (overlapprof::IsGzip(raw.substr(0, 2))) {
    auto inflated = overlapprof::GunzipBuffer(data, size);
    if (!inflated.ok() || inflated->size() == 0) return 0;
    ParseDocument(inflated->data(), inflated->size(), inflated->capacity());
    return 0;
  }
  if (size == 0) return 0;  // ReadInputFile refuses empty files
  // Exactly size + padding bytes, so ASan sees any read past the padding.
  std::unique_ptr<char[]> copy(new char[size + overlapprof::kInputPadding]);
  std::memcpy(copy.get(), data, size);
  std::memset(copy.get() + size, 0, overlapprof::kInputPadding);
  ParseDocument(copy.get(), size, size + overlapprof::kInputPadding);
  return 0;
}
