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
  // mode: ImportOptions::kineto_index_walk (-1: where simdjson has a kernel for this CPU other
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

// One event at token k ('{'), as the reader's ParseEvents reads it, into slot: true with k past
// its '}', false where the walker bails (the slot then holds part of it).
bool IxEvent(const IxTokens& x, uint32_t& k, WalkSlot& slot);

// Adds n to KinetoIndexWalkedEvents() (src/importers/importer.h): events read by this walker.
void CountIndexWalkedEvents(uint64_t n);

}  // namespace overlapprof::kineto
