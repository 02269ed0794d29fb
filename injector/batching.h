#pragma once
// When the injector's writer thread drains the ring and when it commits a batch (sink.cc's
// loop), as a pure policy so it can be tested without threads or a store
// (tests/unit/injector_batching_test.cc). Header-only, no CUDA.
//
// The ring is drained often, so a burst of hooks does not fill it; the store is committed
// every flush_ms, and early when a batch reaches a quarter of the ring (the ring is not
// drained during a commit, so a commit must stay short at high call rates), when a signal
// handler asked for a flush, and when stopping. Times in ns (CLOCK_REALTIME), periods in ms.
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace overlapprof::inject {

class BatchPolicy {
 public:
  // How long the writer sleeps between drains when idle, at most.
  static constexpr int kIdleDrainMs = 50;
  // ... and when the last drain took more than an eighth of the ring (busy).
  static constexpr int kBusyDrainMs = 1;

  BatchPolicy(int flush_ms, size_t ring_capacity, int64_t now_ns)
      : flush_ms_(flush_ms), ring_capacity_(ring_capacity), next_commit_ns_(now_ns + PeriodNs()) {}

  // The poll timeout before the next drain, given how many records the last drain took.
  int PollTimeoutMs(size_t last_drained) const {
    return last_drained > ring_capacity_ / 8 ? kBusyDrainMs : std::min(flush_ms_, kIdleDrainMs);
  }

  // After a drain: whether to commit now. `pending` is what the open batch holds (records),
  // `flush_requests` how many signal handlers asked for a flush since the last pass.
  bool ShouldCommit(int64_t now_ns, size_t pending, int flush_requests, bool stopping) const {
    return stopping || flush_requests > 0 || pending >= ring_capacity_ / 4 || now_ns >= next_commit_ns_;
  }

  // A commit started at now_ns: the next periodic one is a full period later.
  void Committed(int64_t now_ns) { next_commit_ns_ = now_ns + PeriodNs(); }
  int64_t next_commit_ns() const { return next_commit_ns_; }

 private:
  int64_t PeriodNs() const { return int64_t{flush_ms_} * 1000000; }
  int flush_ms_;
  size_t ring_capacity_;
  int64_t next_commit_ns_;
};

}  // namespace overlapprof::inject
