// The CI gate's inputs (src/cli/summary_input.h): a JSON summary read back into a RunView.
#include "src/cli/summary_input.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "compare_util.h"
#include "reports/what_if_report.h"

namespace overlapprof {
namespace {

using testing::View;

namespace fs = std::filesystem;

// Every figure of a read, or its error, as text: two reads are the same when these are equal.
std::string Describe(StatusOr<RunView> r) {
  if (!r.ok()) return "error: " + r.status().message();
  const RunView& v = *r;
  std::string ops;
  for (const auto& [op, te] : v.op_time_exposed_ns) ops += fmt::format("{}:{}/{} ", op, te.first, te.second);
  for (const auto& [op, cb] : v.op_count_bytes) ops += fmt::format("{}:{}x{} ", op, cb.first, cb.second);
  return fmt::format("{} {} {} {} {} {} {} {} | {} | {} | {} | {} | {} | {} | {} | {} {} {} | {} | {} {} {}", v.ranks, v.comm_ns,
                     v.compute_ns, v.overlap_ns, v.exposed_comm_ns, v.iterations, v.warmup_iterations, v.world_size,
                     ops, fmt::join(v.iter_overlap_ratio, ","), fmt::join(v.iter_exposed_ns, ","),
                     fmt::join(v.iter_comm_ns, ","), fmt::join(v.iter_compute_ns, ","), fmt::join(v.iter_wall_ns, ","),
                     fmt::join(v.rank_ids, ","), v.marked_iterations, v.data_lost, fmt::join(v.data_lost_counters, ";"),
                     v.source, v.what_if_ranks, v.what_if_median_error_pct, v.what_if_max_error_pct);
}

// The objects that hold the last segment of `path` ("ranks[].data_quality[].value"): every
// element of each "[]" list on the way.
void Parents(nlohmann::json& j, const std::vector<std::string>& segs, size_t i, std::vector<nlohmann::json*>& out) {
  if (i + 1 == segs.size()) {
    if (j.is_object()) out.push_back(&j);
    return;
  }
  const bool list = segs[i].size() > 2 && segs[i].compare(segs[i].size() - 2, 2, "[]") == 0;
  const std::string key = list ? segs[i].substr(0, segs[i].size() - 2) : segs[i];
  if (!j.is_object() || !j.contains(key)) return;
  nlohmann::json& v = j[key];
  if (!list) return Parents(v, segs, i + 1, out);
  if (v.is_array())
    for (nlohmann::json& e : v) Parents(e, segs, i + 1, out);
}

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> segs;
  for (size_t b = 0;;) {
    const size_t e = path.find('.', b);
    segs.push_back(path.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) return segs;
    b = e + 1;
  }
}

// Another value of the same kind, one the reader must notice: a number moved, a boolean
// flipped, a string changed, null made 0.
nlohmann::json Changed(const nlohmann::json& v) {
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_number_integer()) return v.get<int64_t>() + 7;
  if (v.is_number()) return v.get<double>() > 0.5 ? v.get<double>() - 0.25 : v.get<double>() + 0.25;
  if (v.is_string()) return v.get<std::string>() + "x";
  if (v.is_null()) return 0;
  return nullptr;
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

// A malformed baseline or NEW run is refused, never read as zeros: each
// mutation of a valid summary below must fail with kInvalidInput naming the field.
TEST(Compare, MalformedSummariesAreRefusedNotReadAsZero) {
  const nlohmann::json good = nlohmann::json::parse(R"({"schema": "overlapprof.summary/1", "ranks": [
      {"rank": 0, "comm_ns": 10, "compute_ns": 20, "overlap_ns": 5, "exposed_comm_ns": 5, "iterations": 1,
       "data_quality": [{"counter": "records_dropped_cupti", "severity": "error", "value": 4},
                        {"counter": "rank_unknown", "severity": "warning", "value": 1}]}],
      "iterations": [{"overlap_ratio": 0.5, "exposed_comm_ns": 5, "comm_ns": 10, "compute_ns": 20, "wall_ns": 40}],
      "op_types": [{"op": "allreduce", "count": 3, "bytes": null, "time_ns": 10, "exposed_ns": 5}],
      "data_quality": {"errors": 1, "warnings": 1},
      "what_if": {"replay": [{"rank": 0, "iterations": 2, "median_error_pct": 0.5, "max_error_pct": 1.5}]}})");
  auto ok = RunViewFromSummary(good, "t");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->data_lost, 4);
  EXPECT_EQ(ok->what_if_ranks, 1);
  EXPECT_DOUBLE_EQ(ok->what_if_max_error_pct, 1.5);
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
      // An error counter cancelled by a negative one must not read as "no loss".
      {"/ranks/0/data_quality/1", nlohmann::json{{"counter", "x"}, {"severity", "error"}, {"value", -4}},
       "data_quality[1].value is negative"},
      {"/ranks/0/data_quality", nullptr, "ranks[0].data_quality is not an array"},
      {"/iterations/0/wall_ns", "40", "iterations[0].wall_ns is a string"},
      {"/iterations/0/overlap_ratio", "0.5", "overlap_ratio is not null nor a number"},
      {"/op_types/0/count", nullptr, "op_types[0].count is null"},
      {"/ranks", nlohmann::json::array(), "no ranks"},
      {"/data_quality/errors", 2, "data_quality.errors is 2 but the ranks list 1"},
      {"/what_if/replay/0/median_error_pct", "0.5", "what_if.replay[0].median_error_pct is not a number >= 0"},
      {"/what_if/replay/0/max_error_pct", -1, "what_if.replay[0].max_error_pct is not a number >= 0"},
      {"/what_if/replay/0/iterations", 1.5, "what_if.replay[0].iterations is a fraction"},
      {"/what_if/replay", 5, "what_if.replay is not an array"},
      {"/what_if", 3, "what_if is not an object"},
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

// The writer (reports/json_summary.cc, whose output golden_test.cc holds byte for byte to
// tests/golden) and the reader spell the summary's keys apart. Over every golden summary: each
// key the gate reads (SummaryKeysRead) is present in every object of its kind the writer emitted,
// and changing or dropping that key in some golden changes what ReadSummary returns. A key renamed in the writer but not in the
// reader, or read under a misspelt name, fails here.
TEST(SummaryInput, EveryKeyTheGateReadsIsOneTheWriterEmitsAndIsReadBack) {
  std::vector<std::pair<std::string, nlohmann::json>> goldens;
  for (const auto& entry : fs::directory_iterator(OVERLAPPROF_GOLDEN_DIR)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 13 || name.compare(name.size() - 13, 13, ".summary.json") != 0) continue;
    std::ifstream f(entry.path());
    goldens.emplace_back(name, nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(f), {})));
  }
  ASSERT_GE(goldens.size(), 10u);
  {
    // The what_if section is written only with --what-if, which no golden uses: a golden with the
    // section as the writer (WhatIfJson) emits it, two modeled ranks and one not.
    WhatIfResult w;
    for (int r = 0; r < 3; ++r) {
      WhatIfReplayRank row;
      row.rank = r;
      row.iterations = r == 2 ? 0 : 4;
      row.median_error_pct = 0.5 + r;
      row.max_error_pct = 2.25 + r;
      if (r == 2) row.why_not = "fewer than two consecutive steady iterations";
      w.replay.push_back(row);
    }
    nlohmann::json with = goldens.front().second;
    with["what_if"] = nlohmann::json::parse(WhatIfJson(w).dump());
    StatusOr<RunView> read = RunViewFromSummary(with, "with_what_if");
    ASSERT_TRUE(read.ok()) << read.status().message();
    const RunView& v = *read;
    EXPECT_EQ(v.what_if_ranks, 2);
    EXPECT_DOUBLE_EQ(v.what_if_median_error_pct, 1.0);
    EXPECT_DOUBLE_EQ(v.what_if_max_error_pct, 3.25);
    StatusOr<RunView> plain = RunViewFromSummary(goldens.front().second, "x");
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(plain->what_if_ranks, -1);
    goldens.emplace_back("with_what_if", std::move(with));
  }
  const std::vector<std::string> keys = SummaryKeysRead();
  ASSERT_GE(keys.size(), 25u);
  std::set<std::string> noticed;  // keys whose change some golden's read noticed
  for (auto& [name, golden] : goldens) {
    const std::string as_written = Describe(RunViewFromSummary(golden, name));
    ASSERT_EQ(as_written.rfind("error", 0), std::string::npos) << name << ": " << as_written;
    for (const std::string& key : keys) {
      const std::vector<std::string> segs = Split(key);
      const std::string leaf = segs.back();
      std::vector<nlohmann::json*> holders;
      Parents(golden, segs, 0, holders);
      // what_if is written only with --what-if (no golden): its keys are checked where it is present.
      if (key != "what_if")
        for (nlohmann::json* h : holders) EXPECT_TRUE(h->contains(leaf)) << name << ": the writer did not emit " << key;
      // Changed (a scalar) or dropped (a list, or a scalar whose change the read may rightly
      // ignore, as a counter's severity: stats.def decides).
      for (const bool drop : {false, true}) {
        nlohmann::json changed = golden;
        holders.clear();
        Parents(changed, segs, 0, holders);
        bool any = false;
        for (nlohmann::json* h : holders) {
          if (!h->contains(leaf)) continue;
          nlohmann::json& v = (*h)[leaf];
          if (drop || v.is_array() || v.is_object())
            h->erase(leaf);
          else
            v = Changed(v);
          any = true;
        }
        if (any && Describe(RunViewFromSummary(changed, name)) != as_written) noticed.insert(key);
      }
    }
  }
  for (const std::string& key : keys) {
    if (key == "data_quality") continue;  // an object: its key "errors" is what is read
    EXPECT_TRUE(noticed.count(key)) << "changing " << key << " in every golden summary nor dropping it, changed nothing ReadSummary returns";
  }
}

// The other direction: in the objects the gate reads (the document, its data_quality, and the
// elements of ranks, ranks[].data_quality, iterations and op_types), every key the writer emits in
// a golden summary is either read back (SummaryKeysRead) or listed here as not needed by the gate.
// A key added to one of those objects fails here until it is read or listed; an entry no golden
// holds any more fails too, so the list stays the writer's.
TEST(SummaryInput, EveryKeyTheWriterEmitsWhereTheGateReadsIsReadOrListedAsNotNeeded) {
  const std::set<std::string> not_for_the_gate = {
      // Sections of other analyzers: the gate compares the figures above them.
      "bucket_stalls", "buckets", "clock_offsets", "collectives", "collectives_summary", "cross_rank", "findings",
      "fsdp", "fsdp_allgathers", "interference", "point_to_point", "step_breakdown", "stragglers", "tool", "tp",
      "verdict",
      "data_quality.warnings",
      // A rank's description and the figures the gate derives from others (wall per iteration,
      // the overlap ratio from its sums).
      "ranks[].achievable_ratio", "ranks[].busy_ns", "ranks[].comm_kernels", "ranks[].comm_ops", "ranks[].comm_rules",
      "ranks[].device", "ranks[].end_ns", "ranks[].format", "ranks[].host", "ranks[].idle_ns",
      "ranks[].iteration_spread", "ranks[].kernels", "ranks[].memcpys", "ranks[].memory_ns", "ranks[].memsets",
      "ranks[].nccl_profiler_ops", "ranks[].notices", "ranks[].overlap_ratio", "ranks[].overlap_ratio_reason",
      "ranks[].source", "ranks[].start_ns", "ranks[].streams", "ranks[].timing_source", "ranks[].verdict",
      "ranks[].wall_ns", "ranks[].warmup_iterations", "ranks[].data_quality[].description",
      // An iteration's position and the figures the gate does not test.
      "iterations[].achievable_ratio", "iterations[].busy_ns", "iterations[].comm_kernels", "iterations[].comm_ops",
      "iterations[].end_ns", "iterations[].idle_ns", "iterations[].index", "iterations[].kernels",
      "iterations[].memcpys", "iterations[].memory_ns", "iterations[].memsets", "iterations[].overlap_ns",
      "iterations[].overlap_ratio_reason", "iterations[].rank", "iterations[].start_ns", "iterations[].step",
      // Per-rank rows and bandwidths; the gate sums time, exposed time, count and bytes.
      "op_types[].algbw_GBps", "op_types[].busbw_GBps", "op_types[].exposed_fraction", "op_types[].ops_under_1MiB",
      "op_types[].rank"};
  // Keys emitted only for inputs no golden summary is made from (so the check below that each
  // entry is in some golden skips them): the recorder's environment, stores written by
  // `overlapprof run` (tests/e2e/injector_test.py checks the writer emits it).
  const std::set<std::string> not_for_the_gate_no_golden = {"ranks[].overlap_env"};
  const std::vector<std::string> read = SummaryKeysRead();
  const std::set<std::string> read_set(read.begin(), read.end());
  std::set<std::string> seen;
  size_t goldens = 0;
  for (const auto& entry : fs::directory_iterator(OVERLAPPROF_GOLDEN_DIR)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 13 || name.compare(name.size() - 13, 13, ".summary.json") != 0) continue;
    ++goldens;
    std::ifstream f(entry.path());
    const nlohmann::json j = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(f), {}));
    auto check = [&](const nlohmann::json& object, const std::string& prefix) {
      if (!object.is_object()) return;
      for (const auto& [key, value] : object.items()) {
        const std::string path = prefix + key;
        seen.insert(path);
        EXPECT_TRUE(read_set.count(path) || not_for_the_gate.count(path) || not_for_the_gate_no_golden.count(path))
            << name << ": the writer emits " << path << ", which the gate neither reads nor lists as not needed";
      }
    };
    auto each = [&](const nlohmann::json& list, const std::string& prefix) {
      if (list.is_array())
        for (const nlohmann::json& e : list) check(e, prefix);
    };
    check(j, "");
    if (j.contains("data_quality")) check(j["data_quality"], "data_quality.");
    if (j.contains("ranks")) {
      each(j["ranks"], "ranks[].");
      for (const nlohmann::json& r : j["ranks"])
        if (r.contains("data_quality")) each(r["data_quality"], "ranks[].data_quality[].");
    }
    if (j.contains("iterations")) each(j["iterations"], "iterations[].");
    if (j.contains("op_types")) each(j["op_types"], "op_types[].");
  }
  ASSERT_GE(goldens, 10u);
  for (const std::string& k : not_for_the_gate) EXPECT_TRUE(seen.count(k)) << k << " is in no golden summary any more";
}

}  // namespace
}  // namespace overlapprof
