// ComposePreload (run.h): pure, in the library so unit tests reach it.
#include <string>
#include <vector>

#include "src/cli/run.h"

namespace overlapprof {

std::string ComposePreload(const std::string& injector, const std::string& existing) {
  std::vector<std::string> sanitizers, rest;
  size_t i = 0;
  while (i < existing.size()) {
    size_t j = existing.find_first_of(": \t\n", i);
    if (j == std::string::npos) j = existing.size();
    if (j > i) {
      std::string e = existing.substr(i, j - i);
      std::string base = e.substr(e.rfind('/') == std::string::npos ? 0 : e.rfind('/') + 1);
      bool san = false;
      for (const char* prefix : {"libasan.so", "libtsan.so", "libubsan.so", "libhwasan.so", "liblsan.so"})
        san = san || base.rfind(prefix, 0) == 0;
      san = san || (base.rfind("libclang_rt.", 0) == 0 && base.find("san") != std::string::npos);
      (san ? sanitizers : rest).push_back(std::move(e));
    }
    i = j + 1;
  }
  std::string out;
  auto add = [&out](const std::string& e) { out += (out.empty() ? "" : ":") + e; };
  for (const auto& e : sanitizers) add(e);
  add(injector);
  for (const auto& e : rest) add(e);
  return out;
}

}  // namespace overlapprof
