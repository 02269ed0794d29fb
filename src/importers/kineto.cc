// Importer for PyTorch-profiler (Kineto) Chrome-trace JSON, plain or gzip.
//
// Reads: GPU kernels, memcpy, memset and sync activities (device, stream, correlation,
// bytes, NCCL metadata args), CUDA/HIP runtime and driver calls (for correlation),
// ProfilerStep#N ranges (iterations), user annotations, GPU user annotations,
// distributedInfo, deviceProperties, thread names of GPU streams, baseTimeNanoseconds.
// Everything else (cpu_op details, flows, python stacks) is skipped without being decoded.
//
// Split in two: KinetoReader (here) tokenizes the JSON; kineto::TraceBuilder
// (kineto_builder.*) builds the rank's trace from the events (kineto_event.h).
//
// Streaming (issue 16): the file is read as a stream (src/io/input_stream.h: gzip inflated on a
// second thread) into a bounded window of bytes (16 MiB by default). Each time the window is
// full, its whole elements of traceEvents are read in place, their events handed to the builder,
// and their text dropped. Two walkers read the elements, each field as simdjson On-Demand would:
// first the index walker (WalkIndexed), over simdjson's stage 1 (the index of every token) of
// regions of up to 256 KiB that end between two elements, then the walker over the bytes
// (WalkTables, WalkWindow), from where the first stopped; each stops at the element the window
// (or region) cuts, or at one it does not read exactly as On-Demand would: it "bails". From
// there a scanner tracks strings, escapes and bracket depth (64 bytes at a time, with bit masks:
// ScanEvents) to find the last comma between elements in the window; what the walkers left
// before it is parsed in place,
// wrapped as "[...]", with simdjson On-Demand (ParseEvents), which reports every error as it
// would have over the whole batch. One element larger than the window grows it, up to
// kMaxEventBytes (256 MiB); past that, the file is refused. Whitespace between elements is
// dropped as the window fills, also after a whole element and before its comma (the element is
// then parsed at once: ScanState::need_sep). The other top-level keys (distributedInfo,
// deviceProperties, baseTimeNanoseconds, ...), before or after traceEvents, are read as separate
// small documents of at most kMaxTopLevelValueBytes (64 MiB) each. The builder applies
// baseTimeNanoseconds and resolves ranks in Finish, so where keys are in the file does not
// change the result.
//
// Memory: the window, simdjson's index of one batch when On-Demand parses one (about 2.5x the
// window when resident; a file the walkers read whole never allocates it), the index walker's
// (4 bytes per byte of its longest region: 1 MiB), the inflate queue
// (16 MiB), and the RankTrace being built (docs/performance.md, issue 16); nothing grows with the
// size of the JSON text itself. Strings are interned from their raw (escaped) bytes, so
// simdjson's string buffer is never filled.
//
// Times: "ts" and "dur" are parsed from their decimal text exactly (no double rounding)
// into integer ns; absolute time = baseTimeNanoseconds (when present) + ts.
#include <simdjson.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <fmt/format.h>

#include <charconv>
#include <cstddef>
#include <condition_variable>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "src/importers/importer.h"
#include "src/importers/kineto_builder.h"
#include "src/importers/kineto_event.h"
#include "src/trace/classify.h"
#include "src/io/input_file.h"
#include "src/io/input_stream.h"
#include "src/common/utf8.h"

namespace overlapprof {

namespace od = simdjson::ondemand;
using kineto::Cat;
using kineto::DecodeCat;
using kineto::RawEvent;

bool JsonNumberStart(std::string_view tok) {
  const size_t k = !tok.empty() && tok[0] == '-';
  if (k >= tok.size() || static_cast<unsigned>(tok[k] - '0') >= 10) return false;
  return !(tok[k] == '0' && k + 1 < tok.size() && static_cast<unsigned>(tok[k + 1] - '0') < 10);
}

bool ParseScaledDecimal(std::string_view tok, int exp10, int64_t* out) {
  while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\n' || tok.back() == '\r' || tok.back() == '\t'))
    tok.remove_suffix(1);
  {
    // Fast path, the form of nearly every "ts" and "dur": [-]digits[.digits], 19 digits at most
    // (their value fits uint64 as it is), exp10 in [0, 19]. The same arithmetic as below.
    static constexpr uint64_t kPow10[20] = {1ull,
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
    const char* p = tok.data();
    const char* const e = p + tok.size();
    const bool neg = p < e && *p == '-';
    p += neg;
    uint64_t m = 0;
    const char* const int_start = p;
    while (p < e && static_cast<unsigned>(*p - '0') < 10) m = m * 10 + static_cast<unsigned>(*p++ - '0');
    size_t digits = static_cast<size_t>(p - int_start), frac = 0;
    bool plain = true;
    if (p < e && *p == '.') {
      const char* const f = ++p;
      while (p < e && static_cast<unsigned>(*p - '0') < 10) m = m * 10 + static_cast<unsigned>(*p++ - '0');
      frac = static_cast<size_t>(p - f);
      plain = frac > 0;
      digits += frac;
    }
    if (plain && p == e && digits > 0 && digits <= 19 && exp10 >= 0 && exp10 <= 19) {
      const int64_t total = exp10 - static_cast<int64_t>(frac);  // in [-19, 19]
      uint64_t v;
      bool fits = true;
      if (total >= 0) {
        fits = !__builtin_mul_overflow(m, kPow10[total], &v);
      } else {
        const uint64_t pw = kPow10[-total], r = m % pw;
        v = m / pw + (r >= pw - r ? 1 : 0);  // half away from zero (r * 2 >= pw without overflow)
      }
      if (fits) {
        if (v > (neg ? uint64_t{1} << 63 : static_cast<uint64_t>(INT64_MAX))) return false;
        *out = neg ? static_cast<int64_t>(-static_cast<__int128>(v)) : static_cast<int64_t>(v);
        return true;
      }
    }
  }
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
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < n && is_digit(tok[i])) {
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
    while (i < n && is_digit(tok[i])) {
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
    if (i >= n || !is_digit(tok[i])) return false;
    int64_t e = 0;
    while (i < n && is_digit(tok[i])) {
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
  const unsigned __int128 limit = neg ? static_cast<unsigned __int128>(INT64_MAX) + 1 : INT64_MAX;
  if (v > limit) return false;
  *out = neg ? static_cast<int64_t>(-static_cast<__int128>(v)) : static_cast<int64_t>(v);
  return true;
}


namespace {

constexpr size_t kDefaultWindowBytes = size_t{16} << 20;
constexpr size_t kMinWindowBytes = 16;
// The largest element of traceEvents (and so the largest the window grows).
constexpr size_t kMaxEventBytes = size_t{256} << 20;
// The largest value of a top-level key other than traceEvents (and the largest key).
constexpr size_t kMaxTopLevelValueBytes = size_t{64} << 20;

// "256 MiB", or "1000 bytes" for a size that is no whole number of MiB (tests' small limits).
std::string SizeText(size_t n) {
  return n % (size_t{1} << 20) == 0 ? fmt::format("{} MiB", n >> 20) : fmt::format("{} bytes", n);
}

bool IsJsonSpace(int c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// First '"' or '\\' in p[i, end), or end. SSE2 where there is one (every x86-64).
inline size_t FindQuoteOrBackslash(const char* p, size_t i, size_t end) {
#if defined(__SSE2__)
  const __m128i q = _mm_set1_epi8('"'), b = _mm_set1_epi8('\\');
  while (i + 16 <= end) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, b)));
    if (m) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(m)));
    i += 16;
  }
#endif
  while (i < end && p[i] != '"' && p[i] != '\\') ++i;
  return i;
}

// The characters the scanner looks at outside strings.
struct OutsideTable {
  bool t[256] = {};
  constexpr OutsideTable() {
    for (char c : {'"', '\\', '{', '}', '[', ']', ','}) t[static_cast<unsigned char>(c)] = true;
  }
};
constexpr OutsideTable kOutside;

// ---- the event walker: the fast path for the elements of traceEvents -------------------------
// simdjson On-Demand reads each event as ParseEvents (below) does; the walker reads the same
// fields from the bytes directly, without simdjson's index of the batch, and stops ("bails") at
// anything it does not read exactly as On-Demand would: the rest of the batch then goes through
// On-Demand (KinetoReader::WalkEventsDocument). What it accepts: an object of fields whose keys
// are strings, each followed by ':' and a value, separated by ',' (the structure On-Demand
// checks where it iterates: each event, and the args it reads); a value is a string, a scalar (a
// run of bytes that are not whitespace, brackets, ':' ',' '"' or '\', as simdjson delimits one),
// or an object or array skipped by counting brackets outside strings (as On-Demand skips a value
// it does not read: skip_child). Inside strings, a byte below 0x20 bails (simdjson's stage 1
// refuses it; the batch is checked as UTF-8 before). A backslash outside a string bails, so do
// a NUL outside one and nesting deeper than kWalkMaxDepth. The text ends in a ']' followed by
// zeros (the batch's padding), which stop every scan.
constexpr int kWalkMaxDepth = 512;

// KinetoIndexWalkedEvents(): added once per region.
std::atomic<uint64_t> g_index_walked_events{0};

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
constexpr WalkTables kWalk;

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

using kineto::KeyIs;  // key == lit, the length known when compiled

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

// The raw contents of a string from its raw JSON token (simdjson's raw_json_token: the string
// and the whitespace after it); false when the token is not a string. On-Demand's reading
// (KinetoReader::RawString) and the index walker's (IxValue).
inline bool StringToken(std::string_view tok, std::string_view* out) {
  while (!tok.empty() && tok.back() != '"') tok.remove_suffix(1);  // trailing whitespace
  if (tok.size() < 2 || tok.front() != '"') return false;
  *out = tok.substr(1, tok.size() - 2);
  return true;
}

// A value as the index walker reads it: from its first token to the next token (simdjson's
// raw_json_token, which the walker over the bytes gives too: WalkValue).
struct IxValue {
  const char* begin = nullptr;
  const char* next = nullptr;  // the token after the value's first one
  std::string_view Token() const { return {begin, static_cast<size_t>(next - begin)}; }
  bool Str(std::string_view* out) const { return *begin == '"' && StringToken(Token(), out); }
};

// An event as the walker reads it, in a slot that is used again and again (a batch's, or the
// reader's own): Clear puts back a fresh RawEvent's values where the last reading set any (seen,
// args_seen: the bits of EventField's and ArgsField's keys): the top-level fields one by one,
// the args (every field from "device" on) in one copy.
constexpr RawEvent kFreshEvent{};

struct WalkSlot {
  RawEvent ev;
  int dups = 0;                          // json_duplicate_keys found in it
  uint32_t seen = 0, args_seen = 0;      // fields set (WalkEvent's and WalkArgs's bits)
  void Clear() {
    const RawEvent& kFresh = kFreshEvent;
    if (seen) {
      ev.ph = kFresh.ph;
      ev.ts = kFresh.ts;
      ev.cat = kFresh.cat;
      ev.pid = kFresh.pid;
      ev.tid = kFresh.tid;
      ev.dur = kFresh.dur;
      ev.name = kFresh.name;
      ev.has_name = kFresh.has_name;
    }
    if (args_seen) {  // every field of args at once (they follow "device"): one copy, no branch per field
      static_assert(std::is_trivially_copyable_v<RawEvent> && std::is_standard_layout_v<RawEvent>);
      constexpr size_t kArgs = offsetof(RawEvent, device);
      std::memcpy(reinterpret_cast<char*>(&ev) + kArgs, reinterpret_cast<const char*>(&kFresh) + kArgs,
                  sizeof(RawEvent) - kArgs);
    }
    dups = 0;
    seen = args_seen = 0;
  }
};

// The builder on a thread of its own, for large inputs: the events the walker reads are handed
// over in batches and built while the walker reads the next ones. The text their views point
// into must stay as it is until Sync() (KinetoReader::B: before every other use of the builder,
// and before the window's bytes are moved, overwritten or given back to the stream).
class BuildThread {
 public:
  explicit BuildThread(kineto::TraceBuilder& b) : b_(b) {
    for (size_t i = 1; i < kBatches; ++i) free_.push_back(&batches_[i]);
    cur_ = &batches_[0];
  }
  // Starts the thread; false when it cannot be started (events are then built at once).
  bool Start() {
    try {
      thread_ = std::thread([this] { Run(); });
    } catch (const std::system_error&) {
      return false;
    }
    return true;
  }
  ~BuildThread() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // The slot for the next event (cleared), added by Commit.
  WalkSlot& Slot() {
    if (cur_->n == kBatch) Hand();
    WalkSlot& slot = cur_->slots[cur_->n];
    slot.Clear();
    return slot;
  }
  void Commit() {
    ++cur_->n;
    ++added_;
  }
  size_t added() const { return added_; }  // events added so far
  // Returns when the first `n` events added are built (Sync's, for a part).
  void SyncTo(size_t n) {
    if (n > handed_) Hand(true);  // some are still in the batch being filled
    std::unique_lock<std::mutex> lock(mu_);
    if (built_ >= n) return;
    cv_.notify_all();
    cv_.wait(lock, [&] { return built_ >= n; });
  }
  // Runs fn on the thread, after every event added (Sync), and waits for it: the builder's
  // Finish, so that its memory comes from the same malloc arena as the trace it sorts.
  void Call(const std::function<void()>& fn) {
    Sync();
    std::unique_lock<std::mutex> lock(mu_);
    call_ = &fn;
    cv_.notify_all();
    cv_.wait(lock, [&] { return call_ == nullptr; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }
  // Returns when every event added is built (an exception the builder threw is thrown here).
  void Sync() {
    if (cur_->n == 0 && !pending_) return;
    if (cur_->n != 0) Hand(true);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.notify_all();
    cv_.wait(lock, [&] { return ready_.empty() && !building_; });
    pending_ = false;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  static constexpr size_t kBatch = 512;  // events handed over at once (~180 KB)
  // Batches in flight (5.8 MB): room for the reader to run on while the builder waits for a core
  // (three threads share two). 1 GB trace, 10 alternated runs: wall median 1.0 s with 8, 0.85 s
  // with 32, ~0.86 s with 64 (docs/performance.md, Streaming import).
  static constexpr size_t kBatches = 32;
  static constexpr size_t kWake = 4;
  struct Batch {
    std::unique_ptr<WalkSlot[]> slots{new WalkSlot[kBatch]};
    size_t n = 0;
  };

  // Hands the batch being filled over. The thread is woken when kWake batches wait (or when
  // the reader waits: no batch free, Sync), not for each: fewer switches between the threads.
  void Hand(bool wake = false) {
    std::unique_lock<std::mutex> lock(mu_);
    ready_.push_back(cur_);
    handed_ += cur_->n;
    pending_ = true;
    if (wake || ready_.size() >= kWake || free_.empty()) cv_.notify_all();
    cv_.wait(lock, [&] { return !free_.empty(); });
    cur_ = free_.back();
    free_.pop_back();
  }
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !ready_.empty() || call_; });
      if (stop_) return;
      if (call_) {
        try {
          (*call_)();
        } catch (...) {
          error_ = std::current_exception();
        }
        call_ = nullptr;
        cv_.notify_all();
        continue;
      }
      Batch* batch = ready_.front();
      ready_.erase(ready_.begin());
      building_ = true;
      lock.unlock();
      try {
        if (!error_)
          for (size_t i = 0; i < batch->n; ++i) {
            const WalkSlot& e = batch->slots[i];
            if (e.dups) b_.AddStat(Stat::json_duplicate_keys, e.dups);
            b_.AddEvent(e.ev);
          }
      } catch (...) {
        error_ = std::current_exception();
      }
      const size_t n = batch->n;
      batch->n = 0;
      lock.lock();
      built_ += n;
      building_ = false;
      free_.push_back(batch);
      cv_.notify_all();
    }
  }

  kineto::TraceBuilder& b_;
  Batch batches_[kBatches];
  Batch* cur_;                 // being filled by the reader
  bool pending_ = false;       // batches handed over since the last Sync (reader's)
  size_t added_ = 0, handed_ = 0;  // events added, and handed over (reader's)
  size_t built_ = 0;               // events built (under mu_)
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Batch*> ready_;  // handed over, in order
  std::vector<Batch*> free_;
  bool building_ = false, stop_ = false;
  std::exception_ptr error_;   // thrown by the builder; set and read under mu_ or when idle
  const std::function<void()>* call_ = nullptr;  // Call's, until done
  std::thread thread_;
};

// Tokenizes the document: the top-level keys into the builder's metadata, each element of
// traceEvents into a RawEvent that the builder adds. JSON errors are reported here with their
// byte offset (in the document, after a BOM); what the events mean is the builder's business.
// Not thread-safe (one per import).
class KinetoReader {
 public:
  KinetoReader(ByteStream& in, const ImportOptions& o, od::parser& parser, bool skip_bom)
      : in_(in),
        parser_(parser),
        builder_(o),
        skip_bom_(skip_bom),
        max_event_(std::max(o.kineto.max_event_bytes ? o.kineto.max_event_bytes : kMaxEventBytes, kMinWindowBytes)),
        max_top_(std::min(max_event_, kMaxTopLevelValueBytes)),
        walk_(!o.kineto.on_demand_only),
        ix_mode_(o.kineto.index_walk) {
    size_t window = std::min(std::max(o.kineto.window_bytes ? o.kineto.window_bytes : kDefaultWindowBytes, kMinWindowBytes),
                             max_event_);
    // No larger than the whole text when its length is known (a small plain file or buffer: the
    // default 16 MiB would be allocated, and its parser index sized, for nothing).
    if (const uint64_t n = in.size_hint(); n > 0 && n < window) window = std::max<size_t>(n, kMinWindowBytes);
    window_ = window;
    // The builder on a thread of its own for large inputs: a stream inflated on a thread (which
    // lends its blocks), or a file of 32 MiB or more.
    const bool build_thread = o.kineto.build_thread > 0 ||
                              (o.kineto.build_thread < 0 && (front_ > 0 || in.size_hint() >= (uint64_t{32} << 20)));
    if (build_thread && walk_) {
      build_ = std::make_unique<BuildThread>(builder_);
      if (!build_->Start()) build_.reset();
    }
    if (front_ > 0) {  // the stream lends its blocks: the window is in them (TakeBlock)
      tail_mem_.reset(new char[front_ + kInputPadding + 2]);
      d_ = tail_mem_.get() + 1;
    } else {
      Allocate(window);
    }
  }

  Status Parse() {
    Status st = ParseDocument();
    if (!st.ok()) {
      // The rest of the stream is still read: a stream error (bad gzip) wins over what the JSON
      // had, as when the whole file was inflated before it was parsed.
      Sync();
      while (!eof_) {
        len_ = pos_ = 0;
        if (Status r = Fill(); !r.ok()) return r;
      }
      return st;
    }
    if (build_) {  // on the builder's thread (its malloc arena holds the trace)
      Status done;
      build_->Call([&] { done = builder_.Finish(); });
      return done;
    }
    return builder_.Finish();
  }

  RankTrace Take() { return B().Take(); }

 private:
  // The builder, every event built (BuildThread).
  kineto::TraceBuilder& B() {
    Sync();
    return builder_;
  }
  void Sync() {
    if (build_) build_->Sync();
  }
  // The slot the walker reads the next event into (cleared), then added by CommitSlot.
  WalkSlot& NextSlot() {
    if (build_) return build_->Slot();
    slot_.Clear();
    return slot_;
  }
  void CommitSlot() {
    if (build_) {
      build_->Commit();
      return;
    }
    if (slot_.dups) builder_.AddStat(Stat::json_duplicate_keys, slot_.dups);
    builder_.AddEvent(slot_.ev);
  }

  // ---- the window: d_[0, len_) holds the stream's bytes from offset base_ --------------------
  // There is one spare byte before d_ (where '[' goes before a batch at d_[0]), and kInputPadding
  // + 1 after d_[cap_] (']' and simdjson's padding after a batch at the end). The window is
  // mem_, memory of its own that the stream's bytes are copied into (Read), or, when the stream
  // lends its blocks (the threaded gzip stream: block_front() > 0), a block itself (lent_), with
  // the bytes kept from the block before (the tail: an element cut by the block's end) copied in
  // front of it: no copy of the rest (TakeBlock). A lent window is always full (len_ == cap_);
  // dropping its first bytes moves its start. A tail too large for the room before a block (an
  // element larger than it), and a window that must grow, go to mem_ until a block's edge.
  void Allocate(size_t cap) {
    Sync();
    std::unique_ptr<char[]> m(new char[cap + kInputPadding + 2]);
    if (len_) std::memcpy(m.get() + 1, d_, len_);
    mem_ = std::move(m);
    d_ = mem_.get() + 1;
    cap_ = cap;
    lent_ = false;
  }
  // Drops d_[0, n): the caller shifts the indices it holds.
  void Compact(size_t n) {
    if (lent_) {
      d_ += n;
      cap_ -= n;
    } else {
      Sync();
      std::memmove(d_, d_ + n, len_ - n);
    }
    len_ -= n;
    base_ += n;
    pos_ -= std::min(pos_, n);
  }
  // Reads more of the stream into the window; eof_ at its end.
  Status Fill() {
    if (eof_) return OkStatus();
    if (front_ > 0 && len_ < front_ && (lent_ || in_.buffered() == 0)) return TakeBlock();
    if (lent_) Allocate(std::max({len_ + 1, std::min(len_ * 2, max_event_), window_}));  // a tail too large to carry
    if (len_ == cap_) return OkStatus();
    ExpectMore(base_);
    StatusOr<size_t> r = in_.Read(d_ + len_, cap_ - len_);
    if (!r.ok()) return r.status();
    if (*r == 0) eof_ = true;
    len_ += *r;
    return OkStatus();
  }
  // The stream's next block becomes the window, the window's bytes (len_ < front_) in front of
  // it. At the end of the stream (or on an error) the window is those bytes, in tail_mem_.
  Status TakeBlock() {
    // The stream takes back the block before the one the window is in: the events that point
    // into it (added before the window moved to the current block) must be built. A window of
    // the reader's own (mem_) is freed below: everything built.
    if (lent_ && build_) {
      build_->SyncTo(block_events_);
    } else {
      Sync();
    }
    std::memmove(tail_mem_.get() + 1, d_, len_);
    d_ = tail_mem_.get() + 1;
    cap_ = front_;
    lent_ = false;
    mem_.reset();
    StatusOr<ByteStream::Block> b = in_.NextBlock();
    if (!b.ok()) return b.status();
    if (b->size == 0) {
      eof_ = true;
      return OkStatus();
    }
    char* const start = b->data - len_;
    std::memcpy(start, d_, len_);
    d_ = start;
    len_ += b->size;
    cap_ = len_;
    lent_ = true;
    lent_utf8_ = b->utf8_valid;
    if (build_) block_events_ = build_->added();  // what points into the blocks before this one
    ExpectMore(base_);
    return OkStatus();
  }
  // Once the text read passes 64 MiB, and again each time it has grown four times: the builder
  // is told how much more to expect (TraceBuilder::ExpectMore), the stream's estimated length
  // over `read` (the bytes before the window: built, or about to be).
  void ExpectMore(uint64_t read) {
    if (read < next_estimate_) return;
    next_estimate_ = read * 4;
    const uint64_t total = in_.EstimatedSize();
    if (total <= read) return;
    const double factor = static_cast<double>(total) / static_cast<double>(read);
    if (build_) {
      build_->Call([&] { builder_.ExpectMore(factor); });
    } else {
      builder_.ExpectMore(factor);
    }
  }
  // Document offset (bytes after the BOM) of d_[i].
  uint64_t At(size_t i) const { return base_ + i - bom_; }
  uint64_t DocumentSize() const { return base_ + len_ - bom_; }

  Status Truncated(bool in_string) const {
    return MakeError(StatusCode::kInvalidInput, "truncated JSON: the document ends inside an unclosed {} after {} bytes",
                     in_string ? "string" : "object or array", DocumentSize());
  }
  Status Invalid(size_t i, std::string_view what) const {
    return MakeError(StatusCode::kInvalidInput, "invalid JSON near byte {} ({})", At(i), what);
  }

  // A syntax error `err` found at d_[from], where every bracket before it, counted blindly
  // (strings skipped), leaves `depth` open. Reads the rest of the stream counting the same way:
  // a document that ends inside a string or a bracket is reported as truncated (its cause, most
  // likely), as the whole-document parse did; and a stream error wins over both.
  Status SyntaxError(Status err, size_t from, int64_t depth) {
    Sync();  // the window is read over
    bool in_string = false, escaped = false;
    for (;;) {
      for (size_t i = from; i < len_; ++i) {
        const char c = d_[i];
        if (in_string) {
          if (escaped) escaped = false;
          else if (c == '\\') escaped = true;
          else if (c == '"') in_string = false;
        } else if (c == '"') {
          in_string = true;
        } else if (c == '{' || c == '[') {
          ++depth;
        } else if (c == '}' || c == ']') {
          --depth;
        }
      }
      if (eof_) break;
      base_ += len_;
      len_ = pos_ = from = 0;
      OVERLAPPROF_RETURN_IF_ERROR(Fill());
    }
    if (in_string || depth > 0) return Truncated(in_string);
    return err;
  }

  // ---- the top level, a byte at a time (keys and small values) -------------------------------
  // The byte at pos_, reading more when needed; -1 at the end of the stream or on an error
  // (then in pending_). While capturing_, d_[keep_, ...) is kept (the window grows up to
  // kMaxTopLevelValueBytes); otherwise everything before pos_ may go.
  int Peek() {
    while (pos_ >= len_) {
      if (eof_ || !pending_.ok()) return -1;
      if (len_ == cap_) {
        const size_t keep = capturing_ ? keep_ : pos_;
        if (keep > 0) {
          Compact(keep);
          if (capturing_) keep_ = 0;
        } else if (cap_ < max_top_) {
          Allocate(std::min(cap_ * 2, max_top_));
        } else {
          pending_ = MakeError(StatusCode::kInvalidInput,
                               "a top-level value larger than {} near byte {}: refused (the limit for keys other "
                               "than traceEvents)",
                               SizeText(max_top_), At(keep_));
          return -1;
        }
      }
      pending_ = Fill();
    }
    return static_cast<unsigned char>(d_[pos_]);
  }
  int SkipSpace() {
    int c;
    while (IsJsonSpace(c = Peek())) ++pos_;
    return c;
  }
  // At -1 from Peek inside an open value: the read error, or the document cut short.
  Status AtEnd(bool in_string) const { return pending_.ok() ? Truncated(in_string) : pending_; }

  // Scans the JSON value at pos_ (a string, an object or array, or a scalar token) to its end.
  // Strings and brackets are tracked, not validated (simdjson validates what is parsed).
  Status ScanTopLevelValue() {
    int c = Peek();
    if (c == -1) return AtEnd(false);
    if (c != '"' && c != '{' && c != '[') {
      while ((c = Peek()) != -1 && c != ',' && c != '}' && c != ']' && !IsJsonSpace(c)) ++pos_;
      return pending_;
    }
    int64_t depth = 0;
    bool in_string = false;
    for (;;) {
      c = Peek();
      if (c == -1) return AtEnd(in_string);
      ++pos_;
      if (in_string) {
        if (c == '\\') {
          if (Peek() == -1) return AtEnd(true);
          ++pos_;
        } else if (c == '"') {
          in_string = false;
          if (depth == 0) return OkStatus();
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return OkStatus();
      }
    }
  }

  Status ParseDocument() {
    OVERLAPPROF_RETURN_IF_ERROR(Fill());
    while (len_ < 3 && !eof_) OVERLAPPROF_RETURN_IF_ERROR(Fill());
    if (skip_bom_ && len_ >= 3 && std::memcmp(d_, "\xEF\xBB\xBF", 3) == 0) pos_ = bom_ = 3;
    if (len_ == 0) {
      if (in_.was_compressed()) return MakeError(StatusCode::kInvalidInput, "empty file (gzip of nothing)");
      return MakeError(StatusCode::kInvalidInput, "empty file");
    }
    while (len_ == pos_ && !eof_) OVERLAPPROF_RETURN_IF_ERROR(Fill());  // a BOM and nothing else?
    if (len_ == pos_) return MakeError(StatusCode::kInvalidInput, "empty file");
    int c = SkipSpace();
    if (c == '[') {
      ++pos_;
      events_depth_ = 1;
      OVERLAPPROF_RETURN_IF_ERROR(StreamEvents(false));
      have_events_ = true;
    } else if (c == '{') {
      ++pos_;
      OVERLAPPROF_RETURN_IF_ERROR(ParseTopObject());
    } else if (c == -1) {
      if (!pending_.ok()) return pending_;
      return SyntaxError(Invalid(pos_, "no JSON value"), pos_, 0);
    } else {
      return MakeError(StatusCode::kInvalidInput, "not a Chrome-trace JSON: the top level is not an object or array");
    }
    c = SkipSpace();
    if (!pending_.ok()) return pending_;
    if (c != -1)
      return MakeError(StatusCode::kInvalidInput, "invalid JSON: trailing content after the document near byte {}",
                       At(pos_));
    if (!have_events_)
      return MakeError(StatusCode::kInvalidInput, "no \"traceEvents\" array: not a PyTorch-profiler trace");
    return OkStatus();
  }

  // The members of the top-level object; pos_ is just past its '{'.
  Status ParseTopObject() {
    uint32_t seen = 0;
    events_depth_ = 2;
    int c = SkipSpace();
    if (c == '}') {
      ++pos_;
      return OkStatus();
    }
    for (;;) {
      if (c == -1) return AtEnd(false);
      if (c != '"') return SyntaxError(Invalid(pos_, "expected a key"), pos_, 1);
      // The key, raw (escaped) as in the file.
      capturing_ = true;
      keep_ = pos_;
      OVERLAPPROF_RETURN_IF_ERROR(ScanTopLevelValue());
      std::string key(d_ + keep_ + 1, pos_ - keep_ - 2);
      capturing_ = false;
      CountInvalidUtf8(key);
      c = SkipSpace();
      if (c == -1) return AtEnd(false);
      if (c != ':') return SyntaxError(Invalid(pos_, "expected ':' after a key"), pos_, 1);
      ++pos_;
      c = SkipSpace();
      if (c == -1) return AtEnd(false);
      if (key == "traceEvents") {
        if (!First(seen, 0)) {
          // A later traceEvents is skipped (its text still read, and checked when it is an array).
          if (c == '[') {
            ++pos_;
            OVERLAPPROF_RETURN_IF_ERROR(StreamEvents(true));
          } else {
            OVERLAPPROF_RETURN_IF_ERROR(ScanTopLevelValue());
          }
        } else {
          if (c != '[')
            return MakeError(StatusCode::kInvalidInput, "\"traceEvents\" is not an array near byte {}", At(pos_));
          ++pos_;
          OVERLAPPROF_RETURN_IF_ERROR(StreamEvents(false));
          have_events_ = true;
        }
      } else {
        capturing_ = true;
        keep_ = pos_;
        OVERLAPPROF_RETURN_IF_ERROR(ScanTopLevelValue());
        capturing_ = false;
        if (Status st = ParseTopLevelValue(key, keep_, pos_, seen); !st.ok()) return SyntaxError(st, keep_, 1);
      }
      c = SkipSpace();
      if (c == -1) return AtEnd(false);
      ++pos_;
      if (c == '}') return OkStatus();
      if (c != ',') return SyntaxError(Invalid(pos_ - 1, "expected ',' or '}' after a value"), pos_ - 1, 1);
      c = SkipSpace();
    }
  }

  void CountInvalidUtf8(std::string_view s) {
    if (simdjson::validate_utf8(s.data(), s.size())) return;
    size_t replaced = 0;
    (void)SanitizeUtf8(s, &replaced);
    B().AddStat(Stat::invalid_utf8_replaced, static_cast<int64_t>(replaced));
  }

  // The value of a top-level key other than traceEvents, d_[from, to), as a document "[value]".
  Status ParseTopLevelValue(const std::string& key, size_t from, size_t to, uint32_t& seen) {
    const std::string_view text(d_ + from, to - from);
    int bit = -1;
    if (key == "distributedInfo") bit = 1;
    else if (key == "deviceProperties") bit = 2;
    else if (key == "baseTimeNanoseconds") bit = 3;
    else if (key == "host_name" || key == "hostname") bit = 4;
    if (bit < 0 || !First(seen, bit)) {
      CountInvalidUtf8(text);  // not read: only its bytes count (as they did in a whole-document parse)
      return OkStatus();
    }
    std::string doc_text;
    doc_text.reserve(text.size() + 2 + kInputPadding);
    doc_text += '[';
    doc_text += text;
    doc_text += ']';
    const uint64_t offset = At(from) - 1;
    if (!simdjson::validate_utf8(doc_text.data(), doc_text.size())) {
      size_t replaced = 0;
      doc_text = SanitizeUtf8(doc_text, &replaced);
      B().AddStat(Stat::invalid_utf8_replaced, static_cast<int64_t>(replaced));
    }
    const size_t n = doc_text.size();
    doc_text.append(kInputPadding, '\0');
    cur_buf_ = doc_text.data();
    cur_size_ = n;
    cur_offset_ = offset;
    od::document doc;
    if (auto e = parser_.iterate(doc_text.data(), n, doc_text.size()).get(doc)) return JsonError(e, nullptr);
    od::array arr;
    if (auto e = doc.get_array().get(arr)) return JsonError(e, &doc);
    for (auto er : arr) {
      od::value v;
      if (auto e = std::move(er).get(v)) return JsonError(e, &doc);
      if (bit == 1) {
        OVERLAPPROF_RETURN_IF_ERROR(ParseDistributedInfo(v, &doc));
      } else if (bit == 2) {
        OVERLAPPROF_RETURN_IF_ERROR(ParseDeviceProperties(v, &doc));
      } else if (bit == 3) {
        std::string_view tok = v.raw_json_token();
        int64_t base;
        if (ParseJsonNumber(tok, 0, &base)) B().SetBaseTime(base);
      } else {
        std::string_view s;
        if (RawString(v, &s)) B().meta().host = B().Text(s);
      }
      break;
    }
    return OkStatus();
  }

  // ---- traceEvents, streamed ---------------------------------------------------------------
  // Scanner state over the elements of an array: inside a string, after a backslash in one, and
  // the bracket depth below the array (0: between its elements). need_sep: an element was parsed
  // before its separator was seen (StreamEvents, whitespace after an element filling the window);
  // the next comma between elements is that separator, not a cut.
  struct ScanState {
    bool in_string = false, escaped = false, need_sep = false;
    int64_t depth = 0;
  };

  // Scans d_[from, to): *cut gets the last comma between elements, *close the array's ']' (and
  // the scan stops there); while s.need_sep, the first comma between elements goes to *sep
  // instead (and clears it). Errors: a '}' between elements.
  // A backslash escapes the next byte inside strings and outside them alike (as simdjson's
  // stage 1 reads it; outside a string it is invalid JSON, which simdjson reports when it
  // parses the batch), so the 64-byte block scan and the byte loop agree on every input.
  Status ScanEvents(ScanState& s, size_t from, size_t to, size_t* cut, size_t* close, size_t* sep) {
    const char* p = d_;
    size_t i = from;
    // The element edges at depth 0 among the commas in `m` (bits of the block at `base`).
    auto commas = [&](uint64_t m, size_t base) {
      if (s.depth != 0 || m == 0) return;
      if (s.need_sep) {
        *sep = base + static_cast<size_t>(__builtin_ctzll(m));
        s.need_sep = false;
        m &= m - 1;
        if (m == 0) return;
      }
      *cut = base + 63 - static_cast<size_t>(__builtin_clzll(m));
    };
#if defined(__SSE2__)
    // 64 bytes at a time: the bit masks of quotes, backslashes, brackets and commas; escaped
    // bytes and the inside of strings from them without a branch per byte (simdjson's stage-1
    // method: odd runs of backslashes, then a prefix XOR of the unescaped quotes).
    uint64_t prev_escaped = s.escaped ? 1 : 0;
    uint64_t prev_in_string = s.in_string ? ~uint64_t{0} : 0;
    const __m128i kQuote = _mm_set1_epi8('"'), kBackslash = _mm_set1_epi8('\\'), kComma = _mm_set1_epi8(','),
                  kOpen = _mm_set1_epi8('{'), kClose = _mm_set1_epi8('}'), k20 = _mm_set1_epi8(0x20);
    for (; i + 64 <= to; i += 64) {
      uint64_t quote = 0, backslash = 0, comma = 0, open = 0, closing = 0;
      for (int k = 0; k < 4; ++k) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 16 * k));
        const __m128i v20 = _mm_or_si128(v, k20);  // '[' -> '{', ']' -> '}'
        auto bits = [&](__m128i eq) {
          return static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(eq))) << (16 * k);
        };
        quote |= bits(_mm_cmpeq_epi8(v, kQuote));
        backslash |= bits(_mm_cmpeq_epi8(v, kBackslash));
        comma |= bits(_mm_cmpeq_epi8(v, kComma));
        open |= bits(_mm_cmpeq_epi8(v20, kOpen));
        closing |= bits(_mm_cmpeq_epi8(v20, kClose));
      }
      const uint64_t escaped = EscapedBytes(backslash, prev_escaped);
      const uint64_t in_string = InStringBytes(quote & ~escaped, prev_in_string);
      const uint64_t outside = ~in_string & ~escaped;
      comma &= outside;
      open &= outside;
      closing &= outside;
      uint64_t brackets = open | closing;
      uint64_t done = 0;  // the bits up to the last bracket handled
      while (brackets) {
        const unsigned b = static_cast<unsigned>(__builtin_ctzll(brackets));
        commas(comma & ((uint64_t{1} << b) - 1) & ~done, i);
        done = (uint64_t{2} << b) - 1;  // b = 63: 0 - 1, every bit
        if (open >> b & 1) {
          ++s.depth;
        } else if (s.depth == 0) {
          if (p[i + b] == '}')
            return SyntaxError(Invalid(i + b, "unbalanced '}' in traceEvents"), i + b, events_depth_);
          *close = i + b;
          return OkStatus();
        } else {
          --s.depth;
        }
        brackets &= brackets - 1;
      }
      commas(comma & ~done, i);
    }
    s.escaped = prev_escaped != 0;
    s.in_string = prev_in_string != 0;
#endif
    // The rest (under 64 bytes, or all without SSE2) a byte at a time.
    while (i < to) {
      if (s.escaped) {
        s.escaped = false;
        ++i;
        continue;
      }
      if (s.in_string) {
        i = FindQuoteOrBackslash(p, i, to);
        if (i == to) break;
        if (p[i] == '\\') s.escaped = true;
        else s.in_string = false;
        ++i;
        continue;
      }
      while (i < to && !kOutside.t[static_cast<unsigned char>(p[i])]) ++i;
      if (i == to) break;
      switch (p[i]) {
        case '\\':
          s.escaped = true;
          break;
        case '"':
          s.in_string = true;
          break;
        case '{':
        case '[':
          ++s.depth;
          break;
        case '}':
        case ']':
          if (s.depth == 0) {
            if (p[i] == '}') return SyntaxError(Invalid(i, "unbalanced '}' in traceEvents"), i, events_depth_);
            *close = i;
            return OkStatus();
          }
          --s.depth;
          break;
        default:  // ','
          commas(1, i);
          break;
      }
      ++i;
    }
    return OkStatus();
  }

  // The elements of an array, pos_ just past its '['; pos_ ends past its ']'. `discard`: a
  // duplicate traceEvents, parsed (checked) but not added.
  Status StreamEvents(bool discard) {
    constexpr size_t npos = SIZE_MAX;
    size_t bs = pos_, scan = pos_, cut = npos;  // batch start, scanned up to, last cut in [bs, scan)
    bool first = true;
    ScanState s;
    // The walker (WalkWindow) takes the whole elements of a full window, and the scanner (with
    // On-Demand) what it leaves: at the batch edges of a window, and anything it bails on.
    const bool walk = walk_ && !discard;
    for (;;) {
      // The events of d_[bs, walked) are added (by the walker); walked_sep: the separator before
      // d_[walked] (npos: none, walked == bs).
      size_t walked = bs, walked_sep = npos;
      if (walk && scan == bs && !s.need_sep) {
        // Batches are parsed when the window is full (or the stream ended), as below: the
        // walker waits for that too, so that the batches On-Demand sees are the same.
        if (len_ < cap_ && !eof_) {
          OVERLAPPROF_RETURN_IF_ERROR(Fill());
          continue;
        }
        size_t close = npos;
        WalkWindow(bs, first, &walked, &walked_sep, &close);
        if (close != npos) {
          pos_ = close + 1;
          return OkStatus();
        }
        scan = walked;  // the rest from a fresh state: the walker stopped between two elements
        if (walked_sep != npos) cut = walked_sep;
      }
      size_t close = npos, sep = npos;
      OVERLAPPROF_RETURN_IF_ERROR(ScanEvents(s, scan, len_, &cut, &close, &sep));
      scan = len_;
      if (sep != npos) {  // the separator after an element parsed early: only whitespace before it
        OVERLAPPROF_RETURN_IF_ERROR(OnlySpaceAfterElement(bs, sep));
        bs = sep + 1;
      }
      if (close != npos) {
        if (s.need_sep) {  // the last element was parsed early
          OVERLAPPROF_RETURN_IF_ERROR(OnlySpaceAfterElement(bs, close));
        } else {
          OVERLAPPROF_RETURN_IF_ERROR(ParseBatchRest(bs, walked_sep, close, first, true, discard));
        }
        pos_ = close + 1;
        return OkStatus();
      }
      if (len_ == cap_) {  // the window is full: parse what is whole, keep the rest
        if (cut != npos) {
          OVERLAPPROF_RETURN_IF_ERROR(ParseBatchRest(bs, walked_sep, cut, first, false, discard));
          first = false;
          bs = cut + 1;
          cut = npos;
        }
        // Whitespace before the next element is not kept (a gzip bomb of spaces streams through).
        while (bs < len_ && IsJsonSpace(static_cast<unsigned char>(d_[bs]))) ++bs;
        // Nor is whitespace after a whole element that fills the window before its separator: the
        // element is parsed now and the separator looked for after the whitespace (need_sep).
        if (bs == 0 && !s.need_sep && s.depth == 0 && !s.in_string) {
          size_t k = len_;
          while (k > bs && IsJsonSpace(static_cast<unsigned char>(d_[k - 1]))) --k;
          if (k > bs && k < len_ && (d_[k - 1] == '}' || d_[k - 1] == ']' || d_[k - 1] == '"')) {
            OVERLAPPROF_RETURN_IF_ERROR(ParseBatch(bs, k, first, false, discard));
            first = false;
            s.need_sep = true;
            bs = len_;
          }
        }
        if (bs > 0) {
          const size_t n = bs;
          pos_ = bs;
          Compact(n);
          bs -= n;
          scan -= n;
        } else if (cap_ < max_event_) {
          Allocate(std::min(cap_ * 2, max_event_));
        } else {
          return MakeError(StatusCode::kInvalidInput,
                           "an element of traceEvents larger than {} near byte {}: refused (the limit on one "
                           "event)",
                           SizeText(max_event_), At(bs));
        }
      }
      if (eof_) return Truncated(s.in_string);
      if (walk && !s.need_sep) {  // bs is between two elements: the walker starts there again
        scan = bs;
        s = ScanState{};
      }
      OVERLAPPROF_RETURN_IF_ERROR(Fill());
    }
  }

  // The walker over the full window from d_[bs] (between two elements; `first`: no batch of the
  // array parsed yet): adds each element that is whole and followed by its separator, up to
  // the first it does not take (cut by the window's end, or one it bails on, which the scanner
  // and On-Demand then read as they would have). *walked: where it stopped (after the separator
  // before that element, or bs), *walked_sep: that separator (npos: none); *close: the array's
  // ']' when it got there. Only text checked as UTF-8 is taken: up to the window's last ASCII
  // byte (every element ends in one, and so does its separator).
  void WalkWindow(size_t bs, bool first, size_t* walked, size_t* walked_sep, size_t* close) {
    // (Known valid when the window is a block the stream checked: the stream's bytes up to its
    // last ASCII byte, which is the window's.)
    size_t valid = len_;
    while (valid > bs && static_cast<unsigned char>(d_[valid - 1]) >= 0x80) --valid;
    if (!(lent_ && lent_utf8_) && !simdjson::validate_utf8(d_ + bs, valid - bs)) return;
    d_[len_] = '\0';  // stops every scan of the walker (the window has padding after cap_)
    const char* const end = d_ + len_;
    const char* p = d_ + (IndexWalker() ? WalkIndexed(bs, walked, walked_sep) : bs);
    for (;;) {
      const char* q = WalkSpace(p);
      if (*q == ']' && q < end && first && *walked_sep == npos_) {  // an empty array
        *close = static_cast<size_t>(q - d_);
        return;
      }
      if (*q != '{') return;
      const char* r = WalkEvent(q, NextSlot());
      if (!r) return;
      r = WalkSpace(r);
      if (r >= end || (*r != ',' && *r != ']')) return;
      CommitSlot();
      if (*r == ']') {
        *close = static_cast<size_t>(r - d_);
        return;
      }
      *walked_sep = static_cast<size_t>(r - d_);
      p = r + 1;
      *walked = static_cast<size_t>(p - d_);
    }
  }

  // Regions of the window for the index walker: at most kIxRegion bytes, ending just past a ','
  // that follows a '}' and comes before a '{' (whitespace between them): the end of an element
  // nearly always. Where it is not (such a ',' inside a string), the region's stage 1 fails on
  // the string it leaves open, or the last element's tokens end in it, and the walker over the
  // bytes goes on from there.
  static constexpr size_t kIxRegion = size_t{256} << 10;

  // Creates the index walker's stage 1 on first use; null where it is off (ImportOptions::
  // kineto.index_walk) or simdjson could not make one. Its capacity (the longest region) follows
  // the window's, up to kIxRegion (a small window does not need 1 MiB of index). The stage 1 is
  // the one On-Demand runs (the implementation simdjson picked for this CPU), through simdjson's
  // implementation interface (public, documented for internal use: simdjson 3's
  // create_dom_parser_implementation, stage1, structural_indexes). A simdjson that changed it
  // fails to compile here; one that changed what its index holds fails the tests that compare
  // this walker with On-Demand (kineto_stream_test, kineto_stream_fuzzer).
  simdjson::internal::dom_parser_implementation* IndexWalker() {
    if (!ix_tried_) {
      ix_tried_ = true;
      const simdjson::implementation* impl = simdjson::get_active_implementation();
      const bool on = ix_mode_ > 0 || (ix_mode_ < 0 && impl->name() != "fallback");
      if (on && impl->create_dom_parser_implementation(0, simdjson::DEFAULT_MAX_DEPTH, ix_) != simdjson::SUCCESS)
        ix_.reset();
    }
    const size_t want = std::min(kIxRegion, cap_);
    if (ix_ && ix_cap_ < want) {
      if (ix_->set_capacity(want) != simdjson::SUCCESS) ix_.reset();
      ix_cap_ = want;
    }
    return ix_.get();
  }

  // Just past the last region edge (see kIxRegion) in d_[from, to), or 0.
  size_t IxCut(size_t from, size_t to) const {
    while (to > from + 1) {
      const void* c = memrchr(d_ + from + 1, ',', to - from - 1);
      if (!c) return 0;
      const size_t i = static_cast<size_t>(static_cast<const char*>(c) - d_);
      size_t b = i, a = i + 1;
      while (b > from && IsJsonSpace(static_cast<unsigned char>(d_[b - 1]))) --b;
      while (a < len_ && IsJsonSpace(static_cast<unsigned char>(d_[a]))) ++a;
      if (b > from && d_[b - 1] == '}' && a < len_ && d_[a] == '{') return i + 1;
      to = i;
    }
    return 0;
  }

  // WalkWindow's index walker, from d_[bs]: region by region, each indexed by simdjson's stage
  // 1 and its elements read by IxEvent; returns where the walker over the bytes goes on (after
  // the separator before the first element not taken, or bs). *walked, *walked_sep as
  // WalkWindow's.
  size_t WalkIndexed(size_t bs, size_t* walked, size_t* walked_sep) {
    for (size_t pos = bs;; pos = *walked) {
      const size_t cut = IxCut(pos, std::min(pos + ix_cap_, len_));
      if (cut == 0 ||
          ix_->stage1(reinterpret_cast<const uint8_t*>(d_ + pos), cut - pos, simdjson::stage1_mode::regular) !=
              simdjson::SUCCESS)
        return *walked;
      const IxTokens x{d_ + pos, ix_->structural_indexes.get(), ix_->n_structural_indexes};
      uint32_t k = 0;
      uint64_t taken = 0;
      bool whole = true;  // every element of the region taken
      while (k < x.n) {
        if (!x.Is(k, '{') || !IxEvent(x, k, NextSlot()) || k >= x.n || !x.Is(k, ',')) {
          whole = false;
          break;
        }
        CommitSlot();
        ++taken;
        *walked_sep = pos + x.ix[k];
        *walked = *walked_sep + 1;
        ++k;
      }
      g_index_walked_events.fetch_add(taken, std::memory_order_relaxed);
      if (!whole || taken == 0) return *walked;  // (taken == 0: no element, which no edge allows)
    }
  }

  // ParseBatch(bs, e, ...) when the walker has added the events before d_[walked_sep] (npos:
  // none): On-Demand reads the rest, d_[walked_sep, e), as WalkEventsDocument has it read.
  Status ParseBatchRest(size_t bs, size_t walked_sep, size_t e, bool first, bool last, bool discard) {
    if (walked_sep == npos_) return ParseBatch(bs, e, first, last, discard);
    if (e <= walked_sep) return OkStatus();  // every element of the batch was walked
    Sync();  // the walked events are built: their last bytes are overwritten
    char saved[kInputPadding + 1];
    std::memcpy(saved, d_ + e, sizeof saved);
    d_[e] = ']';
    std::memset(d_ + e + 1, 0, kInputPadding);
    char* const open = d_ + walked_sep - 2;  // inside the walked events (2 bytes at least)
    const char saved_open[2] = {open[0], open[1]};
    open[0] = '[';
    open[1] = '0';
    Status st = ParseEventsOnDemand(open, e + 1 - (walked_sep - 2), At(walked_sep - 2), false, true);
    open[0] = saved_open[0];
    open[1] = saved_open[1];
    std::memcpy(d_ + e, saved, sizeof saved);
    if (!st.ok()) return SyntaxError(st, bs, events_depth_);
    return st;
  }

  // While need_sep: d_[bs, e) (e: the separator or the array's ']') must be whitespace, else the
  // element parsed early has content after it.
  Status OnlySpaceAfterElement(size_t bs, size_t e) {
    for (size_t i = bs; i < e; ++i)
      if (!IsJsonSpace(static_cast<unsigned char>(d_[i])))
        return SyntaxError(Invalid(i, "content after an element"), bs, events_depth_);
    return OkStatus();
  }

  // Parses the elements in d_[bs, e) (e: a comma between elements or the array's ']') as the
  // document "[...]", in place: the byte before bs becomes '[', d_[e] ']' followed by zeros
  // (simdjson's padding), and the bytes after e are put back afterwards.
  Status ParseBatch(size_t bs, size_t e, bool first, bool last, bool discard) {
    size_t i = bs;
    while (i < e && IsJsonSpace(static_cast<unsigned char>(d_[i]))) ++i;
    if (i == e) {
      if (first && last) return OkStatus();  // an empty array
      return SyntaxError(Invalid(e, "a missing element in traceEvents"), bs, events_depth_);
    }
    char saved[kInputPadding + 1];
    std::memcpy(saved, d_ + e, sizeof saved);
    char* const open = d_ + bs - 1;  // d_ - 1 is mem_[0] (not d_[bs - 1]: bs may be 0)
    *open = '[';
    d_[e] = ']';
    std::memset(d_ + e + 1, 0, kInputPadding);
    Status st = ParseEventsDocument(open, e - bs + 2, At(bs) - 1, discard);
    std::memcpy(d_ + e, saved, sizeof saved);
    if (!st.ok()) return SyntaxError(st, bs, events_depth_);
    return st;
  }

  // One batch "[...]" at buf[0, n) (kInputPadding readable zeros after), at document offset `offset`.
  Status ParseEventsDocument(char* buf, size_t n, uint64_t offset, bool discard) {
    if (walk_ && !discard && simdjson::validate_utf8(buf, n)) return WalkEventsDocument(buf, n, offset);
    return ParseEventsOnDemand(buf, n, offset, discard, false);
  }

  // The batch buf[0, n) by the walker, event by event. Where it bails, at the event after the
  // separator `sep`, the rest goes through On-Demand as the document "[0" + buf[sep, n): the
  // two bytes before the separator (the end of the event before it) are overwritten for the
  // call and put back, and the 0, a stand-in for the events before, is skipped. On-Demand then
  // meets the rest in the state it would have reached over the whole batch (after an element,
  // at its comma, one level deep), so it reports what it would have, at the same offsets.
  Status WalkEventsDocument(char* buf, size_t n, uint64_t offset) {
    const char* const end = buf + n - 1;  // the batch's ']'
    const char* p = buf + 1;
    size_t sep = 0;  // buf[sep]: the separator before the event at p; 0: none yet
    for (;;) {
      const char* q = WalkSpace(p);
      if (*q != '{') break;
      const char* r = WalkEvent(q, NextSlot());
      if (!r) break;
      r = WalkSpace(r);
      if (r != end && *r != ',') break;
      CommitSlot();
      if (r == end) return OkStatus();
      sep = static_cast<size_t>(r - buf);
      p = r + 1;
    }
    if (sep == 0) return ParseEventsOnDemand(buf, n, offset, false, false);
    Sync();                         // the events before are built: their bytes are overwritten
    char* const s = buf + sep - 2;  // sep >= 3: '[' and an event of 2 bytes at least before it
    const char saved[2] = {s[0], s[1]};
    s[0] = '[';
    s[1] = '0';
    Status st = ParseEventsOnDemand(s, n - (sep - 2), offset + (sep - 2), false, true);
    s[0] = saved[0];
    s[1] = saved[1];
    return st;
  }

  // The batch with simdjson On-Demand (skip_first: its first element is a stand-in, skipped).
  Status ParseEventsOnDemand(const char* buf, size_t n, uint64_t offset, bool discard, bool skip_first) {
    if (parser_.capacity() < n) (void)!parser_.allocate(std::max(n, std::min(cap_ + 2, simdjson::SIMDJSON_MAXSIZE_BYTES)));
    cur_buf_ = buf;
    cur_size_ = n;
    cur_offset_ = offset;
    od::document doc;
    if (auto e = parser_.iterate(buf, n, n + kInputPadding).get(doc)) {
      if (e != simdjson::UTF8_ERROR || buf == sanitized_.data()) return JsonError(e, nullptr);
      // Invalid UTF-8 (raw bytes in a kernel or host name): parse a copy of the batch with each
      // invalid sequence replaced by U+FFFD (src/common/utf8.h), counted. A copy, only then.
      size_t replaced = 0;
      sanitized_ = SanitizeUtf8(std::string_view(buf, n), &replaced);
      B().AddStat(Stat::invalid_utf8_replaced, static_cast<int64_t>(replaced));
      const size_t m = sanitized_.size();
      sanitized_.append(kInputPadding, '\0');
      Status st = ParseEventsOnDemand(sanitized_.data(), m, offset, discard, skip_first);
      sanitized_ = std::string();
      return st;
    }
    od::array arr;
    if (auto e = doc.get_array().get(arr)) return JsonError(e, &doc);
    if (discard) {
      for (auto er : arr) {
        od::value v;
        if (auto e = std::move(er).get(v)) return JsonError(e, &doc);
      }
    } else {
      OVERLAPPROF_RETURN_IF_ERROR(ParseEvents(arr, &doc, skip_first));
    }
    const char* loc = nullptr;
    if (doc.current_location().get(loc) == simdjson::SUCCESS)
      return MakeError(StatusCode::kInvalidInput, "invalid JSON near byte {} (content after an element)",
                       cur_offset_ + static_cast<size_t>(loc - cur_buf_));
    return OkStatus();
  }

  Status JsonError(simdjson::error_code e, od::document* doc, std::string_view what = {}) {
    uint64_t offset = cur_offset_ + cur_size_;
    if (doc) {
      const char* loc = nullptr;
      if (doc->current_location().get(loc) == simdjson::SUCCESS && loc >= cur_buf_ && loc <= cur_buf_ + cur_size_)
        offset = cur_offset_ + static_cast<size_t>(loc - cur_buf_);
    }
    if (!what.empty()) return MakeError(StatusCode::kInvalidInput, "{} near byte {}", what, offset);
    if (e == simdjson::UTF8_ERROR) return MakeError(StatusCode::kInvalidInput, "invalid JSON: not valid UTF-8");
    return MakeError(StatusCode::kInvalidInput, "invalid JSON near byte {} ({})", offset, simdjson::error_message(e));
  }

  // Duplicate keys: the first occurrence of a key overlapprof reads is used, later ones are
  // skipped and counted (json_duplicate_keys, a warning); docs/schema.md. `seen` holds one bit
  // per key of the object being read. Keys overlapprof does not read are never compared.
  bool First(uint32_t& seen, int bit) {
    const uint32_t m = uint32_t{1} << bit;
    if (seen & m) {
      B().AddStat(Stat::json_duplicate_keys, 1);
      return false;
    }
    seen |= m;
    return true;
  }

  // The raw (escaped) text of a key. Keys of interest never contain escapes.
  static std::string_view KeyOf(od::field& f) {
    const char* p = f.key().raw();
    const char* q = p;
    while (*q != '"') q += (*q == '\\') ? 2 : 1;  // the padded buffer ends in zeros and '"' exists
    return {p, static_cast<size_t>(q - p)};
  }

  // Raw (still escaped) contents of a JSON string value; false if it is not a string.
  static bool RawString(od::value& v, std::string_view* out) { return StringToken(v.raw_json_token(), out); }

  // An integer from a number, a numeric string, or a hex string ("0x1f").
  static bool AnyInt(od::value& v, int64_t* out) { return AnyIntToken(v.raw_json_token(), out); }
  static bool AnyIntToken(std::string_view tok, int64_t* out) {
    {  // Fast path: 1 to 18 digits and nothing after them but whitespace, what ids nearly always are.
      const char* p = tok.data();
      const char* const e = p + std::min<size_t>(tok.size(), 18);
      uint64_t v = 0;
      while (p < e && static_cast<unsigned>(*p - '0') < 10) v = v * 10 + static_cast<unsigned>(*p++ - '0');
      const char* q = p;
      while (q < tok.data() + tok.size() && kWalk.ws[static_cast<unsigned char>(*q)]) ++q;
      if (p > tok.data() && q == tok.data() + tok.size() && (tok[0] != '0' || p == tok.data() + 1)) {
        *out = static_cast<int64_t>(v);
        return true;
      }
    }
    while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\n' || tok.back() == '\r' || tok.back() == '\t'))
      tok.remove_suffix(1);
    if (!tok.empty() && tok.front() == '"') {
      if (tok.size() < 2) return false;
      std::string_view s = tok.substr(1, tok.size() - 2);
      if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        uint64_t u;
        auto r = std::from_chars(s.data() + 2, s.data() + s.size(), u, 16);
        if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return false;
        *out = static_cast<int64_t>(u);
        return true;
      }
      return ParseScaledDecimal(s, 0, out);  // a string: its text, read leniently
    }
    return ParseJsonNumber(tok, 0, out);
  }

  Status ParseDistributedInfo(od::value& v, od::document* doc) {
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) return OkStatus();  // ignored if not an object
    uint32_t seen = 0;
    for (auto fr : obj) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
      std::string_view key = KeyOf(f);
      od::value fv = f.value();
      int64_t n;
      std::string_view s;
      static constexpr std::string_view kKeys[] = {"rank", "world_size", "backend", "nccl_version", "pg_config"};
      bool dup = false;
      for (int k = 0; k < 5; ++k)
        if (key == kKeys[k]) dup = !First(seen, k);
      if (dup) continue;
      if (key == "rank" && AnyInt(fv, &n)) {
        B().SetRank(n);
      } else if (key == "world_size" && AnyInt(fv, &n)) {
        B().meta().world_size = n;
      } else if (key == "backend" && RawString(fv, &s)) {
        B().meta().backend = B().Text(s);
      } else if (key == "nccl_version" && RawString(fv, &s)) {
        B().meta().nccl_version = B().Text(s);
      } else if (key == "pg_config") {
        od::array pgs;
        std::string_view raw;
        if (fv.get_array().get(pgs) == simdjson::SUCCESS && pgs.raw_json().get(raw) == simdjson::SUCCESS)
          B().meta().pg_config_json = std::string(raw);
      }
    }
    return OkStatus();
  }

  Status ParseDeviceProperties(od::value& v, od::document* doc) {
    od::array arr;
    if (v.get_array().get(arr) != simdjson::SUCCESS) return OkStatus();
    for (auto er : arr) {
      od::value ev;
      if (auto e = std::move(er).get(ev)) return JsonError(e, doc);
      od::object obj;
      if (ev.get_object().get(obj) != simdjson::SUCCESS) continue;
      Device d;
      uint32_t seen = 0;
      for (auto fr : obj) {
        od::field f;
        if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
        std::string_view key = KeyOf(f);
        od::value fv = f.value();
        std::string_view s;
        static constexpr std::string_view kKeys[] = {"id", "name", "totalGlobalMem", "computeMajor", "computeMinor", "numSms"};
        bool dup = false;
        for (int k = 0; k < 6; ++k)
          if (key == kKeys[k]) dup = !First(seen, k);
        if (dup) continue;
        if (key == "id") AnyInt(fv, &d.id);
        else if (key == "name" && RawString(fv, &s)) d.name = B().Text(s);
        else if (key == "totalGlobalMem") AnyInt(fv, &d.total_memory);
        else if (key == "computeMajor") AnyInt(fv, &d.compute_major);
        else if (key == "computeMinor") AnyInt(fv, &d.compute_minor);
        else if (key == "numSms") AnyInt(fv, &d.sm_count);
      }
      B().AddDevice(std::move(d));
    }
    return OkStatus();
  }

  Status ParseArgs(od::value& v, RawEvent& ev, od::document* doc) {
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) return OkStatus();
    uint32_t seen = 0;
    for (auto fr : obj) {
      od::field f;
      if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
      std::string_view key = KeyOf(f);
      od::value fv = f.value();
      switch (key.size()) {
        case 3:
          if ((key == "Seq" && First(seen, 0)) || (key == "seq" && First(seen, 1))) AnyInt(fv, &ev.seq);
          break;
        case 4:
          if (key == "name" && First(seen, 2)) RawString(fv, &ev.arg_name);
          break;
        case 5:
          if (key == "bytes" && First(seen, 3)) AnyInt(fv, &ev.bytes);
          else if (key == "dtype" && First(seen, 4)) RawString(fv, &ev.dtype);
          break;
        case 6:
          if (key == "device" && First(seen, 5)) AnyInt(fv, &ev.device);
          else if (key == "stream" && First(seen, 6)) AnyInt(fv, &ev.stream);
          else if (key == "labels" && First(seen, 7)) RawString(fv, &ev.arg_labels);
          break;
        case 8:
          if (key == "Src Rank" && First(seen, 8)) AnyInt(fv, &ev.src_rank);
          else if (key == "Dst Rank" && First(seen, 9)) AnyInt(fv, &ev.dst_rank);
          else if (key == "toDevice" && First(seen, 20)) AnyInt(fv, &ev.to_device);
          else if (key == "inDevice" && First(seen, 21)) AnyInt(fv, &ev.in_device);
          break;
        case 10:
          if (key == "Group size" && First(seen, 10)) AnyInt(fv, &ev.group_size);
          else if (key == "fromDevice" && First(seen, 22)) AnyInt(fv, &ev.from_device);
          break;
        case 11:
          if (key == "correlation" && First(seen, 11)) AnyInt(fv, &ev.correlation);
          else if (key == "External id" && First(seen, 12)) ev.external_id = fv.raw_json_token();
          break;
        case 13:
          if (key == "In msg nelems" && First(seen, 13)) AnyInt(fv, &ev.in_nelems);
          break;
        case 14:
          if (key == "Out msg nelems" && First(seen, 14)) AnyInt(fv, &ev.out_nelems);
          break;
        case 15:
          if (key == "Collective name" && First(seen, 15)) RawString(fv, &ev.coll_name);
          break;
        case 18:
          if (key == "Process Group Name" && First(seen, 16)) RawString(fv, &ev.pg_name);
          break;
        case 19:
          if (key == "Process Group Ranks" && First(seen, 17)) RawString(fv, &ev.pg_ranks);
          else if (key == "Sequence number" && First(seen, 18)) AnyInt(fv, &ev.seq);
          break;
        case 25:
          if (key == "Process Group Description" && First(seen, 19)) RawString(fv, &ev.pg_desc);
          break;
        default:
          break;
      }
    }
    return OkStatus();
  }

  // ---- the walker's events (see WalkTables): the fields ParseEvents and ParseArgs read, read
  // as they read them; null where it bails. Duplicates are counted in *dups and added with the
  // event (an event the walker bails on is read again by On-Demand, which counts them itself).
  static bool WalkFirst(uint32_t& seen, int bit, int& dups) {
    const uint32_t m = uint32_t{1} << bit;
    if (seen & m) {
      ++dups;
      return false;
    }
    seen |= m;
    return true;
  }

  // One field of an object at p (at its key's quote): the key, and p past the ':' and the
  // whitespace after it; false to bail.
  static bool WalkKey(const char*& p, std::string_view* key) {
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
  static bool WalkNext(const char*& p, const char* v_end) {
    p = WalkSpace(v_end);
    if (*p == ',') {
      p = WalkSpace(p + 1);
      return true;
    }
    p = *p == '}' ? p + 1 : nullptr;
    return false;
  }

  // One field of args, as ParseArgs reads it, from a value of either walker (V: Token(), the
  // raw JSON token as simdjson gives it; Str(), the raw contents of a string).
  template <class V>
  static void ArgsField(std::string_view key, const V& v, RawEvent& ev, int& dups, uint32_t& seen) {
    switch (key.size()) {
      case 3:
        if ((KeyIs(key, "Seq") && WalkFirst(seen, 0, dups)) || (KeyIs(key, "seq") && WalkFirst(seen, 1, dups)))
          AnyIntToken(v.Token(), &ev.seq);
        break;
      case 4:
        if (KeyIs(key, "name") && WalkFirst(seen, 2, dups)) v.Str(&ev.arg_name);
        break;
      case 5:
        if (KeyIs(key, "bytes") && WalkFirst(seen, 3, dups)) AnyIntToken(v.Token(), &ev.bytes);
        else if (KeyIs(key, "dtype") && WalkFirst(seen, 4, dups)) v.Str(&ev.dtype);
        break;
      case 6:
        if (KeyIs(key, "device") && WalkFirst(seen, 5, dups)) AnyIntToken(v.Token(), &ev.device);
        else if (KeyIs(key, "stream") && WalkFirst(seen, 6, dups)) AnyIntToken(v.Token(), &ev.stream);
        else if (KeyIs(key, "labels") && WalkFirst(seen, 7, dups)) v.Str(&ev.arg_labels);
        break;
      case 8:
        if (KeyIs(key, "Src Rank") && WalkFirst(seen, 8, dups)) AnyIntToken(v.Token(), &ev.src_rank);
        else if (KeyIs(key, "Dst Rank") && WalkFirst(seen, 9, dups)) AnyIntToken(v.Token(), &ev.dst_rank);
        else if (KeyIs(key, "toDevice") && WalkFirst(seen, 20, dups)) AnyIntToken(v.Token(), &ev.to_device);
        else if (KeyIs(key, "inDevice") && WalkFirst(seen, 21, dups)) AnyIntToken(v.Token(), &ev.in_device);
        break;
      case 10:
        if (KeyIs(key, "Group size") && WalkFirst(seen, 10, dups)) AnyIntToken(v.Token(), &ev.group_size);
        else if (KeyIs(key, "fromDevice") && WalkFirst(seen, 22, dups)) AnyIntToken(v.Token(), &ev.from_device);
        break;
      case 11:
        if (KeyIs(key, "correlation") && WalkFirst(seen, 11, dups)) AnyIntToken(v.Token(), &ev.correlation);
        else if (KeyIs(key, "External id") && WalkFirst(seen, 12, dups)) ev.external_id = v.Token();
        break;
      case 13:
        if (KeyIs(key, "In msg nelems") && WalkFirst(seen, 13, dups)) AnyIntToken(v.Token(), &ev.in_nelems);
        break;
      case 14:
        if (KeyIs(key, "Out msg nelems") && WalkFirst(seen, 14, dups)) AnyIntToken(v.Token(), &ev.out_nelems);
        break;
      case 15:
        if (KeyIs(key, "Collective name") && WalkFirst(seen, 15, dups)) v.Str(&ev.coll_name);
        break;
      case 18:
        if (KeyIs(key, "Process Group Name") && WalkFirst(seen, 16, dups)) v.Str(&ev.pg_name);
        break;
      case 19:
        if (KeyIs(key, "Process Group Ranks") && WalkFirst(seen, 17, dups)) v.Str(&ev.pg_ranks);
        else if (KeyIs(key, "Sequence number") && WalkFirst(seen, 18, dups)) AnyIntToken(v.Token(), &ev.seq);
        break;
      case 25:
        if (KeyIs(key, "Process Group Description") && WalkFirst(seen, 19, dups)) v.Str(&ev.pg_desc);
        break;
      default:
        break;
    }
  }

  // args (p at its '{'), as ParseArgs reads them.
  static const char* WalkArgs(const char* p, RawEvent& ev, int& dups, uint32_t& seen) {
    p = WalkSpace(p + 1);
    if (*p == '}') return p + 1;
    for (;;) {
      std::string_view key;
      if (!WalkKey(p, &key)) return nullptr;
      const WalkValue v = WalkReadValue(p);
      if (!v.end) return nullptr;
      ArgsField(key, v, ev, dups, seen);
      if (!WalkNext(p, v.end)) return p;
    }
  }

  // Whether ParseEvents reads an event's args (its "args" key just read; `object`: the value is
  // an object). Counts a duplicate "args".
  static bool ReadsArgs(WalkSlot& slot, bool object) {
    if (!(WalkFirst(slot.seen, 7, slot.dups) && object)) return false;
    const RawEvent& ev = slot.ev;
    const Cat c = DecodeCat(ev.cat);
    return (c != Cat::kCpuOp && c != Cat::kOther) ||
           (c == Cat::kCpuOp && ev.has_name && (KeyIs(ev.name, "record_param_comms") || IsCommHostOpName(ev.name)));
  }
  // One field of an event other than "args", as ParseEvents reads it (V: as ArgsField's).
  template <class V>
  static void EventField(std::string_view key, const V& v, WalkSlot& slot) {
    RawEvent& ev = slot.ev;
    int& dups = slot.dups;
    uint32_t& seen = slot.seen;
    switch (key.size()) {
      case 2:
        if (KeyIs(key, "ph") && WalkFirst(seen, 0, dups)) {
          std::string_view s;
          if (v.Str(&s) && !s.empty()) ev.ph = s[0];
        } else if (KeyIs(key, "ts") && WalkFirst(seen, 1, dups)) {
          ev.ts = v.Token();
        }
        break;
      case 3:
        if (KeyIs(key, "cat") && WalkFirst(seen, 2, dups)) v.Str(&ev.cat);
        else if (KeyIs(key, "pid") && WalkFirst(seen, 3, dups)) AnyIntToken(v.Token(), &ev.pid);
        else if (KeyIs(key, "tid") && WalkFirst(seen, 4, dups)) AnyIntToken(v.Token(), &ev.tid);
        else if (KeyIs(key, "dur") && WalkFirst(seen, 5, dups)) ev.dur = v.Token();
        break;
      case 4:
        if (KeyIs(key, "name") && WalkFirst(seen, 6, dups)) ev.has_name = v.Str(&ev.name);
        break;
      default:
        break;
    }
  }

  // One event (p at its '{'), as ParseEvents reads it.
  static const char* WalkEvent(const char* p, WalkSlot& slot) {
    p = WalkSpace(p + 1);
    if (*p == '}') return p + 1;
    for (;;) {
      std::string_view key;
      if (!WalkKey(p, &key)) return nullptr;
      if (key.size() == 4 && KeyIs(key, "args")) {
        const char* const v_end = ReadsArgs(slot, *p == '{') ? WalkArgs(p, slot.ev, slot.dups, slot.args_seen)
                                                            : WalkReadValue(p).end;
        if (!v_end) return nullptr;
        if (!WalkNext(p, v_end)) return p;
        continue;
      }
      const WalkValue v = WalkReadValue(p);
      if (!v.end) return nullptr;
      EventField(key, v, slot);
      if (!WalkNext(p, v.end)) return p;
    }
  }

  // ---- the index walker: the same reading over simdjson's stage 1 of a region of the window,
  // the index of where every token starts (every '{' '}' '[' ']' ':' ',' outside strings, the
  // opening quote of every string, the first byte of every other scalar), the index simdjson's
  // On-Demand itself reads the region with. A value's raw token is the text from its token to
  // the next one; a nested value is skipped by counting brackets over the tokens, as On-Demand's
  // skip does; a key ends at the last quote before its ':'. What is not an object of fields
  // (a key that is not a string, no ':', no ',' or '}' after a value, a missing value), an
  // event that the region's tokens end in, and nesting deeper than kWalkMaxDepth bail, as the
  // walker over the bytes does; On-Demand then reads the event. So an event the index walker
  // takes is read as On-Demand reads it, token by token; the tests and kineto_stream_fuzzer
  // compare the two. Positions are offsets from t, the region's first byte.
  //
  // One difference with the text the rest of the reader sees: a bracket or comma after a
  // backslash outside strings is a token for simdjson, but escaped for the scanner that finds
  // element edges where the walkers do not (ScanEvents). The walker over the bytes bails at a
  // backslash outside strings; this one at a bracket or comma with a backslash before it.
  struct IxTokens {
    const char* t;
    const uint32_t* ix;
    uint32_t n;  // tokens
    char At(uint32_t k) const { return t[ix[k]]; }
    // The byte before token k is a backslash (t[-1] is readable: the byte before the window, or
    // in it).
    bool AfterBackslash(uint32_t k) const { return t[static_cast<ptrdiff_t>(ix[k]) - 1] == '\\'; }
    // Token k is c, not after a backslash.
    bool Is(uint32_t k, char c) const { return At(k) == c && !AfterBackslash(k); }
  };
  // The value at token k (k < n); k then at the token after it.
  static bool IxReadValue(const IxTokens& x, uint32_t& k, IxValue* v) {
    const char c = x.At(k);
    if (c == ':' || c == ',' || c == '}' || c == ']') return false;  // no value
    if (k + 1 >= x.n) return false;
    v->begin = x.t + x.ix[k];
    v->next = x.t + x.ix[k + 1];
    if (c != '{' && c != '[') {
      ++k;
      return true;
    }
    if (x.AfterBackslash(k)) return false;
    int depth = 1;
    for (uint32_t j = k + 1; j < x.n; ++j) {
      const char b = x.At(j);
      int d;
      if (b == '{' || b == '[') d = 1;
      else if (b == '}' || b == ']') d = -1;
      else if (b == ',') d = 0;
      else continue;
      if (x.AfterBackslash(j)) return false;
      depth += d;
      if (depth > kWalkMaxDepth) return false;
      if (depth == 0) {
        k = j + 1;
        return true;
      }
    }
    return false;
  }
  // A key at token k: k then at its value.
  static bool IxKey(const IxTokens& x, uint32_t& k, std::string_view* key) {
    if (k + 2 >= x.n || x.At(k) != '"' || x.At(k + 1) != ':') return false;
    const char* const q = x.t + x.ix[k];
    const char* e = x.t + x.ix[k + 1];  // back over the whitespace before ':' to the closing quote
    while (e[-1] != '"') --e;
    if (e - 1 <= q) return false;
    *key = std::string_view(q + 1, static_cast<size_t>(e - 1 - (q + 1)));
    k += 2;
    return true;
  }
  // After a value: k at ','/'}'; 1: another field (k at its key), 0: the object's end (k past
  // it), -1: bail.
  static int IxNext(const IxTokens& x, uint32_t& k) {
    if (k >= x.n || x.AfterBackslash(k)) return -1;
    const char c = x.At(k++);
    return c == ',' ? 1 : c == '}' ? 0 : -1;
  }
  // args at token k ('{'), as ParseArgs reads them.
  static bool IxArgs(const IxTokens& x, uint32_t& k, RawEvent& ev, int& dups, uint32_t& seen) {
    if (x.AfterBackslash(k) || ++k >= x.n) return false;
    if (x.Is(k, '}')) {
      ++k;
      return true;
    }
    for (;;) {
      std::string_view key;
      IxValue v;
      if (!IxKey(x, k, &key) || !IxReadValue(x, k, &v)) return false;
      ArgsField(key, v, ev, dups, seen);
      const int next = IxNext(x, k);
      if (next <= 0) return next == 0;
    }
  }
  // One event at token k ('{'), as ParseEvents reads it; k then past its '}'.
  static bool IxEvent(const IxTokens& x, uint32_t& k, WalkSlot& slot) {
    if (++k >= x.n) return false;
    if (x.Is(k, '}')) {
      ++k;
      return true;
    }
    for (;;) {
      std::string_view key;
      if (!IxKey(x, k, &key)) return false;
      IxValue v;
      if (key.size() == 4 && KeyIs(key, "args")) {
        if (ReadsArgs(slot, x.At(k) == '{') ? !IxArgs(x, k, slot.ev, slot.dups, slot.args_seen)
                                            : !IxReadValue(x, k, &v))
          return false;
      } else {
        if (!IxReadValue(x, k, &v)) return false;
        EventField(key, v, slot);
      }
      const int next = IxNext(x, k);
      if (next <= 0) return next == 0;
    }
  }

  Status ParseEvents(od::array& arr, od::document* doc, bool skip_first) {
    for (auto er : arr) {
      od::value v;
      if (auto e = std::move(er).get(v)) return JsonError(e, doc);
      if (skip_first) {  // WalkEventsDocument's stand-in
        skip_first = false;
        continue;
      }
      od::object obj;
      if (v.get_object().get(obj) != simdjson::SUCCESS) {
        B().AddMalformed();
        continue;
      }
      RawEvent ev;
      uint32_t seen = 0;
      for (auto fr : obj) {
        od::field f;
        if (auto e = std::move(fr).get(f)) return JsonError(e, doc);
        std::string_view key = KeyOf(f);
        od::value fv = f.value();
        switch (key.size()) {
          case 2:
            if (key == "ph" && First(seen, 0)) {
              std::string_view s;
              if (RawString(fv, &s) && !s.empty()) ev.ph = s[0];
            } else if (key == "ts" && First(seen, 1)) {
              ev.ts = fv.raw_json_token();
            }
            break;
          case 3:
            if (key == "cat" && First(seen, 2)) RawString(fv, &ev.cat);
            else if (key == "pid" && First(seen, 3)) AnyInt(fv, &ev.pid);
            else if (key == "tid" && First(seen, 4)) AnyInt(fv, &ev.tid);
            else if (key == "dur" && First(seen, 5)) {
              ev.dur = fv.raw_json_token();
            }
            break;
          case 4:
            if (key == "name" && First(seen, 6)) ev.has_name = RawString(fv, &ev.name);
            else if (key == "args" && First(seen, 7)) {
              // cpu_op args (shapes, call stacks) are large and unused: skip undecoded, except
              // for host ops that launch communication (their External id links their kernels,
              // rule 2) and record_param_comms, whose NCCL arguments name SendRecv kernels
              // ("name" precedes "args" in every writer seen).
              Cat c = DecodeCat(ev.cat);
              if ((c != Cat::kCpuOp && c != Cat::kOther) ||
                  (c == Cat::kCpuOp && ev.has_name && (KeyIs(ev.name, "record_param_comms") || IsCommHostOpName(ev.name))))
                OVERLAPPROF_RETURN_IF_ERROR(ParseArgs(fv, ev, doc));
            }
            break;
          default:
            break;
        }
      }
      B().AddEvent(ev);
    }
    return OkStatus();
  }

  static constexpr size_t npos_ = SIZE_MAX;
  ByteStream& in_;
  const size_t front_ = in_.block_front();  // > 0: the stream lends blocks with this room before them
  od::parser& parser_;
  kineto::TraceBuilder builder_;
  std::unique_ptr<BuildThread> build_;  // null: events built on this thread
  WalkSlot slot_;                       // the walker's event when build_ is null
  const bool skip_bom_;
  const size_t max_event_, max_top_;  // the window's most (bytes): for an event, for a top-level value
  std::unique_ptr<char[]> mem_;       // the window when it is not in a lent block
  std::unique_ptr<char[]> tail_mem_;  // front_ bytes (+ 1 before, padding after): TakeBlock's
  char* d_ = nullptr;
  size_t cap_ = 0, len_ = 0;
  size_t window_ = 0;  // the size of a window of its own
  bool lent_ = false;  // d_ is in a block the stream lent
  bool lent_utf8_ = false;  // that block's ByteStream::Block::utf8_valid
  size_t block_events_ = 0;  // events added before the window moved to the block it is in
  uint64_t base_ = 0;  // stream offset of d_[0]
  size_t bom_ = 0;     // bytes of a UTF-8 BOM skipped at the start (offsets are after it)
  size_t pos_ = 0;     // the top level's cursor in d_
  size_t keep_ = 0;    // while capturing_: the first byte kept
  bool capturing_ = false, eof_ = false, have_events_ = false;
  int64_t events_depth_ = 1;  // brackets open inside traceEvents (1: a top-level array)
  Status pending_;     // a read error or refusal met by Peek
  // The document simdjson parses now (a batch, or a top-level value) and its document offset.
  const char* cur_buf_ = nullptr;
  size_t cur_size_ = 0;
  uint64_t cur_offset_ = 0;
  std::string sanitized_;  // a batch with invalid UTF-8 replaced, while it is parsed
  const bool walk_;        // events by the walker (WalkEventsDocument), On-Demand where it bails
  const int ix_mode_;      // ImportOptions::kineto.index_walk
  uint64_t next_estimate_ = uint64_t{64} << 20;  // ExpectMore's next checkpoint (bytes read)
  bool ix_tried_ = false;  // IndexWalker() made ix_ (or found it off)
  size_t ix_cap_ = 0;      // ix_'s capacity: the longest region
  std::unique_ptr<simdjson::internal::dom_parser_implementation> ix_;  // stage 1 of the index walker
};

class KinetoImporter : public OneRankImporter {
 public:
  std::string_view name() const override { return "kineto"; }
  std::string_view description() const override {
    return "PyTorch profiler (Kineto) Chrome-trace JSON, .json or .json.gz";
  }
  int Probe(std::string_view head) const override {
    if (IsGzip(head)) return 50;  // gzip of what is only known after inflating
    size_t i = 0;
    if (head.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 BOM
    while (i < head.size() && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) ++i;
    if (i < head.size() && (head[i] == '{' || head[i] == '[')) return 60;
    return 0;
  }
  StatusOr<RankTrace> Import(const std::string& path, const ImportOptions& options) const override {
    StatusOr<RankTrace> t = [&]() -> StatusOr<RankTrace> {
      OVERLAPPROF_ASSIGN_OR_RETURN(std::unique_ptr<ByteStream> in, OpenInputStream(path));
      return ParseKinetoStream(*in, options, true);
    }();
    // What the import freed (its blocks and window, its indexes, the host calls no reader asked
    // for) stays in the heap, where the analyzers' preparation of the rank, and the next rank,
    // reuse it instead of faulting in fresh memory (main()'s mallopt). It used to be given back
    // here (malloc_trim) for large ranks: 20 GB trace, `analyze` 12.5-14.2 s with 4.4-5.7 s of
    // system time, against 10.7-11.7 s and 2.7-3.8 s without, for a peak RSS 12% higher (2.04 ->
    // 2.29 GB; 1 GB trace: unchanged). The old arrays of the vectors the builder grows are still
    // given back as they are left (PushBack, kineto_builder.cc). docs/performance.md.
    if (t.ok()) t->meta.source_path = path;
    return t;
  }
};

}  // namespace

StatusOr<RankTrace> ParseKinetoStream(ByteStream& in, const ImportOptions& options, bool skip_bom) {
  ImportScratch local;
  ImportScratch& scratch = options.scratch ? *options.scratch : local;
  if (!scratch.json_parser) scratch.json_parser = std::make_shared<od::parser>();
  KinetoReader p(in, options, *static_cast<od::parser*>(scratch.json_parser.get()), skip_bom);
  OVERLAPPROF_RETURN_IF_ERROR(p.Parse());
  return p.Take();
}

uint64_t KinetoIndexWalkedEvents() { return g_index_walked_events.load(std::memory_order_relaxed); }

StatusOr<RankTrace> ParseKinetoJson(const char* buffer, size_t size, size_t /*capacity*/, const ImportOptions& options) {
  if (size == 0) return MakeError(StatusCode::kInvalidInput, "empty file");
  std::unique_ptr<ByteStream> in = MemoryStream(std::string_view(buffer, size));
  return ParseKinetoStream(*in, options, false);
}

std::unique_ptr<Importer> MakeKinetoImporter() { return std::make_unique<KinetoImporter>(); }

}  // namespace overlapprof
