#pragma once
// Exact decimal numbers as scaled integers: "4458676522709.059" µs -> 4458676522709059 ns, with no
// rounding through a double (which cannot hold such a value exactly). Used for the times and ids
// of JSON traces, read from their text.
#include <cstdint>
#include <string_view>

namespace overlapprof {

// Exact decimal number token -> round(value * 10^exp10) as int64 (round half away from
// zero). Lenient beyond JSON (accepts "01", ".5"); trailing whitespace is ignored; false for
// anything that is not a decimal number or whose result does not fit.
bool ParseScaledDecimal(std::string_view token, int exp10, int64_t* out);

// Whether a token starts as a JSON number must: an optional '-', then "0" alone or a digit 1-9
// ("0005", "-01", ".5", "+1" do not).
bool JsonNumberStart(std::string_view token);

// ParseScaledDecimal of a JSON number token (unquoted): false where JsonNumberStart is false.
inline bool ParseJsonNumber(std::string_view token, int exp10, int64_t* out) {
  return JsonNumberStart(token) && ParseScaledDecimal(token, exp10, out);
}

}  // namespace overlapprof
