// Exact scaled decimals (src/common/decimal.h).
#include "src/common/decimal.h"

namespace overlapprof {
namespace {

bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool IsDigit(char c) { return static_cast<unsigned>(c - '0') < 10; }

constexpr uint64_t kPow10[20] = {1ull,
                                 10ull,
                                 100ull,
                                 1000ull,
                                 10000ull,
                                 100000ull,
                                 1000000ull,
                                 10000000ull,
                                 100000000ull,
                                 1000000000ull,
                                 10000000000ull,
                                 100000000000ull,
                                 1000000000000ull,
                                 10000000000000ull,
                                 100000000000000ull,
                                 1000000000000000ull,
                                 10000000000000000ull,
                                 100000000000000000ull,
                                 1000000000000000000ull,
                                 10000000000000000000ull};

// v with the sign applied, into *out when it fits int64.
bool Signed(unsigned __int128 v, bool neg, int64_t* out) {
  const unsigned __int128 limit = neg ? static_cast<unsigned __int128>(INT64_MAX) + 1 : INT64_MAX;
  if (v > limit) return false;
  *out = neg ? static_cast<int64_t>(-static_cast<__int128>(v)) : static_cast<int64_t>(v);
  return true;
}

// The form of nearly every "ts" and "dur": [-]digits[.digits], 19 digits at most (their value fits
// uint64 as it is), exp10 in [0, 19], and a result that fits int64. False, *out untouched, for
// anything else, which ParseExactDecimal then reads: the same arithmetic on 128 bits, so both
// give the same result for every token this one reads, and refuse the same out-of-range ones.
bool ParseShortDecimal(std::string_view tok, int exp10, int64_t* out) {
  const char* p = tok.data();
  const char* const e = p + tok.size();
  const bool neg = p < e && *p == '-';
  p += neg;
  uint64_t m = 0;
  const char* const int_start = p;
  while (p < e && IsDigit(*p)) m = m * 10 + static_cast<unsigned>(*p++ - '0');
  size_t digits = static_cast<size_t>(p - int_start), frac = 0;
  if (p < e && *p == '.') {
    const char* const f = ++p;
    while (p < e && IsDigit(*p)) m = m * 10 + static_cast<unsigned>(*p++ - '0');
    frac = static_cast<size_t>(p - f);
    if (frac == 0) return false;
    digits += frac;
  }
  if (p != e || digits == 0 || digits > 19 || exp10 < 0 || exp10 > 19) return false;
  const int64_t total = exp10 - static_cast<int64_t>(frac);  // in [-19, 19]
  uint64_t v;
  if (total >= 0) {
    if (__builtin_mul_overflow(m, kPow10[total], &v)) return false;
  } else {
    const uint64_t pw = kPow10[-total], r = m % pw;
    v = m / pw + (r >= pw - r ? 1 : 0);  // half away from zero (r * 2 >= pw without overflow)
  }
  return Signed(v, neg, out);
}

// Any decimal number: [-]digits[.digits][(e|E)[+-]digits], 36 significant digits kept.
bool ParseExactDecimal(std::string_view tok, int exp10, int64_t* out) {
  size_t i = 0, n = tok.size();
  bool neg = false;
  if (i < n && tok[i] == '-') {
    neg = true;
    ++i;
  }
  unsigned __int128 mant = 0;
  int sig_digits = 0;  // significant digits accumulated in mant
  int64_t scale = 0;   // value = mant * 10^scale
  bool any = false;
  while (i < n && IsDigit(tok[i])) {
    if (sig_digits < 36) {
      mant = mant * 10 + static_cast<unsigned>(tok[i] - '0');
      if (mant != 0) ++sig_digits;
    } else {
      ++scale;  // digits beyond 36 significant ones are dropped (never seen in traces)
    }
    any = true;
    ++i;
  }
  if (i < n && tok[i] == '.') {
    ++i;
    bool frac_any = false;
    while (i < n && IsDigit(tok[i])) {
      if (sig_digits < 36) {
        mant = mant * 10 + static_cast<unsigned>(tok[i] - '0');
        if (mant != 0) ++sig_digits;
        --scale;
      }
      frac_any = true;
      ++i;
    }
    if (!frac_any) return false;
    any = true;
  }
  if (!any) return false;
  if (i < n && (tok[i] == 'e' || tok[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < n && (tok[i] == '+' || tok[i] == '-')) eneg = tok[i++] == '-';
    if (i >= n || !IsDigit(tok[i])) return false;
    int64_t e = 0;
    while (i < n && IsDigit(tok[i])) {
      if (e < 100000) e = e * 10 + (tok[i] - '0');
      ++i;
    }
    scale += eneg ? -e : e;
  }
  if (i != n) return false;
  int64_t total = scale + exp10;
  unsigned __int128 v;
  if (mant == 0) {
    v = 0;
  } else if (total >= 0) {
    if (total > 38) return false;
    v = mant;
    for (int64_t k = 0; k < total; ++k) {
      if (v > (static_cast<unsigned __int128>(1) << 64)) return false;
      v *= 10;
    }
  } else {
    if (-total > 38) {
      v = 0;
    } else {
      unsigned __int128 p = 1;
      for (int64_t k = 0; k < -total; ++k) p *= 10;
      v = mant / p;
      if ((mant % p) * 2 >= p) ++v;  // half away from zero (sign applied below)
    }
  }
  return Signed(v, neg, out);
}

}  // namespace

bool JsonNumberStart(std::string_view tok) {
  const size_t k = !tok.empty() && tok[0] == '-';
  if (k >= tok.size() || !IsDigit(tok[k])) return false;
  return !(tok[k] == '0' && k + 1 < tok.size() && IsDigit(tok[k + 1]));
}

bool ParseScaledDecimal(std::string_view tok, int exp10, int64_t* out) {
  while (!tok.empty() && IsJsonSpace(tok.back())) tok.remove_suffix(1);
  return ParseShortDecimal(tok, exp10, out) || ParseExactDecimal(tok, exp10, out);
}

}  // namespace overlapprof
