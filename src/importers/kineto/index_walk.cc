// The index walker (index_walk.h).
#include "src/importers/kineto/index_walk.h"

#include <simdjson.h>

#include <atomic>
#include <string_view>

#include "src/importers/importer.h"

namespace overlapprof {
namespace kineto {
namespace {

// KinetoIndexWalkedEvents(): added once per region.
std::atomic<uint64_t> g_index_walked_events{0};

// A value as the index walker reads it: from its first token to the next token (simdjson's
// raw_json_token, which the walker over the bytes gives too: WalkValue).
struct IxValue {
  const char* begin = nullptr;
  const char* next = nullptr;  // the token after the value's first one
  std::string_view Token() const { return {begin, static_cast<size_t>(next - begin)}; }
  bool Str(std::string_view* out) const { return *begin == '"' && StringToken(Token(), out); }
};


// The value at token k (k < n); k then at the token after it.
bool IxReadValue(const IxTokens& x, uint32_t& k, IxValue* v) {
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
bool IxKey(const IxTokens& x, uint32_t& k, std::string_view* key) {
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
int IxNext(const IxTokens& x, uint32_t& k) {
  if (k >= x.n || x.AfterBackslash(k)) return -1;
  const char c = x.At(k++);
  return c == ',' ? 1 : c == '}' ? 0 : -1;
}
// args at token k ('{'), as ParseArgs reads them.
bool IxArgs(const IxTokens& x, uint32_t& k, RawEvent& ev, int& dups, FieldsSeen& seen) {
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

}  // namespace

struct StructuralIndexer::Impl {
  std::unique_ptr<simdjson::internal::dom_parser_implementation> stage1;
};

StructuralIndexer::StructuralIndexer() : impl_(std::make_unique<Impl>()) {}
StructuralIndexer::~StructuralIndexer() = default;

std::unique_ptr<StructuralIndexer> StructuralIndexer::Make(int mode) {
  const simdjson::implementation* impl = simdjson::get_active_implementation();
  const bool on = mode > 0 || (mode < 0 && impl->name() != "fallback");
  if (!on) return nullptr;
  std::unique_ptr<StructuralIndexer> s(new StructuralIndexer());
  if (impl->create_dom_parser_implementation(0, simdjson::DEFAULT_MAX_DEPTH, s->impl_->stage1) != simdjson::SUCCESS)
    return nullptr;
  return s;
}

bool StructuralIndexer::Reserve(size_t n) {
  capacity_ = n;
  return impl_->stage1->set_capacity(n) == simdjson::SUCCESS;
}

bool StructuralIndexer::Index(const char* t, size_t n, IxTokens* out) {
  simdjson::internal::dom_parser_implementation& p = *impl_->stage1;
  if (p.stage1(reinterpret_cast<const uint8_t*>(t), n, simdjson::stage1_mode::regular) != simdjson::SUCCESS)
    return false;
  *out = IxTokens{t, p.structural_indexes.get(), p.n_structural_indexes};
  return true;
}

bool IxEvent(const IxTokens& x, uint32_t& k, WalkSlot& slot) {
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


void CountIndexWalkedEvents(uint64_t n) { g_index_walked_events.fetch_add(n, std::memory_order_relaxed); }

}  // namespace kineto

uint64_t KinetoIndexWalkedEvents() { return kineto::g_index_walked_events.load(std::memory_order_relaxed); }

}  // namespace overlapprof
