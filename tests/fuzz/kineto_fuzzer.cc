// libFuzzer target: the Kineto (PyTorch-profiler Chrome-trace JSON) importer.
//
// Each input is a whole file as the importer would read it:
//  - gzip (starts 1f 8b): GunzipBuffer, then the inflated document is parsed, as
//    ReadInputFile + KinetoImporter::Import do;
//  - anything else: copied into a buffer with kInputPadding zero bytes after it (the
//    contract of ParseKinetoJson), a UTF-8 BOM skipped as Import does, and parsed.
// Whatever the result, a RankTrace that parses must satisfy trace_checks.h.
//
// Short inputs (<= 64 bytes) are also fed to ParseScaledDecimal, whose result is
// compared with an exact decimal oracle when the token is a strict JSON number.
//
// Run: tests/fuzz/run_fuzzers.sh (see tests/fuzz/README.md).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "src/common/decimal.h"
#include "src/importers/importer.h"
#include "src/importers/kineto/kineto.h"
#include "src/io/input_file.h"
#include "tests/fuzz/trace_checks.h"

namespace {

using overlapprof::ImportOptions;
using overlapprof::InputBuffer;
using overlapprof::kInputPadding;

// --- ParseScaledDecimal oracle -------------------------------------------------------

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Strict JSON number grammar (RFC 8259), optionally followed by JSON whitespace.
bool IsJsonNumber(std::string_view t) {
  while (!t.empty() && (t.back() == ' ' || t.back() == '\n' || t.back() == '\r' || t.back() == '\t'))
    t.remove_suffix(1);
  size_t i = 0, n = t.size();
  if (i < n && t[i] == '-') ++i;
  if (i >= n) return false;
  if (t[i] == '0') {
    ++i;
  } else if (t[i] >= '1' && t[i] <= '9') {
    while (i < n && IsDigit(t[i])) ++i;
  } else {
    return false;
  }
  if (i < n && t[i] == '.') {
    ++i;
    if (i >= n || !IsDigit(t[i])) return false;
    while (i < n && IsDigit(t[i])) ++i;
  }
  if (i < n && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < n && (t[i] == '+' || t[i] == '-')) ++i;
    if (i >= n || !IsDigit(t[i])) return false;
    while (i < n && IsDigit(t[i])) ++i;
  }
  return i == n;
}

// Exact round-half-away-from-zero of (JSON number token) * 10^exp10, or false when it
// does not fit int64. Only for tokens that IsJsonNumber accepts.
bool ExactScaled(std::string_view t, int exp10, int64_t* out) {
  size_t i = 0;
  bool neg = t[0] == '-';
  if (neg) ++i;
  std::string digits;  // significand digits, integer and fraction parts
  int64_t scale = 0;   // value = digits * 10^scale
  while (i < t.size() && IsDigit(t[i])) digits += t[i++];
  if (i < t.size() && t[i] == '.') {
    ++i;
    while (i < t.size() && IsDigit(t[i])) {
      digits += t[i++];
      --scale;
    }
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (t[i] == '+' || t[i] == '-') eneg = t[i++] == '-';
    int64_t e = 0;
    while (i < t.size() && IsDigit(t[i])) {
      if (e < 1000000000) e = e * 10 + (t[i] - '0');  // tokens are short: no real exponent gets near
      ++i;
    }
    scale += eneg ? -e : e;
  }
  scale += exp10;
  size_t lead = digits.find_first_not_of('0');
  if (lead == std::string::npos) {
    *out = 0;
    return true;
  }
  digits.erase(0, lead);
  const int64_t len = static_cast<int64_t>(digits.size());
  // Integer digits of the result: len + scale. Over 20 cannot fit int64.
  if (len + scale > 20) return false;
  std::string int_part, frac_first;
  if (scale >= 0) {
    int_part = digits + std::string(static_cast<size_t>(scale), '0');
  } else if (len + scale > 0) {
    int_part = digits.substr(0, static_cast<size_t>(len + scale));
    frac_first = digits.substr(static_cast<size_t>(len + scale), 1);
  } else if (len + scale == 0) {
    frac_first = digits.substr(0, 1);
  }  // else: the value is below 0.1: rounds to 0
  unsigned __int128 v = 0;
  for (char c : int_part) v = v * 10 + static_cast<unsigned>(c - '0');
  if (!frac_first.empty() && frac_first[0] >= '5') ++v;  // half (or more) away from zero
  const unsigned __int128 limit = neg ? static_cast<unsigned __int128>(INT64_MAX) + 1 : INT64_MAX;
  if (v > limit) return false;
  *out = neg ? static_cast<int64_t>(-static_cast<__int128>(v)) : static_cast<int64_t>(v);
  return true;
}

void CheckScaledDecimal(std::string_view tok) {
  for (int exp10 : {0, 3, -3, 9}) {
    int64_t got = 12345;
    bool ok = overlapprof::ParseScaledDecimal(tok, exp10, &got);
    if (!IsJsonNumber(tok)) continue;  // lenient extensions are not checked
    int64_t want = 0;
    bool want_ok = ExactScaled(tok, exp10, &want);
    if (ok != want_ok || (ok && got != want)) {
      std::fprintf(stderr,
                   "overlapprof fuzz: ParseScaledDecimal(\"%.*s\", %d) = %s %lld, exact = %s %lld\n",
                   static_cast<int>(tok.size()), tok.data(), exp10, ok ? "true" : "false",
                   static_cast<long long>(got), want_ok ? "true" : "false", static_cast<long long>(want));
      std::abort();
    }
  }
}

// --- the importer -------------------------------------------------------------------

void ParseDocument(const char* data, size_t size, size_t capacity) {
  size_t skip = std::string_view(data, size).substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  ImportOptions options;  // ts/dur in µs, as the importer's default
  auto trace = overlapprof::ParseKinetoJson(data + skip, size - skip, capacity - skip, options);
  if (trace.ok()) {
    overlapprof::fuzz::CheckTrace(*trace);
    overlapprof::fuzz::AnalyzeTrace(*trace);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size <= 64) CheckScaledDecimal(std::string_view(reinterpret_cast<const char*>(data), size));

  std::string_view head(reinterpret_cast<const char*>(data), size < 2 ? size : 2);
  if (overlapprof::IsGzip(head)) {
    auto inflated = overlapprof::GunzipBuffer(data, size);
    if (!inflated.ok()) return 0;
    const InputBuffer& buf = *inflated;
    // The padding contract ParseKinetoJson relies on.
    OVERLAPPROF_FUZZ_CHECK(buf.capacity() >= buf.size() + kInputPadding, buf.size());
    for (size_t i = 0; i < kInputPadding; ++i) OVERLAPPROF_FUZZ_CHECK(buf.data()[buf.size() + i] == 0, i);
    if (buf.size() == 0) return 0;  // ReadInputFile refuses "gzip of nothing"
    ParseDocument(buf.data(), buf.size(), buf.capacity());
    return 0;
  }

  if (size == 0) return 0;  // ReadInputFile refuses empty files
  // Exactly size + padding bytes, so ASan sees any read past the padding.
  std::unique_ptr<char[]> copy(new char[size + kInputPadding]);
  std::memcpy(copy.get(), data, size);
  std::memset(copy.get() + size, 0, kInputPadding);
  ParseDocument(copy.get(), size, size + kInputPadding);
  return 0;
}
