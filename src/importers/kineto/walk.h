#pragma once
// The walker over the bytes: the fast path for the elements of traceEvents, reading the fields of
// the field tables (fields.h) from the JSON text directly, without simdjson's index. Used by the
// reader (reader.cc) on the elements the index walker (index_walk.h) left, and on batches.
//
// simdjson On-Demand reads each event as the reader's ParseEvents does; the walker reads the same
// fields from the bytes, and stops ("bails") at anything it does not read exactly as On-Demand
// would: the rest of the batch then goes through On-Demand (KinetoReader::WalkEventsDocument). What
// it accepts: an object of fields whose keys are strings, each followed by ':' and a value,
// separated by ',' (the structure On-Demand checks where it iterates: each event, and the args it
// reads); a value is a string, a scalar (a run of bytes that are not whitespace, brackets, ':' ','
// '"' or '\', as simdjson delimits one), or an object or array skipped by counting brackets outside
// strings (as On-Demand skips a value it does not read: skip_child). Inside strings, a byte below
// 0x20 bails (simdjson's stage 1 refuses it; the batch is checked as UTF-8 before). A backslash
// outside a string bails, so do a NUL outside one and nesting deeper than kWalkMaxDepth. The text
// ends in a ']' followed by zeros (the batch's padding), which stop every scan.
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "src/importers/kineto/event.h"
#include "src/importers/kineto/fields.h"

namespace overlapprof::kineto {

inline constexpr int kWalkMaxDepth = 512;

struct WalkTables {
  bool ws[256] = {};
  bool scalar[256] = {};     // bytes of a scalar token
  bool skip_stop[256] = {};  // what a bracket-counting skip looks at outside strings
  bool key[256] = {};        // bytes of a string that need no look (not '"', '\\' or below 0x20)
  constexpr WalkTables() {
    for (char c : {' ', '\t', '\n', '\r'}) ws[static_cast<unsigned char>(c)] = true;
    for (int c = 0x20; c < 256; ++c) scalar[c] = key[c] = true;
    for (char c : {' ', '\t', '\n', '\r', '{', '}', '[', ']', ':', ',', '"', '\\'})
      scalar[static_cast<unsigned char>(c)] = false;
    key[static_cast<unsigned char>('"')] = key[static_cast<unsigned char>('\\')] = false;
    for (char c : {'"', '\\', '{', '}', '[', ']', '\0'}) skip_stop[static_cast<unsigned char>(c)] = true;
  }
};
inline constexpr WalkTables kWalk;

// The first byte at or after p that is not whitespace. Most runs are one space (after ':' and
// ','); the indentation of pretty-printed traces is a newline and a few spaces.
__attribute__((always_inline)) inline const char* WalkSpace(const char* p) {
  if (!kWalk.ws[static_cast<unsigned char>(p[0])]) return p;
  if (!kWalk.ws[static_cast<unsigned char>(p[1])]) return p + 1;
#if defined(__SSE2__)
  const __m128i sp = _mm_set1_epi8(' '), nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r'), tab = _mm_set1_epi8('\t');
  for (p += 2;; p += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i w = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, sp), _mm_cmpeq_epi8(v, nl)),
                                   _mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, tab)));
    const unsigned m = ~static_cast<unsigned>(_mm_movemask_epi8(w)) & 0xffffu;
    if (m) return p + __builtin_ctz(m);
  }
#else
  p += 2;
  while (kWalk.ws[static_cast<unsigned char>(*p)]) ++p;
  return p;
#endif
}

// Stage-1 masks of a 64-byte block, as simdjson builds them (shared by WalkSkipNested and the
// element-edge scanner). The bytes escaped by a backslash: odd runs of backslashes escape the byte
// after them; `prev_escaped` (0 or 1) carries a run across blocks and is updated.
inline uint64_t EscapedBytes(uint64_t backslash, uint64_t& prev_escaped) {
  if (!(backslash | prev_escaped)) return 0;
  backslash &= ~prev_escaped;
  const uint64_t follows_escape = backslash << 1 | prev_escaped;
  constexpr uint64_t kEven = 0x5555555555555555ull;
  const uint64_t odd_starts = backslash & ~kEven & ~follows_escape;
  unsigned long long even_starts;
  prev_escaped = __builtin_uaddll_overflow(odd_starts, backslash, &even_starts) ? 1 : 0;
  return (kEven ^ (static_cast<uint64_t>(even_starts) << 1)) & follows_escape;
}
// The bytes inside strings, from each unescaped quote up to its closing one (prefix XOR);
// `prev_in_string` (all ones when the block before ended inside a string) is updated.
inline uint64_t InStringBytes(uint64_t quote, uint64_t& prev_in_string) {
  uint64_t in_string = quote;
  in_string ^= in_string << 1;
  in_string ^= in_string << 2;
  in_string ^= in_string << 4;
  in_string ^= in_string << 8;
  in_string ^= in_string << 16;
  in_string ^= in_string << 32;
  in_string ^= prev_in_string;
  prev_in_string = static_cast<uint64_t>(static_cast<int64_t>(in_string) >> 63);
  return in_string;
}

// The raw contents of a string from its raw JSON token (simdjson's raw_json_token: the string
// and the whitespace after it); false when the token is not a string. On-Demand's reading
// (reader.cc, OdValue) and the index walker's (index_walk.cc, IxValue).
inline bool StringToken(std::string_view tok, std::string_view* out) {
  while (!tok.empty() && tok.back() != '"') tok.remove_suffix(1);  // trailing whitespace
  if (tok.size() < 2 || tok.front() != '"') return false;
  *out = tok.substr(1, tok.size() - 2);
  return true;
}

// An event as a walker reads it, in a slot that is used again and again (a batch's, or the
// reader's own): Clear puts back a fresh RawEvent's values where the last reading set any (seen,
// args_seen: the keys of kEventFields and kArgsFields read): the event's fields one by one, the
// args (every member from "device" on, kineto_fields_test checks it) in one copy.
struct WalkSlot {
  RawEvent ev;
  int dups = 0;                // json_duplicate_keys found in it
  FieldsSeen seen, args_seen;  // the keys of the event and of its args read
  void Clear() {
    if (seen.seen) ResetFields<kEventFields>(ev);
    if (args_seen.seen) {  // one copy, no branch per field
      static constexpr RawEvent kFresh{};
      static_assert(std::is_trivially_copyable_v<RawEvent> && std::is_standard_layout_v<RawEvent>);
      constexpr size_t kArgs = offsetof(RawEvent, device);
      std::memcpy(reinterpret_cast<char*>(&ev) + kArgs, reinterpret_cast<const char*>(&kFresh) + kArgs,
                  sizeof(RawEvent) - kArgs);
    }
    dups = 0;
    seen = args_seen = FieldsSeen{};
  }
};

// One event (p at its '{', the text valid UTF-8 and ending as above), as the reader's ParseEvents
// reads it, into slot: just past its '}', or null where the walker bails (the slot then holds
// part of it).
const char* WalkEvent(const char* p, WalkSlot& slot);

}  // namespace overlapprof::kineto
