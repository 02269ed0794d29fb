// The gate's statistics and decisions (analyzers/compare.h).
#include "analyzers/compare.h"

#include <gtest/gtest.h>

#include <sstream>

namespace overlapprof {
namespace {

TEST(MannWhitney, KnownValues) {
  // Completely separated samples of 5: U = 0, z = (12.5 - 0.5) / sqrt(25 * 11 / 12): p = 0.01219
  // (scipy.stats.mannwhitneyu(..., method="asymptotic", use_continuity=True) gives the same).
  EXPECT_NEAR(MannWhitneyP({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}), 0.012186, 1e-5);
  EXPECT_NEAR(MannWhitneyP({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5}), 0.012186, 1e-5);  // symmetric
  EXPECT_DOUBLE_EQ(MannWhitneyP({3, 3, 3}, {3, 3, 3}), 1.0);                     // all tied
  EXPECT_DOUBLE_EQ(MannWhitneyP({}, {1, 2}), 1.0);
  // Ties across samples: 20/80 vs 15/75 three times each: U = 27, p = 0.161.
  EXPECT_NEAR(MannWhitneyP({20, 80, 20, 80, 20, 80}, {15, 75, 15, 75, 15, 75}), 0.1615, 1e-3);
}

RunView View(std::vector<double> ratios_pct, int64_t comm_per_iter_ns = 4000000) {
  RunView v;
  v.source = "x";
  v.ranks = 1;
  for (double r : ratios_pct) {
    v.iter_overlap_ratio.push_back(r / 100);
    int64_t overlap = static_cast<int64_t>(r / 100 * comm_per_iter_ns);
    v.iter_exposed_ns.push_back(static_cast<double>(comm_per_iter_ns - overlap));
    v.iter_comm_ns.push_back(static_cast<double>(comm_per_iter_ns));
    v.iter_compute_ns.push_back(1e7);
    v.comm_ns += comm_per_iter_ns;
    v.overlap_ns += overlap;
    v.exposed_comm_ns += comm_per_iter_ns - overlap;
    v.compute_ns += 10000000;
    ++v.iterations;
  }
  return v;
}

TEST(Compare, RegressionImprovementNoiseAndTooNoisy) {
  Policy p;
  RunView base = View({75, 76, 74, 75, 77, 73, 75, 76});
  EXPECT_EQ(Compare(base, View({50, 51, 49, 50, 52, 48, 50, 51}), p).gate, Verdict::kRegressed);
  EXPECT_EQ(Compare(base, View({95, 96, 94, 95, 97, 93, 95, 96}), p).gate, Verdict::kImproved);
  EXPECT_EQ(Compare(base, View({75, 74, 76, 75, 73, 77, 76, 75}), p).gate, Verdict::kUnchanged);
  Comparison noisy = Compare(View({20, 80, 20, 80, 20, 80}), View({15, 75, 15, 75, 15, 75}), p);
  EXPECT_EQ(noisy.metrics[0].verdict, Verdict::kInconclusive);
  ASSERT_TRUE(noisy.metrics[0].p.has_value());
  EXPECT_NEAR(noisy.metrics[0].change, -5.0, 1e-9);
}

TEST(Compare, FewIterationsUseTheAggregatesAndNoTest) {
  Policy p;
  Comparison c = Compare(View({75, 75}), View({70, 70}), p);
  EXPECT_EQ(c.metrics[0].verdict, Verdict::kRegressed);
  EXPECT_FALSE(c.metrics[0].p.has_value());
  EXPECT_NE(c.metrics[0].why.find("no statistical test possible"), std::string::npos);
  p.max_overlap_drop_pp = 6;
  p.max_exposed_comm_increase_pct = 50;
  EXPECT_EQ(Compare(View({75, 75}), View({70, 70}), p).gate, Verdict::kUnchanged);
}

TEST(Compare, DataLossBeyondTheLimit) {
  Policy p;
  RunView n = View({75, 75});
  n.data_lost = 3;
  n.data_lost_counters = {"rank 0: records_dropped_hooks = 3"};
  Comparison c = Compare(View({75, 75}), n, p);
  EXPECT_TRUE(c.data_lost);
  EXPECT_NE(c.data_lost_why.find("records_dropped_hooks = 3"), std::string::npos);
  p.max_data_loss = 3;
  EXPECT_FALSE(Compare(View({75, 75}), n, p).data_lost);
}

TEST(Compare, SummaryJsonIsValidated) {
  EXPECT_FALSE(RunViewFromSummary(nlohmann::json::parse(R"({"traceEvents": []})"), "t").ok());
  EXPECT_EQ(RunViewFromSummary(nlohmann::json::parse(R"({"schema": "overlapprof.summary/9", "ranks": []})"), "t")
                .status()
                .code(),
            StatusCode::kUnsupportedVersion);
  auto v = RunViewFromSummary(nlohmann::json::parse(R"({"schema": "overlapprof.summary/1", "ranks": [
      {"rank": 0, "comm_ns": 10, "compute_ns": 20, "overlap_ns": 5, "exposed_comm_ns": 5, "iterations": 2,
       "data_quality": [{"counter": "records_dropped_cupti", "severity": "error", "value": 4}]}],
      "iterations": [{"overlap_ratio": 0.5, "exposed_comm_ns": 5, "comm_ns": 5, "compute_ns": 10, "wall_ns": 20},
                     {"overlap_ratio": null, "exposed_comm_ns": 0, "comm_ns": 5, "compute_ns": 10, "wall_ns": 20}]})"),
                              "t");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->iter_overlap_ratio.size(), 1u);  // null ratios are not samples
  EXPECT_EQ(v->data_lost, 4);
}

// A malformed baseline (issue 14 §4) or NEW run (§3) is refused, never read as zeros: each
// mutation of a valid summary below must fail with kInvalidInput naming the field.
TEST(Compare, MalformedSummariesAreRefusedNotReadAsZero) {
  const nlohmann::json good = nlohmann::json::parse(R"({"schema": "overlapprof.summary/1", "ranks": [
      {"rank": 0, "comm_ns": 10, "compute_ns": 20, "overlap_ns": 5, "exposed_comm_ns": 5, "iterations": 1,
       "data_quality": [{"counter": "records_dropped_cupti", "severity": "error", "value": 4},
                        {"counter": "rank_unknown", "severity": "warning", "value": 1}]}],
      "iterations": [{"overlap_ratio": 0.5, "exposed_comm_ns": 5, "comm_ns": 10, "compute_ns": 20, "wall_ns": 40}],
      "op_types": [{"op": "allreduce", "count": 3, "bytes": null, "time_ns": 10, "exposed_ns": 5}],
      "data_quality": {"errors": 1, "warnings": 1}})");
  auto ok = RunViewFromSummary(good, "t");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->data_lost, 4);
  EXPECT_EQ(ok->op_count_bytes.at("allreduce"), std::make_pair(int64_t{3}, int64_t{-1}));
  struct Case {
    const char* pointer;
    nlohmann::json value;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"/ranks/0/comm_ns", "10", "ranks[0].comm_ns is a string"},
      {"/ranks/0/overlap_ns", nullptr, "ranks[0].overlap_ns is null"},
      {"/ranks/0/compute_ns", 2.5, "ranks[0].compute_ns is a fraction"},
      {"/ranks/0/iterations", true, "ranks[0].iterations is a boolean"},
      {"/ranks/0/exposed_comm_ns", -5, "ranks[0].exposed_comm_ns is negative"},
      {"/ranks/0/comm_ns", 18446744073709551615ull, "ranks[0].comm_ns is negative or too large"},
      // §3: an error counter cancelled by a negative one must not read as "no loss".
      {"/ranks/0/data_quality/1", nlohmann::json{{"counter", "x"}, {"severity", "error"}, {"value", -4}},
       "data_quality[1].value is negative"},
      {"/ranks/0/data_quality", nullptr, "ranks[0].data_quality is not an array"},
      {"/iterations/0/wall_ns", "40", "iterations[0].wall_ns is a string"},
      {"/iterations/0/overlap_ratio", "0.5", "overlap_ratio is not null nor a number"},
      {"/op_types/0/count", nullptr, "op_types[0].count is null"},
      {"/ranks", nlohmann::json::array(), "no ranks"},
      {"/data_quality/errors", 2, "data_quality.errors is 2 but the ranks list 1"},
  };
  for (const Case& c : cases) {
    nlohmann::json bad = good;
    bad[nlohmann::json::json_pointer(c.pointer)] = c.value;
    auto v = RunViewFromSummary(bad, "t");
    ASSERT_FALSE(v.ok()) << c.pointer;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidInput) << c.pointer;
    EXPECT_NE(v.status().message().find(c.expect), std::string::npos) << c.pointer << ": " << v.status().message();
  }
  // A missing key is malformed too.
  nlohmann::json missing = good;
  missing["ranks"][0].erase("comm_ns");
  EXPECT_NE(RunViewFromSummary(missing, "t").status().message().find("ranks[0].comm_ns is missing"), std::string::npos);
  // Sums are overflow-checked: two ranks of INT64_MAX communication.
  nlohmann::json big = good;
  big["ranks"][0]["comm_ns"] = INT64_MAX;
  big["ranks"].push_back(big["ranks"][0]);
  big["data_quality"]["errors"] = 2;
  auto o = RunViewFromSummary(big, "t");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("the sum of comm_ns overflows"), std::string::npos) << o.status().message();
}

// Severities are the tool's own (stats.def), never the summary's: an error-level counter
// relabelled `warning` or `info` is still lost data, and a counter name this overlapprof does not
// know counts as lost data, named as unknown.
TEST(Compare, CounterSeveritiesComeFromTheToolNotTheFile) {
  auto read = [](const std::string& counters, int errors = 0) {
    return ReadSummary(R"({"schema": "overlapprof.summary/1", "ranks": [
      {"rank": 3, "comm_ns": 10, "compute_ns": 20, "overlap_ns": 5, "exposed_comm_ns": 5, "iterations": 1,
       "data_quality": [)" + counters + R"(]}], "data_quality": {"errors": )" + std::to_string(errors) + "}}",
                       "t", nullptr);
  };
  auto relabelled = read(R"({"counter": "records_dropped_cupti", "severity": "warning", "value": 4},
                            {"counter": "records_dropped_hooks", "severity": "info", "value": 2})");
  ASSERT_TRUE(relabelled.ok()) << relabelled.status().message();
  EXPECT_EQ(relabelled->data_lost, 6);
  EXPECT_EQ(relabelled->data_lost_counters,
            (std::vector<std::string>{"rank 3: records_dropped_cupti = 4", "rank 3: records_dropped_hooks = 2"}));
  // A warning-level counter relabelled `error` is no lost data (and cannot make errors count).
  auto promoted = read(R"({"counter": "rank_unknown", "severity": "error", "value": 1})");
  ASSERT_TRUE(promoted.ok()) << promoted.status().message();
  EXPECT_EQ(promoted->data_lost, 0);
  auto unknown = read(R"({"counter": "records_dropped_cuptl", "severity": "info", "value": 7})", 1);
  ASSERT_TRUE(unknown.ok()) << unknown.status().message();
  EXPECT_EQ(unknown->data_lost, 7);
  ASSERT_EQ(unknown->data_lost_counters.size(), 1u);
  EXPECT_NE(unknown->data_lost_counters[0].find("records_dropped_cuptl = 7 (a counter this overlapprof does not know"),
            std::string::npos);
  Policy p;
  RunView base = View({75, 75}), next = View({75, 75});
  next.data_lost = relabelled->data_lost;
  EXPECT_TRUE(Compare(base, next, p).data_lost);
}

// The summary is read in one pass that keeps only what the gate uses: values under keys it does
// not read, at any depth, are skipped, duplicate keys of the objects it reads keep their first
// value (with the key reported), and a key it does not read given twice is no error.
TEST(Compare, ReadSummarySkipsWhatTheGateDoesNotReadAndKeepsTheFirstKey) {
  std::vector<std::string> dups;
  auto v = ReadSummary(R"({"schema": "overlapprof.summary/1", "padding": [0, [1, {"a": [2]}], {"x": 1, "x": 2}],
      "ranks": [{"rank": 0, "comm_ns": 10, "comm_ns": 99, "compute_ns": 20, "overlap_ns": 5, "exposed_comm_ns": 5,
                 "iterations": 1, "notes": {"deep": [[[]]]}, "data_quality": []}],
      "iterations": [{"exposed_comm_ns": 5, "comm_ns": 10, "compute_ns": 20, "wall_ns": 40, "kernels": [1, 2]}],
      "iterations": [{"exposed_comm_ns": 6, "comm_ns": 10, "compute_ns": 20, "wall_ns": 40}]})",
                       "t", &dups);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->comm_ns, 10);
  EXPECT_EQ(v->iter_exposed_ns, std::vector<double>{5});
  EXPECT_EQ(dups, (std::vector<std::string>{"comm_ns", "iterations"}));
  // A list given as something else, or elements of the wrong kind, are named.
  EXPECT_NE(ReadSummary(R"({"schema": "overlapprof.summary/1", "ranks": {"a": 1}})", "t", nullptr)
                .status().message().find("summary without ranks"), std::string::npos);
  EXPECT_NE(ReadSummary(R"({"schema": "overlapprof.summary/1", "ranks": [[1]]})", "t", nullptr)
                .status().message().find("ranks[0] is not an object"), std::string::npos);
  EXPECT_NE(ReadSummary(R"({"schema": "overlapprof.summary/1", "ranks": [{"comm_ns": [1]}]})", "t", nullptr)
                .status().message().find("ranks[0].comm_ns is an array"), std::string::npos);
  EXPECT_NE(ReadSummary(R"({"schema": "overlapprof.summary/1", "ranks": [{"comm_ns": 1,)", "t", nullptr)
                .status().message().find("t: invalid JSON"), std::string::npos);
}

// Linear time and memory in what is kept: a baseline of many iterations (each a few hundred
// bytes the gate mostly does not read) and a huge unread list. (Figures: bench/gate_baseline_bench.py.)
TEST(Compare, ReadSummaryOfManyIterations) {
  std::string text = R"({"schema": "overlapprof.summary/1", "ranks": [)";
  for (int r = 0; r < 64; ++r)
    text += (r ? "," : "") + std::string(R"({"rank": )") + std::to_string(r) +
            R"(, "comm_ns": 10, "compute_ns": 20, "overlap_ns": 5, "exposed_comm_ns": 5, "iterations": 1000, "data_quality": []})";
  text += R"(], "iterations": [)";
  for (int i = 0; i < 64000; ++i)
    text += (i ? "," : "") + std::string(R"({"rank": 0, "index": 1, "overlap_ratio": 0.5, "warmup": false, "comm_ns": 10, )"
                                         R"("compute_ns": 20, "exposed_comm_ns": 5, "wall_ns": 40, "kernels": 62, "memsets": 1})");
  text += R"(], "padding": [)";
  for (int i = 0; i < 1000000; ++i) text += i ? ",0" : "0";
  text += "]}";
  auto v = ReadSummary(text, "t", nullptr);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->ranks, 64);
  EXPECT_EQ(v->iter_wall_ns.size(), 64000u);
  EXPECT_EQ(v->iter_overlap_ratio.size(), 64000u);
}

TEST(Compare, MarkdownEscapesPathsAndNames) {
  RunView b = View({75, 76, 74, 75, 77, 73, 75, 76}), n = View({75, 76, 74, 75, 77, 73, 75, 76});
  b.source = "base|x](http://evil)\n# injected <img src=x>`code`";
  n.source = "new*bold*";
  n.op_time_exposed_ns["a|b"] = {1, 1};
  const std::string md = RenderComparisonMarkdown(Compare(b, n, Policy{}), b, n, "check");
  EXPECT_EQ(md.find("\n# injected"), std::string::npos) << md;
  EXPECT_NE(md.find("base\\|x\\]\\(http://evil\\) # injected \\<img src=x\\>\\`code\\`"), std::string::npos) << md;
  EXPECT_NE(md.find("new\\*bold\\*"), std::string::npos) << md;
  EXPECT_NE(md.find("| exposed_a\\|b_per_iter (ms) |"), std::string::npos) << md;
  // Every table row has the header's 8 cell separators.
  std::istringstream lines(md);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| ", 0) != 0) continue;
    size_t bars = 0;
    for (size_t i = 0; i < line.size(); ++i) bars += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    EXPECT_EQ(bars, 8u) << line;
  }
}

}  // namespace
}  // namespace overlapprof
