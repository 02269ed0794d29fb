#pragma once
// The Nsight Systems importer's options (ImportOptions::nsys; src/importers/nsys/). Their own
// header so that importer.h can hold them without declaring anything else of the format.
#include <cstdint>

namespace overlapprof {

// How an Nsight Systems export's tables are read (src/importers/nsys/nsys_file_session.h): the
// ways give the same ranks; the default is the fastest, the others are what it is tested and
// measured against.
enum class NsysReadMode : uint8_t {
  kAuto,         // ranks built while listing (within read_ahead_budget_bytes), else as kSpill
  kSpill,        // one pass over each table, rows spilled by rank to a temporary file
  kScanPerRank,  // each rank scans the tables' pages itself
  kSql,          // each rank reads through SQL queries
};

struct NsysImportOptions {
  NsysReadMode read_mode = NsysReadMode::kAuto;
  // --rank-by-gpu: a rank of an export that does not say its rank gets its CUDA device as rank
  // and local rank, and this world size (ImportFile; the inputs were checked by
  // CheckRanksByGpu). 0: off.
  int64_t rank_by_gpu_world = 0;
};

}  // namespace overlapprof
