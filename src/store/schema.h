#pragma once
// The trace store's schema: one SQLite file per rank (docs/schema.md is the contract).
//
// Versioning: PRAGMA application_id identifies an overlapprof store; PRAGMA user_version
// is major*1000 + minor, and meta('schema_version') repeats it as "major.minor". A minor
// bump only adds (tables, columns, counters) and old readers keep working; a major bump
// changes meaning, and readers refuse a newer major with a message naming the version.
#include <cstdint>
#include <string_view>

namespace overlapprof {

inline constexpr int32_t kStoreApplicationId = 0x4F564C50;  // 'OVLP'
inline constexpr int kSchemaMajor = 1;
inline constexpr int kSchemaMinor = 3;
inline constexpr int kSchemaUserVersion = kSchemaMajor * 1000 + kSchemaMinor;

// Tables and their columns. Times are INTEGER ns on the clock named by meta.clock_source.
// meta.value has no declared type on purpose: BLOB affinity keeps "1.0" a string and 3 an
// integer (a declared type such as ANY would get NUMERIC affinity and turn "1.0" into 1).
inline constexpr std::string_view kSchemaDdl = R"sql(
CREATE TABLE meta(
  key   TEXT PRIMARY KEY,
  value
) WITHOUT ROWID;
CREATE TABLE string(
  id    INTEGER PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE device(
  id            INTEGER PRIMARY KEY,
  name          TEXT,
  compute_major INTEGER,
  compute_minor INTEGER,
  total_memory  INTEGER,
  sm_count      INTEGER
);
CREATE TABLE stream(
  id        INTEGER PRIMARY KEY,
  device    INTEGER,
  native_id INTEGER,
  name      TEXT
);
CREATE TABLE comm_op(
  id            INTEGER PRIMARY KEY,
  communicator  TEXT NOT NULL,
  comm_rank     INTEGER,
  comm_nranks   INTEGER,
  seq           INTEGER,
  op            TEXT NOT NULL,
  datatype      TEXT,
  count         INTEGER,
  bytes         INTEGER,
  root_peer     INTEGER,
  stream_id     INTEGER REFERENCES stream(id),
  host_enter_ns INTEGER,
  host_exit_ns  INTEGER,
  host_tid      INTEGER,
  pg_desc       TEXT,
  source        INTEGER NOT NULL,
  launch_id     INTEGER,
  stream_handle INTEGER
);
CREATE TABLE external_correlation(
  correlation_id INTEGER NOT NULL,
  external_id    INTEGER NOT NULL
);
CREATE TABLE cuda_event(
  kind           INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL,
  sync_id        INTEGER NOT NULL,
  stream_id      INTEGER REFERENCES stream(id)
);
CREATE TABLE gpu_activity(
  id             INTEGER PRIMARY KEY,
  start_ns       INTEGER NOT NULL,
  end_ns         INTEGER NOT NULL,
  category       INTEGER NOT NULL,
  kind           INTEGER NOT NULL,
  stream_id      INTEGER NOT NULL REFERENCES stream(id),
  name_id        INTEGER NOT NULL REFERENCES string(id),
  correlation_id INTEGER,
  launch_ns      INTEGER,
  bytes          INTEGER,
  copy_kind      INTEGER,
  comm_op_id     INTEGER REFERENCES comm_op(id)
);
CREATE TABLE activity_chunk(
  id       INTEGER PRIMARY KEY,
  first_id INTEGER NOT NULL,
  count    INTEGER NOT NULL,
  data     BLOB NOT NULL
);
CREATE TABLE host_call_chunk(
  id       INTEGER PRIMARY KEY,
  first_id INTEGER NOT NULL,
  count    INTEGER NOT NULL,
  data     BLOB NOT NULL
);
CREATE TABLE comm_op_chunk(
  id       INTEGER PRIMARY KEY,
  first_id INTEGER NOT NULL,
  count    INTEGER NOT NULL,
  data     BLOB NOT NULL
);
CREATE TABLE trace_range_chunk(
  id       INTEGER PRIMARY KEY,
  first_id INTEGER NOT NULL,
  count    INTEGER NOT NULL,
  data     BLOB NOT NULL
);
CREATE TABLE host_call(
  id             INTEGER PRIMARY KEY,
  start_ns       INTEGER NOT NULL,
  end_ns         INTEGER NOT NULL,
  correlation_id INTEGER,
  tid            INTEGER,
  name_id        INTEGER NOT NULL REFERENCES string(id)
);
CREATE TABLE trace_range(
  id        INTEGER PRIMARY KEY,
  kind      INTEGER NOT NULL,
  start_ns  INTEGER NOT NULL,
  end_ns    INTEGER NOT NULL,
  name_id   INTEGER NOT NULL REFERENCES string(id),
  step      INTEGER,
  tid       INTEGER,
  stream_id INTEGER REFERENCES stream(id)
);
CREATE TABLE nccl_profiler_op(
  id                INTEGER PRIMARY KEY,
  communicator      TEXT,
  nccl_comm_hash    INTEGER,
  comm_rank         INTEGER,
  comm_nranks       INTEGER,
  op                TEXT NOT NULL,
  nccl_seq          INTEGER,
  datatype          TEXT,
  count             INTEGER,
  bytes             INTEGER,
  root_peer         INTEGER,
  algorithm         TEXT,
  protocol          TEXT,
  channels_expected INTEGER,
  channels          INTEGER,
  gpu_start_raw     INTEGER,
  gpu_end_raw       INTEGER,
  start_ns          INTEGER,
  end_ns            INTEGER,
  host_start_ns     INTEGER,
  group_id          INTEGER,
  proxy_ops         INTEGER,
  proxy_steps       INTEGER,
  abi_version       INTEGER,
  flags             INTEGER NOT NULL,
  host_tid          INTEGER,
  comm_op_id        INTEGER REFERENCES comm_op(id)
);
CREATE TABLE stats(
  name        TEXT PRIMARY KEY,
  severity    TEXT NOT NULL,
  value       INTEGER NOT NULL,
  description TEXT NOT NULL
) WITHOUT ROWID;
)sql";

// Created once the bulk of the rows is in (faster than maintaining them row by row).
inline constexpr std::string_view kSchemaIndexes = R"sql(
CREATE INDEX IF NOT EXISTS gpu_activity_by_stream ON gpu_activity(stream_id, start_ns);
CREATE INDEX IF NOT EXISTS gpu_activity_by_correlation ON gpu_activity(correlation_id);
CREATE INDEX IF NOT EXISTS gpu_activity_by_comm_op ON gpu_activity(comm_op_id) WHERE comm_op_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS comm_op_by_seq ON comm_op(communicator, seq);
CREATE INDEX IF NOT EXISTS host_call_by_correlation ON host_call(correlation_id);
CREATE INDEX IF NOT EXISTS trace_range_by_kind ON trace_range(kind, start_ns);
)sql";

// Added in 1.2 (stores written before lack it; readers use it when it is there).
inline constexpr std::string_view kNcclProfilerOpTable = "nccl_profiler_op";
// Added in 1.3: CUDA event records and the waits on them (EventLink; kind is EventLinkKind).
inline constexpr std::string_view kCudaEventTable = "cuda_event";

// The tables a valid store must have (the reader checks them before reading).
inline constexpr std::string_view kRequiredTables[] = {
    "meta",        "string",         "device",          "stream",      "comm_op", "gpu_activity",
    "host_call",   "activity_chunk", "host_call_chunk", "trace_range", "stats"};
// Chunked copies of row tables that stores written before they existed lack (additions to
// schema 1.0; docs/schema.md "Chunks"): readers use one when it is there and read the rows
// otherwise. {chunk table, row table}.
struct OptionalChunkTable {
  std::string_view chunks, rows;
};
inline constexpr OptionalChunkTable kCommOpChunks{"comm_op_chunk", "comm_op"};
inline constexpr OptionalChunkTable kRangeChunks{"trace_range_chunk", "trace_range"};
// Analysis reads the dictionaries and the chunk tables, never the row copies of chunked
// data; the reader runs PRAGMA quick_check on exactly the tables it reads (see ReadStore).

}  // namespace overlapprof
