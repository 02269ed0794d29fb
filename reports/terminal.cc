// The terminal summary: one table row per rank, optional per-iteration table, notices,
// data-quality counters and the verdict. Colour only when ReportOptions::color.
#include <fmt/format.h>

#include "analyzers/overlap.h"
#include "reports/report.h"

namespace overlapprof {

namespace {

std::string RankLabel(int64_t rank) { return rank == kUnknown ? "?" : std::to_string(rank); }

class TerminalReport : public ReportWriter {
 public:
  std::string_view name() const override { return "terminal"; }
  std::string_view description() const override { return "human-readable tables"; }

  Status Write(const Summary& s, const ReportOptions& o, std::ostream& out) const override {
    auto paint = [&](std::string_view code, const std::string& text) {
      return o.color ? fmt::format("\x1b[{}m{}\x1b[0m", code, text) : text;
    };
    out << fmt::format("{:>5}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>8}  {:>7}  {:>6}  {:>5}\n", "rank", "wall",
                       "compute", "comm", "overlap", "exposed", "overlap%", "bound%", "ops", "iters");
    for (const RankResult& r : s.ranks) {
      const OverlapFigures& f = r.whole;
      out << fmt::format("{:>5}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>8}  {:>7}  {:>6}  {:>5}\n",
                         RankLabel(r.rank), FormatDuration(f.wall_ns), FormatDuration(f.compute_ns),
                         FormatDuration(f.comm_ns), FormatDuration(f.overlap_ns), FormatDuration(f.exposed_comm_ns),
                         FormatPercent(f.overlap_ratio), FormatPercent(f.achievable_ratio), f.comm_ops,
                         r.iteration_count);
    }
    if (o.per_iteration && !s.iterations.empty()) {
      out << "\nper iteration (window on the GPU timeline):\n";
      out << fmt::format("{:>5}  {:>5}  {:>6}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>8}  {:>6}\n", "rank", "iter",
                         "step", "wall", "compute", "comm", "overlap", "exposed", "overlap%", "ops");
      for (const IterationResult& it : s.iterations) {
        const OverlapFigures& f = it.figures;
        out << fmt::format("{:>5}  {:>5}  {:>6}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>8}  {:>6}\n",
                           RankLabel(it.rank), it.index, it.step == kUnknown ? "-" : std::to_string(it.step),
                           FormatDuration(f.wall_ns), FormatDuration(f.compute_ns), FormatDuration(f.comm_ns),
                           FormatDuration(f.overlap_ns), FormatDuration(f.exposed_comm_ns),
                           FormatPercent(f.overlap_ratio), f.comm_ops);
      }
    }
    out << "\n";
    for (const RankResult& r : s.ranks) {
      out << fmt::format("rank {} ({}): {}\n", RankLabel(r.rank), r.source_path, r.verdict);
      for (const std::string& n : r.notices) out << fmt::format("  note: {}\n", n);
    }
    // Data quality: every non-zero counter, worst first.
    bool any = false;
    for (Severity sev : {Severity::kError, Severity::kWarning, Severity::kInfo}) {
      for (const RankResult& r : s.ranks) {
        auto show = [&](std::string_view name, Severity se, int64_t v, std::string_view desc) {
          if (v == 0 || se != sev) return;
          if (!any) out << "\ndata quality:\n";
          any = true;
          std::string tag = std::string(SeverityName(se));
          if (se == Severity::kError) tag = paint("1;31", tag);
          else if (se == Severity::kWarning) tag = paint("33", tag);
          out << fmt::format("  {} rank {}: {} = {} ({})\n", tag, RankLabel(r.rank), name, v, desc);
        };
        for (size_t i = 0; i < kStatCount; ++i) {
          const StatInfo& info = GetStatInfo(static_cast<Stat>(i));
          show(info.name, info.severity, r.stats.Get(static_cast<Stat>(i)), info.description);
        }
        for (const ExtraStat& e : r.extra_stats) show(e.name, e.severity, e.value, e.description);
      }
    }
    if (!any) out << "\ndata quality: no problems recorded\n";
    out << "\n" << paint("1", "verdict: " + s.verdict) << "\n";
    if (!out) return MakeError(StatusCode::kIo, "write failed");
    return OkStatus();
  }
};

}  // namespace

std::unique_ptr<ReportWriter> MakeTerminalReport() { return std::make_unique<TerminalReport>(); }

}  // namespace overlapprof
