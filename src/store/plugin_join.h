#pragma once
// Joins the operations NCCL's profiler plugin timed (table nccl_profiler_op, schema 1.2) to
// the NCCL calls the hooks recorded (comm_op), in a settled injector store: `overlapprof run`
// calls it after the job, once the comm_op rows are there (MaterializeCommOpRows).
//
// The key, per rank: the communicator (ours: the plugin's init names it, else the one
// communicator of the same rank and size), the function, and the order: NCCL numbers
// collectives per communicator and function (seqNumber), so the k-th AllReduce event is the
// k-th allreduce call; point-to-point events carry no number and are taken in the order NCCL
// started them per (communicator, send/recv, peer). The size must agree too: bytes where both
// sides know them (NCCL reports broadcast and all-gather as ncclInt8 with the count in bytes),
// else the element count.
// Sets nccl_profiler_op.comm_op_id (and a communicator it lacked), and the counters
// nccl_plugin_ops_unmatched (plugin ops joined to no call) and nccl_plugin_calls_unmatched
// (calls on a communicator the plugin reported on, without a plugin op), and meta
// timing_source: "nccl_profiler" when a joined op has GPU times, else "kernels". Idempotent
// (meta nccl_profiler_joined); a store without the table, or without plugin rows, is left alone.
#include <string>

#include "src/common/status.h"

namespace overlapprof {

struct NcclPluginJoin {
  int64_t plugin_ops = 0, matched = 0, plugin_unmatched = 0, calls_unmatched = 0;
  int64_t timed = 0;  // matched ops with GPU times on the trace clock
};

StatusOr<NcclPluginJoin> JoinNcclProfilerOps(const std::string& path);

}  // namespace overlapprof
