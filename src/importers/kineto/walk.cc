// The walker over the bytes (walk.h).
#include "src/importers/kineto/walk.h"

namespace overlapprof::kineto {
namespace {

// p just past a string's opening quote: its closing quote, or null (a byte below 0x20 in it,
// escaped or not, which includes the zeros after the text).
inline const char* WalkStringEnd(const char* p) {
  for (;;) {
#if defined(__SSE2__)
    const __m128i q = _mm_set1_epi8('"'), b = _mm_set1_epi8('\\'), c1f = _mm_set1_epi8(0x1f);
    for (;;) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      const __m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(v, c1f), v);  // v <= 0x1f
      const int m = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, b)), ctl));
      if (m) {
        p += __builtin_ctz(static_cast<unsigned>(m));
        break;
      }
      p += 16;
    }
#else
    while (kWalk.key[static_cast<unsigned char>(*p)]) ++p;
#endif
    if (*p == '"') return p;
    if (*p != '\\' || static_cast<unsigned char>(p[1]) < 0x20) return nullptr;
    p += 2;
  }
}

#if defined(__SSE2__)
// Bit i of each mask: p[i] is a '"', a '\\', '{' or '[', '}' or ']', a NUL, below 0x20.
struct Block64 {
  uint64_t quote = 0, backslash = 0, open = 0, close = 0, nul = 0, ctl = 0;
};
inline Block64 Classify64(const char* p) {
  const __m128i kQuote = _mm_set1_epi8('"'), kBackslash = _mm_set1_epi8('\\'), kOpen = _mm_set1_epi8('{'),
                kClose = _mm_set1_epi8('}'), k20 = _mm_set1_epi8(0x20), k1f = _mm_set1_epi8(0x1f),
                kZero = _mm_setzero_si128();
  Block64 m;
  for (int k = 0; k < 4; ++k) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    const __m128i v20 = _mm_or_si128(v, k20);  // '[' -> '{', ']' -> '}'
    auto bits = [&](__m128i eq) {
      return static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(eq))) << (16 * k);
    };
    m.quote |= bits(_mm_cmpeq_epi8(v, kQuote));
    m.backslash |= bits(_mm_cmpeq_epi8(v, kBackslash));
    m.open |= bits(_mm_cmpeq_epi8(v20, kOpen));
    m.close |= bits(_mm_cmpeq_epi8(v20, kClose));
    m.nul |= bits(_mm_cmpeq_epi8(v, kZero));
    m.ctl |= bits(_mm_cmpeq_epi8(_mm_min_epu8(v, k1f), v));
  }
  return m;
}
#endif

// p at '{' or '[': just past the bracket that closes it (any closing bracket: On-Demand's
// skip counts, it does not match), or null. 64 bytes at a time where there is SSE2 (strings
// and escapes from bit masks, as ScanEvents finds them), a byte at a time otherwise.
inline const char* WalkSkipNested(const char* p) {
  int depth = 0;
#if defined(__SSE2__)
  uint64_t prev_in_string = 0, prev_escaped = 0;
  for (;; p += 64) {
    const Block64 m = Classify64(p);
    const uint64_t escaped = EscapedBytes(m.backslash, prev_escaped);
    const uint64_t in_string = InStringBytes(m.quote & ~escaped, prev_in_string);
    // Where it bails: a NUL (the end of the text), a byte below 0x20 in a string, a backslash
    // outside one.
    const uint64_t stop = m.nul | (m.ctl & in_string) | (m.backslash & ~in_string);
    uint64_t brackets = (m.open | m.close) & ~in_string;
    if (stop) brackets &= (stop & (0 - stop)) - 1;  // before the first
    for (; brackets; brackets &= brackets - 1) {
      const unsigned b = static_cast<unsigned>(__builtin_ctzll(brackets));
      if (m.open >> b & 1) {
        if (++depth > kWalkMaxDepth) return nullptr;
      } else if (--depth == 0) {
        return p + b + 1;
      }
    }
    if (stop) return nullptr;
  }
#else
  for (;;) {
    while (!kWalk.skip_stop[static_cast<unsigned char>(*p)]) ++p;
    switch (*p) {
      case '"':
        p = WalkStringEnd(p + 1);
        if (!p) return nullptr;
        ++p;
        break;
      case '{':
      case '[':
        if (++depth > kWalkMaxDepth) return nullptr;
        ++p;
        break;
      case '}':
      case ']':
        ++p;
        if (--depth == 0) return p;
        break;
      default:  // a backslash outside a string, a NUL
        return nullptr;
    }
  }
#endif
}


// One value at p (whitespace skipped before it).
struct WalkValue {
  const char* begin = nullptr;
  const char* end = nullptr;  // just past the value; null: bail
  bool is_string = false;
  // simdjson's raw_json_token: the first token and the whitespace after it (up to the next
  // structural character).
  std::string_view Token() const {
    const char* first_end = (*begin == '{' || *begin == '[') ? begin + 1 : end;
    return {begin, static_cast<size_t>(WalkSpace(first_end) - begin)};
  }
  // RawString: the raw contents of a string value.
  bool Str(std::string_view* out) const {
    if (!is_string) return false;
    *out = std::string_view(begin + 1, static_cast<size_t>(end - begin - 2));
    return true;
  }
};

inline WalkValue WalkReadValue(const char* p) {
  WalkValue v;
  v.begin = p;
  const unsigned char c = static_cast<unsigned char>(*p);
  if (c == '"') {
    const char* q = WalkStringEnd(p + 1);
    v.end = q ? q + 1 : nullptr;
    v.is_string = true;
  } else if (c == '{' || c == '[') {
    v.end = WalkSkipNested(p);
  } else if (kWalk.scalar[c]) {
    do ++p;
    while (kWalk.scalar[static_cast<unsigned char>(*p)]);
    v.end = p;
  }
  return v;
}


// One field of an object at p (at its key's quote): the key, and p past the ':' and the
// whitespace after it; false to bail.
inline bool WalkKey(const char*& p, std::string_view* key) {
  if (*p != '"') return false;
  const char* const k = p + 1;
  const char* const ke = WalkStringEnd(k);
  if (!ke) return false;
  p = WalkSpace(ke + 1);
  if (*p != ':') return false;
  p = WalkSpace(p + 1);
  *key = std::string_view(k, static_cast<size_t>(ke - k));
  return true;
}
// After a field's value (v_end): the next field's key, true; the object's end, false with p
// past its '}'; or p null (bail).
inline bool WalkNext(const char*& p, const char* v_end) {
  p = WalkSpace(v_end);
  if (*p == ',') {
    p = WalkSpace(p + 1);
    return true;
  }
  p = *p == '}' ? p + 1 : nullptr;
  return false;
}

// args (p at its '{'), as the reader's ParseArgs reads them.
inline const char* WalkArgs(const char* p, RawEvent& ev, int& dups, FieldsSeen& seen) {
  p = WalkSpace(p + 1);
  if (*p == '}') return p + 1;
  for (;;) {
    std::string_view key;
    if (!WalkKey(p, &key)) return nullptr;
    const WalkValue v = WalkReadValue(p);
    if (!v.end) return nullptr;
    ArgsField(key, v, ev, seen, &dups);
    if (!WalkNext(p, v.end)) return p;
  }
}

}  // namespace

const char* WalkEvent(const char* p, WalkSlot& slot) {
  p = WalkSpace(p + 1);
  if (*p == '}') return p + 1;
  for (;;) {
    std::string_view key;
    if (!WalkKey(p, &key)) return nullptr;
    if (IsArgsKey(key)) {
      const bool read = ReadsArgs(slot.ev, slot.seen, &slot.dups) && *p == '{';
      const char* const v_end = read ? WalkArgs(p, slot.ev, slot.dups, slot.args_seen) : WalkReadValue(p).end;
      if (!v_end) return nullptr;
      if (!WalkNext(p, v_end)) return p;
      continue;
    }
    const WalkValue v = WalkReadValue(p);
    if (!v.end) return nullptr;
    EventField(key, v, slot.ev, slot.seen, &slot.dups);
    if (!WalkNext(p, v.end)) return p;
  }
}

}  // namespace overlapprof::kineto
