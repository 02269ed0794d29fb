#pragma once
// Custom what-if scenarios (`--scenario SPEC`, docs/what-if.md "Custom scenarios"): the grammar,
// parsed once into a typed ScenarioSpec at the command line, and each spec's evaluation on the run's
// model (analyzers/what_if_model.h) in the what-if analyzer's Finish.
//
// Grammar (spaces not allowed; K a positive decimal factor, R a rank, N a positive integer):
//   comm*K                 every transfer (and unmatched communication kernel) scaled by K
//   host*K                 host work and host gaps between launches scaled by K
//   kernel~REGEX*K         GPU tasks whose name matches REGEX (ECMAScript, searched) take K times as long
//   rank=R:median          rank R's pre-collective work (compute, host) at the median rank's pace
//   ddp.bucket_cap_mb=X    gradient all-reduces regrouped into buckets of X MiB (X > 0)
//   ddp.compress=bf16|fp16 gradient all-reduces (32-bit) carry half the bytes
//   ddp.accumulate=N       gradient all-reduces in one micro-step of N (N >= 1)
//   fsdp.prefetch=+1       each all-gather issued one block (all-gather) earlier
//   pp.slowest=median      the slowest pipeline stage at the median stage's pace
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "analyzers/what_if_model.h"
#include "src/common/status.h"
#include "src/trace/model.h"

namespace overlapprof::whatif {

enum class ScenarioKind : uint8_t {
  kCommScale,      // comm*K
  kHostScale,      // host*K
  kKernelScale,    // kernel~REGEX*K
  kRankMedian,     // rank=R:median
  kDdpBucketCap,   // ddp.bucket_cap_mb=X
  kDdpCompress,    // ddp.compress=bf16|fp16
  kDdpAccumulate,  // ddp.accumulate=N
  kFsdpPrefetch,   // fsdp.prefetch=+1
  kPpSlowest,      // pp.slowest=median
};

enum class CompressType : uint8_t { kBf16, kFp16 };

struct ScenarioSpec {
  std::string text;  // as given: the scenario's name in every output
  ScenarioKind kind = ScenarioKind::kCommScale;
  double factor = 1.0;           // comm, host, kernel: the factor K (>= 0)
  std::string pattern;           // kernel: the regex (validated when parsed)
  int64_t rank = -1;             // rank=R
  double bucket_cap_mb = 0;      // ddp.bucket_cap_mb (MiB, > 0)
  CompressType compress = CompressType::kBf16;
  int64_t accumulate = 1;        // ddp.accumulate (>= 1)
  int64_t prefetch_deeper = 1;   // fsdp.prefetch=+N (only +1 for now)
};

// Parses one SPEC; an error (StatusCode::kInvalidInput) is one line naming the part that is wrong.
StatusOr<ScenarioSpec> ParseScenario(std::string_view text);
// Every SPEC of a command line, in order.
StatusOr<std::vector<ScenarioSpec>> ParseScenarios(const std::vector<std::string>& texts);

// What the scenarios read of one rank's trace beyond its model, per GPU task of its RankModel
// (index < RankModel::gpu_activity.size()). Gathered on the thread that read the rank.
struct ScenarioRankInputs {
  std::vector<Collective> op;      // the task's communication op (kUnknown: none or unknown)
  std::vector<int64_t> bytes;      // its op's bytes; -1 unknown
  std::vector<uint8_t> wide;       // 1: the op's datatype is a 32-bit float (compressible to 16 bits)
  // Communication tasks: when what they wait for was done (the later of their launch call's start and
  // the end of the last non-communication GPU task launched before them; rule C), rank clock, ns.
  std::vector<int64_t> ready_ns;
  std::vector<uint8_t> backward;   // 1: a compute task launched inside a host annotation named *backward*
  std::map<std::string, std::vector<uint8_t>> kernel_match;  // per kernel~ REGEX: per task, 1 = its name matches
  bool point_to_point = false;     // the trace has send/recv operations (pipeline stages)
};
ScenarioRankInputs GatherScenarioInputs(const RankTrace& trace, const RankModel& model,
                                        const std::vector<ScenarioSpec>& specs);

// The run a scenario is planned on.
struct ScenarioRun {
  const RunGraph& graph;
  const std::vector<ScenarioRankInputs>& inputs;  // per slot (empty entries for unmodeled slots)
  const std::vector<int64_t>& offsets;            // per slot: clock offset (domain minus reference)
  const std::vector<int64_t>& ranks;              // per slot: the rank's number
};

// How a spec is predicted: the replays to run and how to weigh them (the predicted step of a slot is
// the weighted sum of its mean steps under each change), or why it cannot be (why_not non-empty).
struct ScenarioPlan {
  std::vector<Change> changes;
  std::vector<double> weights;
  std::string assumptions;
  std::string why_not;
};

// Plans `spec` on the run. An error (StatusCode::kInvalidArgument, exit 2) names the part of the
// spec the run cannot take: a rank not in the run, a regex no GPU task matches, a knob whose
// operations the trace does not hold.
StatusOr<ScenarioPlan> PlanScenario(const ScenarioSpec& spec, const ScenarioRun& run);

}  // namespace overlapprof::whatif
