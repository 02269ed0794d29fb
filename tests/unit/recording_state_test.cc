// How a store's recording ended (src/store/recording_state.h), read through ReadStore from
// synthetic stores written with the store writer: an unfinished file is counted and its notice
// says how much it may miss.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

#include "src/store/reader.h"
#include "src/store/recording_state.h"
#include "src/store/writer.h"
#include "test_util.h"

namespace overlapprof {
namespace {

constexpr int64_t kBase = 1'700'000'000'000'000'000;  // 2023-11-14 22:13:20 UTC
constexpr int64_t kSec = 1'000'000'000;

void Sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// An injector-like store: 100 kernels over the 10 s after kBase, then `meta` as given (SQL
// values: integers, or quoted text as PutMeta writes them).
std::string Store(const testing::TempDir& dir, const std::string& name, const std::string& meta_values) {
  RankTrace t;
  t.meta.rank = 0;
  t.meta.world_size = 1;
  t.meta.source_format = "overlapprof";
  const uint32_t stream = t.StreamIndex(0, 7);
  const uint32_t kernel = t.names.Intern("gemm");
  for (int i = 0; i < 100; ++i) {
    Activity a;
    a.start_ns = kBase + i * kSec / 10;
    a.end_ns = a.start_ns + kSec / 20;
    a.stream = stream;
    a.name_id = kernel;
    t.activities.push_back(a);
  }
  const std::string path = dir.File(name);
  EXPECT_TRUE(WriteStore(t, path, false).ok());
  Sql(path, fmt::format("UPDATE meta SET value={} WHERE key='created_unix_ns'", kBase));
  if (!meta_values.empty()) Sql(path, "INSERT OR REPLACE INTO meta(key, value) VALUES " + meta_values);
  return path;
}

RankTrace Read(const std::string& path) {
  StatusOr<RankTrace> t = ReadStore(path);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : RankTrace{};
}

std::string Notices(const RankTrace& t) {
  std::string all;
  for (const std::string& n : t.notices) all += n + "\n";
  return all;
}

TEST(RecordingState, FinishedAndImportedStoresHaveNoNotice) {
  testing::TempDir dir;
  for (const std::string& meta : {std::string("('recording_state', 'finished')"), std::string()}) {
    RankTrace t = Read(Store(dir, meta.empty() ? "imported.db" : "finished.db", meta));
    EXPECT_EQ(t.stats.Get(Stat::recording_incomplete), 0);
    EXPECT_EQ(t.stats.Get(Stat::recording_incomplete_large_loss), 0);
    EXPECT_TRUE(t.notices.empty()) << Notices(t);
  }
}

TEST(RecordingState, UnmarkedRecordingFileIsIncompleteWithItsPossibleLoss) {
  // Nobody marked it (run and the job were killed together): the reader counts it itself. A
  // 1 s flush period after 10 s recorded: 1/11 of the recording, 10 records at its rate.
  testing::TempDir dir;
  RankTrace t = Read(Store(dir, "r.db",
                           fmt::format("('recording_state', 'recording'), ('last_commit_ns', '{}'), "
                                       "('flush_interval_ms', '1000')",
                                       kBase + 10 * kSec)));
  EXPECT_EQ(t.stats.Get(Stat::recording_incomplete), 1);
  EXPECT_EQ(t.stats.Get(Stat::recording_incomplete_large_loss), 0);  // 9% < 10%: a warning
  ASSERT_EQ(t.notices.size(), 1u);
  const std::string& n = t.notices[0];
  EXPECT_NE(n.find("ended without its final flush"), std::string::npos) << n;
  EXPECT_NE(n.find("up to about 1.0 s after its last commit at 2023-11-14 22:13:30.000 UTC may be missing"),
            std::string::npos)
      << n;
  EXPECT_NE(n.find("about 10 records at this file's own rate (100 records in 10 s), 9% of the recording"),
            std::string::npos)
      << n;
}

TEST(RecordingState, LargeShareMissingIsAnError) {
  // A 2 s period after 10 s recorded: 2/12 = 17% >= 10%.
  testing::TempDir dir;
  RankTrace t = Read(Store(dir, "r.db",
                           fmt::format("('recording_state', 'incomplete'), ('last_commit_ns', {}), "
                                       "('flush_interval_ms', 2000)",
                                       kBase + 10 * kSec)));
  EXPECT_EQ(t.stats.Get(Stat::recording_incomplete), 1);
  EXPECT_EQ(t.stats.Get(Stat::recording_incomplete_large_loss), 1);
  EXPECT_EQ(GetStatInfo(Stat::recording_incomplete_large_loss).severity, Severity::kError);
  ASSERT_EQ(t.notices.size(), 1u);
  EXPECT_NE(t.notices[0].find("up to about 2.0 s after its last commit"), std::string::npos) << t.notices[0];
  EXPECT_NE(t.notices[0].find("about 20 records"), std::string::npos) << t.notices[0];
  EXPECT_NE(t.notices[0].find("17% of the recording (at least 10%"), std::string::npos) << t.notices[0];
}

TEST(RecordingState, ProcessSeenGoneByRunBoundsTheLossExactly) {
  // run saw the process gone 300 ms after the last commit: that, not the 2 s period, bounds it.
  testing::TempDir dir;
  RankTrace t = Read(Store(dir, "r.db",
                           fmt::format("('recording_state', 'incomplete'), ('last_commit_ns', {}), "
                                       "('flush_interval_ms', 2000), ('process_gone_ns', {})",
                                       kBase + 10 * kSec, kBase + 10 * kSec + 300'000'000)));
  EXPECT_EQ(t.stats.Get(Stat::recording_incomplete_large_loss), 0);  // 3%
  ASSERT_EQ(t.notices.size(), 1u);
  EXPECT_NE(t.notices[0].find("up to about 300 ms after its last commit"), std::string::npos) << t.notices[0];
  EXPECT_NE(t.notices[0].find("seen gone"), std::string::npos) << t.notices[0];
  EXPECT_NE(t.notices[0].find("about 3 records"), std::string::npos) << t.notices[0];
}

TEST(RecordingState, OlderStoresSayTheLossIsUnknown) {
  testing::TempDir dir;
  RankTrace t = Read(Store(dir, "r.db", "('recording_state', 'recording')"));
  EXPECT_EQ(t.stats.Get(Stat::recording_incomplete), 1);
  EXPECT_EQ(t.stats.Get(Stat::recording_incomplete_large_loss), 0);
  ASSERT_EQ(t.notices.size(), 1u);
  EXPECT_NE(t.notices[0].find("how much is missing after its last commit is unknown"), std::string::npos)
      << t.notices[0];
}

TEST(RecordingState, WriteFailedAndLostFilesSayWhatIsMissing) {
  testing::TempDir dir;
  RankTrace w = Read(Store(dir, "w.db", "('recording_state', 'write_failed')"));
  EXPECT_EQ(w.stats.Get(Stat::recording_incomplete), 0);  // records_lost_write_failed is its counter
  ASSERT_EQ(w.notices.size(), 1u);
  EXPECT_NE(w.notices[0].find("stopped at a failed write"), std::string::npos) << w.notices[0];
  RankTrace l = Read(Store(dir, "l.db", "('recording_state', 'lost'), ('lost_reason', '0 bytes')"));
  EXPECT_EQ(l.stats.Get(Stat::recording_failed), 1);
  EXPECT_EQ(GetStatInfo(Stat::recording_failed).severity, Severity::kError);
  ASSERT_EQ(l.notices.size(), 1u);
  EXPECT_NE(l.notices[0].find("its recording failed (0 bytes): everything this process did is missing"), std::string::npos) << l.notices[0];
}

TEST(RecordingState, MalformedMetaValuesAreUnknownNotGarbage) {
  testing::TempDir dir;
  RankTrace t = Read(Store(dir, "r.db",
                           "('recording_state', 'incomplete'), ('last_commit_ns', '12abc'), "
                           "('flush_interval_ms', '-5')"));
  EXPECT_EQ(t.stats.Get(Stat::recording_incomplete), 1);
  ASSERT_EQ(t.notices.size(), 1u);
  EXPECT_NE(t.notices[0].find("unknown"), std::string::npos) << t.notices[0];
}

TEST(RecordingState, AbsurdMetaValuesNeitherOverflowNorAreBelieved) {
  // Values from a hostile file: a flush period of centuries, times near INT64_MAX.
  testing::TempDir dir;
  RankTrace t = Read(Store(dir, "r.db",
                           "('recording_state', 'incomplete'), ('last_commit_ns', 9223372036854775000), "
                           "('flush_interval_ms', 9223372036854775), ('process_gone_ns', 9223372036854775807)"));
  EXPECT_EQ(t.stats.Get(Stat::recording_incomplete), 1);
  ASSERT_EQ(t.notices.size(), 1u);
  EXPECT_NE(t.notices[0].find("ended without its final flush"), std::string::npos) << t.notices[0];
}

}  // namespace
}  // namespace overlapprof
