// Kineto event helpers shared by the reader and the builder.
#include "src/importers/kineto/event.h"

#include "src/importers/importer.h"

#include <utility>

namespace overlapprof::kineto {

int64_t IdFromToken(std::string_view tok) {
  while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\n' || tok.back() == '\r' || tok.back() == '\t'))
    tok.remove_suffix(1);
  int64_t v;
  if (tok.size() >= 2 && tok.front() == '"') {  // a string: its text, read leniently
    tok = tok.substr(1, tok.size() - 2);
    return !tok.empty() && ParseScaledDecimal(tok, 0, &v) ? v : kUnknown;
  }
  return ParseJsonNumber(tok, 0, &v) ? v : kUnknown;
}

uint8_t CopyKindFromName(std::string_view name) {
  // CUPTI_ACTIVITY_MEMCPY_KIND_*: HTOD=1 DTOH=2 HTOA=3 ATOH=4 ATOA=5 ATOD=6 DTOA=7 DTOD=8 HTOH=9 PTOP=10
  static const std::pair<std::string_view, uint8_t> kKinds[] = {
      {"HtoD", 1}, {"DtoH", 2}, {"HtoA", 3}, {"AtoH", 4}, {"AtoA", 5},
      {"AtoD", 6}, {"DtoA", 7}, {"DtoD", 8}, {"HtoH", 9}, {"PtoP", 10}};
  for (const auto& [k, v] : kKinds)
    if (name.find(k) != std::string_view::npos) return v;
  return 0;
}

std::string Unescape(std::string_view raw, UnescapeIssues* issues) {
  UnescapeIssues ignored;
  if (issues == nullptr) issues = &ignored;
  std::string out;
  out.reserve(raw.size());
  auto hex4 = [&](size_t at, uint32_t* cp) {
    if (at + 4 > raw.size()) return false;
    uint32_t v = 0;
    for (size_t k = at; k < at + 4; ++k) {
      char c = raw[k];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return false;
    }
    *cp = v;
    return true;
  };
  auto put_utf8 = [&](uint32_t cp) {
    if (cp < 0x80) out += static_cast<char>(cp);
    else if (cp < 0x800) { out += static_cast<char>(0xC0 | (cp >> 6)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) { out += static_cast<char>(0xE0 | (cp >> 12)); out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
    else { out += static_cast<char>(0xF0 | (cp >> 18)); out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F)); out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
  };
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c != '\\' || i + 1 >= raw.size()) { out += c; continue; }
    char e = raw[++i];
    switch (e) {
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t cp;
        if (!hex4(i + 1, &cp)) {
          issues->invalid = true;
          out += "\\u";
          break;
        }
        i += 4;
        if (cp >= 0xD800 && cp < 0xE000) {  // a surrogate: valid only as a high one, then a low one
          uint32_t lo;
          if (cp < 0xDC00 && i + 6 < raw.size() && raw[i + 1] == '\\' && raw[i + 2] == 'u' && hex4(i + 3, &lo) &&
              lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          } else {
            cp = 0xFFFD;
            ++issues->replaced;
          }
        }
        put_utf8(cp);
        break;
      }
      case '"': case '\\': case '/': out += e; break;
      default:
        issues->invalid = true;
        out += '\\';
        out += e;
        break;
    }
  }
  return out;
}

}  // namespace overlapprof::kineto
