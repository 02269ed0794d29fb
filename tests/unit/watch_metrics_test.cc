// run --watch's figures (src/cli/watch_metrics.h): windows counted once each, the last one only
// once the job has ended; the exposition's names, labels and units; --watch-listen's parsing.
#include "src/cli/watch_metrics.h"

#include <gtest/gtest.h>

#include <regex>

namespace overlapprof {
namespace {

// A summary of one rank file with `n` windows of 10 ms: 6 ms compute of which 2 ms hide
// communication, 2 ms exposed, 1 ms of it waiting, 1 ms idle.
Summary OneRank(int n, const std::string& path = "rank0.db", int64_t rank = 0) {
  Summary s;
  RankResult r;
  r.rank = rank;
  r.host = "node\"1";
  r.source_path = path;
  r.stats.Set(Stat::recording_incomplete, 1);
  s.ranks.push_back(r);
  StepBreakdown b;
  for (int i = 0; i < n; ++i) {
    StepSplit sp;
    sp.wall_ns = 10'000'000;
    sp.compute_only_ns = 4'000'000;
    sp.comm_hidden_ns = 2'000'000;
    sp.comm_exposed_ns = 1'000'000;
    sp.comm_waiting_ns = 1'000'000;
    sp.idle_ns = 2'000'000;
    b.iterations.push_back({rank, 0, i, i, false, sp});
  }
  s.step_breakdown = b;
  OpTypeRow op;
  op.rank = rank;
  op.op = Collective::kAllReduce;
  op.count = n;
  op.bytes = int64_t{1} << 20;
  op.time_ns = 4'000'000 * n;
  op.exposed_ns = 2'000'000 * n;
  op.busbw_GBps = 1.5;
  op.algbw_GBps = 1.0;
  s.op_types = std::vector<OpTypeRow>{op};
  return s;
}

TEST(WatchMetrics, WindowsCountOnceAndTheLastOnlyWhenTheJobHasEnded) {
  WatchState w;
  w.Fold(OneRank(3), WatchPhase::kRecording);
  EXPECT_EQ(w.files().at("rank0.db").steps, 2);  // the third may still grow
  w.Fold(OneRank(3), WatchPhase::kRecording);
  EXPECT_EQ(w.files().at("rank0.db").steps, 2);  // nothing counted twice
  w.Fold(OneRank(5), WatchPhase::kRecording);
  EXPECT_EQ(w.files().at("rank0.db").steps, 4);
  EXPECT_EQ(w.files().at("rank0.db").last_steps, 2);
  w.Fold(OneRank(5), WatchPhase::kEnded);
  const WatchFileFigures& f = w.files().at("rank0.db");
  EXPECT_EQ(f.steps, 5);
  EXPECT_EQ(f.wall_ns, 50'000'000);
  EXPECT_EQ(f.compute_ns, 30'000'000);
  EXPECT_EQ(f.comm_ns, 20'000'000);
  EXPECT_EQ(f.hidden_ns, 10'000'000);
  EXPECT_EQ(f.exposed_ns, 10'000'000);
  EXPECT_EQ(f.waiting_ns, 5'000'000);
  EXPECT_EQ(f.idle_ns, 10'000'000);
}

TEST(WatchMetrics, LiveFilesAreNotReportedUnfinishedUntilTheJobHasEnded) {
  WatchState w;
  w.Fold(OneRank(2), WatchPhase::kRecording);
  EXPECT_TRUE(w.files().at("rank0.db").counters.empty());
  w.Fold(OneRank(2), WatchPhase::kEnded);
  ASSERT_EQ(w.files().at("rank0.db").counters.size(), 1u);
  EXPECT_EQ(w.files().at("rank0.db").counters[0].first, "recording_incomplete");
}

TEST(WatchMetrics, ExpositionInBaseUnitsWithBoundedLabels) {
  WatchState w;
  w.Fold(OneRank(3), WatchPhase::kRecording);
  w.Fold(OneRank(2, "rank0_restart1.db"), WatchPhase::kEnded);  // a restarted rank adds up
  WatchHealth h;
  h.analyses = 2;
  const std::string text = w.Exposition(h);
  const std::string l = "{rank=\"0\",host=\"node\\\"1\"}";
  EXPECT_NE(text.find("overlapprof_steps_total" + l + " 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("overlapprof_step_seconds_total" + l + " 0.040000000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("overlapprof_comm_exposed_seconds_total" + l + " 0.008000000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("overlapprof_comm_hidden_ratio" + l + " 0.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("overlapprof_comm_exposed_ratio" + l + " 0.2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("overlapprof_comm_ops_total{rank=\"0\",host=\"node\\\"1\",op=\"allreduce\"} 5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("overlapprof_comm_op_bus_bandwidth_bytes_per_second{rank=\"0\",host=\"node\\\"1\",op=\"allreduce\"} "
                      "1500000000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("overlapprof_data_quality_recording_incomplete" + l + " 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE overlapprof_steps_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("overlapprof_watch_analyses_total 2\n"), std::string::npos);
  for (const char* label : {"step=", "comm=", "pid=", "seq="}) EXPECT_EQ(text.find(label), std::string::npos) << label;
}

TEST(WatchMetrics, EveryDataQualityCounterIsAWellFormedMetric) {
  Summary s = OneRank(2);
  for (size_t i = 0; i < kStatCount; ++i) s.ranks[0].stats.Set(static_cast<Stat>(i), 1);
  WatchState w;
  w.Fold(s, WatchPhase::kEnded);
  const std::string text = w.Exposition({});
  const std::regex sample(R"(overlapprof_[a-zA-Z0-9_]+(\{[^}]*\})? [0-9.e+-]+)");
  const std::regex comment(R"(# (HELP|TYPE) overlapprof_[a-zA-Z0-9_]+ .*)");
  size_t dq = 0, pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    ASSERT_NE(end, std::string::npos);
    const std::string line = text.substr(pos, end - pos);
    EXPECT_TRUE(std::regex_match(line, line[0] == '#' ? comment : sample)) << line;
    if (line.rfind("overlapprof_data_quality_", 0) == 0) ++dq;
    pos = end + 1;
  }
  EXPECT_EQ(dq, kStatCount + 2);  // each counter, the errors and warnings sums
}

TEST(WatchMetrics, ListenAddress) {
  auto a = ParseListenAddress("127.0.0.1:9464");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 9464);
  EXPECT_TRUE(a->loopback);
  auto any = ParseListenAddress("0.0.0.0:0");
  ASSERT_TRUE(any.ok());
  EXPECT_FALSE(any->loopback);
  for (const char* bad : {"", "9464", "127.0.0.1", "127.0.0.1:", "localhost:9464", "127.0.0.1:65536",
                          "127.0.0.1:-1", "127.0.0.1:94a4", "[::1]:9464", "127.0.0.1:1234567"}) {
    auto r = ParseListenAddress(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(WatchMetrics, LabelValuesAreEscaped) { EXPECT_EQ(PromLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd"); }

}  // namespace
}  // namespace overlapprof
