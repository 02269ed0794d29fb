#pragma once
// The writer thread's side of the injector: turns hook records and CUPTI records into
// RankTrace batches and appends them to the rank's store (StoreWriter, kLive mode: WAL, one
// transaction per batch). Runs only on the writer thread; holds no lock a hook could wait on.
#include <cstdint>
#include <memory>
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
// The writer thread's CUPTI decoding state (kernel-name cache, API-call filter, work list),
// owned by the Sink.
struct CuptiDecoder;
struct CuptiDecoderDeleter {
  void operator()(CuptiDecoder* d) const noexcept;
};
using CuptiDecoderPtr = std::unique_ptr<CuptiDecoder, CuptiDecoderDeleter>;
CuptiDecoderPtr NewCuptiDecoder() noexcept;  // null when out of memory
// Moves the records of every completed CUPTI buffer into `t` (activities, host calls) and
// `t->external_correlations`, and returns the buffers to the pool. With a null decoder the
// buffers are only recycled (their records counted as dropped).
void CuptiDrain(CuptiDecoder* d, RankTrace* t) noexcept;
// Called once by the writer thread before its final drain: disables CUPTI activity so no
// buffer is completed after the store is closed.
void CuptiShutdown() noexcept;
// The dropped-record counts per (context, stream) so far, as extra stats rows.
void CuptiDroppedByStream(std::vector<ExtraStat>* out);

class Recorder;
// The writer thread's body (runtime.cc starts it): opens the store, drains and commits until
// the recorder asks it to stop, then finishes the file and moves the recorder to kFinished.
void RunWriter(Recorder* rec) noexcept;

}  // namespace overlapprof::inject
