#pragma once
// The writer thread's side of the injector: turns hook records and CUPTI records into
// RankTrace batches and appends them to the rank's store (StoreWriter, kLive mode: WAL, one
// transaction per batch). Runs only on the writer thread; holds no lock a hook could wait on.
#include <cstdint>
#include <string>
#include <vector>

#include "src/trace/model.h"

namespace overlapprof::inject {

struct SinkConfig {
  std::string path;        // the rank's store file
  RunMeta meta;            // rank, world size, pid, host, ... (rank may be learnt later)
  bool rank_from_env = false;
};

// Implemented in cupti.cc; called by the writer thread only, with no lock of ours held.
// CuptiFlush asks CUPTI to hand over buffered records (force: also incomplete ones).
void CuptiFlush(bool force) noexcept;
// Moves the records of every completed CUPTI buffer into `t` (activities, host calls) and
// `t->external_correlations`, and returns the buffers to the pool.
void CuptiDrain(RankTrace* t) noexcept;
// Called once by the writer thread before its final drain: disables CUPTI activity so no
// buffer is completed after the store is closed.
void CuptiShutdown() noexcept;
// The dropped-record counts per (context, stream) so far, as extra stats rows.
void CuptiDroppedByStream(std::vector<ExtraStat>* out);

}  // namespace overlapprof::inject
