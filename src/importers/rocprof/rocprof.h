#pragma once
// rocprofv3 (ROCm's rocprofiler-sdk tool) JSON output: `{"rocprofiler-sdk-tool": [{metadata, agents,
// strings, kernel_symbols, buffer_records: {kernel_dispatch, memory_copy, hip_api, rccl_api,
// marker_api, ...}, ...}]}`, one file per process (rank). docs/rocprof.md describes what is read.
// Times in the file are integer ns on CLOCK_BOOTTIME (rocprofiler-sdk's clock); they are kept as
// they are.
#include <string>
#include <string_view>

#include "src/common/status.h"
#include "src/importers/importer.h"
#include "src/trace/model.h"

namespace overlapprof::rocprof {

// Whether `text` (decompressed) starts like rocprofv3 JSON: optional BOM and whitespace, '{',
// whitespace, the key "rocprofiler-sdk-tool".
bool LooksLikeRocprofJson(std::string_view text);

// The importer's Probe on a file's first raw bytes: 70 (above the Kineto importer's 60 for any
// JSON object, 50 for any gzip) when they are rocprofv3 JSON, inflating the gzip head when
// compressed; 0 otherwise.
int ProbeRocprof(std::string_view head);

// Parses a whole rocprofv3 JSON document held in memory. `capacity` >= size + kInputPadding (the
// bytes after `size` are simdjson's padding; the caller's). `file_name`: the base name of the
// file, one of the places the rank is read from (rank<N>). Errors: kInvalidInput, one line.
StatusOr<RankTrace> ParseRocprofJson(const char* data, size_t size, size_t capacity, std::string_view file_name,
                                     const ImportOptions& options);

// The same on any text (copied into a padded buffer): tests and the fuzzer.
StatusOr<RankTrace> ParseRocprofText(std::string_view text, std::string_view file_name = {},
                                     const ImportOptions& options = {});

}  // namespace overlapprof::rocprof
