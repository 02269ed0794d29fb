#pragma once
// The index walker: the field tables (fields.h) read over simdjson's stage 1 of a region of the
// reader's window, the index of where every token starts (every '{' '}' '[' ']' ':' ',' outside
// strings, the opening quote of every string, the first byte of every other scalar), the index
// simdjson's On-Demand itself reads the region with. A value's raw token is the text from its token
// to the next one; a nested value is skipped by counting brackets over the tokens, as On-Demand's
// skip does; a key ends at the last quote before its ':'. What is not an object of fields (a key
// that is not a string, no ':', no ',' or '}' after a value, a missing value), an event that the
// region's tokens end in, and nesting deeper than kWalkMaxDepth bail, as the walker over the bytes
// (walk.h) does; the reader then reads the event with it, or On-Demand. So an event the index
// walker takes is read as On-Demand reads it, token by token; the tests and kineto_stream_fuzzer
// compare the two. Positions are offsets from t, the region's first byte.
//
// One difference with the text the rest of the reader sees: a bracket or comma after a backslash
// outside strings is a token for simdjson, but escaped for the scanner that finds element edges
// where the walkers do not (the reader's ScanEvents). The walker over the bytes bails at a
// backslash outside strings; this one at a bracket or comma with a backslash before it.
//
// This is the only file that uses simdjson's implementation interface (simdjson::internal: the
// stage 1 that On-Demand runs, for the implementation simdjson picked for this CPU; documented
// for internal use: simdjson 3's create_dom_parser_implementation, stage1, structural_indexes).
// A simdjson that changed it fails to compile here; one that changed what its index holds fails
// the tests that compare this walker with On-Demand (kineto_stream_test, kineto_stream_fuzzer).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "src/importers/kineto/walk.h"

namespace overlapprof::kineto {

// The tokens of a region: ix[k] is the offset from t of token k.
struct IxTokens {
  const char* t = nullptr;
  const uint32_t* ix = nullptr;
  uint32_t n = 0;  // tokens
  char At(uint32_t k) const { return t[ix[k]]; }
  // The byte before token k is a backslash (t[-1] is readable: the byte before the window, or
  // in it).
  bool AfterBackslash(uint32_t k) const { return t[static_cast<ptrdiff_t>(ix[k]) - 1] == '\\'; }
  // Token k is c, not after a backslash.
  bool Is(uint32_t k, char c) const { return At(k) == c && !AfterBackslash(k); }
};

// simdjson's stage 1 over regions of text, made once per reader and used again.
class StructuralIndexer {
 public:
  // mode: ImportOptions::kineto.index_walk (-1: where simdjson has a kernel for this CPU other
  // than its portable fallback, 0 never, 1 always). Null where it is off or simdjson could not
  // make one.
  static std::unique_ptr<StructuralIndexer> Make(int mode);
  ~StructuralIndexer();
  // Room for regions of up to n bytes; false when there is none (the indexer is then unusable).
  bool Reserve(size_t n);
  size_t capacity() const { return capacity_; }
  // The tokens of t[0, n) (n <= capacity(), kInputPadding readable bytes after it), valid until
  // the next call; false where stage 1 refuses the text (a string it leaves open, a byte below
  // 0x20 in a string, ...).
  bool Index(const char* t, size_t n, IxTokens* out);

 private:
  struct Impl;
  StructuralIndexer();
  std::unique_ptr<Impl> impl_;
  size_t capacity_ = 0;
};

// The reading of events from the tokens: always inlined into the reader's loop over a region,
// where the tokens stay in registers (a call per event costs ~15% of the walk: the stores into
// the event would force the tokens to be read again from memory).

// A value as the index walker reads it: from its first token to the next token (simdjson's
// raw_json_token, which the walker over the bytes gives too: WalkValue).
struct IxValue {
  const char* begin = nullptr;
  const char* next = nullptr;  // the token after the value's first one
  std::string_view Token() const { return {begin, static_cast<size_t>(next - begin)}; }
  bool Str(std::string_view* out) const { return *begin == '"' && StringToken(Token(), out); }
};


// The value at token k (k < n); k then at the token after it.
__attribute__((always_inline)) inline bool IxReadValue(const IxTokens& x, uint32_t& k, IxValue* v) {
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
__attribute__((always_inline)) inline bool IxKey(const IxTokens& x, uint32_t& k, std::string_view* key) {
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
__attribute__((always_inline)) inline int IxNext(const IxTokens& x, uint32_t& k) {
  if (k >= x.n || x.AfterBackslash(k)) return -1;
  const char c = x.At(k++);
  return c == ',' ? 1 : c == '}' ? 0 : -1;
}
// args at token k ('{'), as ParseArgs reads them.
__attribute__((always_inline)) inline bool IxArgs(const IxTokens& x, uint32_t& k, RawEvent& ev, int& dups, FieldsSeen& seen) {
  if (x.AfterBackslash(k) || ++k >= x.n) return false;
  if (x.Is(k, '}')) {
    ++k;
    return true;
  }
  for (;;) {
    std::string_view key;
    IxValue v;
    if (!IxKey(x, k, &key) || !IxReadValue(x, k, &v)) return false;
    ArgsField(key, v, ev, seen, &dups);
    const int next = IxNext(x, k);
    if (next <= 0) return next == 0;
  }
}

// One event at token k ('{'), as the reader's ParseEvents reads it, into slot: true with k past
// its '}', false where the walker bails (the slot then holds part of it).
__attribute__((always_inline)) inline bool IxEvent(const IxTokens& x, uint32_t& k, WalkSlot& slot) {
  if (++k >= x.n) return false;
  if (x.Is(k, '}')) {
    ++k;
    return true;
  }
  for (;;) {
    std::string_view key;
    if (!IxKey(x, k, &key)) return false;
    IxValue v;
    if (IsArgsKey(key)) {
      const bool read = ReadsArgs(slot.ev, slot.seen, &slot.dups) && x.At(k) == '{';
      if (read ? !IxArgs(x, k, slot.ev, slot.dups, slot.args_seen) : !IxReadValue(x, k, &v)) return false;
    } else {
      if (!IxReadValue(x, k, &v)) return false;
      EventField(key, v, slot.ev, slot.seen, &slot.dups);
    }
    const int next = IxNext(x, k);
    if (next <= 0) return next == 0;
  }
}

}  // namespace overlapprof::kineto
