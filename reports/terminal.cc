// The terminal summary: one table row per rank, optional per-iteration table, notices,
// data-quality counters and the verdict. Colour only when ReportOptions::color.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "analyzers/overlap.h"
#include "reports/interference_report.h"
#include "reports/report.h"
#include "reports/what_if_report.h"
#include "src/common/utf8.h"

namespace overlapprof {

namespace {

std::string RankLabel(int64_t rank) { return rank == kUnknown ? "?" : std::to_string(rank); }

std::string FormatBytes(int64_t b) {
  const double v = static_cast<double>(b);
  if (v >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", v / (1024.0 * 1024 * 1024));
  if (v >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", v / (1024.0 * 1024));
  if (v >= 1024.0) return fmt::format("{:.1f} KiB", v / 1024.0);
  return fmt::format("{} B", b);
}

// One Write: the summary, the options and the stream every table goes to, and what the tables
// share (colour, the file column).
struct Page {
  const Summary& s;
  const ReportOptions& o;
  std::ostream& out;
  // Several files with the same rank (or several without one): a last column says which file
  // each row is, else rows could not be told apart.
  bool same_rank = false;

  std::string Paint(std::string_view code, const std::string& text) const {
    return o.color ? fmt::format("\x1b[{}m{}\x1b[0m", code, text) : text;
  }
  std::string FileColumn(const std::string& text) const { return same_rank ? "  " + text : std::string(); }
};

bool SomeRankTwice(const Summary& s) {
  std::map<std::string, int> label_count;
  for (const RankResult& r : s.ranks) ++label_count[RankLabel(r.rank)];
  bool same_rank = false;
  for (const auto& entry : label_count) same_rank |= entry.second > 1;
  return same_rank;
}

// One row per rank: the whole trace's overlap figures.
void WriteRanks(const Page& p) {
  const Summary& s = p.s;
  std::ostream& out = p.out;
  out << fmt::format("{:>5}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>8}  {:>7}  {:>6}  {:>5}{}\n", "rank", "wall",
                     "compute", "comm", "overlap", "exposed", "overlap%", "bound%", "ops", "iters", p.FileColumn("file"));
  for (const RankResult& r : s.ranks) {
    const OverlapFigures& f = r.whole;
    out << fmt::format("{:>5}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>8}  {:>7}  {:>6}  {:>5}{}\n",
                       RankLabel(r.rank), FormatDuration(f.wall_ns), FormatDuration(f.compute_ns),
                       FormatDuration(f.comm_ns), FormatDuration(f.overlap_ns), FormatDuration(f.exposed_comm_ns),
                       FormatPercent(f.overlap_ratio), FormatPercent(f.achievable_ratio), f.comm_ops,
                       r.iteration_count, p.FileColumn(EscapeForTerminal(r.source_path)));
  }
}

// Ranks with NCCL profiler plugin data: what their communication was timed by.
// None read: a 1-rank communicator (NCCL reports none), or --comm-timing kernels.
void WriteTimingSources(const Page& p) {
  for (const RankResult& r : p.s.ranks) {
    if (r.timing_source.empty()) continue;
    if (r.nccl_profiler_ops == 0)
      p.out << fmt::format("rank {}: communication timed by its kernels (no NCCL profiler plugin operation used)\n",
                           RankLabel(r.rank));
    else
      p.out << fmt::format("rank {}: communication timed by {} ({} of {} NCCL profiler ops used)\n", RankLabel(r.rank),
                           r.timing_source == "nccl_profiler" ? "NCCL's profiler plugin, per operation"
                                                              : "its kernels",
                           r.nccl_profiler_timed_ops, r.nccl_profiler_ops);
  }
}

// Where the step time goes: one line per rank and the run (the step_breakdown analyzer).
void WriteStepSplit(const Page& pg) {
  const Summary& s = pg.s;
  std::ostream& out = pg.out;
  if (!s.step_breakdown || s.step_breakdown->ranks.empty()) return;
  const StepBreakdown& b = *s.step_breakdown;
  out << "\nstep time split (per rank: steady iterations, else the whole trace; % of wall time):\n";
  out << fmt::format("{:>5}  {:>5}  {:>10}  {:>8}  {:>8}  {:>8}  {:>8}  {:>8}  {:>8}\n", "rank", "iters",
                     "step", "compute", "hidden", "exposed", "waiting", "memory", "idle");
  auto line = [&](const std::string& who, int64_t iters, const StepSplit& p) {
    auto pct = [&](int64_t ns) {
      return p.wall_ns > 0 ? FormatPercent(static_cast<double>(ns) / static_cast<double>(p.wall_ns))
                           : std::string("n/a");
    };
    out << fmt::format("{:>5}  {:>5}  {:>10}  {:>8}  {:>8}  {:>8}  {:>8}  {:>8}  {:>8}\n", who,
                       iters > 0 ? std::to_string(iters) : std::string("-"),
                       FormatDuration(iters > 0 ? p.wall_ns / iters : p.wall_ns), pct(p.compute_only_ns),
                       pct(p.comm_hidden_ns), pct(p.comm_exposed_ns), pct(p.comm_waiting_ns),
                       pct(p.memory_only_ns), pct(p.idle_ns));
  };
  int64_t run_iters = 0;
  bool all_iters = true;
  for (const StepBreakdownRank& r : b.ranks) {
    line(RankLabel(r.rank), r.iterations, r.split);
    run_iters += r.iterations;
    all_iters = all_iters && r.iterations > 0;
  }
  if (b.ranks.size() > 1) line("run", all_iters ? run_iters : 0, b.run);
}

// By op type, summed over ranks (the op_types analyzer's rows).
void WriteOpTypes(const Page& p) {
  const Summary& s = p.s;
  std::ostream& out = p.out;
  if (!s.op_types || s.op_types->empty()) return;
  struct Row { int64_t count = 0, time = 0, exposed = 0, bytes = 0; bool bytes_known = true; };
  std::map<std::string, Row> rows;
  for (const OpTypeRow& j : *s.op_types) {
    Row& r = rows[j.op];
    r.count += j.count;
    r.time += j.time_ns;
    r.exposed += j.exposed_ns;
    if (j.bytes) r.bytes += *j.bytes;
    else r.bytes_known = false;
  }
  out << "\nby op type (all ranks):\n";
  out << fmt::format("{:>14}  {:>7}  {:>10}  {:>10}  {:>10}  {:>8}\n", "op", "count", "bytes", "time", "exposed",
                     "exposed%");
  for (const auto& [op, r] : rows)
    out << fmt::format("{:>14}  {:>7}  {:>10}  {:>10}  {:>10}  {:>8}\n", EscapeForTerminal(op), r.count,
                       r.bytes_known ? FormatBytes(r.bytes) : "?", FormatDuration(r.time), FormatDuration(r.exposed),
                       r.time > 0 ? FormatPercent(static_cast<double>(r.exposed) / static_cast<double>(r.time))
                                  : std::string("n/a"));
}

// Across ranks: wait (for the last rank to arrive) against transfer, and the stragglers.
void WriteCrossRank(const Page& p) {
  const Summary& s = p.s;
  std::ostream& out = p.out;
  if (!s.cross_rank || s.cross_rank->ranks.empty()) return;
  out << "\nacross ranks (matched collectives: kernel time = waiting for the last rank + transfer):\n";
  out << fmt::format("{:>5}  {:>11}  {:>10}  {:>10}  {:>14}\n", "rank", "collectives", "wait", "transfer",
                     "exposed wait");
  if (const CollectivesSummary& cs = s.cross_rank->summary; cs.plugin_timing)
    out << fmt::format("  from each rank's NCCL profiler plugin GPU start for {} of {} matched collectives (the "
                       "rest from kernels)\n",
                       cs.timed_by_nccl_profiler, cs.matched);
  for (const CrossRankRow& r : s.cross_rank->ranks)
    out << fmt::format("{:>5}  {:>11}  {:>10}  {:>10}  {:>14}\n", std::to_string(r.rank), r.collectives,
                       FormatDuration(r.wait_ns), FormatDuration(r.transfer_ns), FormatDuration(r.exposed_wait_ns));
  size_t shown = 0;
  for (const StragglerRow& r : s.cross_rank->stragglers) {
    if (shown == 3 || r.last_arrivals == 0) continue;
    ++shown;
    out << fmt::format("  straggler rank {}: last at {} of {} collectives; the others lost {} waiting\n", r.rank,
                       r.last_arrivals, r.collectives_counted, FormatDuration(r.others_wait_ns));
  }
}

// Point-to-point: the recv wait (pipeline bubble) and the stage everyone waits on.
void WritePointToPoint(const Page& pg) {
  const Summary& s = pg.s;
  std::ostream& out = pg.out;
  if (!s.cross_rank || !s.cross_rank->point_to_point || s.cross_rank->point_to_point->pairs <= 0) return;
  const PointToPoint& p = *s.cross_rank->point_to_point;
  out << fmt::format("\npoint-to-point: {} send/recv pairs, recvs waited {} for their peers' sends", p.pairs,
                     FormatDuration(p.recv_wait_ns));
  if (p.bottleneck_rank)
    out << fmt::format("; the stage everyone waits on: rank {} ({} of that)", *p.bottleneck_rank,
                       FormatDuration(p.bottleneck_waited_on_ns));
  out << "\n";
}

// --per-iteration: one row per iteration window. Bounded: per rank the first and last
// kTerminalIterationRows rows, and how many are left out between (all of them are in the JSON
// summary).
void WriteIterations(const Page& p) {
  const Summary& s = p.s;
  std::ostream& out = p.out;
  if (!p.o.per_iteration || s.iterations.empty()) return;
  out << "\nper iteration (window on the GPU timeline; w = warm-up, left out of spreads and the CI gate):\n";
  out << fmt::format("{:>5}  {:>5}  {:>6}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>8}  {:>6}{}\n", "rank", "iter",
                     "step", "wall", "compute", "comm", "overlap", "exposed", "overlap%", "ops", p.FileColumn("file"));
  constexpr int64_t kTerminalIterationRows = 20;
  std::vector<int64_t> rows(s.ranks.size() + 1, 0);
  for (const IterationResult& it : s.iterations) ++rows[std::min(it.rank_index, s.ranks.size())];
  for (const IterationResult& it : s.iterations) {
    const int64_t n = rows[std::min(it.rank_index, s.ranks.size())];
    if (n > 2 * kTerminalIterationRows && it.index >= kTerminalIterationRows &&
        it.index < n - kTerminalIterationRows) {
      if (it.index == kTerminalIterationRows)
        out << fmt::format("{:>5}  ... {} iterations left out (all of them in --json)\n", RankLabel(it.rank),
                           n - 2 * kTerminalIterationRows);
      continue;
    }
    const OverlapFigures& f = it.figures;
    out << fmt::format("{:>5}  {:>5}  {:>6}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>8}  {:>6}{}\n",
                       RankLabel(it.rank), it.warmup ? fmt::format("{}w", it.index) : std::to_string(it.index),
                       it.step == kUnknown ? "-" : std::to_string(it.step),
                       FormatDuration(f.wall_ns), FormatDuration(f.compute_ns), FormatDuration(f.comm_ns),
                       FormatDuration(f.overlap_ns), FormatDuration(f.exposed_comm_ns),
                       FormatPercent(f.overlap_ratio), f.comm_ops,
                       p.FileColumn(EscapeForTerminal(it.rank_index < s.ranks.size() ? s.ranks[it.rank_index].source_path : "?")));
  }
}

// Each rank's verdict and its notices.
void WriteRankVerdicts(const Page& p) {
  for (const RankResult& r : p.s.ranks) {
    p.out << fmt::format("rank {} ({}): {}\n", RankLabel(r.rank), EscapeForTerminal(r.source_path),
                         EscapeForTerminal(r.verdict));
    for (const std::string& n : r.notices) p.out << fmt::format("  note: {}\n", EscapeForTerminal(n));
  }
}

// Data quality: every non-zero counter, worst first.
void WriteDataQuality(const Page& p) {
  std::ostream& out = p.out;
  bool any = false;
  for (Severity sev : {Severity::kError, Severity::kWarning, Severity::kInfo}) {
    for (const RankResult& r : p.s.ranks) {
      auto show = [&](std::string_view name, Severity se, int64_t v, std::string_view desc) {
        if (v == 0 || se != sev) return;
        if (!any) out << "\ndata quality:\n";
        any = true;
        std::string tag = std::string(SeverityName(se));
        if (se == Severity::kError) tag = p.Paint("1;31", tag);
        else if (se == Severity::kWarning) tag = p.Paint("33", tag);
        out << fmt::format("  {} rank {}: {} = {} ({})\n", tag, RankLabel(r.rank), EscapeForTerminal(name), v,
                           EscapeForTerminal(desc));
      };
      for (size_t i = 0; i < kStatCount; ++i) {
        const StatInfo& info = GetStatInfo(static_cast<Stat>(i));
        show(info.name, info.severity, r.stats.Get(static_cast<Stat>(i)), info.description);
      }
      for (const ExtraStat& e : r.extra_stats) show(e.name, e.severity, e.value, e.description);
    }
  }
  if (!any) out << "\ndata quality: no problems recorded\n";
}

// Findings: what to change, warnings first, at most kMaxFindings lines; findings identical
// across ranks are one line naming the ranks.
void WriteFindings(const Page& p) {
  const Summary& s = p.s;
  std::ostream& out = p.out;
  if (s.findings.empty()) return;
  constexpr size_t kMaxFindings = 12;
  out << "\nfindings:\n";
  size_t shown = 0;
  const std::vector<GroupedFinding> grouped = GroupFindings(s.findings);
  for (Severity sev : {Severity::kError, Severity::kWarning, Severity::kInfo}) {
    for (const GroupedFinding& g : grouped) {
      const Finding& f = *g.first;
      if (f.severity != sev) continue;
      if (shown++ >= kMaxFindings) continue;
      std::string who = g.ranks.size() > 1   ? fmt::format("ranks {}", fmt::join(g.ranks, ", "))
                        : g.ranks.size() == 1 ? fmt::format("rank {}", g.ranks[0])
                                              : std::string("run");
      const std::string_view name = SeverityName(sev);
      std::string tag = sev == Severity::kWarning ? p.Paint("33", std::string(name)) : std::string(name);
      out << fmt::format("  {} {}: {}\n", tag, who, EscapeForTerminal(f.message));
    }
  }
  if (shown > kMaxFindings)
    out << fmt::format("  ... {} more in the JSON summary (\"findings\")\n", shown - kMaxFindings);
}

class TerminalReport : public ReportWriter {
 public:
  std::string_view name() const override { return "terminal"; }
  std::string_view description() const override { return "human-readable tables"; }

  // The tables in page order; each is left out when its analyzer has nothing to show.
  Status Write(const Summary& s, const ReportOptions& o, std::ostream& out) override {
    const Page page{s, o, out, SomeRankTwice(s)};
    WriteRanks(page);
    WriteTimingSources(page);
    WriteStepSplit(page);
    WriteWhatIfTable(s, out);
    WriteInterferenceLine(s, out);
    WriteOpTypes(page);
    WriteCrossRank(page);
    WritePointToPoint(page);
    WriteIterations(page);
    out << "\n";
    WriteRankVerdicts(page);
    WriteDataQuality(page);
    WriteFindings(page);
    out << "\n" << page.Paint("1", "verdict: " + EscapeForTerminal(s.verdict)) << "\n";
    if (!out) return MakeError(StatusCode::kIo, "write failed");
    return OkStatus();
  }
};

}  // namespace

std::unique_ptr<ReportWriter> MakeTerminalReport() { return std::make_unique<TerminalReport>(); }

}  // namespace overlapprof
