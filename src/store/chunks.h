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
// Comm ops: varint flags (bit0 comm_rank, bit1 comm_nranks, bit2 seq, bit3 count, bit4 bytes,
// bit5 root_peer, bit6 stream, bit7 host_enter_ns, bit8 host_exit_ns, bit9 host_tid: set when
// the value is known; bit10 extension values, see below); source byte; four strings (communicator, op, datatype, pg_desc), each
// a varint n: 0 = the same as the previous op's in this chunk ("" before the first op), else
// n - 1 bytes follow; then the flagged values: zigzag comm_rank, zigzag comm_nranks, zigzag
// seq minus the previous present seq, zigzag count, zigzag bytes, zigzag root_peer, varint
// stream, and zigzag deltas of host_enter_ns, host_exit_ns and host_tid from their previous
// present values; with bit10, a varint n and n zigzag values, fields added after the first
// version in order (launch_id, stream_handle), so that a reader skips the ones it does not know and an
// added field stays a minor schema change. Deltas wrap (two's complement), so every int64
// round-trips.
// Ranges: flags (bit0 step, bit1 tid, bit2 stream); kind byte; zigzag start delta; varint
// duration; varint name id; when flagged zigzag step minus the previous present step, zigzag
// tid minus the previous present tid, varint stream.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/status.h"
#include "src/trace/model.h"

namespace overlapprof {

inline constexpr size_t kChunkRows = 65536;
// The largest chunk blob readers accept (SQLITE_LIMIT_LENGTH of the reader); writers split
// chunks to stay below it.
inline constexpr size_t kMaxChunkBytes = size_t{16} << 20;

std::string EncodeActivities(const Activity* a, size_t n);
std::string EncodeHostCalls(const HostCall* h, size_t n);
std::string EncodeCommOps(const CommOp* c, size_t n);
std::string EncodeRanges(const Range* r, size_t n);

// Whether records came in RankTrace::Finalize's order (by start, then end), tracked while
// they are decoded so that readers skip a separate is-sorted pass. Carried across chunks.
struct TimeOrder {
  int64_t start = INT64_MIN, end = INT64_MIN;  // of the last record seen
  bool sorted = true;
  void See(int64_t s, int64_t e) {
    sorted &= s > start || (s == start && e >= end);
    start = s;
    end = e;
  }
};

// Limits the decoded records must respect (sizes of the tables they refer to).
struct ChunkLimits {
  size_t names = 0, streams = 0, comm_ops = 0;
};

// Appends `count` records decoded from `blob` to `out`. Every value is validated (enums,
// references, times within [0, kMaxTimeNs), end >= start, no trailing bytes): a bad blob
// is kCorrupt with what was wrong.
// `order`, when given, sees every record's (start, end).
Status DecodeActivities(std::string_view blob, size_t count, const ChunkLimits& limits, std::vector<Activity>* out,
                        TimeOrder* order = nullptr);
Status DecodeHostCalls(std::string_view blob, size_t count, const ChunkLimits& limits, std::vector<HostCall>* out,
                       TimeOrder* order = nullptr);
// Comm ops: stream within limits.streams, source 1..3, strings within the blob.
Status DecodeCommOps(std::string_view blob, size_t count, const ChunkLimits& limits, std::vector<CommOp>* out);
Status DecodeRanges(std::string_view blob, size_t count, const ChunkLimits& limits, std::vector<Range>* out,
                    TimeOrder* order = nullptr);

}  // namespace overlapprof
