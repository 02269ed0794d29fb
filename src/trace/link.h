#pragma once
// Links the records of an injector trace (source_format "overlapprof") that the injector
// stores raw, because CUPTI delivers them in no guaranteed order:
//  - an activity's launch_ns, from the host API call with its correlation id;
//  - an activity's comm op, from CUPTI's external correlation record for its launching call
//    (correlation id -> external id) and the comm op whose launch_id is that external id.
//    Ops of one NCCL group share a launch id (and its kernel): the activity is linked to the
//    group's first op. A linked activity is communication (docs/classification.md rule 1),
//    and an op without a stream gets its activity's.
// Counts correlations_unmatched (activities whose correlation id matches no host call,
// when the trace has host calls) and comm_ops_without_gpu_activity (when it has GPU
// activities at all: without CUDA there is nothing to link to). Values already set (an
// importer that resolved them) are kept.
#include "src/trace/model.h"

namespace overlapprof {

// NCCL runs an all-to-all as a group of sends and recvs: a group (ops sharing a launch id) of
// sends and recvs only, on one communicator, with a send to and a recv from every other rank of
// it, is an all-to-all. Its ops are renamed "alltoall", and the first (which carries the group's
// kernel) gets the bytes of all its sends (kUnknown when one is unknown). Called first by
// LinkInjectorRecords.
void NameGroupedAllToAll(RankTrace& t);

void LinkInjectorRecords(RankTrace& t);

}  // namespace overlapprof
