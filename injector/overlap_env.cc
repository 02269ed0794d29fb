// The overlap-relevant environment (overlap_env.h).
#include "injector/overlap_env.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

namespace overlapprof::inject {
namespace {

bool Listed(std::string_view name) {
  for (const char* n : kOverlapEnvNames)
    if (name == n) return true;
  for (const char* p : kOverlapEnvPrefixes) {
    const std::string_view prefix(p);
    if (name.size() > prefix.size() && name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

void AppendJsonString(std::string_view s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x80) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

}  // namespace

std::string OverlapEnvJson(const char* const* envp, bool* truncated) {
  *truncated = false;
  std::vector<std::pair<std::string_view, std::string_view>> kept;
  for (const char* const* e = envp; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (!eq) continue;
    const std::string_view name(*e, static_cast<size_t>(eq - *e));
    if (!Listed(name)) continue;
    // A name given twice: the first, as getenv answers.
    if (std::any_of(kept.begin(), kept.end(), [&](const auto& k) { return k.first == name; })) continue;
    if (kept.size() >= static_cast<size_t>(kOverlapEnvMaxVars)) {
      *truncated = true;
      continue;
    }
    std::string_view value(eq + 1);
    if (value.size() > kOverlapEnvMaxValueBytes) {
      value = value.substr(0, kOverlapEnvMaxValueBytes);
      *truncated = true;
    }
    kept.emplace_back(name, value);
  }
  std::sort(kept.begin(), kept.end());
  std::string out = "{";
  for (size_t i = 0; i < kept.size(); ++i) {
    if (i) out += ',';
    AppendJsonString(kept[i].first, out);
    out += ':';
    AppendJsonString(kept[i].second, out);
  }
  return out + "}";
}

}  // namespace overlapprof::inject
