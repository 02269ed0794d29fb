#include "analyzers/summary.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <tuple>

namespace overlapprof {

int Summary::ErrorCounters() const {
  int n = 0;
  for (const RankResult& r : ranks) {
    n += r.stats.ErrorCount();
    for (const ExtraStat& e : r.extra_stats) n += (e.value != 0 && e.severity == Severity::kError);
  }
  return n;
}

int Summary::WarningCounters() const {
  int n = 0;
  for (const RankResult& r : ranks) {
    n += r.stats.WarningCount();
    for (const ExtraStat& e : r.extra_stats) n += (e.value != 0 && e.severity == Severity::kWarning);
  }
  return n;
}

void Summary::NoteSection(std::string_view key) {
  if (std::find(section_order.begin(), section_order.end(), key) == section_order.end())
    section_order.emplace_back(key);
}

nlohmann::ordered_json& Summary::Section(std::string_view key) {
  NoteSection(key);
  // The sections are one vector (nlohmann's ordered_map) of pair<const string, json>, which it
  // copies, deep, when it grows (a const key has no move): the whole summary so far, 6 MB of
  // bucket rows for a 1 GB trace, ~25 ms each time. Room for more sections than there are, once.
  auto& items = sections.get_ref<nlohmann::ordered_json::object_t&>();
  if (items.size() == items.capacity()) items.reserve(std::max<size_t>(32, 2 * items.capacity()));
  return sections[std::string(key)];
}

void Summary::SetCrossRank(CrossRankResult result) {
  NoteSection("collectives_summary");
  if (result.any_matched)
    for (std::string_view k : {"collectives", "stragglers", "clock_offsets", "cross_rank"}) NoteSection(k);
  if (result.point_to_point) NoteSection("point_to_point");
  cross_rank = std::move(result);
}

void Summary::AddFinding(std::string_view analyzer, int64_t rank, Severity severity, std::string message) {
  NoteSection("findings");
  findings.push_back({std::string(analyzer), rank, severity, std::move(message)});
}

std::vector<GroupedFinding> GroupFindings(const std::vector<Finding>& findings) {
  std::vector<GroupedFinding> out;
  // (analyzer, severity, message) -> its group; findings are few (lines a person reads).
  std::map<std::tuple<std::string_view, Severity, std::string_view>, size_t> index;
  for (const Finding& f : findings) {
    auto [it, fresh] = index.try_emplace({f.analyzer, f.severity, f.message}, out.size());
    if (fresh) out.push_back({&f, {}});
    if (f.rank != kUnknown) out[it->second].ranks.push_back(f.rank);
  }
  for (GroupedFinding& g : out) {
    std::sort(g.ranks.begin(), g.ranks.end());
    g.ranks.erase(std::unique(g.ranks.begin(), g.ranks.end()), g.ranks.end());
  }
  return out;
}

}  // namespace overlapprof
