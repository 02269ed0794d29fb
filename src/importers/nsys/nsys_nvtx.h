#pragma once
// NVTX in an export: NCCL's own API ranges (its NVTX domain) and their payloads name the
// communication ops that the kernels' names leave vague (docs/nsys.md, "NCCL ranges").
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/status.h"
#include "src/importers/nsys/nsys_schema.h"
#include "src/importers/nvtx_payload.h"
#include "src/trace/collective.h"
#include "src/trace/model.h"

namespace overlapprof::nsys {

// An NCCL API range (NCCL's NVTX domain) on a host thread: what kind of call it was.
enum class NcclApi : uint8_t { kOther, kGroupStart, kGroupEnd, kSend, kRecv, kCollective };
struct NcclRange {
  int64_t tid;
  int64_t start_ns, end_ns;
  NcclApi api;
  Collective op = Collective::kUnknown;  // kCollective: the collective (NormalizeCollectiveName)
  std::optional<NcclPayload> payload;  // NCCL's NVTX payload, when the export holds it (nvtx_payload.h)
};

// "ncclAllReduce" -> a collective "allreduce"; ncclSend/ncclRecv; ncclGroupStart/End; the rest
// (ncclCommCount, communicator calls such as ncclCommInitRank*) are kOther.
NcclRange NcclApiOf(std::string_view name);

// The runtime call that launched a memcpy (not a peer copy): its correlation id, thread, start.
struct CopyLaunch {
  int64_t correlation;
  int64_t tid;
  int64_t start_ns;
};

// Names the comm ops of `t` from the NCCL ranges of the rank's process (on the trace clock;
// emptied), for the ops whose launch (host_tid, host_enter_ns) lies inside them. First, each
// copy of `copies` launched inside an NCCL collective, send, receive or group end (innermost
// range of its thread) becomes communication of that call: the op of a kernel the same call
// launched, else one op of rule copy_engine for the call's copies (docs/classification.md),
// which is then named as the kernels' ops are.
void NameOpsFromNcclRanges(std::vector<NcclRange>& ranges, RankTrace& t, const std::vector<CopyLaunch>& copies = {});

// NCCL's payload schemas (nvtx_payload.h) of the export: empty when it has none or more rows
// than NCCL's (not NCCL's then).
StatusOr<NvtxPayloadSchemas> ReadPayloadSchemas(const NsysDb& db);

}  // namespace overlapprof::nsys
