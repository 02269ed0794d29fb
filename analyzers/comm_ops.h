#pragma once
// Communication operations as spans on one rank's GPU timeline: what the bucket, FSDP/TP,
// op-type and iteration analyzers share. An op is a CommOp with its GPU activities (one
// collective or point-to-point call; a Kineto trace has one per communication kernel), or a
// communication kernel no op record claims. Times in ns on the trace's clock.
#include <cstdint>
#include <string>
#include <vector>

#include "analyzers/intervals.h"
#include "src/trace/model.h"

namespace overlapprof {

struct OpSpan {
  uint32_t op = kNoIndex;      // index into RankTrace::comm_ops; kNoIndex for an unclaimed kernel
  uint32_t first_activity = 0; // index into RankTrace::activities
  int64_t start_ns = 0;        // first kernel start
  int64_t end_ns = 0;          // last kernel end
  int64_t busy_ns = 0;         // sum of its kernels' durations
  int64_t covered_ns = 0;      // of that, the time compute ran (|kernel ∩ compute union|, summed)
  int64_t launch_ns = kUnknown;  // host time of the launch (NCCL call enter, else the kernel's launch)
  int64_t bytes = kUnknown;    // CommOp::bytes (per-rank buffer as the source reports it)
  int64_t nranks = kUnknown;
  uint32_t stream = kNoIndex;
  std::string op_name;  // normalized: allreduce, allgather, reducescatter, broadcast, send, recv, alltoall, ...
  std::string family;   // OpFamily(op_name), computed once

  int64_t exposed_ns() const { return busy_ns - covered_ns; }
};

// Every op of the trace, sorted by start. `compute` is the rank's compute union.
std::vector<OpSpan> CommOpSpans(const RankTrace& trace, const IntervalSet& compute);

// The op-type family used in tables: allreduce, allgather, reducescatter, broadcast, reduce,
// p2p (send/recv), alltoall, other.
std::string OpFamily(std::string_view op_name);

// nccl-tests' "size" of an op in bytes (the buffer whose size the bandwidth formulas use): the
// full output of an all-gather, the full input of a reduce-scatter, the buffer otherwise.
// kUnknown when the op's bytes are unknown. Kineto's "In msg nelems" is the per-rank input of an
// all-gather and the full input of a reduce-scatter; NCCL's count is per rank for both.
int64_t SizeBytes(const RankTrace& trace, const OpSpan& span);

// Bus-bandwidth factor (nccl-tests, docs/PERFORMANCE.md there): all-reduce 2(n-1)/n,
// all-gather and reduce-scatter (n-1)/n, everything else 1. n unknown or < 2: 1.
double BusFactor(std::string_view family, int64_t nranks);

}  // namespace overlapprof
