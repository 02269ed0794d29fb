#pragma once
// The terminal report's parts. The report is a list of sections in page order
// (reports/terminal_sections.inc), each a function that writes its lines to the page, or nothing
// when it has nothing to show. Adding a part: a function `void WriteX(const TerminalPage&)` in
// the part's own file, declared in its header, and one line in terminal_sections.inc.
//
// A section starts with an empty line when it writes anything (the sections are blocks apart),
// keeps every line within kTerminalWidth columns (TerminalPage::Wrap for text, tables sized to
// fit), escapes text from the inputs with EscapeForTerminal, and shows ranks through
// TerminalPage::shown_ranks (the ranks the user asked for, or the ones that matter) so that it
// scales with the rank count.
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "analyzers/summary.h"
#include "reports/report.h"

namespace overlapprof {

// The width every line of the terminal report fits in.
inline constexpr size_t kTerminalWidth = 100;

// Which sections `--brief` keeps: the verdict and the headline figures only.
enum class TerminalDetail { kBrief, kFull };

// One Write of the terminal report: what every section reads and where it writes.
struct TerminalPage {
  const Summary& s;
  const ReportOptions& o;
  std::ostream& out;
  // Several files with the same rank (or several without one): rows name their file too.
  bool same_rank = false;
  // Indices into s.ranks of the ranks per-rank tables show, in s.ranks order: every rank with
  // --ranks all or when there are few, the listed ones with --ranks LIST, else the ranks that
  // matter (slowest, most exposed, the straggler, outliers beyond the spread).
  std::vector<size_t> shown_ranks;
  // Why each rank in shown_ranks is shown ("slowest", "straggler", ...), empty when asked for.
  std::vector<std::string> why_shown;

  // `text` in ANSI SGR `code` when colour is on, else as it is.
  std::string Paint(std::string_view code, const std::string& text) const;
  // Writes `text` (already escaped) as lines of at most kTerminalWidth columns, broken at spaces:
  // the first line after `first_indent` spaces, the others after `indent` spaces.
  void Wrap(std::string_view text, size_t first_indent, size_t indent) const;
  // The file column's text for a row (empty unless same_rank).
  std::string FileColumn(const std::string& text) const;
};

// A section of the terminal report (terminal_sections.inc).
using TerminalSectionFn = void (*)(const TerminalPage&);
struct TerminalSection {
  std::string_view name;
  TerminalSectionFn write;
  TerminalDetail detail;  // kBrief: shown with --brief too
};
// Every section, in page order.
const std::vector<TerminalSection>& TerminalSections();

// Ranks as a short list: "0-3, 5, 7" (ascending, runs of consecutive ranks joined).
std::string RankList(std::vector<int64_t> ranks);

// Columns `s` takes on a terminal (UTF-8 code points; each counts one column).
size_t TerminalColumns(std::string_view s);

// The sections defined outside terminal.cc (each in its part's file).
#define OVERLAPPROF_TERMINAL_SECTION(name, fn, detail) void fn(const TerminalPage& page);
#include "reports/terminal_sections.inc"
#undef OVERLAPPROF_TERMINAL_SECTION

}  // namespace overlapprof
