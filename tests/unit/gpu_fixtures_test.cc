// Real stores recorded by `overlapprof run` on an H100 (tests/data/gpu/README.md: PyTorch 2.11,
// NCCL 2.28.9, NCCL's profiler plugin on; 2 ranks share the GPU):
//  - the plugin join (src/store/plugin_join.h) undone and run again gives the recorder's own join,
//    every plugin op with its call;
//  - the analysis of each directory equals tests/golden/<name>.summary.json (regenerate with
//    OVERLAPPROF_UPDATE_GOLDEN=1 and review the diff);
//  - grouped calls (one kernel, 4 all-reduces) are timed per op by the plugin, and by one kernel
//    with --comm-timing kernels.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "reports/report.h"
#include "src/cli/pipeline.h"
#include "src/importers/importer.h"
#include "src/store/plugin_join.h"
#include "golden_util.h"
#include "test_util.h"

namespace overlapprof {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> RankFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(testing::DataFile("gpu/" + dir)))
    if (e.path().extension() == ".db") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<int64_t, int64_t>> Joins(const std::string& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT id, coalesce(comm_op_id, -1) FROM nccl_profiler_op ORDER BY id", -1, &st,
                               nullptr),
            SQLITE_OK);
  std::vector<std::pair<int64_t, int64_t>> out;
  while (sqlite3_step(st) == SQLITE_ROW) out.emplace_back(sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

TEST(GpuFixtures, PluginJoinRunAgainGivesTheRecordersJoinEveryOpWithItsCall) {
  for (const char* dir : {"h100_ddp_plugin", "h100_gemm_grouped_plugin"}) {
    for (const std::string& src : RankFiles(dir)) {
      SCOPED_TRACE(src);
      const auto recorded = Joins(src);
      ASSERT_GT(recorded.size(), 50u);
      fs::path copy = fs::temp_directory_path() /
                      ("gpu_fixture_" + std::to_string(::getpid()) + "_" + fs::path(src).filename().string());
      fs::copy_file(src, copy, fs::copy_options::overwrite_existing);
      sqlite3* db = nullptr;
      ASSERT_EQ(sqlite3_open(copy.c_str(), &db), SQLITE_OK);
      ASSERT_EQ(sqlite3_exec(db,
                             "UPDATE nccl_profiler_op SET comm_op_id = NULL;"
                             "DELETE FROM meta WHERE key IN ('nccl_profiler_joined', 'timing_source');"
                             "DELETE FROM stats WHERE name IN ('nccl_plugin_ops_unmatched', "
                             "'nccl_plugin_calls_unmatched');",
                             nullptr, nullptr, nullptr),
                SQLITE_OK);
      sqlite3_close(db);
      auto j = JoinNcclProfilerOps(copy.string());
      ASSERT_TRUE(j.ok()) << j.status().message();
      EXPECT_EQ(j->plugin_ops, static_cast<int64_t>(recorded.size()));
      EXPECT_EQ(j->matched, j->plugin_ops);
      EXPECT_EQ(j->plugin_unmatched, 0);
      EXPECT_EQ(j->calls_unmatched, 0);
      EXPECT_EQ(j->timed, j->plugin_ops);
      EXPECT_EQ(Joins(copy.string()), recorded);
      fs::remove(copy);
    }
  }
}

Summary AnalyzeDir(const std::string& dir, bool kernel_timing_only = false) {
  ImportOptions io;
  io.kernel_timing_only = kernel_timing_only;
  const std::vector<std::string> files = RankFiles(dir);
  StatusOr<Summary> s = AnalyzeFiles({files.begin(), files.end()}, io, {});
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

TEST(GpuFixtures, JsonSummaryMatchesGoldenFiles) {
  for (const char* name : {"h100_ddp_plugin", "h100_gemm_grouped_plugin", "h100_gemm_overlapped_1rank"}) {
    SCOPED_TRACE(name);
    testing::ExpectGoldenSummary(AnalyzeDir(name), name);
  }
}

// The sample's --group: each iteration's 4 all-reduces in one NCCL group, one kernel. The plugin
// times each op on its own; by kernels they are one interval.
TEST(GpuFixtures, GroupedCallsAreTimedPerOpByThePluginAndAsOneKernelWithout) {
  for (const std::string& file : RankFiles("h100_gemm_grouped_plugin")) {
    SCOPED_TRACE(file);
    StatusOr<RankTrace> t = ImportFile(file, {});
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->comm_ops.size(), 100u);
    ASSERT_EQ(t->nccl_plugin_ops.size(), 100u);
    std::map<int64_t, std::vector<const NcclPluginOp*>> groups;
    for (const NcclPluginOp& o : t->nccl_plugin_ops) groups[o.group_id].push_back(&o);
    EXPECT_EQ(groups.size(), 25u);  // 5 warm-up + 20 timed iterations
    for (const auto& [id, ops] : groups) {
      ASSERT_EQ(ops.size(), 4u);
      std::set<int64_t> starts, calls, launches;
      for (const NcclPluginOp* o : ops) {
        ASSERT_TRUE(o->HasGpuTimes());
        ASSERT_NE(o->comm_op, kNoIndex);
        starts.insert(o->start_ns);
        calls.insert(o->comm_op);
        launches.insert(t->comm_ops[o->comm_op].launch_id);
      }
      EXPECT_GT(starts.size(), 1u);    // each op its own interval
      EXPECT_EQ(calls.size(), 4u);     // each joined to its own call
      EXPECT_EQ(launches.size(), 1u);  // the 4 calls are one launch (one kernel)
    }
  }
  const Summary plugin = AnalyzeDir("h100_gemm_grouped_plugin");
  const Summary kernels = AnalyzeDir("h100_gemm_grouped_plugin", /*kernel_timing_only=*/true);
  ASSERT_EQ(plugin.ranks.size(), 2u);
  ASSERT_EQ(kernels.ranks.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(plugin.ranks[i].timing_source, "nccl_profiler");
    EXPECT_EQ(plugin.ranks[i].nccl_profiler_timed_ops, 100);
    EXPECT_TRUE(kernels.ranks[i].timing_source.empty() || kernels.ranks[i].timing_source == "kernels");
    // The ops' intervals lie inside their kernel: the plugin's comm union is not longer.
    EXPECT_LE(plugin.ranks[i].whole.comm_ns, kernels.ranks[i].whole.comm_ns);
    EXPECT_GT(plugin.ranks[i].whole.comm_ns, kernels.ranks[i].whole.comm_ns * 99 / 100);
  }
}

}  // namespace
}  // namespace overlapprof
