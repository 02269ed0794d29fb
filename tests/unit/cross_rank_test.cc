// The cross-rank analyzer on synthetic multi-rank traces with exact known answers, through the
// real Kineto importer and the overlap analyzer that runs before it.
#include "analyzers/cross_rank.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyzers/overlap.h"
#include "reports/report.h"
#include "src/cli/pipeline.h"
#include "src/cli/registry.h"
#include "test_util.h"

namespace overlapprof {

std::unique_ptr<Analyzer> MakeOverlapAnalyzer();  // analyzers/overlap.cc

namespace {

using Json = nlohmann::ordered_json;
using testing::Ev;

constexpr int64_t kBase = 1000000000000000;  // ns; traces hold µs text near 1e12 µs
constexpr int64_t kUs = 1000;

// Kineto "ts"/"dur" text for a time in ns (relative to kBase for ts).
std::string Ts(int64_t ns) {
  const int64_t t = kBase + ns;
  return fmt::format("{}.{:03}", t / 1000, t % 1000);
}
std::string Dur(int64_t ns) { return fmt::format("{}.{:03}", ns / 1000, ns % 1000); }

struct Coll {
  int64_t start, end;   // ns after kBase, on this rank's clock
  int64_t seq = -1;     // -1: no "Seq" argument
  bool meta = true;     // NCCL metadata in the kernel args (else the kernel name only)
  std::string op = "allreduce";
  int64_t nelems = 1024;
  std::string pg = "0";
};

Ev CollEv(const Coll& c, int world) {
  std::string kernel = c.op == "allgather" ? "ncclDevKernel_AllGather_RING_LL" : "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  std::string args;
  if (c.meta) {
    args = fmt::format(R"(, "Collective name": "{}", "In msg nelems": {}, "Out msg nelems": {}, "Group size": {},
                          "dtype": "Float", "Process Group Name": "{}", "Process Group Description": "default_pg")",
                       c.op, c.nelems, c.nelems, world, c.pg);
    if (c.seq >= 0) args += fmt::format(R"(, "Seq": {})", c.seq);
  }
  return {"kernel", kernel, Ts(c.start), Dur(c.end - c.start), 20, -1, args};
}

Ev Compute(int64_t start, int64_t end) { return {"kernel", "gemm", Ts(start), Dur(end - start), 7}; }
Ev Step(int64_t n, int64_t start, int64_t end) {
  return {"user_annotation", fmt::format("ProfilerStep#{}", n), Ts(start), Dur(end - start)};
}

std::string RankJson(int rank, int world, const std::string& host, const std::vector<Ev>& evs) {
  std::string top = fmt::format(R"("distributedInfo": {{"backend": "nccl", "rank": {}, "world_size": {}}},)", rank, world);
  if (!host.empty()) top += fmt::format(R"("hostname": "{}",)", host);
  return testing::KinetoJson(evs, top);
}

std::vector<Ev> Colls(const std::vector<Coll>& cs, int world, std::vector<Ev> more = {}) {
  for (const Coll& c : cs) more.push_back(CollEv(c, world));
  return more;
}

// The summary of a run and its JSON rendering (what these tests check: the sections the JSON
// summary gets from Summary::cross_rank and the findings).
struct Analyzed {
  Summary summary;
  Json json;
};

// Runs the overlap and cross-rank analyzers over the traces, as the pipeline does.
Analyzed Analyze(const std::vector<std::string>& jsons) {
  Summary s;
  auto overlap = MakeOverlapAnalyzer();
  auto xr = MakeCrossRankAnalyzer();
  AnalysisOptions opts;
  for (size_t i = 0; i < jsons.size(); ++i) {
    StatusOr<RankTrace> t = testing::ParseJsonText(jsons[i]);
    EXPECT_TRUE(t.ok()) << t.status().message();
    if (!t.ok()) continue;
    EXPECT_TRUE(overlap->AnalyzeRank(*t, i, opts, s).ok());
    EXPECT_TRUE(xr->AnalyzeRank(*t, i, opts, s).ok());
  }
  EXPECT_TRUE(overlap->Finish(opts, s).ok());
  EXPECT_TRUE(xr->Finish(opts, s).ok());
  Json json = SummaryToJson(s);
  return {std::move(s), std::move(json)};
}

const Json& PerRank(const Analyzed& s, int64_t rank) {
  for (const Json& r : s.json["cross_rank"])
    if (r["rank"] == rank) return r;
  static const Json none;
  ADD_FAILURE() << "no cross_rank entry for rank " << rank;
  return none;
}

std::vector<std::string> Findings(const Analyzed& s) {
  std::vector<std::string> out;
  if (!s.json.contains("findings")) return out;
  for (const Json& f : s.json["findings"])
    if (f["analyzer"] == "cross_rank") out.push_back(f["message"].get<std::string>());
  return out;
}

bool AnyContains(const std::vector<std::string>& v, const std::string& needle) {
  for (const std::string& x : v)
    if (x.find(needle) != std::string::npos) return true;
  return false;
}

// Three ranks on one host. seq 1: ranks start at 100, 150, 250 µs and all end at 400 µs;
// seq 2: all at once. seq 0 only on rank 0 (its profile started earlier): unmatched.
TEST(CrossRank, SkewWaitTransferExactBySeq) {
  const int w = 3;
  Analyzed s = Analyze({
      RankJson(0, w, "h", Colls({{10 * kUs, 20 * kUs, 0}, {100 * kUs, 400 * kUs, 1}, {1000 * kUs, 1100 * kUs, 2}}, w)),
      RankJson(1, w, "h", Colls({{150 * kUs, 400 * kUs, 1}, {1000 * kUs, 1100 * kUs, 2}}, w)),
      RankJson(2, w, "h", Colls({{250 * kUs, 400 * kUs, 1}, {1000 * kUs, 1100 * kUs, 2}}, w)),
  });
  const Json& cs = s.json["collectives_summary"];
  EXPECT_EQ(cs["matched"], 2);
  EXPECT_EQ(cs["unmatched"], 1);
  EXPECT_EQ(cs["notices"], Json::array({"1 ops were not matched: their key (seq, step and ordinal, or ordinal) is on one "
                                         "rank only although other ranks share the communicator (profiling windows or "
                                         "op sequences that differ across ranks)"}));
  EXPECT_EQ(cs["mismatched"], 0);
  EXPECT_EQ(cs["matched_by"]["seq"], 2);
  EXPECT_EQ(cs["skew_ns"]["max"], 150 * kUs);
  EXPECT_EQ(cs["straggler_threshold_ns"], kStragglerSkewNs);

  const Json& cols = s.json["collectives"];
  ASSERT_EQ(cols.size(), 2u);
  const Json& c = cols[0];
  EXPECT_EQ(c["communicator"], "0");
  EXPECT_EQ(c["seq"], 1);
  EXPECT_EQ(c["key"], "seq:1");
  EXPECT_EQ(c["op"], "allreduce");
  EXPECT_EQ(c["bytes"], 4096);
  EXPECT_EQ(c["ranks"], 3);
  EXPECT_EQ(c["start_ns"], kBase + 100 * kUs);
  EXPECT_EQ(c["skew_ns"], 150 * kUs);
  EXPECT_EQ(c["last_rank"], 2);
  EXPECT_EQ(c["wait_ns"], (Json{{"0", 150 * kUs}, {"1", 100 * kUs}, {"2", 0}}));
  EXPECT_EQ(c["transfer_ns"], (Json{{"0", 150 * kUs}, {"1", 150 * kUs}, {"2", 150 * kUs}}));
  EXPECT_EQ(cols[1]["skew_ns"], 0);
  EXPECT_EQ(cols[1]["wait_ns"]["0"], 0);
  EXPECT_EQ(cols[1]["transfer_ns"]["1"], 100 * kUs);

  EXPECT_EQ(PerRank(s, 0)["wait_ns"], 150 * kUs);
  EXPECT_EQ(PerRank(s, 0)["transfer_ns"], 250 * kUs);
  EXPECT_EQ(PerRank(s, 0)["collectives"], 2);
  // No compute at all: every ns of waiting is exposed.
  EXPECT_EQ(PerRank(s, 0)["exposed_wait_ns"], 150 * kUs);
  EXPECT_EQ(PerRank(s, 1)["exposed_wait_ns"], 100 * kUs);
  EXPECT_EQ(PerRank(s, 2)["exposed_wait_ns"], 0);

  // Stragglers: only seq 1 has skew above the threshold; rank 2 was last there.
  const Json& st = s.json["stragglers"];
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[0]["rank"], 2);
  EXPECT_EQ(st[0]["last_arrivals"], 1);
  EXPECT_EQ(st[0]["collectives_counted"], 1);
  EXPECT_EQ(st[0]["last_fraction"], 1.0);
  EXPECT_EQ(st[0]["others_wait_ns"], 250 * kUs);
  EXPECT_EQ(st[0]["mean_lateness_ns"], 100 * kUs);  // 250 - 150
  EXPECT_EQ(st[1]["last_arrivals"], 0);
  EXPECT_TRUE(st[1]["mean_lateness_ns"].is_null());

  // One host: one clock domain, nothing applied.
  const Json& clk = s.json["clock_offsets"];
  ASSERT_EQ(clk.size(), 1u);
  EXPECT_EQ(clk[0]["domain"], "h");
  EXPECT_EQ(clk[0]["ranks"], (Json{0, 1, 2}));
  EXPECT_EQ(clk[0]["applied"], false);
  std::vector<std::string> f = Findings(s);
  EXPECT_TRUE(AnyContains(f, "of rank 0's 410.0 µs exposed communication, 150.0 µs is waiting for other ranks"))
      << ::testing::PrintToString(f);
}

// Rank 0's op [100, 300) µs; compute [50, 150) and [200, 220); rank 1 arrives at 250.
// Waiting [100, 250): uncovered [150, 200) and [220, 250) = 80 µs.
TEST(CrossRank, ExposedWaitWithPartialComputeOverlap) {
  const int w = 2;
  Analyzed s = Analyze({
      RankJson(0, w, "h", Colls({{100 * kUs, 300 * kUs, 7}}, w, {Compute(50 * kUs, 150 * kUs), Compute(200 * kUs, 220 * kUs)})),
      RankJson(1, w, "h", Colls({{250 * kUs, 300 * kUs, 7}}, w)),
  });
  const Json& c = s.json["collectives"][0];
  EXPECT_EQ(c["skew_ns"], 150 * kUs);
  EXPECT_EQ(c["wait_ns"]["0"], 150 * kUs);
  EXPECT_EQ(c["transfer_ns"]["0"], 50 * kUs);
  EXPECT_EQ(c["transfer_ns"]["1"], 50 * kUs);
  EXPECT_EQ(PerRank(s, 0)["exposed_wait_ns"], 80 * kUs);
  EXPECT_EQ(PerRank(s, 0)["exposed_comm_ns"], 130 * kUs);  // [150,200) + [220,300)
  EXPECT_EQ(PerRank(s, 1)["exposed_wait_ns"], 0);
}

// Seven gaps (more than kept per op): when the whole op is waiting, the total stays exact; the
// merges here keep the first gap as it is, so a wait ending in it is exact too.
TEST(CrossRank, ExposedWaitStaysExactOverManyGaps) {
  const int w = 2;
  std::vector<Ev> compute;
  for (int i = 1; i <= 6; ++i) compute.push_back(Compute(i * 100 * kUs, (i * 100 + 10) * kUs));
  for (int i = 1; i <= 6; ++i) compute.push_back(Compute((4000 + i * 100) * kUs, (4000 + i * 100 + 10) * kUs));
  Analyzed s = Analyze({
      RankJson(0, w, "h", Colls({{0, 1000 * kUs, 1}, {2000 * kUs, 3000 * kUs, 2}, {4000 * kUs, 5000 * kUs, 3}}, w, compute)),
      RankJson(1, w, "h", Colls({{1000 * kUs, 1001 * kUs, 1}, {2000 * kUs, 3000 * kUs, 2}, {4050 * kUs, 5000 * kUs, 3}}, w)),
  });
  // seq 1: rank 0 waits its whole op (1000 µs, 60 of them under compute): 940 exposed.
  const Json& cols = s.json["collectives"];
  EXPECT_EQ(cols[0]["wait_ns"]["0"], 1000 * kUs);
  EXPECT_EQ(cols[0]["transfer_ns"]["0"], 0);
  // seq 3: waiting [4000, 4050), all in the first gap [4000, 4100).
  EXPECT_EQ(cols[2]["wait_ns"]["0"], 50 * kUs);
  EXPECT_EQ(PerRank(s, 0)["exposed_wait_ns"], (940 + 50) * kUs);
  EXPECT_EQ(s.json["collectives_summary"]["ends_before_last_arrival"], 0);
}

// Four ranks, ten collectives with skew above the threshold: rank 3 is last in eight (100 µs
// late), rank 1 in two (50 µs late); one more with a 10 µs skew does not count.
TEST(CrossRank, StragglerCounts) {
  const int w = 4;
  std::vector<std::vector<Coll>> per(w);
  for (int k = 0; k < 11; ++k) {
    const int64_t t0 = k * 1000 * kUs;
    for (int r = 0; r < w; ++r) {
      int64_t start = t0;
      if (k < 8 && r == 3) start += 100 * kUs;
      if (k >= 8 && k < 10 && r == 1) start += 50 * kUs;
      if (k == 10 && r == 2) start += 10 * kUs;
      per[r].push_back({start, t0 + 500 * kUs, k});
    }
  }
  std::vector<std::string> jsons;
  for (int r = 0; r < w; ++r) jsons.push_back(RankJson(r, w, "h", Colls(per[r], w)));
  Analyzed s = Analyze(jsons);
  const Json& st = s.json["stragglers"];
  ASSERT_EQ(st.size(), 4u);
  EXPECT_EQ(st[0]["rank"], 3);
  EXPECT_EQ(st[0]["last_arrivals"], 8);
  EXPECT_EQ(st[0]["collectives_counted"], 10);
  EXPECT_DOUBLE_EQ(st[0]["last_fraction"].get<double>(), 0.8);
  EXPECT_EQ(st[0]["others_wait_ns"], 8 * 3 * 100 * kUs);
  EXPECT_EQ(st[0]["mean_lateness_ns"], 100 * kUs);
  EXPECT_EQ(st[1]["rank"], 1);
  EXPECT_EQ(st[1]["last_arrivals"], 2);
  EXPECT_EQ(st[1]["others_wait_ns"], 2 * 3 * 50 * kUs);
  EXPECT_EQ(st[2]["last_arrivals"], 0);
  EXPECT_EQ(s.json["collectives"][10]["last_rank"], 2);  // listed, but not counted
  std::vector<std::string> f = Findings(s);
  EXPECT_TRUE(AnyContains(f, "rank 3 arrived last at 80.0% of 10 collectives; the other ranks lost 2.40 ms waiting for it"))
      << ::testing::PrintToString(f);
  bool warning = false;
  for (const Json& x : s.json["findings"])
    if (x["analyzer"] == "cross_rank" && x["rank"] == 3) warning = x["severity"] == "warning";
  EXPECT_TRUE(warning);
}

// No NCCL metadata: ops match by their order per communicator ("unknown").
TEST(CrossRank, MatchesByOrderWithoutSeqOrSteps) {
  const int w = 2;
  auto ops = [&](int64_t late) {
    std::vector<Coll> v;
    for (int k = 0; k < 3; ++k) v.push_back({k * 1000 * kUs + late, k * 1000 * kUs + 500 * kUs, -1, false});
    return v;
  };
  Analyzed s = Analyze({RankJson(0, w, "h", Colls(ops(0), w)), RankJson(1, w, "h", Colls(ops(30 * kUs), w))});
  const Json& cs = s.json["collectives_summary"];
  EXPECT_EQ(cs["matched"], 3);
  EXPECT_EQ(cs["unmatched"], 0);
  EXPECT_EQ(cs["matched_by"]["ordinal"], 3);
  const Json& cols = s.json["collectives"];
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_EQ(cols[1]["communicator"], "unknown");
  EXPECT_EQ(cols[1]["key"], "ord:1");
  EXPECT_TRUE(cols[1]["seq"].is_null());
  EXPECT_TRUE(cols[1]["bytes"].is_null());
  EXPECT_EQ(cols[1]["skew_ns"], 30 * kUs);
  EXPECT_EQ(cols[1]["last_rank"], 1);
}

// Rank 0 profiled steps 5-7, rank 1 steps 6-8, two ops per step, no Seq: keyed by (step,
// ordinal), steps 6 and 7 match; plain ordinals would have matched rank 0's step 5 with rank
// 1's step 6.
TEST(CrossRank, MatchesByStepAndOrdinalWhenWindowsDiffer) {
  const int w = 2;
  auto rank = [&](int r, int first_step, int64_t late) {
    std::vector<Ev> evs;
    std::vector<Coll> cs;
    for (int st = first_step; st < first_step + 3; ++st) {
      const int64_t t0 = st * 10000 * kUs;
      evs.push_back(Step(st, t0, t0 + 10000 * kUs));
      cs.push_back({t0 + 1000 * kUs + late, t0 + 2000 * kUs});
      cs.push_back({t0 + 3000 * kUs + late, t0 + 4000 * kUs, -1, true, "allreduce", 2048});
    }
    return RankJson(r, w, "h", Colls(cs, w, evs));
  };
  Analyzed s = Analyze({rank(0, 5, 0), rank(1, 6, 40 * kUs)});
  const Json& cs = s.json["collectives_summary"];
  EXPECT_EQ(cs["matched"], 4);
  EXPECT_EQ(cs["unmatched"], 4);
  EXPECT_EQ(cs["mismatched"], 0);
  EXPECT_EQ(cs["matched_by"]["step_ordinal"], 4);
  const Json& cols = s.json["collectives"];
  ASSERT_EQ(cols.size(), 4u);
  EXPECT_EQ(cols[0]["key"], "step:6:0");
  EXPECT_EQ(cols[1]["key"], "step:6:1");
  EXPECT_EQ(cols[1]["bytes"], 8192);
  EXPECT_EQ(cols[3]["key"], "step:7:1");
  for (const Json& c : cols) {
    EXPECT_EQ(c["skew_ns"], 40 * kUs);
    EXPECT_EQ(c["last_rank"], 1);
    EXPECT_EQ(c["wait_ns"]["0"], 40 * kUs);
  }
}

// Hosts a (ranks 0, 1) and b (ranks 2, 3); b's clock reads 3 ms ahead. Ends are simultaneous
// up to ±300 ns; in true time rank 2 is 40 µs late in every collective.
TEST(CrossRank, ClockOffsetOfSecondHostIsEstimatedAndApplied) {
  const int w = 4;
  const int64_t offset = 3000000;
  std::vector<std::vector<Coll>> per(w);
  const int64_t jitter[4] = {0, 300, -300, 100};
  for (int k = 0; k < 8; ++k) {
    const int64_t t0 = 10000 * kUs + k * 1000 * kUs;
    for (int r = 0; r < w; ++r) {
      const int64_t shift = r >= 2 ? offset : 0;
      int64_t start = t0 + (r == 2 ? 40 * kUs : 0) + shift;
      int64_t end = t0 + 500 * kUs + jitter[(r + k) % 4] + shift;
      per[r].push_back({start, end, k});
    }
  }
  std::vector<std::string> jsons;
  for (int r = 0; r < w; ++r) jsons.push_back(RankJson(r, w, r < 2 ? "a" : "b", Colls(per[r], w)));
  Analyzed s = Analyze(jsons);
  const Json& clk = s.json["clock_offsets"];
  ASSERT_EQ(clk.size(), 2u);
  EXPECT_EQ(clk[0]["domain"], "a");
  EXPECT_EQ(clk[0]["reference"], true);
  EXPECT_EQ(clk[1]["domain"], "b");
  EXPECT_EQ(clk[1]["ranks"], (Json{2, 3}));
  EXPECT_EQ(clk[1]["samples"], 8);
  EXPECT_NEAR(clk[1]["offset_ns"].get<int64_t>(), offset, 1000);
  EXPECT_EQ(clk[1]["noise_ns"], kClockNoiseFloorNs);
  EXPECT_EQ(clk[1]["applied"], true);
  // After correction, the true picture: rank 2 is 40 µs late (to the ns: starts carry no jitter
  // and the offset estimate lands on 3 ms exactly here).
  ASSERT_EQ(clk[1]["offset_ns"], offset);
  for (const Json& c : s.json["collectives"]) {
    EXPECT_EQ(c["skew_ns"], 40 * kUs);
    EXPECT_EQ(c["last_rank"], 2);
    EXPECT_EQ(c["wait_ns"]["3"], 40 * kUs);
  }
  EXPECT_TRUE(AnyContains(Findings(s), "the clock of b reads 3.00 ms ahead of that of a"));
}

// An offset below the noise floor is reported and not applied; one without enough shared
// collectives neither.
TEST(CrossRank, SubNoiseOffsetIsNotApplied) {
  const int w = 2;
  auto run = [&](int64_t offset, int n) {
    std::vector<Coll> a, b;
    for (int k = 0; k < n; ++k) {
      const int64_t t0 = 10000 * kUs + k * 1000 * kUs;
      a.push_back({t0, t0 + 500 * kUs, k});
      b.push_back({t0 + 30 * kUs + offset, t0 + 500 * kUs + offset, k});
    }
    return Analyze({RankJson(0, w, "a", Colls(a, w)), RankJson(1, w, "b", Colls(b, w))});
  };
  Analyzed s = run(2000, 8);
  const Json& clk = s.json["clock_offsets"][1];
  EXPECT_EQ(clk["offset_ns"], 2000);
  EXPECT_EQ(clk["noise_ns"], 1000);
  EXPECT_EQ(clk["applied"], false);
  EXPECT_EQ(s.json["collectives"][0]["skew_ns"], 32 * kUs);  // as recorded
  Analyzed few = run(3000000, 4);
  EXPECT_EQ(few.json["clock_offsets"][1]["offset_ns"], 3000000);
  EXPECT_EQ(few.json["clock_offsets"][1]["samples"], 4);
  EXPECT_EQ(few.json["clock_offsets"][1]["applied"], false);
  EXPECT_TRUE(AnyContains(Findings(few), "the clock of b could not be aligned"));
}

TEST(CrossRank, EstimateClockOffsetMedianAndMad) {
  ClockEstimate e = EstimateClockOffset({100000, 100000 - 30000, 100000 + 30000, 100000 - 10000, 100000 + 10000,
                                         100000 - 20000, 100000 + 20000});
  EXPECT_EQ(e.offset_ns, 100000);
  EXPECT_EQ(e.samples, 7);
  EXPECT_EQ(e.noise_ns, 29652);  // 1.4826 * MAD (20000)
  EXPECT_TRUE(e.applied);        // 100000 > 3 * 29652
  ClockEstimate n = EstimateClockOffset({50000, 20000, 80000, 30000, 70000, 40000, 60000});
  EXPECT_EQ(n.offset_ns, 50000);
  EXPECT_FALSE(n.applied);  // 50000 < 3 * 29652
  EXPECT_FALSE(EstimateClockOffset({}).applied);
  // Hostile extremes do not overflow.
  ClockEstimate h = EstimateClockOffset({INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 0});
  EXPECT_EQ(h.offset_ns, 0);
}

// Same key, different op and size on the two ranks: still matched, and counted.
TEST(CrossRank, MismatchedOpOrBytesIsCountedAndStillMatched) {
  const int w = 2;
  Analyzed s = Analyze({RankJson(0, w, "h", Colls({{0, 100 * kUs, 9}}, w)),
                   RankJson(1, w, "h", Colls({{10 * kUs, 100 * kUs, 9, true, "allgather", 4096}}, w))});
  EXPECT_EQ(s.json["collectives_summary"]["matched"], 1);
  EXPECT_EQ(s.json["collectives_summary"]["mismatched"], 1);
  EXPECT_EQ(s.json["collectives"][0]["op"], "allreduce");  // the lowest rank's
  EXPECT_TRUE(AnyContains(Findings(s), "disagree across ranks on op or size"));
}

// A second trace claiming rank 1 and a trace without a rank are left out, with notices.
TEST(CrossRank, DuplicateAndUnknownRanksAreSkippedWithNotices) {
  const int w = 2;
  std::string no_rank = testing::KinetoJson({CollEv({0, 100 * kUs, 1}, w)}, "");
  Analyzed s = Analyze({RankJson(0, w, "h", Colls({{0, 100 * kUs, 1}}, w)),
                   RankJson(1, w, "h", Colls({{20 * kUs, 100 * kUs, 1}}, w)),
                   RankJson(1, w, "h", Colls({{90 * kUs, 100 * kUs, 1}}, w)), no_rank});
  const Json& cs = s.json["collectives_summary"];
  EXPECT_EQ(cs["matched"], 1);
  EXPECT_EQ(cs["ranks"], 2);
  EXPECT_EQ(s.json["collectives"][0]["skew_ns"], 20 * kUs);  // the first rank 1
  std::string notes = cs["notices"].dump();
  EXPECT_NE(notes.find("rank 1 appears in more than one trace"), std::string::npos) << notes;
  EXPECT_NE(notes.find("does not say its rank"), std::string::npos) << notes;
  ASSERT_EQ(s.summary.ranks.size(), 4u);
  EXPECT_TRUE(AnyContains(s.summary.ranks[2].notices, "rank 1 appears in more than one trace"));
}

// Hostile keys: seq near INT64_MAX, a seq repeated on one rank (the first is kept).
TEST(CrossRank, HugeAndRepeatedSeqValues) {
  const int w = 2;
  const int64_t huge = INT64_MAX - 1;
  Analyzed s = Analyze({RankJson(0, w, "h", Colls({{0, 100 * kUs, huge}, {200 * kUs, 300 * kUs, 5}, {400 * kUs, 500 * kUs, 5}}, w)),
                   RankJson(1, w, "h", Colls({{5 * kUs, 100 * kUs, huge}, {210 * kUs, 300 * kUs, 5}}, w))});
  const Json& cs = s.json["collectives_summary"];
  EXPECT_EQ(cs["matched"], 2);
  EXPECT_EQ(cs["duplicate_keys"], 1);
  const Json& cols = s.json["collectives"];
  ASSERT_EQ(cols.size(), 2u);
  EXPECT_EQ(cols[0]["seq"], huge);
  EXPECT_EQ(cols[0]["skew_ns"], 5 * kUs);
  EXPECT_EQ(cols[1]["seq"], 5);
  EXPECT_EQ(cols[1]["skew_ns"], 10 * kUs);
}

// A communicator only one rank has: its ops are unmatched, and the notice names it and the rank.
TEST(CrossRank, UnmatchedOnACommunicatorOfOneRankOnlySaysSo) {
  const int w = 2;
  Coll lone{500 * kUs, 600 * kUs, 1};
  lone.pg = "7";
  Analyzed s = Analyze({RankJson(0, w, "h", Colls({{0, 100 * kUs, 1}, lone}, w)),
                        RankJson(1, w, "h", Colls({{0, 100 * kUs, 1}}, w))});
  const Json& cs = s.json["collectives_summary"];
  EXPECT_EQ(cs["matched"], 1);
  EXPECT_EQ(cs["unmatched"], 1);
  EXPECT_EQ(cs["notices"], Json::array({"1 ops on communicator 7 were not matched: only rank 0 has that communicator "
                                         "(the other members' traces are missing, or name it differently)"}));
}

// One rank: only a short collectives_summary, matched 0.
TEST(CrossRank, SingleRankAddsOnlyASummary) {
  Analyzed s = Analyze({RankJson(0, 2, "h", Colls({{0, 100 * kUs, 1}}, 2))});
  EXPECT_EQ(s.json["collectives_summary"]["matched"], 0);
  EXPECT_EQ(s.json["collectives_summary"]["unmatched"], 1);
  EXPECT_FALSE(s.json.contains("collectives"));
  EXPECT_FALSE(s.json.contains("stragglers"));
  EXPECT_FALSE(s.json.contains("clock_offsets"));
  EXPECT_TRUE(Findings(s).empty());
  // The communicator says 2 ranks and one is present.
  EXPECT_EQ(s.json["collectives_summary"]["partial_communicators"][0]["ranks_present"], 1);
  Analyzed none = Analyze({});
  EXPECT_EQ(none.json["collectives_summary"]["matched"], 0);
}

// More collectives than are listed: the largest skews are kept, in time order.
TEST(CrossRank, ListingIsBoundedToTheLargestSkews) {
  const int w = 2;
  const int n = static_cast<int>(kMaxListedCollectives) + 10;
  std::vector<Coll> a, b;
  for (int k = 0; k < n; ++k) {
    const int64_t t0 = k * 100 * kUs;
    const int64_t skew = ((k * 7919) % n) * 1;  // distinct skews 0..n-1 ns, shuffled
    a.push_back({t0, t0 + 50 * kUs, k});
    b.push_back({t0 + skew, t0 + 50 * kUs, k});
  }
  Analyzed s = Analyze({RankJson(0, w, "h", Colls(a, w)), RankJson(1, w, "h", Colls(b, w))});
  const Json& cs = s.json["collectives_summary"];
  EXPECT_EQ(cs["matched"], n);
  EXPECT_EQ(cs["listed"], kMaxListedCollectives);
  EXPECT_EQ(cs["skew_ns"]["max"], n - 1);
  const Json& cols = s.json["collectives"];
  ASSERT_EQ(cols.size(), kMaxListedCollectives);
  for (size_t i = 0; i < cols.size(); ++i) {
    EXPECT_GE(cols[i]["skew_ns"].get<int64_t>(), 10);  // skews 0..9 were dropped
    if (i > 0) {
      EXPECT_LT(cols[i - 1]["start_ns"].get<int64_t>(), cols[i]["start_ns"].get<int64_t>());
    }
  }
}

// Through the real pipeline and registry: the sections reach the summary.
TEST(CrossRank, RunsInThePipeline) {
  testing::TempDir dir;
  const int w = 2;
  std::string a = dir.Write("rank0.json", RankJson(0, w, "h", Colls({{0, 100 * kUs, 1}, {200 * kUs, 300 * kUs, 2}}, w)));
  std::string b = dir.Write("rank1.json", RankJson(1, w, "h", Colls({{60 * kUs, 100 * kUs, 1}, {200 * kUs, 300 * kUs, 2}}, w)));
  StatusOr<Summary> s = AnalyzeFiles({a, b}, {}, {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE(s->cross_rank.has_value());
  const CrossRankResult& c = *s->cross_rank;
  EXPECT_EQ(c.summary.matched, 2);
  ASSERT_FALSE(c.collectives.empty());
  EXPECT_EQ(c.collectives[0].skew_ns, 60 * kUs);
  ASSERT_FALSE(c.stragglers.empty());
  EXPECT_EQ(c.stragglers[0].rank, 1);
  ASSERT_FALSE(c.ranks.empty());
  EXPECT_EQ(c.ranks[0].wait_ns, 60 * kUs);
}


// Every analyzer, each rank prepared ahead (Analyzer::PrepareRank, as the pipeline does on its
// threads: here all ranks first, last rank first) and then analyzed in input order, gives the
// summary of analyzing rank by rank without preparing: the cross-rank analyzer's interned
// communicators and op names in particular (ranks that meet them in different orders, keys by
// seq and by ordinal, a rank with an unknown id, a duplicated rank).
TEST(CrossRank, PreparedAheadGivesTheSameSummary) {
  const int w = 3;
  auto on = [](Coll c, std::string pg, int64_t seq = -1) {
    c.pg = std::move(pg);
    c.seq = seq;
    return c;
  };
  std::vector<std::string> jsons = {
      RankJson(0, w, "h", Colls({on({0, 100 * kUs}, "1", 1), on({200 * kUs, 300 * kUs}, "0"), on({400 * kUs, 450 * kUs}, "2"),
                                 on({500 * kUs, 510 * kUs}, "9"), on({520 * kUs, 530 * kUs}, "8")},  // rank 0's alone
                                w, {Compute(50 * kUs, 250 * kUs)})),
      RankJson(1, w, "h", Colls({on({10 * kUs, 100 * kUs}, "0"), on({150 * kUs, 300 * kUs}, "1", 1),
                                 on({310 * kUs, 330 * kUs, -1, true, "allgather"}, "0")}, w)),
      RankJson(2, w, "g", Colls({on({0, 90 * kUs}, "2"), on({120 * kUs, 300 * kUs}, "1", 1)}, w, {Compute(0, 200 * kUs)})),
      testing::KinetoJson(Colls({on({0, 100 * kUs}, "0")}, w)),  // no rank id
      RankJson(1, w, "h", Colls({on({20 * kUs, 100 * kUs}, "0")}, w)),  // rank 1 again
  };
  std::vector<RankTrace> traces;
  for (const std::string& j : jsons) {
    StatusOr<RankTrace> t = testing::ParseJsonText(j);
    ASSERT_TRUE(t.ok()) << t.status().message();
    traces.push_back(std::move(*t));
  }
  AnalysisOptions opts;
  auto run = [&](bool prepare) {
    Summary s;
    std::vector<std::unique_ptr<Analyzer>> analyzers = MakeAnalyzers();
    std::vector<std::vector<std::unique_ptr<RankWork>>> work(traces.size());
    if (prepare)
      for (size_t i = traces.size(); i-- > 0;) {
        RankPrep rank{traces[i], i, nullptr};
        for (const auto& a : analyzers) work[i].push_back(a->PrepareRank(rank, opts));
      }
    for (size_t i = 0; i < traces.size(); ++i)
      for (size_t k = 0; k < analyzers.size(); ++k) {
        Status st = prepare ? analyzers[k]->AnalyzeRank(traces[i], i, opts, std::move(work[i][k]), s)
                            : analyzers[k]->AnalyzeRank(traces[i], i, opts, s);
        EXPECT_TRUE(st.ok()) << st.message();
      }
    for (const auto& a : analyzers) EXPECT_TRUE(a->Finish(opts, s).ok());
    return SummaryToJson(s).dump(1);
  };
  const std::string plain = run(false), prepared = run(true);
  EXPECT_EQ(prepared, plain);
  EXPECT_NE(plain.find("\"matched\": 3,"), std::string::npos) << plain;
  EXPECT_NE(plain.find("rank 1 appears in more than one trace"), std::string::npos) << plain;
  // Notices per communicator come in the order the run met them (interned ids).
  EXPECT_LT(plain.find("on communicator 9"), plain.find("on communicator 8")) << plain;
}

}  // namespace
}  // namespace overlapprof
