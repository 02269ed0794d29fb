// The cross-rank analyzer's parts, each on hand-built records (tests/unit/cross_rank_test.cc runs
// the whole analyzer on Kineto traces): matching (cross_rank_match), clock domains and offsets
// (cross_rank_clocks), per-collective figures (cross_rank_figures) and stragglers
// (cross_rank_stragglers); and how the typed result reaches the JSON summary.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analyzers/cross_rank_clocks.h"
#include "analyzers/cross_rank_figures.h"
#include "analyzers/cross_rank_match.h"
#include "analyzers/cross_rank_p2p.h"
#include "analyzers/cross_rank_stragglers.h"
#include "analyzers/summary.h"
#include "reports/report.h"

namespace overlapprof::cross_rank {
namespace {

using Json = nlohmann::ordered_json;

// An op keyed by sequence number on communicator 0, entirely uncovered by compute.
OpRecord Rec(int64_t seq, int64_t start, int64_t end, Collective op = Collective::kAllReduce, int64_t bytes = 4096) {
  OpRecord r;
  r.key_kind = kKeySeq;
  r.key_major = seq;
  r.start_ns = start;
  r.end_ns = end;
  r.op = op;
  r.bytes = bytes;
  r.ngaps = kWholeGap;
  return r;
}

RankOps Rank(int64_t rank, std::string host, std::vector<OpRecord> ops, int64_t exposed_comm_ns = 0) {
  RankOps r;
  r.rank = rank;
  r.host = std::move(host);
  r.exposed_comm_ns = exposed_comm_ns;
  std::sort(ops.begin(), ops.end(), KeyLess);
  r.ops = std::move(ops);
  return r;
}

std::vector<std::string> Messages(const Summary& s) {
  std::vector<std::string> out;
  for (const Finding& f : s.findings) out.push_back(std::string(SeverityName(f.severity)) + ": " + f.message);
  return out;
}

// ---------------------------------------------------------------- matching

TEST(CrossRankMatch, KeyText) {
  EXPECT_EQ(KeyText(kKeySeq, 12, 0), "seq:12");
  EXPECT_EQ(KeyText(kKeyStepOrdinal, 6, 2), "step:6:2");
  EXPECT_EQ(KeyText(kKeyStepOrdinal, kUnknown, 3), "step:none:3");
  EXPECT_EQ(KeyText(kKeyOrdinal, 0, 4), "ord:4");
}

TEST(CrossRankMatch, InternerGivesDenseIdsOncePerString) {
  Interner in;
  EXPECT_EQ(in.Intern("a"), 0u);
  EXPECT_EQ(in.Intern("b"), 1u);
  EXPECT_EQ(in.Intern("a"), 0u);
  EXPECT_EQ(in.size(), 2u);
  EXPECT_EQ(in.Name(1), "b");
}

TEST(CrossRankMatch, UncoveredPiecesAreExactUpToTheLimit) {
  // Compute covers [10,20) and [30,40) of the op [0,50): three gaps, kept exactly.
  IntervalSet compute = IntervalSet::Union({{10, 20}, {30, 40}});
  std::array<Piece, kMaxGapsPerOp + 1> p;
  ASSERT_EQ(UncoveredPieces(compute, 0, 50, p), 3);
  EXPECT_EQ(p[0].start, 0);
  EXPECT_EQ(p[0].end, 10);
  EXPECT_EQ(p[1].start, 20);
  EXPECT_EQ(p[2].end, 50);
  EXPECT_EQ(p[2].uncovered, 10);
  // Entirely covered: no piece.
  EXPECT_EQ(UncoveredPieces(compute, 12, 18, p), 0);
}

TEST(CrossRankMatch, UncoveredPiecesMergeBeyondTheLimitKeepingTheTotalAndTheStart) {
  // Six gaps of 10 ns in [0, 110): compute covers [10k+10, 10k+20) for k = 0, 2, 4, 6, 8.
  std::vector<Interval> iv;
  for (int k = 0; k < 10; k += 2) iv.push_back({10 * k + 10, 10 * k + 20});
  IntervalSet compute = IntervalSet::Union(iv);
  std::array<Piece, kMaxGapsPerOp + 1> p;
  const int n = UncoveredPieces(compute, 0, 110, p);
  ASSERT_EQ(n, kMaxGapsPerOp);
  int64_t total = 0;
  for (int i = 0; i < n; ++i) total += p[i].uncovered;
  EXPECT_EQ(total, 60);
  EXPECT_EQ(p[0].start, 0);  // the start (where waiting happens) stays exact
  EXPECT_EQ(p[0].end, 10);
  EXPECT_EQ(p[0].uncovered, 10);
}

TEST(CrossRankMatch, ExposedWaitOfWholeAndPartlyCoveredOps) {
  RankOps r;
  OpRecord whole = Rec(1, 100, 200);
  EXPECT_EQ(ExposedWait(r, whole, 30), 30);
  EXPECT_EQ(ExposedWait(r, whole, 500), 100);  // capped at the op's end
  EXPECT_EQ(ExposedWait(r, whole, 0), 0);
  // [100,200) with compute over [120,150): gaps [100,120) and [150,200).
  IntervalSet compute = IntervalSet::Union({{120, 150}});
  std::array<Piece, kMaxGapsPerOp + 1> p;
  OpRecord part = Rec(2, 100, 200);
  part.ngaps = static_cast<uint8_t>(UncoveredPieces(compute, 100, 200, p));
  part.gaps = 0;
  r.gaps.assign(p.begin(), p.begin() + part.ngaps);
  EXPECT_EQ(ExposedWait(r, part, 10), 10);
  EXPECT_EQ(ExposedWait(r, part, 40), 20);   // the compute hid [120,140)
  EXPECT_EQ(ExposedWait(r, part, 60), 30);   // ... and [150,160) is exposed
  EXPECT_EQ(ExposedWait(r, part, 100), 70);
}

TEST(CrossRankMatch, ForEachGroupMergesEqualKeysInSlotOrder) {
  std::vector<RankOps> ranks = {Rank(0, "h", {Rec(1, 0, 10), Rec(2, 20, 30)}),
                                Rank(1, "h", {Rec(2, 21, 30), Rec(3, 40, 50)}),
                                Rank(2, "h", {Rec(1, 1, 10), Rec(2, 22, 30)})};
  std::vector<std::vector<size_t>> groups;
  ForEachGroup(ranks, [&](const std::vector<Member>& g) {
    std::vector<size_t> slots;
    for (const Member& m : g) slots.push_back(m.slot);
    groups.push_back(slots);
    for (const Member& m : g) EXPECT_EQ(m.rec->key_major, g[0].rec->key_major);
  });
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0], (std::vector<size_t>{0, 2}));     // seq 1
  EXPECT_EQ(groups[1], (std::vector<size_t>{0, 1, 2}));  // seq 2
  EXPECT_EQ(groups[2], (std::vector<size_t>{1}));        // seq 3: one rank only
}

TEST(CrossRankMatch, KeysOfDifferentKindsOrCommunicatorsDoNotMatch) {
  OpRecord a = Rec(1, 0, 10), b = Rec(1, 0, 10);
  b.key_kind = kKeyOrdinal;
  EXPECT_FALSE(KeyEq(a, b));
  b = a;
  b.comm = 1;
  EXPECT_FALSE(KeyEq(a, b));
  b.comm = 0;
  EXPECT_TRUE(KeyEq(a, b));
}

// ---------------------------------------------------------------- clocks

TEST(CrossRankClocks, DomainsPerHostAndPerRankWithoutHost) {
  std::vector<RankOps> ranks = {Rank(0, "b", {}), Rank(1, "", {}), Rank(2, "a", {}), Rank(3, "b", {})};
  ClockDomains d = AssignClockDomains(ranks);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d.names, (std::vector<std::string>{"b", "rank 1", "a"}));
  EXPECT_EQ(d.ranks[0], (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(d.of_slot, (std::vector<size_t>{0, 1, 2, 0}));
  EXPECT_EQ(d.ref, 0u);  // the lowest rank's
}

TEST(CrossRankClocks, OffsetEstimatedFromCollectiveEndsAndApplied) {
  // Host b's clock reads 2 ms ahead; collectives end together.
  constexpr int64_t kOff = 2000000;
  std::vector<OpRecord> a, b;
  for (int k = 0; k < 8; ++k) {
    const int64_t t = 1000000 * (k + 1);
    a.push_back(Rec(k, t, t + 500000));
    b.push_back(Rec(k, t + 100000 + kOff, t + 500000 + kOff + (k % 2) * 100));  // 100 ns jitter
  }
  std::vector<RankOps> ranks = {Rank(0, "a", a), Rank(1, "b", b)};
  ClockDomains d = AssignClockDomains(ranks);
  MatchCounts counts = EstimateClocks(ranks, d);
  EXPECT_EQ(counts.matched, 8);
  EXPECT_EQ(counts.unmatched, 0);
  EXPECT_FALSE(d.clocks[0].applied);  // the reference
  EXPECT_TRUE(d.clocks[1].applied);
  EXPECT_EQ(d.clocks[1].samples, 8);
  EXPECT_NEAR(d.clocks[1].offset_ns, kOff, 100);
  EXPECT_EQ(d.Adjust(1, 5 * kOff), 5 * kOff - d.clocks[1].offset_ns);
  EXPECT_EQ(d.Adjust(0, 5 * kOff), 5 * kOff);

  std::vector<ClockDomainRow> rows = ClockDomainRows(d);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].reference);
  EXPECT_FALSE(rows[0].noise_ns.has_value());
  EXPECT_EQ(rows[1].domain, "b");
  EXPECT_EQ(rows[1].noise_ns, kClockNoiseFloorNs);
  EXPECT_TRUE(rows[1].applied);

  Summary s;
  AddClockFindings(d, s);
  ASSERT_EQ(s.findings.size(), 1u);
  EXPECT_EQ(s.findings[0].severity, Severity::kInfo);
  EXPECT_NE(s.findings[0].message.find("the clock of b reads 2.00 ms ahead of that of a"), std::string::npos)
      << s.findings[0].message;
}

TEST(CrossRankClocks, TooFewSharedCollectivesLeaveTheDomainUnaligned) {
  std::vector<RankOps> ranks = {Rank(0, "a", {Rec(1, 0, 100), Rec(2, 200, 300)}),
                                Rank(1, "b", {Rec(1, 5000, 5100), Rec(2, 5200, 5300)})};
  ClockDomains d = AssignClockDomains(ranks);
  EstimateClocks(ranks, d);
  EXPECT_FALSE(d.clocks[1].applied);
  EXPECT_EQ(d.clocks[1].samples, 2);
  EXPECT_EQ(d.Adjust(1, 5000), 5000);  // as recorded
  Summary s;
  AddClockFindings(d, s);
  ASSERT_EQ(s.findings.size(), 1u);
  EXPECT_EQ(s.findings[0].severity, Severity::kWarning);
  EXPECT_NE(s.findings[0].message.find("could not be aligned"), std::string::npos);
}

TEST(CrossRankClocks, OneDomainEstimatesNothing) {
  std::vector<RankOps> ranks = {Rank(0, "h", {Rec(1, 0, 100)}), Rank(1, "h", {Rec(1, 50, 100), Rec(2, 0, 1)})};
  ClockDomains d = AssignClockDomains(ranks);
  MatchCounts counts = EstimateClocks(ranks, d);
  EXPECT_EQ(counts.matched, 1);
  EXPECT_EQ(counts.unmatched, 1);
  ASSERT_EQ(d.clocks.size(), 1u);
  EXPECT_EQ(d.clocks[0].samples, 0);
}

TEST(CrossRankClocks, DiffSamplerStaysBoundedAndEven) {
  DiffSampler s;
  for (int64_t i = 0; i < 100000; ++i) s.Add(i);
  EXPECT_EQ(s.seen, 100000);
  EXPECT_LT(s.values.size(), DiffSampler::kCap);
  EXPECT_GT(s.values.size(), DiffSampler::kCap / 4);
  for (size_t i = 1; i < s.values.size(); ++i) EXPECT_EQ(s.values[i] - s.values[i - 1], s.stride);
}

// ---------------------------------------------------------------- per-collective figures

TEST(CrossRankFigures, WaitTransferAndSkewPerCollective) {
  // Seq 1: rank 2 arrives 150 µs after rank 0, all end at 400 µs. Seq 2: simultaneous.
  std::vector<RankOps> ranks = {Rank(0, "h", {Rec(1, 100000, 400000), Rec(2, 1000000, 1100000)}),
                                Rank(1, "h", {Rec(1, 150000, 400000), Rec(2, 1000000, 1100000)}),
                                Rank(2, "h", {Rec(1, 250000, 400000), Rec(2, 1000000, 1100000)})};
  ClockDomains d = AssignClockDomains(ranks);
  MatchCounts counts = EstimateClocks(ranks, d);
  CollectiveFigures f = MeasureCollectives(ranks, d, CommunicatorSizes(ranks), counts.matched);
  EXPECT_EQ(f.skews, (std::vector<double>{150000, 0}));
  EXPECT_EQ(f.memberships, 6);
  EXPECT_EQ(f.mismatched, 0);
  EXPECT_EQ(f.ends_before_last, 0);
  EXPECT_EQ(f.by_kind[kKeySeq], 2);
  EXPECT_EQ(f.totals[0].wait_ns, 150000);
  EXPECT_EQ(f.totals[0].transfer_ns, 150000 + 100000);
  EXPECT_EQ(f.totals[1].wait_ns, 100000);
  EXPECT_EQ(f.totals[2].wait_ns, 0);
  EXPECT_EQ(f.totals[0].exposed_wait_ns, 150000);  // no compute
  // Straggler statistics count seq 1 only (skew above the threshold).
  EXPECT_EQ(f.totals[2].last_arrivals, 1);
  EXPECT_EQ(f.totals[2].others_wait_ns, 250000);
  EXPECT_EQ(f.totals[2].lateness_sum, 100000);
  EXPECT_EQ(f.totals[0].counted, 1);

  ASSERT_EQ(f.listed.size(), 2u);
  Interner comms;
  comms.Intern("0");
  std::vector<ListedCollective> rows = ListedCollectives(f.listed, comms);
  EXPECT_EQ(rows[0].key, "seq:1");
  EXPECT_EQ(rows[0].seq, 1);
  EXPECT_EQ(rows[0].op, Collective::kAllReduce);
  EXPECT_EQ(rows[0].bytes, 4096);
  EXPECT_EQ(rows[0].start_ns, 100000);
  EXPECT_EQ(rows[0].last_rank, 2);
  ASSERT_EQ(rows[0].members.size(), 3u);
  EXPECT_EQ(rows[0].members[1].wait_ns, 100000);
  EXPECT_EQ(rows[0].members[1].transfer_ns, 150000);
}

// NCCL profiler plugin times (OpRecord::kernel_times): an op of a fused kernel [100, 900) that
// the plugin timed [300, 500) on rank 0 and [400, 500) on rank 1.
OpRecord PluginRec(RankOps& r, int64_t seq, int64_t start, int64_t end, int64_t kstart, int64_t kend) {
  OpRecord rec = Rec(seq, start, end);
  rec.kernel_times = static_cast<uint32_t>(r.kernel_times.size());
  r.kernel_times.emplace_back(kstart, kend);
  return rec;
}

TEST(CrossRankFigures, WaitAndTransferFromPluginStartsWhenEveryRankHasThem) {
  std::vector<RankOps> ranks = {Rank(0, "h", {}), Rank(1, "h", {})};
  ranks[0].ops = {PluginRec(ranks[0], 5, 300, 500, 100, 900)};
  ranks[1].ops = {PluginRec(ranks[1], 5, 400, 500, 100, 900)};
  ClockDomains d = AssignClockDomains(ranks);
  MatchCounts counts = EstimateClocks(ranks, d);
  CollectiveFigures f = MeasureCollectives(ranks, d, CommunicatorSizes(ranks), counts.matched);
  EXPECT_TRUE(f.any_plugin);
  EXPECT_EQ((std::pair{f.timed_by_plugin, f.kernel_fallback}), (std::pair<int64_t, int64_t>{1, 0}));
  EXPECT_EQ(f.totals[0].wait_ns, 100);      // rank 1's start - its own
  EXPECT_EQ(f.totals[0].transfer_ns, 100);  // its end - the last start
  EXPECT_EQ(f.totals[1].wait_ns, 0);
  ASSERT_EQ(f.listed.size(), 1u);
  EXPECT_TRUE(f.listed[0].plugin_timed);
  Interner comms;
  comms.Intern("0");
  EXPECT_EQ(ListedCollectives(f.listed, comms)[0].timing, "nccl_profiler");

  // Rank 1 without plugin times (its kernel [150, 900)): every member's kernel, rank 0's too.
  ranks[1] = Rank(1, "h", {Rec(5, 150, 900)});
  d = AssignClockDomains(ranks);
  counts = EstimateClocks(ranks, d);
  f = MeasureCollectives(ranks, d, CommunicatorSizes(ranks), counts.matched);
  EXPECT_EQ((std::pair{f.timed_by_plugin, f.kernel_fallback}), (std::pair<int64_t, int64_t>{0, 1}));
  EXPECT_EQ(f.totals[0].wait_ns, 50);
  EXPECT_EQ(f.totals[0].transfer_ns, 750);
  EXPECT_EQ(ListedCollectives(f.listed, comms)[0].timing, "kernels");
}

TEST(CrossRankFigures, MismatchedEndsBeforeLastArrivalAndOverFull) {
  OpRecord other = Rec(1, 500, 600, Collective::kAllGather, /*bytes=*/kUnknown);
  std::vector<RankOps> ranks = {Rank(0, "h", {Rec(1, 0, 100)}), Rank(1, "h", {other}), Rank(2, "h", {Rec(1, 0, 700)})};
  ranks[0].comm_nranks = {{0, 2}};
  ClockDomains d = AssignClockDomains(ranks);
  MatchCounts counts = EstimateClocks(ranks, d);
  CollectiveFigures f = MeasureCollectives(ranks, d, CommunicatorSizes(ranks), counts.matched);
  EXPECT_EQ(f.mismatched, 1);
  EXPECT_EQ(f.over_full, 1);         // 3 ranks on a communicator of 2
  EXPECT_EQ(f.ends_before_last, 1);  // rank 0 ended at 100 before rank 1 began at 500
  EXPECT_EQ(f.totals[0].wait_ns, 100);  // capped at its kernel's end
  EXPECT_EQ(f.totals[0].transfer_ns, 0);
}

TEST(CrossRankFigures, ListsTheCollectivesWithTheLargestSkewInTimeOrder) {
  std::vector<OpRecord> a, b;
  const int64_t n = static_cast<int64_t>(kMaxListedCollectives) + 10;
  for (int64_t k = 0; k < n; ++k) {
    a.push_back(Rec(k, 1000 * k, 1000 * k + 500));
    b.push_back(Rec(k, 1000 * k + (k < 10 ? 0 : 1), 1000 * k + 500));  // the first 10 have no skew
  }
  std::vector<RankOps> ranks = {Rank(0, "h", a), Rank(1, "h", b)};
  ClockDomains d = AssignClockDomains(ranks);
  MatchCounts counts = EstimateClocks(ranks, d);
  CollectiveFigures f = MeasureCollectives(ranks, d, CommunicatorSizes(ranks), counts.matched);
  ASSERT_EQ(f.listed.size(), kMaxListedCollectives);
  EXPECT_EQ(f.listed.front().key_major, 10);
  for (size_t i = 1; i < f.listed.size(); ++i) EXPECT_LT(f.listed[i - 1].start_ns, f.listed[i].start_ns);
}

// ---------------------------------------------------------------- stragglers

TEST(CrossRankStragglers, OrderRowsAndFindings) {
  std::vector<RankOps> ranks = {Rank(0, "h", {}, 1000000), Rank(1, "h", {}, 1000000), Rank(2, "h", {}, 1000000)};
  std::vector<RankTotals> t(3);
  t[0].counted = 10;  // never last
  t[0].fair_share_sum = 10.0 / 3;
  t[1].counted = 10;  // last twice
  t[1].last_arrivals = 2;
  t[1].others_wait_ns = 40000;
  t[1].lateness_sum = 60000;
  t[1].fair_share_sum = 10.0 / 3;
  t[2].counted = 10;  // last 8 times: persistent
  t[2].last_arrivals = 8;
  t[2].others_wait_ns = 800000;
  t[2].lateness_sum = 800000;
  t[2].fair_share_sum = 10.0 / 3;
  t[2].exposed_wait_ns = 50000;   // 5% of its exposed communication: no finding
  t[0].exposed_wait_ns = 300000;  // 30%: a warning
  t[1].exposed_wait_ns = 150000;  // 15%: info
  std::vector<size_t> order = StragglerOrder(t);
  EXPECT_EQ(order, (std::vector<size_t>{2, 1, 0}));
  std::vector<StragglerRow> rows = StragglerRows(ranks, t, order);
  EXPECT_EQ(rows[0].rank, 2);
  EXPECT_DOUBLE_EQ(rows[0].last_fraction, 0.8);
  EXPECT_EQ(rows[0].mean_lateness_ns, 100000);
  EXPECT_EQ(rows[1].mean_lateness_ns, 30000);
  EXPECT_FALSE(rows[2].mean_lateness_ns.has_value());

  Summary s;
  AddStragglerFindings(ranks, t, order, s);
  AddWaitFindings(ranks, t, s);
  std::vector<std::string> m = Messages(s);
  ASSERT_EQ(m.size(), 3u) << ::testing::PrintToString(m);
  EXPECT_EQ(m[0], "warning: rank 2 arrived last at 80.0% of 10 collectives; the other ranks lost 800.0 µs waiting for it "
                  "(it started 100.0 µs after the next-latest rank on average)");
  EXPECT_EQ(s.findings[0].rank, 2);
  EXPECT_EQ(m[1], "warning: of rank 0's 1.00 ms exposed communication, 300.0 µs is waiting for other ranks to arrive "
                  "(straggler), not transfer");
  EXPECT_EQ(m[2].substr(0, 24), "info: of rank 1's 1.00 m");
}

TEST(CrossRankStragglers, WithoutAPersistentOneTheCostliestIsInfo) {
  std::vector<RankOps> ranks = {Rank(0, "h", {}), Rank(1, "h", {})};
  std::vector<RankTotals> t(2);
  t[0].counted = t[1].counted = 10;
  t[0].fair_share_sum = t[1].fair_share_sum = 5;
  t[0].last_arrivals = 5;
  t[0].others_wait_ns = 500;
  t[1].last_arrivals = 5;
  t[1].others_wait_ns = 400;
  Summary s;
  AddStragglerFindings(ranks, t, StragglerOrder(t), s);
  ASSERT_EQ(s.findings.size(), 1u);  // 50% is the fair share of two ranks: not persistent
  EXPECT_EQ(s.findings[0].severity, Severity::kInfo);
  EXPECT_EQ(s.findings[0].rank, 0);
}

// ---------------------------------------------------------------- typed result in the JSON summary

TEST(CrossRankResultJson, SectionsInTheOrderTheyAppeared) {
  Summary s;
  s.Section("buckets") = Json::array();
  s.AddFinding("x", kUnknown, Severity::kInfo, "first");
  CrossRankResult r;
  r.summary.matched = 1;
  r.summary.skew_ns = SkewStats{1, 2, 3};
  r.any_matched = true;
  ListedCollective c;
  c.communicator = "0";
  c.key = "ord:0";
  c.op = Collective::kAllReduce;
  c.members = {{0, 5, 6}, {1, 0, 6}};
  r.collectives.push_back(c);
  r.ranks.push_back({0, "h", 1, 5, 6, 5, 11});
  s.SetCrossRank(r);
  s.AddFinding("y", 3, Severity::kWarning, "second");
  Json j = SummaryToJson(s);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  const std::vector<std::string> tail(keys.end() - 7, keys.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"buckets", "findings", "collectives_summary", "collectives", "stragglers",
                                            "clock_offsets", "cross_rank"}));
  EXPECT_EQ(j["findings"].size(), 2u);
  EXPECT_TRUE(j["findings"][0]["rank"].is_null());
  EXPECT_EQ(j["findings"][1]["rank"], 3);
  EXPECT_EQ(j["collectives_summary"]["skew_ns"].dump(), R"({"median":1,"p90":2,"max":3})");
  EXPECT_EQ(j["collectives"][0]["wait_ns"].dump(), R"({"0":5,"1":0})");
  EXPECT_TRUE(j["collectives"][0]["seq"].is_null());
  EXPECT_TRUE(j["collectives"][0]["bytes"].is_null());
  EXPECT_EQ(j["collectives"][0]["ranks"], 2);
  EXPECT_EQ(j["collectives"][0]["op"], "allreduce");  // the kind's name, written at the edge
  EXPECT_EQ(j["cross_rank"][0]["exposed_comm_ns"], 11);
}

TEST(CrossRankResultJson, NothingMatchedWritesOnlyTheSummary) {
  Summary s;
  CrossRankResult r;
  r.summary.notices = {"a single rank: nothing to match across ranks"};
  s.SetCrossRank(r);
  Json j = SummaryToJson(s);
  EXPECT_TRUE(j.contains("collectives_summary"));
  EXPECT_TRUE(j["collectives_summary"]["skew_ns"].is_null());
  EXPECT_FALSE(j.contains("collectives"));
  EXPECT_FALSE(j.contains("cross_rank"));
  EXPECT_FALSE(j.contains("findings"));
}

// ---------------------------------------------------------------- point-to-point

P2pRecord P2p(bool send, int64_t self, int64_t peer, int64_t start, int64_t end, int64_t step = 1) {
  P2pRecord p;
  p.send = send;
  p.self = self;
  p.peer = peer;
  p.start_ns = start;
  p.end_ns = end;
  p.step = step;
  return p;
}

TEST(CrossRankP2p, NothingWithoutSendsOrRecvs) {
  std::vector<RankOps> ranks = {Rank(0, "h", {}), Rank(1, "h", {})};
  ClockDomains d = AssignClockDomains(ranks);
  Interner comms;
  comms.Intern("pp");
  EXPECT_FALSE(PairPointToPoint(ranks, d, RecordCounts{}, comms).has_value());
}

// Three stages; rank 2's clock reads 1000 ns ahead (its domain's offset applied). Recv waits:
// rank 1 waits 50 then 0 for rank 0; rank 2 waits 200 for rank 1. Rank 1 is waited on 200 and
// waits 50 itself: the stage everyone waits on.
TEST(CrossRankP2p, PairsInOrderPerPairWithClockOffsetsAndSaysWhyTheRestWasNot) {
  std::vector<RankOps> ranks = {Rank(0, "h", {}), Rank(1, "h", {}), Rank(2, "g", {})};
  ranks[0].p2p = {P2p(true, 0, 1, 100, 200), P2p(true, 0, 1, 500, 700), P2p(true, 0, 5, 800, 900)};
  ranks[1].p2p = {P2p(false, 1, 0, 50, 200), P2p(false, 1, 0, 600, 700), P2p(true, 1, 2, 400, 500)};
  ranks[2].p2p = {P2p(false, 2, 1, 1200, 1500, 2), P2p(true, 2, 1, 1600, 1700, 2)};
  ClockDomains d = AssignClockDomains(ranks);
  d.clocks[d.of_slot[2]].offset_ns = 1000;
  d.clocks[d.of_slot[2]].applied = true;
  Interner comms;
  comms.Intern("pp");
  RecordCounts counts;
  counts.p2p_unnamed = 3;
  std::optional<PointToPoint> p = PairPointToPoint(ranks, d, counts, comms);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->pairs, 3);
  EXPECT_EQ(p->recv_wait_ns, 250);
  EXPECT_EQ(p->unpaired_sends, 2);  // rank 2 -> 1 (no recv on rank 1), rank 0 -> 5 (no trace)
  EXPECT_EQ(p->unpaired_recvs, 0);
  ASSERT_TRUE(p->bottleneck_rank.has_value());
  EXPECT_EQ(*p->bottleneck_rank, 1);
  EXPECT_EQ(p->bottleneck_waited_on_ns, 200);
  ASSERT_EQ(p->ranks.size(), 3u);
  auto row = [](const P2pRankRow& r) { return std::vector<int64_t>{r.rank, r.sends, r.recvs, r.recv_wait_ns, r.waited_on_ns}; };
  EXPECT_EQ(row(p->ranks[0]), (std::vector<int64_t>{0, 2, 0, 0, 50}));
  EXPECT_EQ(row(p->ranks[1]), (std::vector<int64_t>{1, 1, 2, 50, 200}));
  EXPECT_EQ(row(p->ranks[2]), (std::vector<int64_t>{2, 0, 1, 200, 0}));
  ASSERT_EQ(p->iterations.size(), 2u);
  EXPECT_EQ(p->iterations[0].rank, 1);
  EXPECT_EQ(p->iterations[0].step, 1);
  EXPECT_EQ(p->iterations[0].recvs, 2);
  EXPECT_EQ(p->iterations[0].recv_wait_ns, 50);
  EXPECT_EQ(p->iterations[0].waited_most_on, 0);
  EXPECT_EQ(p->iterations[1].rank, 2);
  EXPECT_EQ(p->iterations[1].step, 2);
  EXPECT_EQ(p->iterations[1].recv_wait_ns, 200);
  EXPECT_EQ(p->iterations[1].waited_most_on, 1);
  ASSERT_EQ(p->notices.size(), 2u);
  EXPECT_NE(p->notices[0].find("3 point-to-point kernels (SendRecv)"), std::string::npos) << p->notices[0];
  EXPECT_NE(p->notices[1].find("2 sends and 0 recvs whose peer has no matching op"), std::string::npos) << p->notices[1];
  Summary s;
  AddPointToPointFindings(*p, s);
  ASSERT_EQ(s.findings.size(), 1u);
  EXPECT_EQ(s.findings[0].rank, 1);
  EXPECT_NE(s.findings[0].message.find("rank 1 is the pipeline stage the others wait on"), std::string::npos);
}

// A recv posted after its send waits nothing; the wait is capped at the recv's own duration.
TEST(CrossRankP2p, WaitIsCappedAtTheRecvAndNeverNegative) {
  std::vector<RankOps> ranks = {Rank(0, "h", {}), Rank(1, "h", {})};
  ranks[0].p2p = {P2p(true, 0, 1, 100, 200), P2p(true, 0, 1, 5000, 5100)};
  ranks[1].p2p = {P2p(false, 1, 0, 300, 400), P2p(false, 1, 0, 1000, 1100), P2p(false, 1, 0, 6000, 6100)};
  ClockDomains d = AssignClockDomains(ranks);
  Interner comms;
  comms.Intern("pp");
  std::optional<PointToPoint> p = PairPointToPoint(ranks, d, RecordCounts{}, comms);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->pairs, 2);
  EXPECT_EQ(p->recv_wait_ns, 100);  // 0 (posted after the send), then min(4000, 100)
  EXPECT_EQ(p->unpaired_recvs, 1);
  ASSERT_EQ(p->notices.size(), 1u);
  EXPECT_NE(p->notices[0].find("0 sends and 1 recvs left over after pairing in order"), std::string::npos);
}

}  // namespace
}  // namespace overlapprof::cross_rank
