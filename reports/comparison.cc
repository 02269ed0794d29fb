#include "reports/comparison.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <sstream>

#include "src/common/utf8.h"

namespace overlapprof {
namespace {

std::string Fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

}  // namespace

std::string RenderComparisonText(const Comparison& c, const RunView& b, const RunView& n, bool color) {
  std::ostringstream o;
  const auto verdict = [color](Verdict v) {
    const char* code = v == Verdict::kRegressed ? "1;31" : v == Verdict::kImproved ? "32"
                       : v == Verdict::kInconclusive ? "33" : nullptr;
    if (!color || !code) return std::string(VerdictName(v));
    return fmt::format("\x1b[{}m{}\x1b[0m", code, VerdictName(v));
  };
  // Text from the inputs (paths, op and counter names) is escaped for the terminal.
  const auto t = [](const std::string& s) { return EscapeForTerminal(s); };
  o << "base: " << t(b.source) << " (" << b.ranks << " rank(s), " << b.iterations << " iteration(s))\n";
  o << "new:  " << t(n.source) << " (" << n.ranks << " rank(s), " << n.iterations << " iteration(s))\n";
  for (const std::string& note : c.notes) o << "note: " << t(note) << "\n";
  if (b.what_if_ranks >= 0 || n.what_if_ranks >= 0) {
    // The what-if model's replay error of each run (docs/what-if.md): shown, never gated.
    const auto replay = [](const RunView& v) {
      if (v.what_if_ranks < 0) return std::string("no what_if section");
      if (v.what_if_ranks == 0) return std::string("no rank modeled");
      return fmt::format("median {:.2f}%, max {:.2f}% over {} modeled rank(s)", v.what_if_median_error_pct,
                         v.what_if_max_error_pct, v.what_if_ranks);
    };
    o << "what-if replay error (not gated): base " << replay(b) << "; new " << replay(n) << "\n";
  }
  o << "\n";
  o << fmt::format("{:<34} {:>12} {:>12} {:>12} {:>10} {:>8}  {}\n", "metric", "base", "new", "change", "p", "gated",
                   "verdict");
  for (const MetricResult& m : c.metrics) {
    o << fmt::format("{:<34} {:>12} {:>12} {:>12} {:>10} {:>8}  {}\n", t(m.name) + " (" + m.unit + ")", Fixed(m.base, 2),
                     Fixed(m.next, 2), ChangeText(m),
                     m.p ? fmt::format("{:.3g}", *m.p) : std::string("-"), m.gated ? "yes" : "no", verdict(m.verdict));
  }
  o << "\n";
  for (const MetricResult& m : c.metrics) o << t(m.name) << ": " << verdict(m.verdict) << ": " << t(m.why) << "\n";
  if (c.data_lost) o << "data quality: " << t(c.data_lost_why) << "\n";
  return o.str();
}

namespace {
// Text from the inputs (paths, op and counter names) as literal Markdown: the characters that
// can open markup anywhere in a line (emphasis, links, images, HTML, code spans, table cells,
// strike-through, entities) are backslash-escaped and line breaks become spaces, so a hostile
// name cannot add rows, links, HTML or lines to a CI summary. (Intraword `_` is literal in
// GitHub-flavoured Markdown; the text never starts a line, so `#`, `-`, `+` need nothing.)
std::string MdEscape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char ch : s) {
    if (ch == '\n' || ch == '\r') {
      o += ' ';
      continue;
    }
    if (std::strchr("\\`*[]()<>!|~&", ch) != nullptr && ch != '\0') o += '\\';
    o += ch;
  }
  return o;
}
}  // namespace

std::string RenderComparisonMarkdown(const Comparison& c, const RunView& b, const RunView& n,
                                     const std::string& command) {
  std::ostringstream o;
  const char* icon = c.data_lost || c.gate == Verdict::kRegressed ? "❌"
                     : c.gate == Verdict::kInconclusive          ? "⚠️"
                                                                 : "✅";
  o << "### " << icon << " overlapprof " << command << ": " << (c.data_lost ? "data lost" : VerdictName(c.gate))
    << "\n\n";
  for (const std::string& note : c.notes) o << "> note: " << MdEscape(note) << "\n\n";
  o << "| metric | base | new | change | p | gated | verdict |\n|---|---:|---:|---:|---:|:-:|---|\n";
  for (const MetricResult& m : c.metrics)
    o << fmt::format("| {} ({}) | {} | {} | {} | {} | {} | {} |\n", MdEscape(m.name), m.unit, Fixed(m.base, 2),
                     Fixed(m.next, 2), ChangeText(m), m.p ? fmt::format("{:.3g}", *m.p) : std::string("–"),
                     m.gated ? "yes" : "no", VerdictName(m.verdict));
  o << "\n";
  for (const MetricResult& m : c.metrics)
    if (m.gated) o << "- **" << MdEscape(m.name) << "**: " << MdEscape(m.why) << "\n";
  if (c.data_lost) o << "- **data quality**: " << MdEscape(c.data_lost_why) << "\n";
  o << "\nbase: " << MdEscape(b.source) << " (" << b.iterations << " iterations), new: " << MdEscape(n.source) << " ("
    << n.iterations << " iterations)\n";
  return o.str();
}

namespace {
// Also valid XML 1.0 text: invalid UTF-8 and the control characters XML forbids become U+FFFD.
std::string XmlEscape(const std::string& raw) {
  const std::string s = SanitizeUtf8(raw);
  std::string o;
  for (char ch : s) {
    if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
      o += "\xEF\xBF\xBD";
      continue;
    }
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}
}  // namespace

std::string RenderComparisonJUnit(const Comparison& c, const RunView&, const RunView&) {
  std::vector<const MetricResult*> gated;
  for (const MetricResult& m : c.metrics)
    if (m.gated) gated.push_back(&m);
  int failures = c.data_lost ? 1 : 0, skipped = 0;
  for (const MetricResult* m : gated) {
    if (m->verdict == Verdict::kRegressed) ++failures;
    if (m->verdict == Verdict::kInconclusive) ++skipped;
  }
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << fmt::format("<testsuite name=\"overlapprof check\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">\n",
                   gated.size() + 1, failures, skipped);
  for (const MetricResult* m : gated) {
    o << fmt::format("  <testcase classname=\"overlapprof.check\" name=\"{}\">\n", XmlEscape(m->name));
    if (m->verdict == Verdict::kRegressed)
      o << fmt::format("    <failure message=\"regressed\">{}</failure>\n", XmlEscape(m->why));
    else if (m->verdict == Verdict::kInconclusive)
      o << fmt::format("    <skipped message=\"inconclusive\">{}</skipped>\n", XmlEscape(m->why));
    else
      o << fmt::format("    <system-out>{}: {}</system-out>\n", VerdictName(m->verdict), XmlEscape(m->why));
    o << "  </testcase>\n";
  }
  o << "  <testcase classname=\"overlapprof.check\" name=\"data_quality\">\n";
  if (c.data_lost) o << fmt::format("    <failure message=\"data lost\">{}</failure>\n", XmlEscape(c.data_lost_why));
  o << "  </testcase>\n</testsuite>\n";
  return o.str();
}

std::string RenderComparisonJson(const Comparison& c, const RunView& b, const RunView& n, const std::string& command) {
  using Json = nlohmann::ordered_json;
  auto side = [](const RunView& v) {
    return Json{{"source", v.source}, {"ranks", v.ranks}, {"iterations", v.iterations}};
  };
  Json doc;
  doc["schema"] = "overlapprof.comparison/1";
  doc["command"] = command;
  doc["gate"] = c.data_lost ? "data lost" : VerdictName(c.gate);
  doc["data_lost"] = c.data_lost;
  if (c.data_lost) doc["data_lost_why"] = c.data_lost_why;
  doc["notes"] = c.notes;
  doc["base"] = side(b);
  doc["new"] = side(n);
  Json metrics = Json::array();
  for (const MetricResult& m : c.metrics) {
    Json j{{"name", m.name},      {"unit", m.unit},         {"gated", m.gated},         {"base", m.base},
           {"new", m.next},       {"delta", m.delta},       {"change", m.change},       {"change_unit", m.change_unit},
           {"threshold", m.threshold}, {"n_base", m.n_base}, {"n_new", m.n_next}};
    j["p"] = m.p ? Json(*m.p) : Json(nullptr);
    j["verdict"] = VerdictName(m.verdict);
    j["why"] = m.why;
    metrics.push_back(std::move(j));
  }
  doc["metrics"] = std::move(metrics);
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace overlapprof
