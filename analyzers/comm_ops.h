#pragma once
// Communication operations as spans on one rank's GPU timeline: what the bucket, FSDP/TP,
// op-type and iteration analyzers share. An op is a CommOp with its GPU activities (one
// collective or point-to-point call; a Kineto trace has one per communication kernel), or a
// communication kernel no op record claims. Times in ns on the trace's clock.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analyzers/intervals.h"
#include "src/trace/model.h"

namespace overlapprof {

// Which times a rank's communication intervals come from (docs/nccl-profiler.md,
// "timing_source"). A launch group (the comm ops sharing a launch id, i.e. one NCCL kernel
// plan; an op without one is its own group) is timed by NCCL's profiler plugin when every op
// of it was joined to a plugin op with GPU times on the trace clock: its kernels then leave
// the communication union and its ops' own intervals (each op of a fused kernel its own)
// enter it. Every other communication activity is timed by its kernel as before. Kernel time
// outside every op's interval of a replaced group (launch prologue, gaps between fused ops)
// then counts as idle. Built once per rank; empty (kernels only) for a rank without plugin ops.
struct CommTiming {
  bool plugin = false;              // some group is timed by the plugin: timing_source "nccl_profiler"
  std::vector<bool> replaced;       // by comm op index: its group is timed by the plugin (empty: none)
  std::vector<uint32_t> plugin_ops; // RankTrace::nccl_plugin_ops used (of replaced groups), by start
  std::vector<uint32_t> group;      // by comm op index: its group's representative (lowest index) op
  std::vector<uint32_t> group_size; // by representative: ops in its group
  int64_t plugin_ops_total = 0;     // the rank's plugin ops
  int64_t plugin_ops_with_times = 0;  // of those, with GPU times on the trace clock
  // The measured clock offset checked against CUPTI (docs/nccl-profiler.md, "Clock"): ops alone
  // in their launch with exactly one kernel, whose plugin GPU start and kernel start agree to
  // within kKernelResidualNs unless the offset is off. Counter nccl_plugin_kernel_time_mismatch.
  static constexpr int64_t kKernelResidualNs = 100000;
  int64_t kernel_checked = 0;      // such ops
  int64_t kernel_mismatched = 0;   // of those, |plugin start - kernel start| > kKernelResidualNs
  int64_t kernel_residual_ns = 0;  // median of plugin start - kernel start over them (signed)
  bool Replaced(uint32_t comm_op) const { return comm_op < replaced.size() && replaced[comm_op]; }
  std::string_view source() const { return plugin ? "nccl_profiler" : "kernels"; }
};
CommTiming ResolveCommTiming(const RankTrace& trace);

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
  Collective collective = Collective::kUnknown;  // the op's (CommOp::op), else from the kernel's name
  Collective family = Collective::kUnknown;  // OpFamily(collective), computed once
  // Timed by NCCL's profiler plugin (CommTiming): start/end/busy are the plugin's, and these
  // are its launch group's kernels' first start and last end (kUnknown when it has none). For
  // the cross-rank analyzer, which falls back to kernel times when a rank lacks plugin times.
  bool plugin_timed = false;
  int64_t kernel_start_ns = kUnknown, kernel_end_ns = kUnknown;

  int64_t exposed_ns() const { return busy_ns - covered_ns; }
};

// Every op of the trace, sorted by start. `compute` is the rank's compute union; `timing` says
// which ops the plugin times (default: kernels only). With the plugin, a group of sends and
// recvs that linking named an all-to-all (src/trace/link.h) stays one span, as with kernels.
std::vector<OpSpan> CommOpSpans(const RankTrace& trace, const IntervalSet& compute, const CommTiming& timing = {});

// The op-type family used in tables, as the collective that stands for it: every collective is
// its own family but the point-to-point kernels (send, recv, sendrecv), whose family is
// kSendRecv. A peer-to-peer memcpy (kPeerCopy) is a family of its own, apart from them.
Collective OpFamily(Collective c);
// A family's name in reports: "p2p" for the point-to-point family (kSendRecv), else the
// collective's name (CollectiveName: allreduce, allgather, reducescatter, p2p_copy, ...).
std::string_view OpFamilyName(Collective family);

// nccl-tests' "size" of an op in bytes (the buffer whose size the bandwidth formulas use): the
// full output of an all-gather, the full input of a reduce-scatter, the buffer otherwise.
// kUnknown when the op's bytes are unknown. Kineto's "In msg nelems" is the per-rank input of an
// all-gather and the full input of a reduce-scatter; NCCL's count is per rank for both.
int64_t SizeBytes(const RankTrace& trace, const OpSpan& span);

// Bus-bandwidth factor of an op family (OpFamily; nccl-tests, docs/PERFORMANCE.md there):
// all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n, everything else 1. n unknown or
// < 2: 1.
double BusFactor(Collective family, int64_t nranks);

}  // namespace overlapprof
