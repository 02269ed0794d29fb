#pragma once
// Golden JSON summaries (tests/golden/<name>.summary.json): the summary with its sources reduced
// to file names and the tool version masked, compared as JSON. With OVERLAPPROF_UPDATE_GOLDEN set
// the file is written instead (then review the diff).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "reports/report.h"

namespace overlapprof::testing {

inline nlohmann::ordered_json NormalizedSummary(const Summary& s) {
  nlohmann::ordered_json j = SummaryToJson(s);
  for (auto& r : j["ranks"]) r["source"] = std::filesystem::path(r["source"].get<std::string>()).filename().string();
  j["tool"]["version"] = "(any)";
  return j;
}

inline void ExpectGoldenSummary(const Summary& s, const std::string& name) {
  const std::string got = NormalizedSummary(s).dump(2) + "\n";
  const std::string path = std::string(OVERLAPPROF_GOLDEN_DIR) + "/" + name + ".summary.json";
  if (std::getenv("OVERLAPPROF_UPDATE_GOLDEN")) {
    std::ofstream(path) << got;
    return;
  }
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << "missing " << path << " (run with OVERLAPPROF_UPDATE_GOLDEN=1)";
  const std::string want((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(nlohmann::ordered_json::parse(got), nlohmann::ordered_json::parse(want)) << "summary differs from " << path;
}

}  // namespace overlapprof::testing
