#pragma once
// The renderings of a comparison (analyzers/compare.h) for `overlapprof compare` and `check`: a
// plain table, GitHub-flavoured Markdown, JUnit XML (a test case per gated metric). Text from
// the inputs (paths, op and counter names) is escaped for each format.
#include <string>

#include "analyzers/compare.h"

namespace overlapprof {

// `color`: verdicts in ANSI colour (regressed red, improved green, inconclusive yellow).
std::string RenderComparisonText(const Comparison& c, const RunView& base, const RunView& next, bool color = false);
// `command`: "compare" or "check", named in the heading.
std::string RenderComparisonMarkdown(const Comparison& c, const RunView& base, const RunView& next,
                                     const std::string& command);
// The comparison as JSON (schema "overlapprof.comparison/1", docs/ci-gate.md): the gate, the
// notes, each side's source, ranks and iterations, and per metric its figures and verdict.
std::string RenderComparisonJson(const Comparison& c, const RunView& base, const RunView& next,
                                 const std::string& command);
std::string RenderComparisonJUnit(const Comparison& c, const RunView& base, const RunView& next);

}  // namespace overlapprof
