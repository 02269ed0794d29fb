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

// `s` made safe to print on a terminal, for every piece of text from the inputs (paths, names
// from traces, counter names, messages quoting them) the CLI prints: valid UTF-8 stays as it is,
// byte for byte, except the control characters, which a terminal would act on: C0 (0x00-0x1F,
// tab and newline included: the text is one item on one line) and DEL become `\xNN`, C1
// (U+0080-U+009F, CSI among them) `\u00NN`; each byte of an invalid UTF-8 sequence becomes
// `\xNN`. JSON, HTML, Markdown and XML outputs escape by their own rules instead.
std::string EscapeForTerminal(std::string_view s);

}  // namespace overlapprof
