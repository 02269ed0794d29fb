#pragma once
// Checks shared by the fuzz targets: what every RankTrace an importer returns must
// satisfy, whatever the input (the analyzers index with these fields unchecked). A
// violation aborts, which libFuzzer reports as a crash with the input that caused it.
#include <cstdio>
#include <cstdlib>
#include <set>
#include <utility>

#include "reports/report.h"
#include "src/cli/registry.h"
#include "src/trace/model.h"

namespace overlapprof::fuzz {

[[noreturn]] inline void Violated(const char* what, size_t index) {
  std::fprintf(stderr, "overlapprof fuzz: RankTrace invariant violated: %s (element %zu)\n", what, index);
  std::abort();
}

#define OVERLAPPROF_FUZZ_CHECK(cond, index) \
  do {                                      \
    if (!(cond)) ::overlapprof::fuzz::Violated(#cond, (index)); \
  } while (0)

// model.h: every time lies in [0, kMaxTimeNs = 2^62); importers and the store reader
// enforce it so that sums and differences of two times never overflow.
inline bool InTimeRange(int64_t t) { return t >= 0 && t < (int64_t{1} << 62); }

template <typename T>
bool ByTime(const T& a, const T& b) {  // RankTrace::Finalize's order
  return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns < b.end_ns;
}

// Runs every registered analyzer (as one rank, then the run's final pass) and renders the JSON
// summary: analyzers see hostile-but-importable traces here, and must neither crash nor fail
// with an internal error (a Status is fine: it becomes exit code 2 or 5 in the CLI).
inline void AnalyzeTrace(const RankTrace& t) {
  Summary summary;
  AnalysisOptions options;
  auto analyzers = MakeAnalyzers();
  for (auto& a : analyzers) {
    Status st = a->AnalyzeRank(t, 0, options, summary);
    if (!st.ok()) {
      if (st.code() == StatusCode::kInternal) Violated("analyzer internal error", 0);
      return;
    }
  }
  for (auto& a : analyzers)
    if (Status st = a->Finish(options, summary); !st.ok() && st.code() == StatusCode::kInternal)
      Violated("analyzer internal error in Finish", 0);
  (void)SummaryToJson(summary).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline void CheckTrace(const RankTrace& t) {
  const size_t nnames = t.names.size();
  const size_t nstreams = t.streams.size();
  const size_t ncomm = t.comm_ops.size();
  OVERLAPPROF_FUZZ_CHECK(nnames >= 1 && t.names.Get(0).empty(), 0);
  for (size_t i = 0; i < t.activities.size(); ++i) {
    const Activity& a = t.activities[i];
    OVERLAPPROF_FUZZ_CHECK(InTimeRange(a.start_ns) && InTimeRange(a.end_ns), i);
    OVERLAPPROF_FUZZ_CHECK(a.end_ns >= a.start_ns, i);
    OVERLAPPROF_FUZZ_CHECK(a.name_id < nnames, i);
    OVERLAPPROF_FUZZ_CHECK(a.stream == kNoIndex || a.stream < nstreams, i);
    OVERLAPPROF_FUZZ_CHECK(a.comm_op == kNoIndex || a.comm_op < ncomm, i);
    OVERLAPPROF_FUZZ_CHECK(static_cast<int>(a.kind) >= 1 && static_cast<int>(a.kind) <= 4, i);
    OVERLAPPROF_FUZZ_CHECK(static_cast<int>(a.category) <= 3, i);
    OVERLAPPROF_FUZZ_CHECK(i == 0 || !ByTime(a, t.activities[i - 1]), i);
  }
  for (size_t i = 0; i < ncomm; ++i) {
    const CommOp& c = t.comm_ops[i];
    OVERLAPPROF_FUZZ_CHECK(c.stream == kNoIndex || c.stream < nstreams, i);
    OVERLAPPROF_FUZZ_CHECK(static_cast<int>(c.source) >= 1 && static_cast<int>(c.source) <= 3, i);
  }
  for (size_t i = 0; i < t.host_calls.size(); ++i) {
    const HostCall& h = t.host_calls[i];
    OVERLAPPROF_FUZZ_CHECK(InTimeRange(h.start_ns) && InTimeRange(h.end_ns), i);
    OVERLAPPROF_FUZZ_CHECK(h.end_ns >= h.start_ns, i);
    OVERLAPPROF_FUZZ_CHECK(h.name_id < nnames, i);
    OVERLAPPROF_FUZZ_CHECK(i == 0 || !ByTime(h, t.host_calls[i - 1]), i);
  }
  for (size_t i = 0; i < t.ranges.size(); ++i) {
    const Range& r = t.ranges[i];
    OVERLAPPROF_FUZZ_CHECK(InTimeRange(r.start_ns) && InTimeRange(r.end_ns), i);
    OVERLAPPROF_FUZZ_CHECK(r.end_ns >= r.start_ns, i);
    OVERLAPPROF_FUZZ_CHECK(r.name_id < nnames, i);
    OVERLAPPROF_FUZZ_CHECK(r.stream == kNoIndex || r.stream < nstreams, i);
    OVERLAPPROF_FUZZ_CHECK(static_cast<int>(r.kind) >= 1 && static_cast<int>(r.kind) <= 3, i);
    OVERLAPPROF_FUZZ_CHECK(i == 0 || !ByTime(r, t.ranges[i - 1]), i);
  }
  // No two streams share a (device, native id) key.
  std::set<std::pair<int64_t, int64_t>> keys;
  for (size_t i = 0; i < nstreams; ++i)
    OVERLAPPROF_FUZZ_CHECK(keys.emplace(t.streams[i].device, t.streams[i].native_id).second, i);
}

}  // namespace overlapprof::fuzz
