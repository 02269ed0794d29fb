// The Nsight Systems importer (src/importers/nsys/):
//  1. Small synthetic exports built here with known intervals: exact figures per (process,
//     GPU) rank, overlapping streams, launch times through the runtime table of the right
//     process, steps from NVTX, peer-to-peer copies, columns found by name in any order.
//  2. The real exports in tests/data/nsys: per GPU comm, compute, overlap and kernels equal the
//     independent figures of tests/data/nsys/README.md, and the JSON summary equals the golden
//     files (OVERLAPPROF_UPDATE_GOLDEN=1 regenerates them).
//  3. Rejected inputs: exact one-line errors.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "analyzers/comm_ops.h"
#include "reports/report.h"
#include "src/cli/pipeline.h"
#include "src/cli/registry.h"
#include "src/importers/importer.h"
#include "src/importers/nsys/nsys.h"
#include "src/store/writer.h"
#include "golden_util.h"
#include "test_util.h"

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Names(const std::vector<TraceInput>& inputs) {
  std::vector<std::string> names;
  for (const TraceInput& in : inputs) names.push_back(in.name);
  return names;
}

std::string TempPath(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / fmt::format("overlapprof-nsys-test-{}", ::getpid());
  fs::create_directories(dir);
  fs::path p = dir / name;
  fs::remove(p);
  return p.string();
}

// Writes a SQLite file from an SQL script.
std::string MakeDb(const std::string& name, const std::string& sql) {
  std::string path = TempPath(name);
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
  return path;
}

// globalPid / globalTid as nsys serializes them: vm 1, pid, tid.
constexpr int64_t Gpid(int64_t pid) { return (int64_t{1} << 48) | (pid << 24); }
constexpr int64_t Gtid(int64_t pid, int64_t tid) { return Gpid(pid) | tid; }

constexpr int64_t kUtc = 1700000000000000000;  // session start, UTC ns
constexpr int64_t kClock = 1000;               // session start on the export's clock
constexpr int64_t Utc(int64_t t) { return kUtc - kClock + t; }

// Three ranks: pid 100 drives GPUs 0 and 1, pid 200 shares GPU 0. Columns in an unusual
// order, optional ones missing (no demangledName: names come from shortName).
std::string SyntheticExport(const std::string& name) {
  return MakeDb(name, fmt::format(R"(
CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1, 'gemm_kernel'), (2, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'),
  (3, 'cudaLaunchKernel'), (4, 'ProfilerStep#7'), (5, 'ncclDevKernel_SendRecv');
CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, systemClockNs INTEGER);
INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES ({utc}, '', '', {clock});
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(shortName INTEGER NOT NULL, globalPid INTEGER, correlationId INTEGER,
  streamId INTEGER NOT NULL, deviceId INTEGER NOT NULL, end INTEGER NOT NULL, start INTEGER NOT NULL);
-- pid 100, GPU 0: compute on streams 7 and 8 (overlapping), comm on stream 9
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES
  (1, {p100}, 11, 7, 0, 2000, 1000), (1, {p100}, 12, 8, 0, 2500, 1500), (2, {p100}, 13, 9, 0, 3000, 1800),
  (1, {p100}, 14, 7, 1, 1100, 1000),
  (5, {p200}, 11, 3, 0, 6000, 5000);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (3000, 3500, 0, 7, 15, {p100}, 4096, 10);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER, bytes INTEGER NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (3500, 3600, 0, 7, 16, {p100}, 0, 64);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER);
-- correlation ids are per process: 11 means different calls in pid 100 and pid 200
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
  (900, 950, 0, {t100}, 11, 3, 0), (1400, 1450, 0, {t100}, 12, 3, 0), (1700, 1750, 0, {t100}, 13, 3, 0),
  (960, 980, 0, {t100}, 14, 3, 0), (2900, 2950, 0, {t100}, 15, 3, 0), (3400, 3450, 0, {t100}, 16, 3, 0), (4000, 4100, 0, {t200}, 11, 3, 0);
CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT,
  globalTid INTEGER, textId INTEGER);
INSERT INTO NVTX_EVENTS VALUES (950, 3600, 59, NULL, {t100}, 4), (1000, 2000, 59, 'forward', {t100}, NULL),
  (1200, NULL, 59, 'never ended', {t100}, NULL), (1300, 1300, 34, 'a mark', {t100}, NULL),
  (4500, 6500, 59, 'ProfilerStep#3', {t200}, NULL);
)",
                                  fmt::arg("utc", kUtc), fmt::arg("clock", kClock), fmt::arg("p100", Gpid(100)),
                                  fmt::arg("p200", Gpid(200)), fmt::arg("t100", Gtid(100, 5)),
                                  fmt::arg("t200", Gtid(200, 6))));
}

TEST(NsysImporter, OneRankPerProcessAndGpuInTheOrderOfTheirKeys) {
  std::string path = SyntheticExport("three_ranks.sqlite");
  StatusOr<std::vector<TraceInput>> inputs = ExpandInputs({path});
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  EXPECT_EQ(Names(*inputs), (std::vector<std::string>{path + "#pid100.gpu0", path + "#pid100.gpu1", path + "#pid200.gpu0"}));
  // The whole file cannot be read as one rank.
  StatusOr<RankTrace> whole = ImportFile(path, {});
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(whole.status().message(),
            path + ": holds 3 ranks (pid100.gpu0, pid100.gpu1, pid200.gpu0): name one as FILE#KEY");
}

// Everything a rank's import keeps, as text: activities, comm ops, host calls, counters.
std::string Fingerprint(const RankTrace& t) {
  std::string out = fmt::format("{} streams, {} ranges\n", t.streams.size(), t.ranges.size());
  for (const Activity& a : t.activities)
    out += fmt::format("a {} {} {} {} {} {} {} {} {} {}\n", a.start_ns, a.end_ns, a.correlation_id, a.launch_ns, a.bytes,
                       t.names.Get(a.name_id), a.stream, static_cast<int>(a.kind), static_cast<int>(a.category),
                       a.copy_kind);
  for (const CommOp& o : t.comm_ops)
    out += fmt::format("o {} {} {} {} {}\n", CollectiveName(o.op), o.bytes, o.host_enter_ns, o.host_exit_ns, o.host_tid);
  for (const HostCall& h : t.host_calls)
    out += fmt::format("h {} {} {} {} {}\n", h.start_ns, h.end_ns, h.correlation_id, h.tid, t.names.Get(h.name_id));
  for (size_t i = 0; i < static_cast<size_t>(Stat::kCount); ++i) out += fmt::format("{} ", t.stats.Get(static_cast<Stat>(i)));
  return out;
}

// The ways an export can be read (NsysReadMode): its ranks built while it is listed (the
// default), one pass with rows spilled by rank (a multi-rank export over the build budget, or a
// reader that wants host calls), one direct scan per rank, SQL. Each way lists the file anew.
struct ReadWay {
  const char* name;
  NsysReadMode mode;
};
constexpr ReadWay kReadWays[] = {{"built while listing", NsysReadMode::kAuto},
                                 {"one pass, spilled", NsysReadMode::kSpill},
                                 {"a scan per rank", NsysReadMode::kScanPerRank},
                                 {"SQL", NsysReadMode::kSql}};

// Lists `path` for imports wanting `list_needs` and imports each rank the way `w` says, with
// `needs` and at most `budget` bytes read ahead; the fingerprints, and in *built how many ranks
// the listing built.
std::vector<std::string> ReadEveryRank(const std::string& path, const ReadWay& w, const TraceNeeds& needs,
                                       size_t* built, const TraceNeeds& list_needs,
                                       uint64_t budget = ImportOptions{}.read_ahead_budget_bytes) {
  std::vector<std::string> out;
  ImportObserver observer;
  ImportOptions o;
  o.nsys.read_mode = w.mode;
  o.read_ahead_budget_bytes = budget;
  o.observer = &observer;
  StatusOr<std::vector<TraceInput>> inputs = ExpandInputs({path}, "", list_needs, o);
  EXPECT_TRUE(inputs.ok()) << inputs.status().message();
  *built = observer.ranks_built_while_listing;
  o.store_needs = needs;
  for (const TraceInput& in : inputs.ok() ? *inputs : std::vector<TraceInput>{}) {
    StatusOr<RankTrace> t = ImportFile(in, o);
    EXPECT_TRUE(t.ok()) << t.status().message();
    if (!t.ok()) break;
    EXPECT_GT(t->activities.size(), 0u) << in;
    out.push_back(Fingerprint(*t));
  }
  // A rank built while listing is imported from what was built, unless the import wants host
  // calls (it is read again then).
  EXPECT_EQ(observer.ranks_imported_from_listing.load(), needs.host_calls ? 0u : *built) << w.name;
  return out;
}

// Every way gives the same ranks, with host calls and without, on the synthetic export and on
// the real ones; only the default builds, and only when the imports will not want host calls
// (a rank built while listing has none). One listed without host calls and then imported with
// them is read again, with the same result.
TEST(NsysImporter, EveryWayOfReadingGivesTheSameRanks) {
  TraceNeeds lean;  // what `analyze` asks for by default: no host calls
  lean.annotations = true;
  for (std::string path : {SyntheticExport("three_ways.sqlite"), testing::DataFile("nsys/mfu_2gpu_before.sqlite"),
                           testing::DataFile("nsys/mfu_2gpu_after.sqlite")}) {
    for (const TraceNeeds& needs : {TraceNeeds::All(), lean}) {
      std::vector<std::string> first;
      for (const ReadWay& w : kReadWays) {
        size_t built = 0;
        std::vector<std::string> ranks = ReadEveryRank(path, w, needs, &built, needs);
        ASSERT_GE(ranks.size(), 2u) << path << ", " << w.name;
        EXPECT_EQ(built, w.mode != NsysReadMode::kAuto || needs.host_calls ? 0u : ranks.size()) << path << ", " << w.name;
        if (first.empty()) first = ranks;
        else EXPECT_EQ(ranks, first) << path << ", host calls " << needs.host_calls << ": " << w.name << " vs "
                                     << kReadWays[0].name;
      }
      size_t built = 0;
      EXPECT_EQ(ReadEveryRank(path, kReadWays[0], needs, &built, lean), first) << path << ": listed without host calls";
      EXPECT_GT(built, 0u);
    }
  }
}

// An export whose CUPTI gives eventSyncId (h100_ddp2: CUPTI_ACTIVITY_KIND_CUDA_EVENT records, and
// synchronizations naming them): with host calls, the records and waits become RankTrace::event_links
// (docs/what-if.md, "Recorded edges"), the same every way of reading, each with its API call kept as a
// host call; without host calls, none.
TEST(NsysImporter, EventRecordsAndWaitsBecomeEventLinks) {
  const std::string path = testing::DataFile("nsys/h100_ddp2.sqlite");
  std::vector<std::string> first;
  for (const ReadWay& w : kReadWays) {
    for (const bool host_calls : {true, false}) {
      ImportOptions o;
      o.nsys.read_mode = w.mode;
      o.store_needs = host_calls ? TraceNeeds::All() : TraceNeeds{};
      StatusOr<std::vector<TraceInput>> inputs = ExpandInputs({path}, "", o.store_needs, o);
      ASSERT_TRUE(inputs.ok()) << inputs.status().message();
      std::vector<std::string> ranks;
      int64_t kinds[4] = {};
      for (const TraceInput& in : *inputs) {
        StatusOr<RankTrace> t = ImportFile(in, o);
        ASSERT_TRUE(t.ok()) << t.status().message();
        std::set<int64_t> calls;
        for (const HostCall& h : t->host_calls) calls.insert(h.correlation_id);
        std::string fp;
        for (const EventLink& l : t->event_links) {
          ++kinds[static_cast<int>(l.kind)];
          EXPECT_TRUE(calls.count(l.correlation_id)) << w.name << ": the call of link " << l.correlation_id;
          fp += fmt::format("{} {} {} {}\n", static_cast<int>(l.kind), l.correlation_id, l.sync_id,
                            l.stream == kNoIndex ? -1 : t->streams[l.stream].native_id);
        }
        ranks.push_back(fp);
      }
      if (!host_calls) {
        EXPECT_EQ(kinds[1] + kinds[2] + kinds[3], 0) << w.name;
        continue;
      }
      // The export's own counts (sqlite3): 254 records, 267 event synchronizations and 156 of 208 stream
      // waits with an eventSyncId; records are read where a wait of the rank names one.
      EXPECT_GT(kinds[static_cast<int>(EventLinkKind::kRecord)], 0) << w.name;
      EXPECT_LE(kinds[static_cast<int>(EventLinkKind::kRecord)], 254) << w.name;
      EXPECT_EQ(kinds[static_cast<int>(EventLinkKind::kHostWait)], 267) << w.name;
      EXPECT_EQ(kinds[static_cast<int>(EventLinkKind::kStreamWait)], 156) << w.name;
      if (first.empty()) first = ranks;
      else EXPECT_EQ(ranks, first) << w.name << " vs " << kReadWays[0].name;
    }
  }
}

// 2 processes x 40,000 kernels, interleaved, each with its runtime launch: more rows than the
// build checks its budget at (every 65,536). Correlation ids 1, 1 + step, 1 + 2 step, ...
std::string LargerExport(const std::string& name, int64_t step = 1) {
  return MakeDb(name, fmt::format(R"(
CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1, 'gemm_kernel'), (2, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'), (3, 'cudaLaunchKernel');
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER);
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 79999)
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL
  SELECT 1000 * (i / 2) + 100, 1000 * (i / 2) + 600 + 50 * (i % 7), i % 2, 7 + (i % 20 = 0), (i / 2) * {step} + 1,
         CASE i % 2 WHEN 0 THEN {p100} ELSE {p200} END, CASE WHEN i % 20 = 0 THEN 2 ELSE 1 END FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 79999)
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME
  SELECT 1000 * (i / 2), 1000 * (i / 2) + 50, 0, CASE i % 2 WHEN 0 THEN {t100} ELSE {t200} END, (i / 2) * {step} + 1, 3, 0 FROM n;
)",
                                  fmt::arg("step", step), fmt::arg("p100", Gpid(100)), fmt::arg("p200", Gpid(200)),
                                  fmt::arg("t100", Gtid(100, 5)), fmt::arg("t200", Gtid(200, 6))));
}

// Launches are linked by correlation id whatever the ids' spacing: ids 1,000,003 apart link the
// same launches as ids 1 apart, every way of reading, with host calls and without.
TEST(NsysImporter, SparseAndDenseCorrelationIdsLinkTheSameLaunches) {
  // A rank without its correlation ids: "a" lines lose their 4th field, "h" lines their 4th.
  auto without_ids = [](const std::string& rank) {
    std::istringstream in(rank);
    std::string out, line;
    while (std::getline(in, line)) {
      if (line.rfind("a ", 0) == 0 || line.rfind("h ", 0) == 0) {
        std::istringstream f(line);
        std::vector<std::string> tok;
        for (std::string t; f >> t;) tok.push_back(t);
        if (tok.size() > 3) tok.erase(tok.begin() + 3);
        line.clear();
        for (const std::string& t : tok) line += t + " ";
      }
      out += line + "\n";
    }
    return out;
  };
  const std::string dense = LargerExport("dense_ids.sqlite"), sparse = LargerExport("sparse_ids.sqlite", 1000003);
  for (const TraceNeeds& needs : {TraceNeeds::All(), TraceNeeds{}}) {
    for (const ReadWay& w : kReadWays) {
      size_t built = 0;
      std::vector<std::string> d = ReadEveryRank(dense, w, needs, &built, needs);
      std::vector<std::string> s = ReadEveryRank(sparse, w, needs, &built, needs);
      ASSERT_EQ(d.size(), 2u) << w.name;
      ASSERT_EQ(s.size(), 2u) << w.name;
      for (size_t r = 0; r < 2; ++r) {
        EXPECT_EQ(without_ids(s[r]), without_ids(d[r])) << w.name << ", rank " << r;
        // Every kernel's launch is its runtime call's start, 100 ns before it.
        std::istringstream in(s[r]);
        size_t linked = 0;
        for (std::string line; std::getline(in, line);) {
          if (line.rfind("a ", 0) != 0) continue;
          std::istringstream f(line);
          std::string a;
          int64_t start = 0, end = 0, corr = 0, launch = 0;
          f >> a >> start >> end >> corr >> launch;
          linked += launch == start - 100;
        }
        EXPECT_EQ(linked, 40000u) << w.name << ", rank " << r;
      }
    }
  }
}

// A build that would pass its budget stops (at its first check, from the tables' sizes) and the
// ranks are read as before, with the same result; a budget of 0 builds nothing.
TEST(NsysImporter, ABuildOverItsBudgetStopsAndTheRanksAreReadAsBefore) {
  const std::string path = LargerExport("larger.sqlite");
  TraceNeeds lean;
  size_t built = 0;
  std::vector<std::string> whole = ReadEveryRank(path, kReadWays[0], lean, &built, lean);
  ASSERT_EQ(whole.size(), 2u);
  EXPECT_EQ(built, 2u);
  for (const std::string& rank : whole) {
    size_t activities = 0;
    for (size_t at = rank.find("\na "); at != std::string::npos; at = rank.find("\na ", at + 1)) ++activities;
    EXPECT_EQ(activities, 40000u);
  }
  for (uint64_t mb : {1, 0}) {
    std::vector<std::string> over = ReadEveryRank(path, kReadWays[0], lean, &built, lean, mb << 20);
    EXPECT_EQ(built, 0u) << mb << " MB";
    EXPECT_EQ(over, whole) << mb << " MB";
  }
}

// The read-ahead budget is one for all the files of a pass: each file listed gets what the
// files before it left, so a second export whose ranks would not fit in that is listed only
// (and read as before, its ranks spilled), and the session holds nothing once its ranks are
// imported.
TEST(NsysImporter, TheFilesOfAPassShareOneReadAheadBudget) {
  const std::string a = LargerExport("budget_a.sqlite"), b = LargerExport("budget_b.sqlite");
  StatusOr<std::vector<TraceInput>> alone = ExpandInputs({a});
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  ASSERT_EQ(alone->size(), 2u);
  const uint64_t one_file = (*alone)[0].session->ReadAheadBytes();
  ASSERT_GT(one_file, 0u);
  ImportObserver observer;
  ImportOptions o;
  o.observer = &observer;
  o.read_ahead_budget_bytes = one_file + one_file / 2;
  StatusOr<std::vector<TraceInput>> both = ExpandInputs({a, b}, "", TraceNeeds{}, o);
  ASSERT_TRUE(both.ok()) << both.status().message();
  ASSERT_EQ(both->size(), 4u);
  EXPECT_EQ(observer.ranks_built_while_listing.load(), 2u);
  EXPECT_EQ((*both)[0].session, (*both)[1].session);  // one session per file, shared by its ranks
  EXPECT_EQ((*both)[0].session->ReadAheadBytes(), one_file);
  EXPECT_EQ((*both)[2].session->ReadAheadBytes(), 0u);
  StatusOr<Summary> s = AnalyzeFiles(*both, o, {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(observer.ranks_imported_from_listing.load(), 2u);
  EXPECT_EQ((*both)[0].session->ReadAheadBytes(), 0u);
  ASSERT_EQ(s->ranks.size(), 4u);
  EXPECT_EQ(s->ranks[0].whole.comm_ns, s->ranks[2].whole.comm_ns);
  EXPECT_EQ(s->ranks[1].whole.comm_ns, s->ranks[3].whole.comm_ns);
}

TEST(NsysImporter, ExactFiguresWithOverlappingStreams) {
  std::string path = SyntheticExport("figures.sqlite");
  StatusOr<std::vector<TraceInput>> inputs = ExpandInputs({path});
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  StatusOr<Summary> s = AnalyzeFiles(*inputs, {}, {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->ranks.size(), 3u);
  const OverlapFigures& a = s->ranks[0].whole;  // pid 100, GPU 0
  EXPECT_EQ(a.compute_ns, 1500);                // [1000, 2500)
  // [1800, 3000) of NCCL and the 500 ns peer-to-peer copy, communication by rule 4
  // (docs/classification.md): it overlaps no compute.
  EXPECT_EQ(a.comm_ns, 1700);
  EXPECT_EQ(a.overlap_ns, 700);  // [1800, 2500)
  EXPECT_EQ(a.exposed_comm_ns, 1000);
  EXPECT_EQ(a.memory_ns, 100);  // the memset
  const OverlapFigures& b = s->ranks[1].whole;  // pid 100, GPU 1
  EXPECT_EQ(b.compute_ns, 100);
  EXPECT_EQ(b.comm_ns, 0);
  const OverlapFigures& c = s->ranks[2].whole;  // pid 200, GPU 0
  EXPECT_EQ(c.compute_ns, 0);
  EXPECT_EQ(c.comm_ns, 1000);
}

TEST(NsysImporter, ActivitiesLaunchesRangesAndCounters) {
  std::string path = SyntheticExport("details.sqlite");
  StatusOr<RankTrace> t = ImportFile(path + "#pid100.gpu0", {});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->meta.source_format, "nsys");
  EXPECT_EQ(t->meta.pid, 100);
  EXPECT_EQ(t->meta.source_path, path + "#pid100.gpu0");
  ASSERT_EQ(t->activities.size(), 5u);
  // UTC ns: utcEpochNs + (t - systemClockNs), exact.
  EXPECT_EQ(t->activities[0].start_ns, Utc(1000));
  EXPECT_EQ(t->activities[0].end_ns, Utc(2000));
  EXPECT_EQ(t->names.Get(t->activities[0].name_id), "gemm_kernel");
  EXPECT_EQ(t->activities[0].category, Category::kCompute);
  EXPECT_EQ(t->activities[0].launch_ns, Utc(900));  // pid 100's call 11, not pid 200's
  const Activity& comm = t->activities[2];
  EXPECT_EQ(comm.category, Category::kComm);
  ASSERT_NE(comm.comm_op, kNoIndex);
  EXPECT_EQ(t->comm_ops[comm.comm_op].op, Collective::kAllReduce);
  EXPECT_EQ(t->comm_ops[comm.comm_op].source, CommSource::kKernelName);
  EXPECT_EQ(t->comm_ops[comm.comm_op].host_enter_ns, Utc(1700));
  const Activity& p2p = t->activities[3];
  EXPECT_EQ(p2p.kind, ActivityKind::kMemcpy);
  EXPECT_EQ(p2p.copy_kind, 10);
  EXPECT_EQ(p2p.category, Category::kComm);  // rule 4: peer copies are communication
  EXPECT_EQ(p2p.bytes, 4096);
  EXPECT_EQ(t->names.Get(p2p.name_id), "Memcpy PtoP");
  ASSERT_NE(p2p.comm_op, kNoIndex);
  EXPECT_EQ(t->comm_ops[p2p.comm_op].rule, CommRule::kPeerCopy);
  EXPECT_EQ(t->comm_ops[p2p.comm_op].op, Collective::kPeerCopy);
  EXPECT_EQ(t->comm_ops[p2p.comm_op].bytes, 4096);
  EXPECT_EQ(t->activities[4].kind, ActivityKind::kMemset);
  EXPECT_EQ(t->activities[4].bytes, 64);
  EXPECT_EQ(t->stats.Get(Stat::correlations_unmatched), 0);
  EXPECT_EQ(t->stats.Get(Stat::nsys_optional_tables_missing), 1);  // no SYNCHRONIZATION table
  EXPECT_EQ(t->stats.Get(Stat::nvtx_ranges_unmatched), 1);
  // Streams of this GPU only.
  EXPECT_EQ(t->streams.size(), 3u);
  // NVTX: the step (from StringIds) and the annotation of this process; not the mark.
  ASSERT_EQ(t->ranges.size(), 2u);
  EXPECT_EQ(t->ranges[0].kind, RangeKind::kStep);
  EXPECT_EQ(t->ranges[0].step, 7);
  EXPECT_EQ(t->ranges[0].start_ns, Utc(950));
  EXPECT_EQ(t->ranges[1].kind, RangeKind::kAnnotation);
  EXPECT_EQ(t->names.Get(t->ranges[1].name_id), "forward");
  EXPECT_EQ(t->ranges[1].tid, 5);

  // Iterations from ProfilerStep ranges.
  StatusOr<Summary> s = AnalyzeFiles({path + "#pid100.gpu0"}, {}, {});
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->iterations.size(), 1u);
  EXPECT_EQ(s->iterations[0].step, 7);
}

// One process, one GPU, NCCL's own NVTX ranges (domain 1) around the calls that launched six
// SendRecv / AllReduce kernels (nsys exports them without the payload, as tests/data/nsys).
std::string NcclRangesExport(const std::string& name) {
  return MakeDb(name, fmt::format(R"(
CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1, 'ncclDevKernel_SendRecv'), (2, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'),
  (3, 'cudaLaunchKernel'), (10, 'ncclGroupStart'), (11, 'ncclGroupEnd'), (12, 'ncclSend'), (13, 'ncclRecv'),
  (14, 'ncclAllReduce'), (15, 'ncclCommCount');
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES
  (10000, 10100, 0, 9, 1, {p}, 1), (20000, 20100, 0, 9, 2, {p}, 1), (30000, 30100, 0, 9, 3, {p}, 1),
  (40000, 40100, 0, 9, 4, {p}, 2), (50000, 50100, 0, 9, 5, {p}, 1), (60000, 60100, 0, 9, 6, {p}, 2);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER,
  correlationId INTEGER, nameId INTEGER NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
  (1500, 1510, {t}, 1, 3), (2500, 2510, {t}, 2, 3), (3500, 3510, {t}, 3, 3), (4500, 4510, {t}, 4, 3),
  (5500, 5510, {t}, 5, 3), (6500, 6510, {t}, 6, 3);
CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT,
  globalTid INTEGER, textId INTEGER, domainId INTEGER);
INSERT INTO NVTX_EVENTS VALUES
  -- 1: a group of two sends and two receives: sendrecv (ncclCommCount inside the group is not a call)
  (1000, 1010, 59, NULL, {t}, 10, 1), (1020, 1030, 59, NULL, {t}, 15, 1), (1040, 1050, 59, NULL, {t}, 12, 1),
  (1060, 1070, 59, NULL, {t}, 13, 1), (1080, 1090, 59, NULL, {t}, 12, 1), (1100, 1110, 59, NULL, {t}, 13, 1),
  (1400, 1600, 59, NULL, {t}, 11, 1),
  -- 2: a group of sends only: send
  (2000, 2010, 59, NULL, {t}, 10, 1), (2040, 2050, 59, NULL, {t}, 12, 1), (2400, 2600, 59, NULL, {t}, 11, 1),
  -- 3: a lone ncclRecv launches its own kernel: recv
  (3400, 3600, 59, NULL, {t}, 13, 1),
  -- 4: a lone ncclAllReduce: allreduce
  (4400, 4600, 59, NULL, {t}, 14, 1),
  -- 5: a group mixing an all-reduce and a send: the kernel's name stays (sendrecv)
  (5000, 5010, 59, NULL, {t}, 10, 1), (5020, 5030, 59, NULL, {t}, 14, 1), (5040, 5050, 59, NULL, {t}, 12, 1),
  (5400, 5600, 59, NULL, {t}, 11, 1),
  -- 6: an ncclAllReduce range in the default domain (0: the application's, not NCCL's) names nothing
  (6400, 6600, 59, 'ncclAllReduce', {t}, NULL, 0);
)",
                                  fmt::arg("p", Gpid(100)), fmt::arg("t", Gtid(100, 5))));
}

TEST(NsysImporter, OpsNamedFromNcclsOwnRanges) {
  StatusOr<RankTrace> t = ImportFile(NcclRangesExport("nccl_ranges.sqlite"), {});
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->comm_ops.size(), 6u);
  std::vector<std::string> ops;
  for (const Activity& a : t->activities)  // in time order after Finalize
    if (a.comm_op != kNoIndex) ops.push_back(std::string(CollectiveName(t->comm_ops[a.comm_op].op)));
  EXPECT_EQ(ops, (std::vector<std::string>{"sendrecv", "send", "recv", "allreduce", "sendrecv", "allreduce"}));
  EXPECT_EQ(t->stats.Get(Stat::nsys_ops_named_from_nccl_ranges), 4);
  // Every send, receive and collective range of NCCL's domain (9; not group markers, not the
  // default domain's): their payloads (bytes, communicator) are not read, and the trace says so.
  EXPECT_EQ(t->stats.Get(Stat::nsys_nccl_payloads_unread), 9);
}

// Copy-engine collectives: a memcpy whose runtime call lies inside NCCL's ncclAllGather range is
// communication (rule copy_engine, named all-gather from the range); one inside an ncclAllReduce
// that also launched a kernel joins that kernel's op (one op per call); a memcpy launched outside
// any NCCL range stays memory, as does one inside ncclGroupStart (not a launching call).
TEST(NsysImporter, CopiesLaunchedInsideNcclCallsAreCopyEngineCommunication) {
  const std::string path = MakeDb("nccl_copies.sqlite", fmt::format(R"(
CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1, 'gemm_kernel'), (2, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'),
  (3, 'cudaLaunchKernel'), (4, 'cudaMemcpyAsync'), (10, 'ncclGroupStart'), (14, 'ncclAllGather'), (15, 'ncclAllReduce');
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10000, 12000, 0, 7, 1, {p}, 1), (15000, 16000, 0, 9, 5, {p}, 2);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER, copyKind INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES
  (11000, 11500, 0, 9, 2, {p}, 4096, 8), (13000, 13500, 0, 9, 3, {p}, 4096, 8), (14000, 14500, 0, 9, 4, {p}, 64, 8),
  (16000, 16200, 0, 9, 6, {p}, 64, 8);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER,
  correlationId INTEGER, nameId INTEGER NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
  (1500, 1510, {t}, 1, 3), (2500, 2510, {t}, 2, 4), (3500, 3510, {t}, 3, 4), (4005, 4008, {t}, 4, 4),
  (5500, 5510, {t}, 5, 3), (5520, 5530, {t}, 6, 4);
CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT,
  globalTid INTEGER, textId INTEGER, domainId INTEGER);
INSERT INTO NVTX_EVENTS VALUES (2400, 2600, 59, NULL, {t}, 14, 1), (4000, 4010, 59, NULL, {t}, 10, 1),
  (5400, 5600, 59, NULL, {t}, 15, 1);
)",
                                                                 fmt::arg("p", Gpid(100)), fmt::arg("t", Gtid(100, 5))));
  StatusOr<RankTrace> t = ImportFile(path, {});
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::map<int64_t, const Activity*> by_corr;
  for (const Activity& a : t->activities) by_corr[a.correlation_id] = &a;
  ASSERT_EQ(by_corr.size(), 6u);
  ASSERT_EQ(t->comm_ops.size(), 2u);
  ASSERT_EQ(by_corr[2]->category, Category::kComm);
  const CommOp& op = t->comm_ops[by_corr[2]->comm_op];
  EXPECT_EQ(op.rule, CommRule::kCopyEngine);
  EXPECT_EQ(op.op, Collective::kAllGather);
  EXPECT_EQ(op.bytes, 4096);
  EXPECT_EQ(by_corr[3]->category, Category::kMemory);
  EXPECT_EQ(by_corr[4]->category, Category::kMemory);
  EXPECT_EQ(by_corr[1]->category, Category::kCompute);
  ASSERT_EQ(by_corr[6]->category, Category::kComm);
  EXPECT_EQ(by_corr[6]->comm_op, by_corr[5]->comm_op);
  EXPECT_EQ(t->comm_ops[by_corr[5]->comm_op].op, Collective::kAllReduce);
  EXPECT_EQ(t->comm_ops[by_corr[5]->comm_op].rule, CommRule::kKernelName);
}

// NCCL's NVTX payloads in binaryData (src/importers/nvtx_payload.h), with the schemas of a real
// export (NCCL 2.28.9) plus a send schema with NCCL's "Peer rank" entry. Payload blobs are made
// here (the real exports at hand hold none); `Hex` is SQLite's blob literal of the header + payload.
std::string PayloadBlob(int64_t schema, const std::vector<std::pair<int, uint64_t>>& fields, int size = 24) {
  std::vector<uint8_t> b(32 + size, 0);
  auto put = [&](size_t at, uint64_t v, int width) {
    for (int i = 0; i < width; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  put(0, 1, 8);
  put(8, static_cast<uint64_t>(schema), 8);
  put(16, static_cast<uint64_t>(size), 8);
  put(24, static_cast<uint64_t>(32 + size), 8);
  for (const auto& [offset, v] : fields) put(32 + offset, v, offset % 8 == 0 ? 8 : 4);
  std::string hex = "x'";
  for (uint8_t c : b) hex += fmt::format("{:02x}", c);
  return hex + "'";
}

std::string PayloadExport(const std::string& name) {
  const uint64_t comm = 0xabc, other = 0xdef;
  const std::string init = PayloadBlob(16777218, {{0, comm}, {8, 4}, {12, 2}});
  const std::string init2 = PayloadBlob(16777218, {{0, other}, {8, 2}, {12, 1}});
  auto ar = [&](uint64_t c, uint64_t bytes) { return PayloadBlob(16777221, {{0, c}, {8, bytes}}); };
  const std::string send = PayloadBlob(16777225, {{0, other}, {8, 512}, {20, 0}});
  return MakeDb(name, fmt::format(R"(
CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'), (2, 'ncclDevKernel_SendRecv'),
  (3, 'cudaLaunchKernel'), (10, 'ncclCommInitRankConfig'), (11, 'ncclAllReduce'), (12, 'ncclGroupStart'),
  (13, 'ncclGroupEnd'), (14, 'ncclSend');
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, shortName INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10000, 10100, 0, 9, 1, {p}, 1), (20000, 20100, 0, 9, 2, {p}, 1),
  (30000, 30100, 0, 9, 3, {p}, 1), (40000, 40100, 0, 9, 4, {p}, 2), (50000, 50100, 0, 9, 5, {p}, 1);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER,
  correlationId INTEGER, nameId INTEGER NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (1500, 1510, {t}, 1, 3), (2500, 2510, {t}, 2, 3),
  (3500, 3510, {t}, 3, 3), (4500, 4510, {t}, 4, 3), (5500, 5510, {t}, 5, 3);
CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT,
  globalTid INTEGER, textId INTEGER, domainId INTEGER, binaryData BLOB);
INSERT INTO NVTX_EVENTS VALUES
  (100, 200, 59, NULL, {t}, 10, 1, {init}), (300, 400, 59, NULL, {t}, 10, 1, {init2}),
  -- 1: one all-reduce of 1 MiB on the 4-rank communicator
  (1400, 1600, 59, NULL, {t}, 11, 1, {ar1}),
  -- 2: a group of two all-reduces (one kernel): 2 KiB + 6 KiB
  (2000, 2010, 59, NULL, {t}, 12, 1, NULL), (2020, 2030, 59, NULL, {t}, 11, 1, {ar2a}),
  (2040, 2050, 59, NULL, {t}, 11, 1, {ar2b}), (2400, 2600, 59, NULL, {t}, 13, 1, NULL),
  -- 3: a group whose two all-reduces are on two communicators: no communicator, no bytes
  (3000, 3010, 59, NULL, {t}, 12, 1, NULL), (3020, 3030, 59, NULL, {t}, 11, 1, {ar3a}),
  (3040, 3050, 59, NULL, {t}, 11, 1, {ar3b}), (3400, 3600, 59, NULL, {t}, 13, 1, NULL),
  -- 4: a send of 512 B to rank 0 of the 2-rank communicator
  (4400, 4600, 59, NULL, {t}, 14, 1, {send}),
  -- 5: an all-reduce whose blob does not check out (cut short)
  (5400, 5600, 59, NULL, {t}, 11, 1, x'0100000000000000');
CREATE TABLE NVTX_PAYLOAD_SCHEMAS(domainId INTEGER, schemaId INTEGER, name TEXT, type INTEGER, flags INTEGER,
  numEntries INTEGER, payloadSize INTEGER, alignTo INTEGER);
INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES (1, 16777218, NULL, 1, NULL, 4, 24, NULL),
  (1, 16777221, NULL, 1, NULL, 3, 24, NULL), (1, 16777225, NULL, 1, NULL, 3, 24, NULL),
  (1, 16777218, NULL, 1, NULL, 4, 24, NULL);
CREATE TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES(domainId INTEGER NOT NULL, schemaId INTEGER NOT NULL, idx INTEGER NOT NULL,
  flags INTEGER, type INTEGER, name TEXT, description TEXT, arrayOrUnionDetail INTEGER, offset INTEGER);
INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES
  (1, 16777218, 0, NULL, 18, 'NCCL communicator ID', NULL, NULL, NULL), (1, 16777218, 1, NULL, 5, 'No. of ranks', NULL, NULL, 8),
  (1, 16777218, 2, NULL, 5, 'Rank', NULL, NULL, 12), (1, 16777218, 3, NULL, 5, 'CUDA device', NULL, NULL, 16),
  (1, 16777221, 0, NULL, 18, 'NCCL communicator ID', NULL, NULL, NULL),
  (1, 16777221, 1, NULL, 22, 'Message size [bytes]', NULL, NULL, 8),
  (1, 16777221, 2, NULL, 16777236, 'Reduction operation', NULL, NULL, 16),
  (1, 16777225, 0, NULL, 18, 'NCCL communicator ID', NULL, NULL, NULL),
  (1, 16777225, 1, NULL, 22, 'Message size [bytes]', NULL, NULL, 8), (1, 16777225, 2, NULL, 5, 'Peer rank', NULL, NULL, 20);
)",
                                  fmt::arg("p", Gpid(100)), fmt::arg("t", Gtid(100, 5)), fmt::arg("init", init),
                                  fmt::arg("init2", init2), fmt::arg("ar1", ar(comm, 1 << 20)),
                                  fmt::arg("ar2a", ar(comm, 2048)), fmt::arg("ar2b", ar(comm, 6144)),
                                  fmt::arg("ar3a", ar(comm, 100)), fmt::arg("ar3b", ar(other, 100)),
                                  fmt::arg("send", send)));
}

TEST(NsysImporter, NcclPayloadsGiveBytesCommunicatorAndRank) {
  StatusOr<RankTrace> t = ImportFile(PayloadExport("payloads.sqlite"), {});
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->comm_ops.size(), 5u);
  std::vector<const CommOp*> ops;  // in launch order
  for (const Activity& a : t->activities)
    if (a.comm_op != kNoIndex) ops.push_back(&t->comm_ops[a.comm_op]);
  ASSERT_EQ(ops.size(), 5u);
  EXPECT_EQ(ops[0]->op, Collective::kAllReduce);
  EXPECT_EQ(ops[0]->bytes, 1 << 20);
  EXPECT_EQ(ops[0]->communicator, "0000000000000abc");
  EXPECT_EQ(ops[0]->comm_rank, 2);  // from that communicator's ncclCommInitRankConfig
  EXPECT_EQ(ops[0]->comm_nranks, 4);
  EXPECT_EQ(ops[1]->bytes, 8192);  // the group's two calls, one kernel
  EXPECT_EQ(ops[1]->communicator, "0000000000000abc");
  EXPECT_EQ(ops[2]->op, Collective::kAllReduce);  // named, but two communicators: nothing more taken
  EXPECT_EQ(ops[2]->bytes, kUnknown);
  EXPECT_EQ(ops[2]->communicator, "unknown");
  EXPECT_EQ(ops[3]->op, Collective::kSend);
  EXPECT_EQ(ops[3]->bytes, 512);
  EXPECT_EQ(ops[3]->root_peer, 0);
  EXPECT_EQ(ops[3]->communicator, "0000000000000def");
  EXPECT_EQ(ops[3]->comm_rank, 1);
  EXPECT_EQ(ops[3]->comm_nranks, 2);
  EXPECT_EQ(ops[4]->bytes, kUnknown);  // its blob does not check out
  EXPECT_EQ(ops[4]->communicator, "unknown");
  EXPECT_EQ(t->stats.Get(Stat::nsys_nccl_payloads_decoded), 6);
  EXPECT_EQ(t->stats.Get(Stat::nsys_nccl_payloads_unread), 1);
  // The communicator's rank is not taken for the job's rank: nothing says which one is the world.
  EXPECT_EQ(t->meta.rank, kUnknown);
}

// Payload schema tables longer than NCCL's could ever be (over 65,536 rows) are not read at all:
// the same export with padding rows in NVTX_PAYLOAD_SCHEMA_ENTRIES decodes nothing.
TEST(NsysImporter, PayloadSchemaTablesOverTheBoundAreNotRead) {
  const std::string path = PayloadExport("payloads_padded.sqlite");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 65535) "
                         "INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES SELECT 1, 16777300, i, NULL, 5, 'Rank', NULL, NULL, 0 FROM n",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  StatusOr<RankTrace> t = ImportFile(path, {});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->stats.Get(Stat::nsys_nccl_payloads_decoded), 0);
  EXPECT_EQ(t->stats.Get(Stat::nsys_nccl_payloads_unread), 7);
  for (const CommOp& op : t->comm_ops) EXPECT_EQ(op.bytes, kUnknown);
}

// Groups nest: the calls of a launch in the outer ncclGroupEnd are all those since the outer
// ncclGroupStart, the inner group's too; a group without its ncclGroupStart range (an export
// that lacks them) takes the calls since the thread's previous ncclGroupEnd.
TEST(NsysImporter, NestedGroupsAndGroupsWithoutTheirStart) {
  const std::string path = MakeDb("nested.sqlite", fmt::format(R"(
CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1, 'ncclDevKernel_SendRecv'), (3, 'cudaLaunchKernel'), (10, 'ncclGroupStart'),
  (11, 'ncclGroupEnd'), (12, 'ncclSend'), (13, 'ncclRecv'), (14, 'ncclAllReduce');
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, shortName INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10000, 10100, 0, 9, 1, {p}, 1), (20000, 20100, 0, 9, 2, {p}, 1),
  (30000, 30100, 0, 9, 3, {p}, 1);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER,
  correlationId INTEGER, nameId INTEGER NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (1500, 1510, {t}, 1, 3), (2500, 2510, {t}, 2, 3), (3500, 3510, {t}, 3, 3);
CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT,
  globalTid INTEGER, textId INTEGER, domainId INTEGER);
INSERT INTO NVTX_EVENTS VALUES
  -- 1: a lone all-reduce before, then a group holding a group: send + recv -> sendrecv
  (500, 600, 59, NULL, {t}, 14, 1),
  (1000, 1005, 59, NULL, {t}, 10, 1), (1010, 1015, 59, NULL, {t}, 10, 1), (1020, 1025, 59, NULL, {t}, 12, 1),
  (1030, 1040, 59, NULL, {t}, 11, 1), (1050, 1055, 59, NULL, {t}, 13, 1), (1400, 1600, 59, NULL, {t}, 11, 1),
  -- 2: two sends in a group whose ncclGroupStart is missing: since the previous ncclGroupEnd -> send
  (2020, 2025, 59, NULL, {t}, 12, 1), (2030, 2035, 59, NULL, {t}, 12, 1), (2400, 2600, 59, NULL, {t}, 11, 1),
  -- 3: a launch inside no NCCL range (the kernel keeps its name)
  (3600, 3700, 59, NULL, {t}, 14, 1);
)",
                                                              fmt::arg("p", Gpid(100)), fmt::arg("t", Gtid(100, 5))));
  StatusOr<RankTrace> t = ImportFile(path, {});
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::vector<std::string> ops;
  for (const Activity& a : t->activities)
    if (a.comm_op != kNoIndex) ops.push_back(std::string(CollectiveName(t->comm_ops[a.comm_op].op)));
  EXPECT_EQ(ops, (std::vector<std::string>{"sendrecv", "send", "sendrecv"}));
  EXPECT_EQ(t->stats.Get(Stat::nsys_ops_named_from_nccl_ranges), 2);
}

// One (process, GPU) pair with `env` as nsys' DeviceEnvironment; `second_gpu`: the process
// also drives GPU 1 (two ranks in the export).
std::string EnvExport(const std::string& name, const std::string& env, bool second_gpu = false) {
  return MakeDb(name, fmt::format(R"(
CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1, 'gemm_kernel');
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, globalPid INTEGER, shortName INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1000, 2000, 0, 7, {p}, 1), (3000, 4000, {gpu}, 7, {p}, 1);
CREATE TABLE TARGET_INFO_SYSTEM_ENV(globalVid INTEGER, devStateName TEXT, name TEXT, nameEnum INTEGER, value TEXT);
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (1, 'Local (CLI)', 'Hostname', 619, 'node7'),
  (1, 'Local (CLI)', 'DeviceEnvironment', 610, '{env}');
)",
                                  fmt::arg("p", Gpid(100)), fmt::arg("gpu", second_gpu ? 1 : 0), fmt::arg("env", env)));
}

TEST(NsysImporter, RankFromTheEnvironmentOfAnNsysStartedPerRank) {
  struct Case {
    std::string env;
    int64_t rank, world, local;
  } cases[] = {
      {"PATH=/bin;RANK=3;WORLD_SIZE=8;LOCAL_RANK=3;MASTER_ADDR=n0", 3, 8, 3},
      {"OMPI_COMM_WORLD_RANK=5;OMPI_COMM_WORLD_SIZE=16;OMPI_COMM_WORLD_LOCAL_RANK=1", 5, 16, 1},
      {"SLURM_PROCID=2;SLURM_NTASKS=4", 2, 4, kUnknown},
      {"RANK=0", 0, kUnknown, kUnknown},
      // torchrun's RANK wins over Slurm's task id (one task per node running torchrun)
      {"SLURM_PROCID=1;RANK=9;WORLD_SIZE=16", 9, 16, kUnknown},
      // not a rank: no such variable, a name that only ends in RANK, a value that is no number
      {"PATH=/bin;HOME=/root", kUnknown, kUnknown, kUnknown},
      {"GROUP_RANK=1;ROLE_RANK=1", kUnknown, kUnknown, kUnknown},
      {"RANK=abc;RANK2=1;RANK=-1;RANK=", kUnknown, kUnknown, kUnknown},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.env);
    StatusOr<RankTrace> t = ImportFile(EnvExport("env.sqlite", c.env), {});
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->meta.rank, c.rank);
    EXPECT_EQ(t->meta.world_size, c.world);
    EXPECT_EQ(t->meta.local_rank, c.local);
    EXPECT_EQ(t->meta.host, "node7");
    EXPECT_EQ(t->stats.Get(Stat::rank_unknown), c.rank == kUnknown ? 1 : 0);
  }
  // An export of two ranks (here one process on two GPUs) is never given the one RANK its
  // environment holds: which of them it is, nothing says. Listed first (a directory, the CLI),
  // or named as FILE#KEY with no listing (the ranks are counted then).
  const std::string two = EnvExport("env_two.sqlite", "RANK=3;WORLD_SIZE=8", /*second_gpu=*/true);
  StatusOr<std::vector<TraceInput>> inputs = ExpandInputs({two});
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  ASSERT_EQ(inputs->size(), 2u);
  std::vector<TraceInput> named = *inputs;
  const std::string unlisted = EnvExport("env_two_unlisted.sqlite", "RANK=3;WORLD_SIZE=8", /*second_gpu=*/true);
  named.push_back(unlisted + "#pid100.gpu0");
  named.push_back(unlisted + "#pid100.gpu1");
  for (const TraceInput& in : named) {
    SCOPED_TRACE(in.name);
    StatusOr<RankTrace> t = ImportFile(in, {});
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->meta.rank, kUnknown);
    EXPECT_EQ(t->stats.Get(Stat::rank_unknown), 1);
  }
  // One GPU of that process alone, named with no listing: one rank, so the RANK is its.
  const std::string one = EnvExport("env_one_unlisted.sqlite", "RANK=3;WORLD_SIZE=8");
  StatusOr<RankTrace> t = ImportFile(one + "#pid100.gpu0", {});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->meta.rank, 3);
}

TEST(NsysImporter, WithoutSessionStartTimesStayOnTheExportClock) {
  std::string path = MakeDb("no_session.sqlite", R"(
CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1, 'k');
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER,
  demangledName INTEGER, shortName INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 20, 3, 1, 1, 99), (30, 25, 3, 1, 1, 1), ('x', 40, 3, 1, 1, 1),
  (50, 60, 3, NULL, 7, 1);
)");
  StatusOr<std::vector<TraceInput>> inputs = ExpandInputs({path});
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  ASSERT_EQ(Names(*inputs), std::vector<std::string>{path + "#pid-1.gpu3"});  // no globalPid column
  StatusOr<RankTrace> t = ImportFile(path, {});  // one rank: the whole file is fine
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->activities.size(), 2u);
  EXPECT_EQ(t->activities[0].start_ns, 10);
  EXPECT_EQ(t->names.Get(t->activities[0].name_id), "k");  // demangledName preferred
  EXPECT_EQ(t->names.Get(t->activities[1].name_id), "");   // a string id StringIds lacks
  EXPECT_EQ(t->stats.Get(Stat::events_negative_duration), 1);
  EXPECT_EQ(t->stats.Get(Stat::events_malformed), 1);
  EXPECT_EQ(t->stats.Get(Stat::activities_unknown_stream), 1);
  EXPECT_EQ(t->stats.Get(Stat::nsys_optional_tables_missing), 5);
  EXPECT_EQ(t->meta.clock_source, "nsys: session timestamps");
}

TEST(NsysImporter, RejectedInputsSayWhatTheyAre) {
  std::string no_kernels = MakeDb("no_kernels.sqlite", R"(
CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT(name TEXT NOT NULL, value TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER, end INTEGER, correlationId INTEGER);
)");
  StatusOr<std::vector<TraceInput>> a = ExpandInputs({no_kernels});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(a.status().message(), no_kernels +
                                      ": Nsight Systems export without table CUPTI_ACTIVITY_KIND_KERNEL: no CUDA "
                                      "kernels were traced (nsys profile -t cuda)");
  std::string other = MakeDb("other.sqlite", "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT);");
  StatusOr<RankTrace> b = ImportFile(other, {});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), other +
                                      ": a SQLite database of another schema (application_id 0x0), neither an "
                                      "overlapprof trace store nor an Nsight Systems export");
  std::string no_column = MakeDb("no_column.sqlite", R"(
CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, deviceId INTEGER, streamId INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 0, 0);
)");
  StatusOr<RankTrace> c = ImportFile(no_column, {});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), no_column + ": Nsight Systems export: table CUPTI_ACTIVITY_KIND_KERNEL lacks column end");
  StatusOr<RankTrace> d = ImportFile(SyntheticExport("bad_key.sqlite") + "#gpu0", {});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
}

// Both are SQLite files: the store importer claims only application_id 'OVLP', the nsys
// importer every other SQLite file.
TEST(NsysImporter, ProbeTellsStoresAndExportsApart) {
  std::string export_path = SyntheticExport("probe.sqlite");
  StatusOr<const Importer*> a = ChooseImporter(export_path);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->name(), "nsys");
  StatusOr<RankTrace> t = ImportFile(export_path + "#pid100.gpu0", {});
  ASSERT_TRUE(t.ok());
  std::string store = TempPath("probe.db");
  ASSERT_TRUE(WriteStore(*t, store, true).ok());
  StatusOr<const Importer*> b = ChooseImporter(store);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->name(), "store");
  // The store holds one rank: one input, read back with the same figures.
  StatusOr<std::vector<TraceInput>> inputs = ExpandInputs({store});
  ASSERT_TRUE(inputs.ok());
  EXPECT_EQ(Names(*inputs), std::vector<std::string>{store});
  StatusOr<RankTrace> u = ImportFile(store, {});
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->activities.size(), t->activities.size());
  EXPECT_EQ(u->meta.source_format, "nsys");
}

// tests/data/nsys/README.md: per GPU, comm = ∪ of kernels named *nccl*, compute = ∪ of the
// others, overlap = |compute ∩ comm|; exact ns from an independent Python union of the rows.
struct RealExpected {
  const char* key;
  int64_t kernels, comm_kernels, comm_ns, compute_ns, overlap_ns;
  double readme_comm_us, readme_compute_us;
};

TEST(GoldenNsysExports, PerGpuFiguresEqualTheReadme) {
  const std::pair<const char*, std::vector<RealExpected>> kFiles[] = {
      {"mfu_2gpu_before.sqlite",
       {{"pid144.gpu0", 1993, 33, 17172652, 253690832, 0, 17172.7, 253690.8},
        {"pid145.gpu1", 2017, 33, 8229100, 256095624, 0, 8229.1, 256095.6}}},
      {"mfu_2gpu_after.sqlite",
       {{"pid148.gpu0", 1793, 31, 9989016, 227484352, 0, 9989.0, 227484.4},
        {"pid149.gpu1", 1794, 31, 23753085, 227608953, 0, 23753.1, 227609.0}}},
  };
  for (const auto& [file, ranks] : kFiles) {
    SCOPED_TRACE(file);
    const std::string path = testing::DataFile(std::string("nsys/") + file);
    StatusOr<std::vector<TraceInput>> inputs = ExpandInputs({path});
    ASSERT_TRUE(inputs.ok()) << inputs.status().message();
    StatusOr<Summary> s = AnalyzeFiles(*inputs, {}, {});
    ASSERT_TRUE(s.ok()) << s.status().message();
    ASSERT_EQ(s->ranks.size(), ranks.size());
    for (size_t i = 0; i < ranks.size(); ++i) {
      const RealExpected& e = ranks[i];
      const RankResult& r = s->ranks[i];
      SCOPED_TRACE(e.key);
      EXPECT_EQ(r.source_path, path + "#" + e.key);
      EXPECT_EQ(r.whole.kernels, e.kernels);
      EXPECT_EQ(r.whole.comm_kernels, e.comm_kernels);
      EXPECT_EQ(r.whole.comm_ns, e.comm_ns);
      EXPECT_EQ(r.whole.compute_ns, e.compute_ns);
      EXPECT_EQ(r.whole.overlap_ns, e.overlap_ns);
      EXPECT_NEAR(r.whole.comm_ns / 1e3, e.readme_comm_us, 0.05);
      EXPECT_NEAR(r.whole.compute_ns / 1e3, e.readme_compute_us, 0.05);
      ASSERT_TRUE(r.whole.overlap_ratio.has_value());
      EXPECT_EQ(*r.whole.overlap_ratio, 0.0);
    }
  }
}

TEST(GoldenNsysExports, JsonSummaryMatchesGoldenFiles) {
  for (const char* name : {"mfu_2gpu_before", "mfu_2gpu_after"}) {
    SCOPED_TRACE(name);
    StatusOr<std::vector<TraceInput>> inputs = ExpandInputs({testing::DataFile(std::string("nsys/") + name + ".sqlite")});
    ASSERT_TRUE(inputs.ok());
    StatusOr<Summary> s = AnalyzeFiles(*inputs, {}, {});
    ASSERT_TRUE(s.ok()) << s.status().message();
    testing::ExpectGoldenSummary(*s, std::string("nsys_") + name);
  }
}


// Exports recorded on an H100 (tests/data/nsys/README.md): Nsight Systems 2025.3, NCCL 2.28.9.
StatusOr<Summary> AnalyzeData(const std::string& rel) {
  OVERLAPPROF_ASSIGN_OR_RETURN(std::vector<TraceInput> inputs, ExpandInputs({testing::DataFile("nsys/" + rel)}));
  return AnalyzeFiles(inputs, {}, {});
}

// The gemm sample (1 rank, 4 all-reduces under 8 GEMMs per iteration) profiled by nsys: its
// all-reduces run NCCL's 1-rank kernel (oneRankReduce), named from NCCL's own NVTX ranges, and the
// overlap over the timed iterations agrees with the sample's CUDA-event ground truth of that run
// within the 2 pp that tests/gpu/check.py allows overlapprof's own recorder.
TEST(RealH100Exports, GemmSampleAgreesWithItsGroundTruth) {
  StatusOr<Summary> s = AnalyzeData("h100_gemm1.sqlite");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->ranks.size(), 1u);
  const RankResult& r = s->ranks[0];
  EXPECT_EQ(r.whole.comm_kernels, 52);  // 13 iterations x 4
  std::ifstream f(testing::DataFile("nsys/h100_gemm1.truth.json"));
  const nlohmann::json truth = nlohmann::json::parse(f);
  const int64_t warmup = truth["config"]["warmup"].get<int64_t>();
  const nlohmann::json& timed = truth["ranks"][0]["timed"];
  int64_t iters = 0, comm = 0, overlap = 0;
  for (const IterationResult& it : s->iterations) {
    if (it.step == kUnknown || it.step < warmup) continue;
    ++iters;
    comm += it.figures.comm_ns;
    overlap += it.figures.overlap_ns;
  }
  EXPECT_EQ(iters, timed["iterations"].get<int64_t>());
  ASSERT_GT(comm, 0);
  const double ours = static_cast<double>(overlap) / comm, events = timed["overlap_ratio"].get<double>();
  EXPECT_NEAR(ours, events, 0.02) << "overlapprof " << ours << " vs events " << events;
  // Kernel time against event time of the same all-reduces: within 2 %.
  EXPECT_NEAR(static_cast<double>(comm), timed["comm_ns"].get<double>(), 0.02 * timed["comm_ns"].get<double>());
  ASSERT_TRUE(s->op_types.has_value());
  for (const OpTypeRow& row : *s->op_types) EXPECT_EQ(row.op, Collective::kAllReduce);
}

// torchrun with one nsys per rank (`--no-python nsys profile ...`): one export per rank, whose
// environment gives the rank; the cross-rank views then have their ranks. The same job under one
// nsys around torchrun: two ranks in one export, their ranks unknown (and said so).
TEST(RealH100Exports, OneNsysPerRankGivesTheRanks) {
  StatusOr<Summary> per_rank = AnalyzeData("h100_ddp2_per_rank");
  ASSERT_TRUE(per_rank.ok()) << per_rank.status().message();
  ASSERT_EQ(per_rank->ranks.size(), 2u);
  for (int64_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    const RankResult& r = per_rank->ranks[static_cast<size_t>(i)];
    EXPECT_EQ(r.rank, i);
    EXPECT_NE(r.source_path.find(fmt::format("rank{}.sqlite", i)), std::string::npos) << r.source_path;
    for (const std::string& n : r.notices) EXPECT_EQ(n.find("rank shown as unknown"), std::string::npos) << n;
  }
  for (const RankResult& r : per_rank->ranks) EXPECT_EQ(r.world_size, 2);
  StatusOr<Summary> one = AnalyzeData("h100_ddp2.sqlite");
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_EQ(one->ranks.size(), 2u);
  for (const RankResult& r : one->ranks) {
    EXPECT_EQ(r.rank, kUnknown);
    EXPECT_TRUE(std::any_of(r.notices.begin(), r.notices.end(), [](const std::string& n) {
      return n.find("no RANK in the environment nsys started in") != std::string::npos;
    }));
  }
  // Both: every NCCL call of DDP's start-up and its bucket all-reduces, named from NCCL's ranges.
  for (const Summary* s : {&*per_rank, &*one}) {
    ASSERT_TRUE(s->op_types.has_value());
    std::map<std::string, int64_t> ops;
    for (const OpTypeRow& row : *s->op_types) ops[std::string(OpFamilyName(row.op))] += row.count;
    EXPECT_EQ(ops.count("unknown"), 0u);
    EXPECT_EQ(ops["broadcast"], 8);  // 4 per rank
    EXPECT_EQ(ops["allgather"], 2);
    EXPECT_GT(ops["allreduce"], 0);
  }
}

TEST(RealH100Exports, JsonSummaryMatchesGoldenFiles) {
  for (const auto& [rel, golden] : {std::pair{"h100_gemm1.sqlite", "nsys_h100_gemm1"},
                                    std::pair{"h100_ddp2.sqlite", "nsys_h100_ddp2"},
                                    std::pair{"h100_ddp2_per_rank", "nsys_h100_ddp2_per_rank"}}) {
    SCOPED_TRACE(rel);
    StatusOr<Summary> s = AnalyzeData(rel);
    ASSERT_TRUE(s.ok()) << s.status().message();
    testing::ExpectGoldenSummary(*s, golden);
  }
}

}  // namespace
}  // namespace overlapprof
