#include <gtest/gtest.h>
#include <sqlite3.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <tuple>

#include "analyzers/overlap.h"
#include "src/cli/pipeline.h"
#include "src/store/reader.h"
#include "src/store/schema.h"
#include "src/store/writer.h"
#include "test_util.h"

namespace overlapprof {
namespace {

void Sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

RankTrace RealTrace() {
  StatusOr<RankTrace> t = ImportFile(testing::DataFile("kineto/a100_2rank_rank0.json.gz"), {});
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

// NCCL profiler plugin ops (schema 1.2) read back with their join to a comm op; a store
// without the table (written before 1.2) still reads, with none; a comm_op_id naming no op
// is refused.
TEST(Store, NcclProfilerOpsReadBackAndOlderStoresReadWithout) {
  testing::TempDir dir;
  RankTrace in = RealTrace();
  ASSERT_FALSE(in.comm_ops.empty());
  NcclPluginOp p;
  p.communicator = in.comm_ops[0].communicator;
  p.op = Collective::kAllReduce;
  p.nccl_seq = 0;
  p.count = 1024;
  p.gpu_start_raw = 5;
  p.gpu_end_raw = 9;
  p.start_ns = in.activities.front().start_ns;
  p.end_ns = p.start_ns + 4;
  p.abi_version = 6;
  in.nccl_plugin_ops.push_back(p);
  const std::string path = dir.File("rank0.db");
  ASSERT_TRUE(WriteStore(in, path, false).ok());
  Sql(path, "UPDATE nccl_profiler_op SET comm_op_id = 0; INSERT INTO meta(key, value) VALUES('timing_source', 'nccl_profiler')");
  StatusOr<RankTrace> out = ReadStore(path);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->nccl_plugin_ops.size(), 1u);
  const NcclPluginOp& q = out->nccl_plugin_ops[0];
  EXPECT_EQ(std::tie(q.op, q.nccl_seq, q.count, q.start_ns, q.end_ns, q.abi_version),
            std::tie(p.op, p.nccl_seq, p.count, p.start_ns, p.end_ns, p.abi_version));
  EXPECT_EQ(q.comm_op, 0u);
  EXPECT_TRUE(q.HasGpuTimes());
  EXPECT_EQ(out->meta.timing_source, "nccl_profiler");

  Sql(path, "UPDATE nccl_profiler_op SET comm_op_id = 999999");
  StatusOr<RankTrace> bad = ReadStore(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("comm_op_id out of range"), std::string::npos) << bad.status().message();

  Sql(path, "DROP TABLE nccl_profiler_op; PRAGMA user_version = 1001;"
            "UPDATE meta SET value = '1.1' WHERE key = 'schema_version'");
  StatusOr<RankTrace> old = ReadStore(path);
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_TRUE(old->nccl_plugin_ops.empty());
}

TEST(Store, RoundTripKeepsEverythingTheAnalyzersUse) {
  testing::TempDir dir;
  RankTrace in = RealTrace();
  std::string path = dir.File("rank0.db");
  ASSERT_TRUE(WriteStore(in, path, false).ok());
  StatusOr<RankTrace> out = ReadStore(path);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->meta.rank, in.meta.rank);
  EXPECT_EQ(out->meta.world_size, 2);
  EXPECT_EQ(out->meta.source_format, "kineto");
  ASSERT_EQ(out->activities.size(), in.activities.size());
  ASSERT_EQ(out->comm_ops.size(), in.comm_ops.size());
  ASSERT_EQ(out->host_calls.size(), in.host_calls.size());
  ASSERT_EQ(out->ranges.size(), in.ranges.size());
  ASSERT_EQ(out->streams.size(), in.streams.size());
  ASSERT_EQ(out->devices.size(), in.devices.size());
  for (size_t i = 0; i < in.activities.size(); ++i) {
    const Activity &a = in.activities[i], &b = out->activities[i];
    ASSERT_EQ(a.start_ns, b.start_ns);
    ASSERT_EQ(a.end_ns, b.end_ns);
    ASSERT_EQ(a.category, b.category);
    ASSERT_EQ(a.kind, b.kind);
    ASSERT_EQ(a.stream, b.stream);
    ASSERT_EQ(in.names.Get(a.name_id), out->names.Get(b.name_id));
    ASSERT_EQ(a.correlation_id, b.correlation_id);
    ASSERT_EQ(a.bytes, b.bytes);
    ASSERT_EQ(a.comm_op, b.comm_op);
  }
  for (size_t i = 0; i < in.comm_ops.size(); ++i) {
    EXPECT_EQ(in.comm_ops[i].op, out->comm_ops[i].op);
    EXPECT_EQ(in.comm_ops[i].bytes, out->comm_ops[i].bytes);
    EXPECT_EQ(in.comm_ops[i].communicator, out->comm_ops[i].communicator);
    EXPECT_EQ(in.comm_ops[i].host_enter_ns, out->comm_ops[i].host_enter_ns);
  }
  OverlapFigures fa = WholeTraceFigures(BuildTimelineSets(in));
  OverlapFigures fb = WholeTraceFigures(BuildTimelineSets(*out));
  EXPECT_EQ(fa.overlap_ns, fb.overlap_ns);
  EXPECT_EQ(fa.comm_ns, fb.comm_ns);
  EXPECT_EQ(fa.compute_ns, fb.compute_ns);
  // The bulk writer leaves no partial file or journal behind.
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
}

TEST(Store, StatsRoundTripIncludingUnknownCountersFromNewerMinor) {
  testing::TempDir dir;
  RankTrace in = RealTrace();
  in.stats.Set(Stat::records_dropped_cupti, 7);
  std::string path = dir.File("r.db");
  ASSERT_TRUE(WriteStore(in, path, false).ok());
  Sql(path, "PRAGMA user_version=1005; UPDATE meta SET value = '1.5' WHERE key = 'schema_version';"
            "INSERT INTO stats VALUES('future_counter','error',3,'from a newer writer')");
  StatusOr<RankTrace> out = ReadStore(path);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->stats.Get(Stat::records_dropped_cupti), 7);
  ASSERT_EQ(out->extra_stats.size(), 1u);
  EXPECT_EQ(out->extra_stats[0].name, "future_counter");
  EXPECT_EQ(out->extra_stats[0].severity, Severity::kError);
}

TEST(Store, RefusesNewerMajorVersionNamingIt) {
  testing::TempDir dir;
  std::string path = dir.File("r.db");
  ASSERT_TRUE(WriteStore(RealTrace(), path, false).ok());
  Sql(path, "PRAGMA user_version=2003");
  StatusOr<RankTrace> out = ReadStore(path);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kUnsupportedVersion);
  EXPECT_NE(out.status().message().find("schema 2.3"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("upgrade overlapprof"), std::string::npos);
}

// meta('schema_version') repeats PRAGMA user_version: a store where they disagree is damaged
// or forged, and is refused naming both, not read as either.
TEST(Store, RefusesAStoreWhoseTwoVersionsDisagree) {
  testing::TempDir dir;
  std::string path = dir.File("v.db");
  ASSERT_TRUE(WriteStore(RealTrace(), path, false).ok());
  ASSERT_TRUE(ReadStore(path).ok());
  Sql(path, "UPDATE meta SET value = '2.0' WHERE key = 'schema_version'");
  StatusOr<RankTrace> out = ReadStore(path);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(out.status().message().find("'2.0'"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("1003"), std::string::npos) << out.status().message();
  Sql(path, "UPDATE meta SET value = 7 WHERE key = 'schema_version'");
  EXPECT_EQ(ReadStore(path).status().code(), StatusCode::kInvalidInput);
  Sql(path, fmt::format("UPDATE meta SET value = '{}.{}' WHERE key = 'schema_version'", kSchemaMajor, kSchemaMinor));
  EXPECT_TRUE(ReadStore(path).ok());
}

// A store (or export) in WAL mode on read-only media, without its -shm: SQLite cannot create
// the -shm and refuses the file (SQLITE_CANTOPEN); with no -wal frames to read it is opened
// immutable and reads. Read-only media is a directory this process may not write (as root:
// a child that drops to "nobody").
TEST(Store, AWalModeStoreReadsFromReadOnlyMediaWithoutItsShm) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("overlapprof-ro-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "wal.db").string();
  ASSERT_TRUE(WriteStore(RealTrace(), path, false).ok());
  Sql(path, "PRAGMA journal_mode=WAL");
  ASSERT_FALSE(fs::exists(path + "-shm"));
  ASSERT_FALSE(fs::exists(path + "-wal"));
  fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::getuid() == 0 && ::setuid(65534) != 0) ::_exit(3);
    StatusOr<RankTrace> t = ReadStore(path);
    if (!t.ok()) std::fprintf(stderr, "ReadStore: %s\n", t.status().message().c_str());
    ::_exit(t.ok() && !t->activities.empty() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  fs::permissions(dir, fs::perms::owner_all);
  EXPECT_FALSE(fs::exists(path + "-shm"));
  fs::remove_all(dir);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the store did not read from a read-only directory (see stderr)";
}

TEST(Store, RefusesOtherSchemasAndMissingTables) {
  testing::TempDir dir;
  std::string other = dir.File("other.db");
  Sql(other, "CREATE TABLE t(x); INSERT INTO t VALUES(1);");
  StatusOr<RankTrace> a = ReadStore(other);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(a.status().message().find("another schema"), std::string::npos);

  std::string path = dir.File("r.db");
  ASSERT_TRUE(WriteStore(RealTrace(), path, false).ok());
  Sql(path, "DROP TABLE host_call");
  StatusOr<RankTrace> b = ReadStore(path);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("lacks table 'host_call'"), std::string::npos) << b.status().message();
}

TEST(Store, RowCopiesEqualTheChunksAnalysisReads) {
  testing::TempDir dir;
  RankTrace in = RealTrace();
  std::string path = dir.File("r.db");
  ASSERT_TRUE(WriteStore(in, path, false).ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT id, start_ns, end_ns, category, kind, stream_id, correlation_id, launch_ns, "
                               "coalesce(comm_op_id, -1), (SELECT value FROM string WHERE string.id = name_id) "
                               "FROM gpu_activity ORDER BY id",
                               -1, &q, nullptr),
            SQLITE_OK);
  size_t n = 0;
  while (sqlite3_step(q) == SQLITE_ROW) {
    ASSERT_LT(n, in.activities.size());
    const Activity& a = in.activities[n];
    ASSERT_EQ(sqlite3_column_int64(q, 0), static_cast<int64_t>(n));
    ASSERT_EQ(sqlite3_column_int64(q, 1), a.start_ns);
    ASSERT_EQ(sqlite3_column_int64(q, 2), a.end_ns);
    ASSERT_EQ(sqlite3_column_int64(q, 3), static_cast<int64_t>(a.category));
    ASSERT_EQ(sqlite3_column_int64(q, 4), static_cast<int64_t>(a.kind));
    ASSERT_EQ(sqlite3_column_int64(q, 5), static_cast<int64_t>(a.stream));
    ASSERT_EQ(sqlite3_column_type(q, 6) == SQLITE_NULL ? kUnknown : sqlite3_column_int64(q, 6), a.correlation_id);
    ASSERT_EQ(sqlite3_column_type(q, 7) == SQLITE_NULL ? kUnknown : sqlite3_column_int64(q, 7), a.launch_ns);
    ASSERT_EQ(sqlite3_column_int64(q, 8), a.comm_op == kNoIndex ? -1 : static_cast<int64_t>(a.comm_op));
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(q, 9))), in.names.Get(a.name_id));
    ++n;
  }
  sqlite3_finalize(q);
  sqlite3_close(db);
  EXPECT_EQ(n, in.activities.size());
  // Most activities of a real trace have their launch time resolved.
  size_t launched = 0;
  for (const Activity& a : in.activities) launched += a.launch_ns != kUnknown;
  EXPECT_GT(launched, in.activities.size() * 9 / 10);
}

TEST(Store, RejectsDamagedChunksAndRowsThatDisagreeWithThem) {
  testing::TempDir dir;
  std::string path = dir.File("r.db");
  RankTrace t = RealTrace();
  ASSERT_TRUE(WriteStore(t, path, false).ok());
  struct Case {
    const char* name;
    std::string sql, expect;
  } cases[] = {
      {"truncated", "UPDATE activity_chunk SET data = substr(data, 1, 100) WHERE id = 0",
       "activity_chunk 0: activity chunk record"},
      {"trailing", "UPDATE host_call_chunk SET data = data || x'00' WHERE id = 0",
       "host_call_chunk 0: host call chunk record"},
      {"count", "UPDATE activity_chunk SET count = count + 1 WHERE id = 0", "activity_chunk 0"},
      {"rows", "DELETE FROM gpu_activity WHERE id = (SELECT max(id) FROM gpu_activity)",
       fmt::format("activity_chunk holds {} records but gpu_activity has {} rows", t.activities.size(),
                   t.activities.size() - 1)},
      {"gap", "UPDATE activity_chunk SET first_id = 5 WHERE id = 0", "first_id does not continue"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string copy = dir.File(std::string(c.name) + ".db");
    std::filesystem::copy_file(path, copy);
    Sql(copy, c.sql);
    StatusOr<RankTrace> b = ReadStore(copy);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(b.status().message().find(c.expect), std::string::npos) << b.status().message();
  }
}

TEST(Store, DetectsCorruptedPagesAndTruncation) {
  testing::TempDir dir;
  std::string path = dir.File("r.db");
  ASSERT_TRUE(WriteStore(RealTrace(), path, false).ok());
  const auto size = std::filesystem::file_size(path);
  ASSERT_GT(size, 16384u * 8);
  // (a) The file cut in half, as by a full disk or an interrupted copy.
  std::filesystem::copy_file(path, dir.File("half.db"));
  std::filesystem::resize_file(dir.File("half.db"), size / 2);
  // (b) The b-tree page headers of every page after the first scribbled over.
  std::filesystem::copy_file(path, dir.File("scribbled.db"));
  {
    std::fstream f(dir.File("scribbled.db"), std::ios::in | std::ios::out | std::ios::binary);
    for (std::uintmax_t page = 1; page * 16384 < size; ++page) {
      f.seekp(static_cast<std::streamoff>(page * 16384));
      f.write("\x0d\xff\xff\xff\xff\xff\xff\xff", 8);
    }
  }
  for (const char* name : {"half.db", "scribbled.db"}) {
    StatusOr<RankTrace> out = ReadStore(dir.File(name));
    ASSERT_FALSE(out.ok()) << name;
    EXPECT_EQ(out.status().code(), StatusCode::kCorrupt) << name << ": " << out.status().message();
    EXPECT_NE(out.status().message().find("corrupted"), std::string::npos) << out.status().message();
  }
}

TEST(Store, RefusesToOverwriteUnlessAsked) {
  testing::TempDir dir;
  std::string path = dir.File("r.db");
  RankTrace t = RealTrace();
  ASSERT_TRUE(WriteStore(t, path, false).ok());
  Status again = WriteStore(t, path, false);
  EXPECT_FALSE(again.ok());
  EXPECT_TRUE(WriteStore(t, path, true).ok());
}

TEST(Store, LiveModeAppendsBatchesEachCommitted) {
  testing::TempDir dir;
  std::string path = dir.File("live.db");
  RankTrace all = RealTrace();
  StoreWriter w;
  StoreWriter::Options o;
  o.mode = StoreWriter::Mode::kLive;
  ASSERT_TRUE(w.Open(path, all.meta, o).ok());
  // Two batches: dictionaries cumulative, rows (comm ops too) as deltas.
  RankTrace batch;
  batch.meta = all.meta;
  for (size_t i = 1; i < all.names.size(); ++i) batch.names.Intern(all.names.Get(static_cast<uint32_t>(i)));
  batch.devices = all.devices;
  batch.streams = all.streams;
  batch.comm_ops = all.comm_ops;
  size_t half = all.activities.size() / 2;
  batch.activities.assign(all.activities.begin(), all.activities.begin() + half);
  ASSERT_TRUE(w.Append(batch).ok());
  EXPECT_TRUE(std::filesystem::exists(path + "-wal"));
  batch.activities.assign(all.activities.begin() + half, all.activities.end());
  batch.comm_ops.clear();
  ASSERT_TRUE(w.Append(batch).ok());
  ASSERT_TRUE(w.Finish(all.stats).ok());
  StatusOr<RankTrace> out = ReadStore(path);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->activities.size(), all.activities.size());
  EXPECT_EQ(out->comm_ops.size(), all.comm_ops.size());
}

}  // namespace
}  // namespace overlapprof

namespace overlapprof {
namespace {

void ExpectSameTrace(const RankTrace& a, const RankTrace& b) {
  ASSERT_EQ(a.comm_ops.size(), b.comm_ops.size());
  for (size_t i = 0; i < a.comm_ops.size(); ++i) {
    const CommOp &x = a.comm_ops[i], &y = b.comm_ops[i];
    ASSERT_EQ(std::tie(x.communicator, x.comm_rank, x.comm_nranks, x.seq, x.op, x.datatype, x.count, x.bytes,
                       x.root_peer, x.stream, x.host_enter_ns, x.host_exit_ns, x.host_tid, x.pg_desc, x.source),
              std::tie(y.communicator, y.comm_rank, y.comm_nranks, y.seq, y.op, y.datatype, y.count, y.bytes,
                       y.root_peer, y.stream, y.host_enter_ns, y.host_exit_ns, y.host_tid, y.pg_desc, y.source))
        << i;
  }
  ASSERT_EQ(a.ranges.size(), b.ranges.size());
  for (size_t i = 0; i < a.ranges.size(); ++i) {
    const Range &x = a.ranges[i], &y = b.ranges[i];
    ASSERT_EQ(std::tie(x.start_ns, x.end_ns, x.step, x.tid, x.stream, x.kind),
              std::tie(y.start_ns, y.end_ns, y.step, y.tid, y.stream, y.kind))
        << i;
    ASSERT_EQ(a.names.Get(x.name_id), b.names.Get(y.name_id)) << i;
  }
  ASSERT_EQ(a.activities.size(), b.activities.size());
  for (size_t i = 0; i < a.activities.size(); ++i) {
    ASSERT_EQ(a.activities[i].start_ns, b.activities[i].start_ns);
    ASSERT_EQ(a.activities[i].end_ns, b.activities[i].end_ns);
  }
}

// Stores written before comm_op_chunk and trace_range_chunk existed (schema 1.0 as first
// released) are read from their rows, with the same result.
TEST(Store, ReadsStoresWithoutTheCommOpAndRangeChunks) {
  testing::TempDir dir;
  RankTrace in = RealTrace();
  std::string path = dir.File("r.db");
  ASSERT_TRUE(WriteStore(in, path, false).ok());
  std::string old = dir.File("old.db");
  std::filesystem::copy_file(path, old);
  Sql(old, "DROP TABLE comm_op_chunk; DROP TABLE trace_range_chunk; VACUUM;");
  for (bool annotations : {true, false}) {
    SCOPED_TRACE(annotations);
    StoreReadOptions o;
    o.needs.annotations = annotations;
    StatusOr<RankTrace> a = ReadStore(path, o);
    StatusOr<RankTrace> b = ReadStore(old, o);
    ASSERT_TRUE(a.ok()) << a.status().message();
    ASSERT_TRUE(b.ok()) << b.status().message();
    ExpectSameTrace(*a, *b);
    if (!annotations) {
      for (const Range& r : a->ranges) EXPECT_EQ(r.kind, RangeKind::kStep);
    }
  }
  StatusOr<RankTrace> all = ReadStore(path);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->ranges.size(), in.ranges.size());
  EXPECT_EQ(all->comm_ops.size(), in.comm_ops.size());
  EXPECT_EQ(all->comm_ops.size(), 21u);
}

TEST(Store, RejectsDamagedCommOpAndRangeChunks) {
  testing::TempDir dir;
  std::string path = dir.File("r.db");
  RankTrace t = RealTrace();
  ASSERT_TRUE(WriteStore(t, path, false).ok());
  struct Case {
    const char* name;
    std::string sql, expect;
  } cases[] = {
      {"comm op truncated", "UPDATE comm_op_chunk SET data = substr(data, 1, 30) WHERE id = 0",
       "comm_op_chunk 0: comm op chunk record"},
      {"comm op rows", "DELETE FROM comm_op WHERE id = (SELECT max(id) FROM comm_op)",
       fmt::format("comm_op_chunk holds {} records but comm_op has {} rows", t.comm_ops.size(), t.comm_ops.size() - 1)},
      {"comm op count", "UPDATE comm_op_chunk SET count = count - 1 WHERE id = 0", "comm_op_chunk 0"},
      {"range trailing", "UPDATE trace_range_chunk SET data = data || x'00' WHERE id = 0",
       "trace_range_chunk 0: range chunk record"},
      {"range gap", "UPDATE trace_range_chunk SET first_id = 1 WHERE id = 0", "first_id does not continue"},
      {"not a blob", "UPDATE trace_range_chunk SET data = 7 WHERE id = 0", "data is not a blob"},
      {"too large", "UPDATE activity_chunk SET data = zeroblob(17000000) WHERE id = 0", "chunk larger than"},
      // Claims of billions of records reserve no more than the blobs could hold.
      {"huge count", "UPDATE activity_chunk SET count = 4000000000000 WHERE id = 0", "activity_chunk row 0: bad count"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string copy = dir.File(std::string(c.name) + ".db");
    std::filesystem::copy_file(path, copy);
    Sql(copy, c.sql);
    for (bool quick_check : {true, false}) {
      StoreReadOptions o;
      o.quick_check = quick_check;
      StatusOr<RankTrace> b = ReadStore(copy, o);
      ASSERT_FALSE(b.ok());
      EXPECT_EQ(b.status().code(), StatusCode::kCorrupt);
      EXPECT_NE(b.status().message().find(c.expect), std::string::npos) << b.status().message();
    }
  }
}

TEST(Store, LiveModeChunksCommOpsAndRangesOfEveryBatch) {
  testing::TempDir dir;
  std::string path = dir.File("live.db");
  RankTrace all = RealTrace();
  ASSERT_GE(all.comm_ops.size(), 4u);
  StoreWriter w;
  StoreWriter::Options o;
  o.mode = StoreWriter::Mode::kLive;
  ASSERT_TRUE(w.Open(path, all.meta, o).ok());
  // Three batches: comm ops, ranges and activities are deltas (ids continue across batches).
  RankTrace batch;
  batch.meta = all.meta;
  for (size_t i = 1; i < all.names.size(); ++i) batch.names.Intern(all.names.Get(static_cast<uint32_t>(i)));
  batch.devices = all.devices;
  batch.streams = all.streams;
  const size_t parts[] = {0, all.comm_ops.size() / 3, all.comm_ops.size() / 3, all.comm_ops.size()};
  for (int k = 0; k < 3; ++k) {
    batch.comm_ops.assign(all.comm_ops.begin() + static_cast<ptrdiff_t>(parts[k]),
                          all.comm_ops.begin() + static_cast<ptrdiff_t>(parts[k + 1]));
    size_t r0 = all.ranges.size() * k / 3, r1 = all.ranges.size() * (k + 1) / 3;
    batch.ranges.assign(all.ranges.begin() + static_cast<ptrdiff_t>(r0), all.ranges.begin() + static_cast<ptrdiff_t>(r1));
    size_t a0 = all.activities.size() * k / 3, a1 = all.activities.size() * (k + 1) / 3;
    batch.activities.assign(all.activities.begin() + static_cast<ptrdiff_t>(a0),
                            all.activities.begin() + static_cast<ptrdiff_t>(a1));
    ASSERT_TRUE(w.Append(batch).ok());
  }
  ASSERT_TRUE(w.Finish(all.stats).ok());
  StatusOr<RankTrace> out = ReadStore(path);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectSameTrace(all, *out);
}

// The injector's configuration: live, chunks only (no gpu_activity / host_call rows), raw
// records linked after reading through host calls and external correlations.
TEST(Store, LiveChunksOnlyInjectorStoreIsLinkedOnRead) {
  testing::TempDir dir;
  std::string path = dir.File("inj.db");
  RankTrace t;
  t.meta.source_format = "overlapprof";
  t.meta.rank = 0;
  uint32_t k = t.names.Intern("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  uint32_t gemm = t.names.Intern("sm90_gemm");
  uint32_t launch = t.names.Intern("cuLaunchKernelEx");
  uint32_t s7 = t.StreamIndex(0, 7), s20 = t.StreamIndex(0, 20);
  auto act = [&](int64_t a, int64_t b, uint32_t name, uint32_t stream, int64_t corr, Category c) {
    Activity x;
    x.start_ns = a;
    x.end_ns = b;
    x.name_id = name;
    x.stream = stream;
    x.correlation_id = corr;
    x.category = c;
    return x;
  };
  t.activities = {act(1000, 5000, gemm, s7, 1, Category::kCompute), act(2000, 4000, k, s20, 2, Category::kComm),
                  act(6000, 7000, k, s20, 3, Category::kComm)};
  t.host_calls = {{900, 950, 1, 11, launch}, {1900, 1950, 2, 11, launch}, {5900, 5950, 3, 11, launch}};
  CommOp op;
  op.communicator = "c";
  op.op = Collective::kAllReduce;
  op.source = CommSource::kNcclHook;
  op.launch_id = 100;
  op.stream_handle = 0x5100;
  CommOp grouped = op;
  grouped.launch_id = 200;
  CommOp grouped2 = grouped;
  CommOp lost = op;
  lost.launch_id = 300;
  t.comm_ops = {op, grouped, grouped2, lost};
  t.external_correlations = {{2, 100}, {3, 200}};
  StoreWriter w;
  StoreWriter::Options o;
  o.mode = StoreWriter::Mode::kLive;
  o.row_copies = false;
  ASSERT_TRUE(w.Open(path, t.meta, o).ok());
  ASSERT_TRUE(w.Append(t).ok());
  ASSERT_TRUE(w.Finish(t.stats).ok());
  StatusOr<RankTrace> out = ReadStore(path, {});
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->activities.size(), 3u);
  EXPECT_EQ(out->activities[0].launch_ns, 900);
  EXPECT_EQ(out->activities[0].comm_op, kNoIndex);
  EXPECT_EQ(out->activities[1].comm_op, 0u);
  EXPECT_EQ(out->activities[1].launch_ns, 1900);
  EXPECT_EQ(out->activities[2].comm_op, 1u);  // a group's kernel: its first op
  EXPECT_EQ(out->comm_ops[0].stream, s20);
  EXPECT_EQ(out->comm_ops[2].stream, s20);  // the second op of the group shares the kernel
  EXPECT_EQ(out->comm_ops[0].stream_handle, 0x5100);
  EXPECT_EQ(out->comm_ops[3].stream, kNoIndex);
  EXPECT_EQ(out->stats.Get(Stat::comm_ops_without_gpu_activity), 1);
  EXPECT_EQ(out->stats.Get(Stat::correlations_unmatched), 0);
}

}  // namespace
}  // namespace overlapprof
