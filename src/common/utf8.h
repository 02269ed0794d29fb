#pragma once
// Invalid UTF-8 (from file names, host names, kernel names, any byte string a trace holds) is
// replaced, never refused nor thrown on: each maximal invalid subsequence (Unicode 15, §3.9,
// "U+FFFD substitution of maximal subparts", the practice nlohmann::json's
// error_handler_t::replace and browsers follow) becomes U+FFFD (EF BF BD).
#include <cstddef>
#include <string>
#include <string_view>

namespace overlapprof {

// Length of the valid UTF-8 prefix of `s` (s.size() when all of it is valid).
size_t ValidUtf8Prefix(std::string_view s);

// `s` with every invalid sequence replaced by U+FFFD; `replaced` (when given) gets the number
// of replacements added to it.
std::string SanitizeUtf8(std::string_view s, size_t* replaced = nullptr);

}  // namespace overlapprof
