// The terminal summary, answer first: the verdict, the run's headline figures, a ranks table
// that keeps to the ranks that matter, then the detail sections (reports/terminal_sections.inc),
// and the verdict again. Every line fits kTerminalWidth columns; colour only when
// ReportOptions::color, block characters only when ReportOptions::utf8.
#include "reports/terminal.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include "analyzers/comm_ops.h"
#include "analyzers/overlap.h"
#include "reports/what_if_report.h"
#include "src/common/utf8.h"

namespace overlapprof {

namespace {

// Ranks up to this many are all shown; beyond, the ranks that matter, at most kMaxRankRows.
constexpr size_t kAllRanksUpTo = 8;
constexpr size_t kMaxRankRows = 10;
// Lines of grouped notes shown before the rest are counted.
constexpr size_t kMaxNoteLines = 4;
// Cells of a step-split bar.
constexpr int kBarCells = 16;

std::string RankLabel(int64_t rank) { return rank == kUnknown ? "?" : std::to_string(rank); }

std::string FormatBytes(int64_t b) {
  const double v = static_cast<double>(b);
  if (v >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", v / (1024.0 * 1024 * 1024));
  if (v >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", v / (1024.0 * 1024));
  if (v >= 1024.0) return fmt::format("{:.1f} KiB", v / 1024.0);
  return fmt::format("{} B", b);
}

std::string Share(int64_t part, int64_t whole) {
  return whole > 0 ? FormatPercent(static_cast<double>(part) / static_cast<double>(whole)) : std::string("n/a");
}

bool SomeRankTwice(const Summary& s) {
  std::map<std::string, int> label_count;
  for (const RankResult& r : s.ranks) ++label_count[RankLabel(r.rank)];
  bool same_rank = false;
  for (const auto& entry : label_count) same_rank |= entry.second > 1;
  return same_rank;
}

// One rank's step as the ranks table shows it: its steady iterations (else the whole trace).
struct RankStep {
  int64_t iterations = 0;
  int64_t step_ns = 0;  // per iteration (the whole trace's wall without iterations)
  StepSplit split;      // summed over the iterations
  double exposed_share = 0;  // (exposed + waiting) / wall
};

RankStep StepOf(const Summary& s, size_t i) {
  RankStep r;
  if (s.step_breakdown && i < s.step_breakdown->ranks.size()) {
    const StepBreakdownRank& b = s.step_breakdown->ranks[i];
    r.iterations = b.iterations;
    r.split = b.split;
  } else {  // no step breakdown: the whole trace's figures, no waiting known
    const OverlapFigures& f = s.ranks[i].whole;
    r.split.wall_ns = f.wall_ns;
    r.split.comm_hidden_ns = f.overlap_ns;
    r.split.compute_only_ns = f.compute_ns - f.overlap_ns;
    r.split.comm_exposed_ns = f.exposed_comm_ns;
    r.split.idle_ns = f.idle_ns;
    r.split.memory_only_ns = std::max<int64_t>(0, f.busy_ns - f.compute_ns - f.comm_ns + f.overlap_ns);
  }
  r.step_ns = r.iterations > 0 ? r.split.wall_ns / r.iterations : r.split.wall_ns;
  if (r.split.wall_ns > 0)
    r.exposed_share = static_cast<double>(r.split.comm_exposed_ns + r.split.comm_waiting_ns) /
                      static_cast<double>(r.split.wall_ns);
  return r;
}

// The step split as a bar of kBarCells cells: compute only, hidden communication, exposed
// communication, waiting for other ranks, the rest (memory only, idle); cells by largest remainder.
std::string Bar(const StepSplit& p, bool utf8) {
  const int64_t parts[5] = {p.compute_only_ns, p.comm_hidden_ns, p.comm_exposed_ns, p.comm_waiting_ns,
                            p.memory_only_ns + p.idle_ns};
  static constexpr const char* kUtf8[5] = {"\u2588", "\u2593", "\u2592", "\u2591", "\u00b7"};
  static constexpr const char* kAscii[5] = {"#", "=", "x", "w", "."};
  int64_t total = 0;
  for (int64_t v : parts) total += v;
  if (total <= 0) return std::string(kBarCells, ' ');
  int cells[5];
  double rem[5];
  int used = 0;
  for (int k = 0; k < 5; ++k) {
    const double exact = static_cast<double>(parts[k]) * kBarCells / static_cast<double>(total);
    cells[k] = static_cast<int>(exact);
    rem[k] = exact - cells[k];
    used += cells[k];
  }
  while (used < kBarCells) {
    int best = 0;
    for (int k = 1; k < 5; ++k)
      if (rem[k] > rem[best]) best = k;
    ++cells[best];
    rem[best] = -1;
    ++used;
  }
  std::string bar;
  for (int k = 0; k < 5; ++k)
    for (int c = 0; c < cells[k]; ++c) bar += utf8 ? kUtf8[k] : kAscii[k];
  return bar;
}

std::string BarLegend(bool utf8) {
  return utf8 ? "\u2588 compute only  \u2593 hidden comm  \u2592 exposed comm  \u2591 waiting for ranks  \u00b7 "
                "memory only, idle"
              : "# compute only  = hidden comm  x exposed comm  w waiting for ranks  . memory only, idle";
}

// ---- Lines that differ only by their rank and figures, grouped -------------------------------

// A text split into a shape (the words) and its figures: numbers with their unit. The rank's own
// number after "rank " is part of neither: texts of different ranks share a shape.
struct Figure {
  std::string text;  // as written, "9.86 ms"
  std::string number, unit;
  double value = 0;  // in the unit's base (ns, bytes, percent, count)
};
struct Shaped {
  std::string shape;  // the text with \x01 for the rank's own number, \x02 for each figure
  std::vector<Figure> figures;
};

bool IsWordByte(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '#'; }

Shaped ShapeOf(std::string_view text, int64_t own_rank) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}, {"ms", 1e6}, {"\u00b5s", 1e3},
      {"us", 1e3},           {"ns", 1},          {"s", 1e9},      {"B", 1},   {"%", 1}};
  Shaped out;
  const std::string own = own_rank == kUnknown ? std::string() : std::to_string(own_rank);
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    const bool starts_number = std::isdigit(static_cast<unsigned char>(c)) && (i == 0 || !IsWordByte(text[i - 1]));
    if (!starts_number) {
      out.shape += c;
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j + 1 < text.size() && text[j] == '.' && std::isdigit(static_cast<unsigned char>(text[j + 1]))) {
      ++j;
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    }
    const std::string_view number = text.substr(i, j - i);
    // Followed by a letter (an identifier such as "3rd" or "64x"): not a figure.
    if (j < text.size() && std::isalpha(static_cast<unsigned char>(text[j]))) {
      out.shape.append(number);
      i = j;
      continue;
    }
    const bool after_rank = out.shape.size() >= 5 && out.shape.compare(out.shape.size() - 5, 5, "rank ") == 0;
    if (after_rank) {  // a rank's number: the own one becomes the marker \x01 (the rank list fills it), another stays in the shape
      if (number == own) out.shape += '\x01';
      else out.shape.append(number);
      i = j;
      continue;
    }
    Figure f;
    f.number = std::string(number);
    f.value = std::strtod(f.number.c_str(), nullptr);
    size_t end = j;
    for (const auto& [unit, scale] : kUnits) {
      const size_t at = j < text.size() && text[j] == ' ' ? j + 1 : j;
      if (text.substr(at, unit.size()) != unit) continue;
      const size_t after = at + unit.size();
      if (after < text.size() && std::isalpha(static_cast<unsigned char>(text[after]))) continue;
      f.unit = std::string(text.substr(j, after - j));
      f.value *= scale;
      end = after;
      break;
    }
    f.text = std::string(text.substr(i, end - i));
    out.shape += '\x02';
    out.figures.push_back(std::move(f));
    i = end;
  }
  return out;
}

struct TextGroup {
  std::string text;  // escaped, ready to print
  std::vector<int64_t> ranks;
};

// Texts (one per rank) grouped by shape, in the order each shape first appears. A group of one
// rank keeps its text; a group of several reads "the rank" for the rank's own number and
// "LOW to HIGH" for a figure that differs between them.
std::vector<TextGroup> GroupByShape(const std::vector<std::pair<int64_t, std::string>>& items) {
  std::vector<TextGroup> groups;
  std::vector<std::vector<Shaped>> members;
  std::vector<std::string> originals;
  std::map<std::string, size_t> index;
  for (const auto& [rank, text] : items) {
    Shaped sh = ShapeOf(text, rank);
    auto [it, fresh] = index.try_emplace(sh.shape, groups.size());
    if (fresh) {
      groups.push_back({EscapeForTerminal(text), {}});
      members.emplace_back();
    }
    if (rank != kUnknown) groups[it->second].ranks.push_back(rank);
    members[it->second].push_back(std::move(sh));
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<Shaped>& m = members[g];
    if (m.size() < 2) continue;
    std::string text;
    size_t fig = 0;
    for (char c : m[0].shape) {
      if (c == '\x01') {
        text += "each";
        // "rank \x01" reads "each rank": move "rank " after the word.
        if (text.size() >= 9 && text.compare(text.size() - 9, 9, "rank each") == 0) text.replace(text.size() - 9, 9, "each rank");
      } else if (c == '\x02') {
        const Figure* lo = &m[0].figures[fig];
        const Figure* hi = lo;
        for (const Shaped& x : m) {
          if (x.figures[fig].value < lo->value) lo = &x.figures[fig];
          if (x.figures[fig].value > hi->value) hi = &x.figures[fig];
        }
        if (lo->text == hi->text) text += lo->text;
        else if (lo->unit == hi->unit) text += lo->number + " to " + hi->number + hi->unit;
        else text += lo->text + " to " + hi->text;
        ++fig;
      } else {
        text += c;
      }
    }
    groups[g].text = EscapeForTerminal(text);
    std::sort(groups[g].ranks.begin(), groups[g].ranks.end());
    groups[g].ranks.erase(std::unique(groups[g].ranks.begin(), groups[g].ranks.end()), groups[g].ranks.end());
  }
  return groups;
}

std::string WhoOf(const std::vector<int64_t>& ranks) {
  if (ranks.empty()) return "run";
  return (ranks.size() > 1 ? "ranks " : "rank ") + RankList(ranks);
}

// ---- Which ranks per-rank tables show ----------------------------------------------------------

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The ranks that matter when not all are shown: the slowest and fastest step, the most exposed,
// the stragglers the cross-rank analyzer named, then the outliers (a step or an exposed share
// farther from the median than 3 median absolute deviations, and than 1% of the step or 0.5
// points of share), farthest first; at most kMaxRankRows, in s.ranks order.
void ChooseRanks(const Summary& s, const std::vector<RankStep>& steps, std::vector<size_t>& shown,
                 std::vector<std::string>& why) {
  const size_t n = s.ranks.size();
  std::vector<std::vector<std::string>> reasons(n);
  auto mark = [&](size_t i, const char* reason) {
    if (std::find(reasons[i].begin(), reasons[i].end(), reason) == reasons[i].end()) reasons[i].push_back(reason);
  };
  size_t slowest = 0, fastest = 0, exposed = 0;
  for (size_t i = 1; i < n; ++i) {
    if (steps[i].step_ns > steps[slowest].step_ns) slowest = i;
    if (steps[i].step_ns < steps[fastest].step_ns) fastest = i;
    if (steps[i].exposed_share > steps[exposed].exposed_share) exposed = i;
  }
  mark(slowest, "slowest");
  mark(fastest, "fastest");
  mark(exposed, "most exposed");
  if (s.cross_rank) {
    size_t named = 0;
    for (const StragglerRow& st : s.cross_rank->stragglers) {
      if (named == 2 || st.last_arrivals == 0) continue;
      for (size_t i = 0; i < n; ++i)
        if (s.ranks[i].rank == st.rank) {
          mark(i, "straggler");
          ++named;
          break;
        }
    }
  }
  std::vector<double> step_v, share_v;
  for (const RankStep& r : steps) {
    step_v.push_back(static_cast<double>(r.step_ns));
    share_v.push_back(r.exposed_share);
  }
  const double step_med = Median(step_v), share_med = Median(share_v);
  std::vector<double> step_dev, share_dev;
  for (size_t i = 0; i < n; ++i) {
    step_dev.push_back(std::abs(step_v[i] - step_med));
    share_dev.push_back(std::abs(share_v[i] - share_med));
  }
  const double step_tol = std::max(3 * Median(step_dev), 0.01 * step_med);
  const double share_tol = std::max(3 * Median(share_dev), 0.005);
  std::vector<std::pair<double, size_t>> outliers;  // distance in tolerances, rank index
  for (size_t i = 0; i < n; ++i) {
    const double d = std::max(step_tol > 0 ? step_dev[i] / step_tol : 0, share_tol > 0 ? share_dev[i] / share_tol : 0);
    if (d > 1) outliers.emplace_back(d, i);
  }
  std::stable_sort(outliers.begin(), outliers.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  size_t count = 0;
  for (const auto& r : reasons) count += !r.empty();
  for (const auto& [d, i] : outliers) {
    if (!reasons[i].empty()) continue;
    if (count == kMaxRankRows) break;
    mark(i, "outlier");
    ++count;
  }
  for (size_t i = 0; i < n; ++i) {
    if (reasons[i].empty()) continue;
    shown.push_back(i);
    why.push_back(fmt::format("{}", fmt::join(reasons[i], ",")));
  }
}

TerminalPage MakePage(const Summary& s, const ReportOptions& o, std::ostream& out) {
  TerminalPage page{s, o, out, SomeRankTwice(s), {}, {}};
  const size_t n = s.ranks.size();
  if (!o.ranks.empty() && !o.all_ranks) {
    for (size_t i = 0; i < n; ++i)
      if (std::find(o.ranks.begin(), o.ranks.end(), s.ranks[i].rank) != o.ranks.end()) {
        page.shown_ranks.push_back(i);
        page.why_shown.emplace_back();
      }
    return page;
  }
  std::vector<RankStep> steps;
  for (size_t i = 0; i < n; ++i) steps.push_back(StepOf(s, i));
  std::vector<size_t> chosen;
  std::vector<std::string> why;
  if (n > 1) ChooseRanks(s, steps, chosen, why);
  if (o.all_ranks || n <= kAllRanksUpTo) {
    for (size_t i = 0; i < n; ++i) {
      page.shown_ranks.push_back(i);
      auto it = std::find(chosen.begin(), chosen.end(), i);
      page.why_shown.push_back(it == chosen.end() ? std::string() : why[static_cast<size_t>(it - chosen.begin())]);
    }
  } else {
    page.shown_ranks = std::move(chosen);
    page.why_shown = std::move(why);
  }
  return page;
}

bool Shown(const TerminalPage& p, size_t rank_index) {
  return std::find(p.shown_ranks.begin(), p.shown_ranks.end(), rank_index) != p.shown_ranks.end();
}

}  // namespace

// ---- TerminalPage -------------------------------------------------------------------------------

std::string TerminalPage::Paint(std::string_view code, const std::string& text) const {
  return o.color ? fmt::format("\x1b[{}m{}\x1b[0m", code, text) : text;
}

std::string TerminalPage::FileColumn(const std::string& text) const {
  return same_rank ? "  " + text : std::string();
}

size_t TerminalColumns(std::string_view s) {
  size_t cols = 0;
  for (unsigned char c : s) cols += (c & 0xC0) != 0x80;
  return cols;
}

// Words of `text`, a figure's unit kept with its number ("314.47 ms" is one word).
std::vector<std::string_view> WrapWords(std::string_view text) {
  static constexpr std::string_view kUnits[] = {"GiB", "MiB", "KiB", "ms", "\u00b5s", "us", "ns", "s", "B", "%"};
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    if (i == text.size()) break;
    size_t j = text.find(' ', i);
    if (j == std::string_view::npos) j = text.size();
    std::string_view w = text.substr(i, j - i);
    std::string_view bare = w;
    while (!bare.empty() && std::strchr(",;:.)", bare.back())) bare.remove_suffix(1);
    const bool unit = std::find(std::begin(kUnits), std::end(kUnits), bare) != std::end(kUnits);
    if (unit && !words.empty() && std::isdigit(static_cast<unsigned char>(words.back().back())) &&
        words.back().data() + words.back().size() + 1 == w.data())
      words.back() = std::string_view(words.back().data(), words.back().size() + 1 + w.size());
    else
      words.push_back(w);
    i = j;
  }
  return words;
}

void TerminalPage::Wrap(std::string_view text, size_t first_indent, size_t indent) const {
  std::string line(first_indent, ' ');
  size_t cols = first_indent;
  bool empty = true;  // no word on this line yet
  for (const std::string_view word : WrapWords(text)) {
    const size_t w = TerminalColumns(word);
    if (!empty && cols + 1 + w > kTerminalWidth) {
      out << line << "\n";
      line.assign(indent, ' ');
      cols = indent;
      empty = true;
    }
    if (!empty) {
      line += ' ';
      ++cols;
    }
    // A word longer than the line (a path): cut at the width, by code point.
    std::string_view rest = word;
    while (cols + TerminalColumns(rest) > kTerminalWidth && cols < kTerminalWidth) {
      size_t take = 0, c = 0;
      while (take < rest.size() && cols + c < kTerminalWidth) {
        ++take;
        while (take < rest.size() && (static_cast<unsigned char>(rest[take]) & 0xC0) == 0x80) ++take;
        ++c;
      }
      line.append(rest.substr(0, take));
      out << line << "\n";
      rest.remove_prefix(take);
      line.assign(indent, ' ');
      cols = indent;
    }
    line.append(rest);
    cols += TerminalColumns(rest);
    empty = false;
  }
  out << line << "\n";
}

std::string RankList(std::vector<int64_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? std::to_string(ranks[i])
                  : fmt::format("{}{}{}", ranks[i], j == i + 1 ? "," : "-", ranks[j]);
    i = j + 1;
  }
  return out;
}

// ---- The sections -----------------------------------------------------------------------------

void WriteVerdictFirst(const TerminalPage& p) {
  p.out << p.Paint("1", "verdict:") << " ";
  std::string text = EscapeForTerminal(p.s.verdict);
  std::ostringstream tmp;
  TerminalPage inner{p.s, p.o, tmp, p.same_rank, {}, {}};
  inner.Wrap(text, 9, 9);
  p.out << tmp.str().substr(9);
}

void WriteVerdictLast(const TerminalPage& p) {
  p.out << "\n";
  WriteVerdictFirst(p);
}

// The run as a whole: ranks, iterations and the step, the straggler; the step's split; the
// whole trace's communication.
void WriteRunFigures(const TerminalPage& p) {
  const Summary& s = p.s;
  if (s.ranks.empty()) return;
  p.out << "\n";
  int64_t comm = 0, overlap = 0, exposed = 0, ops = 0;
  for (const RankResult& r : s.ranks) {
    comm += r.whole.comm_ns;
    overlap += r.whole.overlap_ns;
    exposed += r.whole.exposed_comm_ns;
    ops += r.whole.comm_ops;
  }
  std::string run = s.ranks.size() == 1 ? "run: 1 rank" : fmt::format("run: {} ranks", s.ranks.size());
  std::optional<StepSplit> split;
  if (s.step_breakdown && !s.step_breakdown->ranks.empty()) {
    const StepBreakdown& b = *s.step_breakdown;
    split = s.ranks.size() == 1 ? b.ranks[0].split : b.run;
    int64_t iters = 0;
    bool all_iters = true;
    for (const StepBreakdownRank& r : b.ranks) {
      iters += r.iterations;
      all_iters = all_iters && r.iterations > 0;
    }
    run += all_iters ? fmt::format(", {} steady iteration(s) of {}", iters, FormatDuration(split->wall_ns / iters))
                     : fmt::format(", whole trace {}", FormatDuration(split->wall_ns));
  }
  if (s.cross_rank)
    for (const StragglerRow& r : s.cross_rank->stragglers) {
      if (r.last_arrivals == 0) continue;
      run += fmt::format("; straggler rank {} (the others lost {} waiting)", r.rank, FormatDuration(r.others_wait_ns));
      break;
    }
  p.Wrap(run, 0, 5);
  if (split) {
    const StepSplit& t = *split;
    p.Wrap(fmt::format("step: compute only {}, hidden comm {}, exposed comm {}, waiting {}, memory {}, idle {}",
                       Share(t.compute_only_ns, t.wall_ns), Share(t.comm_hidden_ns, t.wall_ns),
                       Share(t.comm_exposed_ns, t.wall_ns), Share(t.comm_waiting_ns, t.wall_ns),
                       Share(t.memory_only_ns, t.wall_ns), Share(t.idle_ns, t.wall_ns)),
           0, 6);
  }
  if (comm > 0) {
    // bound: min(1, compute / comm) per rank, the best overlap any schedule could reach.
    std::optional<double> lo, hi;
    for (const RankResult& r : s.ranks) {
      if (!r.whole.achievable_ratio) continue;
      lo = std::min(lo.value_or(*r.whole.achievable_ratio), *r.whole.achievable_ratio);
      hi = std::max(hi.value_or(*r.whole.achievable_ratio), *r.whole.achievable_ratio);
    }
    std::string bound;
    if (lo) bound = FormatPercent(*lo) == FormatPercent(*hi)
                        ? fmt::format(" (bound {})", FormatPercent(*lo))
                        : fmt::format(" (bound {} to {})", FormatPercent(*lo), FormatPercent(*hi));
    p.Wrap(fmt::format("comm: {} in {} ops (whole trace, all ranks): {} hidden{}, {} exposed",
                       FormatDuration(comm), ops, Share(overlap, comm), bound, FormatDuration(exposed)),
           0, 6);
  }
}

// One row per shown rank: its step, the split as a bar and in shares, the whole trace's overlap,
// and why it is shown; a line counts the ranks folded.
void WriteRanksTable(const TerminalPage& p) {
  const Summary& s = p.s;
  // One rank: the run's figures above are its own.
  if (s.ranks.empty() || (s.ranks.size() == 1 && !p.o.all_ranks && p.o.ranks.empty())) return;
  std::ostream& out = p.out;
  out << "\n";
  const size_t folded = s.ranks.size() - p.shown_ranks.size();
  if (folded > 0 && p.o.ranks.empty())
    out << fmt::format("ranks: {} of {} shown (slowest, fastest, most exposed, stragglers, outliers; --ranks all)\n",
                       p.shown_ranks.size(), s.ranks.size());
  else
    out << "ranks (step: per steady iteration, else the whole trace; split in % of the step):\n";
  out << fmt::format("{:>5}  {:>9}  {:<{}}  {:>7} {:>7} {:>7} {:>7}  {:>8}{}\n", "rank", "step", "split",
                     kBarCells, "compute", "hidden", "exposed", "waiting", "overlap%",
                     p.FileColumn("  file"));
  for (size_t k = 0; k < p.shown_ranks.size(); ++k) {
    const size_t i = p.shown_ranks[k];
    const RankResult& r = s.ranks[i];
    const RankStep st = StepOf(s, i);
    const StepSplit& sp = st.split;
    const std::string bar = Bar(sp, p.o.utf8);
    std::string row = fmt::format("{:>5}  {:>9}  {}  {:>7} {:>7} {:>7} {:>7}  {:>8}", RankLabel(r.rank),
                                  FormatDuration(st.step_ns), bar, Share(sp.compute_only_ns, sp.wall_ns),
                                  Share(sp.comm_hidden_ns, sp.wall_ns), Share(sp.comm_exposed_ns, sp.wall_ns),
                                  Share(sp.comm_waiting_ns, sp.wall_ns), FormatPercent(r.whole.overlap_ratio));
    row += p.FileColumn(EscapeForTerminal(r.source_path));
    if (k < p.why_shown.size() && !p.why_shown[k].empty()) {
      // The reasons that fit the line, in order.
      std::string why;
      for (std::string_view rest = p.why_shown[k]; !rest.empty();) {
        const size_t comma = rest.find(',');
        const std::string_view reason = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        if (TerminalColumns(row) + 2 + why.size() + (why.empty() ? 0 : 1) + reason.size() > kTerminalWidth) break;
        why += (why.empty() ? "" : ",") + std::string(reason);
      }
      if (!why.empty()) row += "  " + why;
    }
    out << row << "\n";
  }
  if (folded > 0) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    double elo = 1e9, ehi = -1;
    for (size_t i = 0; i < s.ranks.size(); ++i) {
      if (Shown(p, i)) continue;
      const RankStep st = StepOf(s, i);
      lo = std::min(lo, st.step_ns);
      hi = std::max(hi, st.step_ns);
      elo = std::min(elo, st.exposed_share);
      ehi = std::max(ehi, st.exposed_share);
    }
    out << fmt::format("  ... {} more rank(s) folded: step {} to {}, exposed comm and waiting {} to {}\n", folded,
                       FormatDuration(lo), FormatDuration(hi), FormatPercent(elo), FormatPercent(ehi));
  }
  out << "  split: " << BarLegend(p.o.utf8) << "\n";
}

// What communication was timed by, where the NCCL profiler plugin was read; ranks alike grouped.
void WriteTimingSources(const TerminalPage& p) {
  std::vector<std::pair<int64_t, std::string>> items;
  for (const RankResult& r : p.s.ranks) {
    if (r.timing_source.empty()) continue;
    if (r.nccl_profiler_ops == 0)
      items.emplace_back(r.rank, "communication timed by its kernels (no NCCL profiler plugin operation used)");
    else
      items.emplace_back(r.rank, fmt::format("communication timed by {} ({} of {} NCCL profiler ops used)",
                                             r.timing_source == "nccl_profiler"
                                                 ? "NCCL's profiler plugin, per operation"
                                                 : "its kernels",
                                             r.nccl_profiler_timed_ops, r.nccl_profiler_ops));
  }
  if (items.empty()) return;
  p.out << "\n";
  for (const TextGroup& g : GroupByShape(items)) p.Wrap(fmt::format("{}: {}", WhoOf(g.ranks), g.text), 0, 2);
}

void WriteWhatIfSection(const TerminalPage& p) { WriteWhatIfTable(p.s, p.out); }

// By op type, summed over ranks (the op_types analyzer's rows).
void WriteOpTypes(const TerminalPage& p) {
  const Summary& s = p.s;
  std::ostream& out = p.out;
  if (!s.op_types || s.op_types->empty()) return;
  struct Row { int64_t count = 0, time = 0, exposed = 0, bytes = 0; bool bytes_known = true; };
  std::map<std::string, Row> rows;
  for (const OpTypeRow& j : *s.op_types) {
    Row& r = rows[std::string(OpFamilyName(j.op))];
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
                       Share(r.exposed, r.time));
}

// Across ranks: wait (for the last rank to arrive) against transfer, for the shown ranks.
void WriteCrossRank(const TerminalPage& p) {
  const Summary& s = p.s;
  std::ostream& out = p.out;
  if (!s.cross_rank || s.cross_rank->ranks.empty()) return;
  // The per-rank rows only when ranks were asked for (the ranks table has each one's waiting
  // share); the stragglers after the first (the run's figures name it).
  const bool rows = p.o.all_ranks || !p.o.ranks.empty();
  const CollectivesSummary& cs = s.cross_rank->summary;
  size_t more_stragglers = 0;
  for (const StragglerRow& r : s.cross_rank->stragglers) more_stragglers += r.last_arrivals > 0;
  more_stragglers = std::min<size_t>(more_stragglers, 3);
  if (!rows && !cs.plugin_timing && more_stragglers < 2) return;
  out << "\nacross ranks (matched collectives: kernel time = waiting for the last rank + transfer):\n";
  if (rows)
    out << fmt::format("{:>5}  {:>11}  {:>10}  {:>10}  {:>14}\n", "rank", "collectives", "wait", "transfer",
                       "exposed wait");
  if (cs.plugin_timing)
    p.Wrap(fmt::format("from each rank's NCCL profiler plugin GPU start for {} of {} matched collectives (the "
                       "rest from kernels)",
                       cs.timed_by_nccl_profiler, cs.matched),
           2, 4);
  std::vector<int64_t> shown, folded_ranks;
  for (size_t i = 0; i < s.ranks.size(); ++i) (Shown(p, i) ? shown : folded_ranks).push_back(s.ranks[i].rank);
  size_t folded = 0;
  for (const CrossRankRow& r : s.cross_rank->ranks) {
    if (!rows) break;
    if (std::find(shown.begin(), shown.end(), r.rank) == shown.end() &&
        std::find(folded_ranks.begin(), folded_ranks.end(), r.rank) != folded_ranks.end()) {
      ++folded;
      continue;
    }
    out << fmt::format("{:>5}  {:>11}  {:>10}  {:>10}  {:>14}\n", std::to_string(r.rank), r.collectives,
                       FormatDuration(r.wait_ns), FormatDuration(r.transfer_ns), FormatDuration(r.exposed_wait_ns));
  }
  if (folded > 0) out << fmt::format("  ... {} more rank(s) folded\n", folded);
  size_t listed = 0;
  for (const StragglerRow& r : s.cross_rank->stragglers) {
    if (listed == 3 || r.last_arrivals == 0) continue;
    if (listed++ == 0 && !rows) continue;
    out << fmt::format("  straggler rank {}: last at {} of {} collectives; the others lost {} waiting\n", r.rank,
                       r.last_arrivals, r.collectives_counted, FormatDuration(r.others_wait_ns));
  }
}

// Point-to-point: the recv wait (pipeline bubble) and the stage everyone waits on.
void WritePointToPoint(const TerminalPage& pg) {
  const Summary& s = pg.s;
  if (!s.cross_rank || !s.cross_rank->point_to_point || s.cross_rank->point_to_point->pairs <= 0) return;
  const PointToPoint& p = *s.cross_rank->point_to_point;
  std::string line = fmt::format("point-to-point: {} send/recv pairs, recvs waited {} for their peers' sends", p.pairs,
                                 FormatDuration(p.recv_wait_ns));
  if (p.bottleneck_rank)
    line += fmt::format("; the stage everyone waits on: rank {} ({} of that)", *p.bottleneck_rank,
                        FormatDuration(p.bottleneck_waited_on_ns));
  pg.out << "\n";
  pg.Wrap(line, 0, 2);
}

// --per-iteration: one row per iteration window of the shown ranks. Bounded: per rank the first
// and last kTerminalIterationRows rows, and how many are left out between (all of them are in
// the JSON summary).
void WriteIterations(const TerminalPage& p) {
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
    if (!Shown(p, it.rank_index)) continue;
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

// Whether WriteRankNotes writes anything: the data-quality lines then follow it as one block.
bool RankNotesShown(const TerminalPage& p) {
  if (p.o.all_ranks || !p.o.ranks.empty()) return true;
  for (const RankResult& r : p.s.ranks)
    if (!r.notices.empty()) return true;
  return false;
}

// The ranks' notices, alike ones grouped (at most kMaxNoteLines lines), and, for ranks asked for
// by --ranks, each one's verdict and file.
void WriteRankNotes(const TerminalPage& p) {
  const Summary& s = p.s;
  std::vector<std::pair<int64_t, std::string>> items;
  for (const RankResult& r : s.ranks)
    for (const std::string& n : r.notices) items.emplace_back(r.rank, n);
  const bool verdicts = p.o.all_ranks || !p.o.ranks.empty();
  if (!RankNotesShown(p)) return;
  p.out << "\n";  // the data-quality lines follow without a blank line
  if (verdicts)
    for (size_t i : p.shown_ranks) {
      const RankResult& r = s.ranks[i];
      p.Wrap(fmt::format("rank {} ({}): {}", RankLabel(r.rank), EscapeForTerminal(r.source_path),
                         EscapeForTerminal(r.verdict)),
             0, 2);
    }
  const std::vector<TextGroup> groups = GroupByShape(items);
  for (size_t g = 0; g < groups.size() && g < kMaxNoteLines; ++g)
    p.Wrap(fmt::format("note {}: {}", WhoOf(groups[g].ranks), groups[g].text), 0, 2);
  if (groups.size() > kMaxNoteLines)
    p.out << fmt::format("  ... {} more note(s) in the JSON summary (\"ranks[].notices\")\n",
                         groups.size() - kMaxNoteLines);
}

// Data quality: every non-zero counter, worst first; a counter set on several ranks is one line.
void WriteDataQuality(const TerminalPage& p) {
  std::ostream& out = p.out;
  const char* gap = RankNotesShown(p) ? "" : "\n";
  bool any = false;
  for (Severity sev : {Severity::kError, Severity::kWarning, Severity::kInfo}) {
    std::vector<std::pair<int64_t, std::string>> items;
    for (const RankResult& r : p.s.ranks) {
      auto show = [&](std::string_view name, Severity se, int64_t v, std::string_view desc) {
        if (v == 0 || se != sev) return;
        items.emplace_back(r.rank, fmt::format("{} = {} ({})", name, v, desc));
      };
      for (size_t i = 0; i < kStatCount; ++i) {
        const StatInfo& info = GetStatInfo(static_cast<Stat>(i));
        show(info.name, info.severity, r.stats.Get(static_cast<Stat>(i)), info.description);
      }
      for (const ExtraStat& e : r.extra_stats) show(e.name, e.severity, e.value, e.description);
    }
    for (const TextGroup& g : GroupByShape(items)) {
      if (!any) out << gap << "data quality:\n";
      any = true;
      std::string tag = std::string(SeverityName(sev));
      if (sev == Severity::kError) tag = p.Paint("1;31", tag);
      else if (sev == Severity::kWarning) tag = p.Paint("33", tag);
      p.Wrap(fmt::format("{} {}: {}", tag, WhoOf(g.ranks), g.text), 2, 4);
    }
  }
  if (!any) out << gap << "data quality: no problems recorded\n";
}

// Findings: what to change, worst first, at most --top lines; a finding seen on several ranks is
// one line with the rank list and the range of its figures.
void WriteFindings(const TerminalPage& p) {
  const Summary& s = p.s;
  std::ostream& out = p.out;
  if (s.findings.empty()) return;
  const size_t top = static_cast<size_t>(std::max<int64_t>(p.o.top_findings, 0));
  size_t shown = 0, total = 0;
  bool heading = false;
  for (Severity sev : {Severity::kError, Severity::kWarning, Severity::kInfo}) {
    // Per analyzer, so that only one analyzer's findings share a line.
    std::map<std::string, std::vector<std::pair<int64_t, std::string>>> by_analyzer;
    std::vector<std::string> order;
    for (const Finding& f : s.findings) {
      if (f.severity != sev) continue;
      if (!by_analyzer.count(f.analyzer)) order.push_back(f.analyzer);
      by_analyzer[f.analyzer].emplace_back(f.rank, f.message);
    }
    for (const std::string& a : order)
      for (const TextGroup& g : GroupByShape(by_analyzer[a])) {
        ++total;
        if (shown >= top) continue;
        ++shown;
        if (!heading) out << "\nfindings:\n";
        heading = true;
        const std::string_view name = SeverityName(sev);
        std::string tag = sev == Severity::kError     ? p.Paint("1;31", std::string(name))
                          : sev == Severity::kWarning ? p.Paint("33", std::string(name))
                                                      : std::string(name);
        p.Wrap(fmt::format("{} {}: {}", tag, WhoOf(g.ranks), g.text), 2, 4);
      }
  }
  if (total > shown) {
    if (!heading) out << "\nfindings:\n";
    out << fmt::format("  ... {} more (--top N shows more; all of them in the JSON summary, \"findings\")\n",
                       total - shown);
  }
}

const std::vector<TerminalSection>& TerminalSections() {
  static const std::vector<TerminalSection> kSections = {
#define OVERLAPPROF_TERMINAL_SECTION(name, fn, detail) {#name, &fn, TerminalDetail::detail},
#include "reports/terminal_sections.inc"
#undef OVERLAPPROF_TERMINAL_SECTION
  };
  return kSections;
}

namespace {

class TerminalReport : public ReportWriter {
 public:
  std::string_view name() const override { return "terminal"; }
  std::string_view description() const override { return "human-readable tables"; }

  // The sections in page order; each is left out when it has nothing to show, or with --brief
  // when it is not a headline.
  Status Write(const Summary& s, const ReportOptions& o, std::ostream& out) override {
    const TerminalPage page = MakePage(s, o, out);
    for (const TerminalSection& section : TerminalSections()) {
      if (o.brief && section.detail != TerminalDetail::kBrief) continue;
      section.write(page);
    }
    if (!out) return MakeError(StatusCode::kIo, "write failed");
    return OkStatus();
  }
};

}  // namespace

std::unique_ptr<ReportWriter> MakeTerminalReport() { return std::make_unique<TerminalReport>(); }

}  // namespace overlapprof
