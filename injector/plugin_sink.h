#pragma once
// The writer thread's side of NCCL's profiler plugin (nccl_plugin.cc): kPluginComm and
// kPluginOp records → RankTrace::nccl_plugin_ops (store table nccl_profiler_op), the
// `nccl_profiler` meta (communicators, ABI, clock offset) and the clock offset between NCCL's
// GPU clock (%globaltimer) and the trace clock. Writer thread only (owned by the Sink).
//
// Clock: every op carries the smallest (host CLOCK_REALTIME when NCCL reported a channel's
// start) - (that channel's GPU start) over its channels. The host notices a channel after
// the GPU started it, so each sample is the offset plus a notice latency >= 0: the offset
// is estimated by the smallest sample seen (an upper bound, biased by the smallest latency),
// and the residual is the mean excess of the samples over it. Rows are written with the
// estimate at the time, and rewritten with the final one when the file is finished.
#include <cstdint>
#include <string>
#include <vector>

#include "injector/records.h"
#include "src/common/stats.h"
#include "src/store/writer.h"
#include "src/trace/model.h"

namespace overlapprof::inject {

class PluginSink {
 public:
  static constexpr int64_t kResidualThresholdNs = 1000000;  // nccl_plugin_clock_residual_high

  // `resolved_id`: our communicator id for a kPluginComm whose own comm_id is 0 (the init ran
  // on a thread of NCCL's: non-blocking creation), found by the Sink; 0 when unknown.
  void TakeComm(const HookRecord& r, uint64_t resolved_id);
  void TakeOp(const HookRecord& r, RankTrace* t);
  // The plugin slot as this process sees it (NCCL_PROFILER_PLUGIN): meta value, and whether
  // another plugin holds it.
  static std::string SlotState(bool* taken);
  bool meta_dirty() const { return meta_dirty_; }
  std::string MetaJson();  // clears meta_dirty
  // Before the last commit: the residual counter. After it: rows retimed with the final
  // offset, the meta.
  void FinalStats(StatCounters* stats) const;
  Status FinishStore(StoreWriter* w);
  bool has_offset() const { return samples_ > 0; }
  int64_t offset_ns() const { return min_sample_; }
  int64_t residual_ns() const { return samples_ ? static_cast<int64_t>(excess_sum_ / samples_) : 0; }

 private:
  struct Comm {
    uint64_t id, hash;
    int32_t rank, nranks, nnodes;
    uint8_t abi;
    std::string name;
  };
  const Comm* FindComm(uint64_t hash) const;
  std::vector<Comm> comms_;
  bool meta_dirty_ = false;
  int abi_ = 0;
  // Clock samples (see the top of this file). excess_sum_ is kept relative to min_sample_
  // (rebased when the minimum moves).
  int64_t min_sample_ = 0;
  int64_t samples_ = 0;
  long double excess_sum_ = 0;
};

}  // namespace overlapprof::inject
