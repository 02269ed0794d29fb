#pragma once
// The Kineto (PyTorch-profiler JSON) importer's functions for the rest of the program: the
// fuzzers, the benchmarks and the tests parse documents held in memory or streams with them
// (src/importers/kineto/reader.cc). Its options are ImportOptions::kineto
// (src/importers/kineto/kineto_options.h).
#include <cstddef>

#include "src/common/status.h"
#include "src/importers/importer.h"
#include "src/io/input_stream.h"
#include "src/trace/model.h"

namespace overlapprof {

// Kineto parsing of a JSON document held in memory (also used by the fuzzer and the
// benchmark): streamed from the buffer, as a file is (ParseKinetoStream). `capacity` is unused
// (the buffer needs no padding any more); kept for callers.
StatusOr<RankTrace> ParseKinetoJson(const char* buffer, size_t size, size_t capacity,
                                    const ImportOptions& options);

// Kineto parsing of a stream (src/io/input_stream.h): what the Kineto importer's Import does
// with the file's stream. `skip_bom`: a UTF-8 byte order mark at the start is skipped. Memory
// does not grow with the JSON text.
StatusOr<RankTrace> ParseKinetoStream(ByteStream& in, const ImportOptions& options, bool skip_bom = true);

}  // namespace overlapprof
