#pragma once
// Column-chunk encoding of GPU activities and host calls (docs/schema.md, "Chunks").
//
// The store keeps every activity twice: as a row of `gpu_activity` (the queryable copy,
// for people and SQL) and inside a chunk of `activity_chunk` (what analysis reads: a
// compact varint blob per up to kChunkRows records, decoded at tens of millions of
// records per second, where SQLite's row-at-a-time reads top out near 5 million). Both
// are written in the same transaction.
//
// Encoding v1, per activity, in order: flags byte (bit0 correlation, bit1 bytes,
// bit2 comm op, bit3 launch time, bit4 copy kind); kind<<4 | category; zigzag varint of
// start minus the previous start; varint duration; varint stream+1 (0 = unknown);
// varint name id; then when flagged: zigzag correlation minus the previous present
// correlation, zigzag bytes, varint comm op, zigzag (start - launch), copy-kind byte.
// Host calls: flags (bit0 correlation, bit1 tid); zigzag start delta; varint duration;
// varint name id; when flagged zigzag correlation delta, zigzag tid.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/status.h"
#include "src/trace/model.h"

namespace overlapprof {

inline constexpr size_t kChunkRows = 65536;

std::string EncodeActivities(const Activity* a, size_t n);
std::string EncodeHostCalls(const HostCall* h, size_t n);

// Limits the decoded records must respect (sizes of the tables they refer to).
struct ChunkLimits {
  size_t names = 0, streams = 0, comm_ops = 0;
};

// Appends `count` records decoded from `blob` to `out`. Every value is validated (enums,
// references, times within [0, kMaxTimeNs), end >= start, no trailing bytes): a bad blob
// is kCorrupt with what was wrong.
Status DecodeActivities(std::string_view blob, size_t count, const ChunkLimits& limits, std::vector<Activity>* out);
Status DecodeHostCalls(std::string_view blob, size_t count, const ChunkLimits& limits, std::vector<HostCall>* out);

}  // namespace overlapprof
