#include "src/common/utf8.h"

#include <cstdint>

namespace overlapprof {
namespace {

// Length of the well-formed sequence at s[i] (Unicode Table 3-7), or 0 when it is not one;
// then *bad gets the length of the maximal subpart to replace (at least 1).
size_t SequenceAt(std::string_view s, size_t i, size_t* bad) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if (c == 0xED) n = 3, hi = 0x9F;  // no surrogates
  else if (c >= 0xE1 && c <= 0xEF) n = 3;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c == 0xF4) n = 4, hi = 0x8F;  // nothing past U+10FFFF
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else {
    *bad = 1;
    return 0;
  }
  size_t k = 1;
  for (; k < n && i + k < s.size(); ++k) {
    const uint8_t x = b(i + k);
    if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) break;
  }
  if (k == n) return n;
  *bad = k;  // the lead byte and the continuation bytes that were still valid
  return 0;
}

}  // namespace

size_t ValidUtf8Prefix(std::string_view s) {
  size_t i = 0, bad = 0;
  while (i < s.size()) {
    // ASCII runs, 8 bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t w = 0;
      for (size_t k = 0; k < 8; ++k) w |= static_cast<uint64_t>(static_cast<uint8_t>(s[i + k])) << (8 * k);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const size_t n = SequenceAt(s, i, &bad);
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

std::string SanitizeUtf8(std::string_view s, size_t* replaced) {
  size_t i = ValidUtf8Prefix(s);
  if (i == s.size()) return std::string(s);
  std::string out(s.substr(0, i));
  out.reserve(s.size() + 16);
  size_t count = 0;
  while (i < s.size()) {
    size_t bad = 0;
    const size_t n = SequenceAt(s, i, &bad);
    if (n > 0) {
      out.append(s, i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++count;
      i += bad;
    }
  }
  if (replaced) *replaced += count;
  return out;
}

std::string EscapeForTerminal(std::string_view s) {
  constexpr char kHex[] = "0123456789abcdef";
  const auto is_plain = [](uint8_t c) { return c >= 0x20 && c < 0x7F; };
  size_t i = 0;
  while (i < s.size() && is_plain(static_cast<uint8_t>(s[i]))) ++i;
  if (i == s.size()) return std::string(s);
  std::string out(s.substr(0, i));
  out.reserve(s.size() + 16);
  const auto escape_byte = [&](uint8_t c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  while (i < s.size()) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      if (is_plain(c)) out += static_cast<char>(c);
      else escape_byte(c);
      ++i;
      continue;
    }
    size_t bad = 0;
    const size_t n = SequenceAt(s, i, &bad);
    if (n == 0) {
      for (size_t k = 0; k < bad; ++k) escape_byte(static_cast<uint8_t>(s[i + k]));
      i += bad;
    } else if (n == 2 && c == 0xC2 && static_cast<uint8_t>(s[i + 1]) <= 0x9F) {  // U+0080-U+009F
      const uint8_t x = static_cast<uint8_t>(s[i + 1]);
      out += "\\u00";
      out += kHex[x >> 4];
      out += kHex[x & 15];
      i += 2;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace overlapprof
