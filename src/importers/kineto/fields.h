#pragma once
// The fields of a Kineto event that the importer reads, written once: one table per kind of object
// (an element of traceEvents, its "args"), which every reader applies (the On-Demand reader, the
// walker over the bytes, the index walker: src/importers/kineto/reader.h). A row says the key, what
// its value becomes (FieldKind) and where it goes (a member of RawEvent); its index in the table is
// its bit in the object's duplicate-key mask. A new key is one row.
//
// Duplicate keys: the first occurrence of a key a table holds is applied; later ones are skipped and
// counted (json_duplicate_keys, a warning; docs/schema.md). Keys no table holds are never compared.
//
// Lookup (VisitField) is a switch on the key's length, then compares of the key's words against
// constants, for the rows of that length, generated from the table when compiled: no loop over
// rows, no call to memcmp.
#include <array>
#include <bit>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <utility>

#include "src/common/decimal.h"
#include "src/importers/kineto/event.h"
#include "src/trace/classify.h"

namespace overlapprof::kineto {

// What a field's value becomes. V, the value as a reader gives it, has Token() (simdjson's
// raw_json_token: the value's first token and the whitespace after it) and Str(&out) (the raw,
// still escaped, contents of a string; false when the value is not one).
enum class FieldKind : uint8_t {
  kInt,        // AnyIntToken(Token()) into an int64_t member; unchanged when it is no integer
  kString,     // Str() into a string_view member, unchanged when no string; `flag` (if any): whether it was one
  kToken,      // Token() into a string_view member, undecoded (times, External id)
  kFirstChar,  // the first byte of a non-empty string into a char member ("ph")
  kArgs,       // the event's args object: its fields read with kArgsFields where ReadsArgs says so
};

struct Field {
  std::string_view key;
  FieldKind kind;
  int64_t RawEvent::*int_member = nullptr;          // kInt
  std::string_view RawEvent::*text_member = nullptr;  // kString, kToken
  char RawEvent::*char_member = nullptr;              // kFirstChar
  bool RawEvent::*flag = nullptr;                     // kString: set to whether the value was a string
};

constexpr Field IntField(std::string_view key, int64_t RawEvent::*m) { return {key, FieldKind::kInt, m}; }
constexpr Field StringField(std::string_view key, std::string_view RawEvent::*m, bool RawEvent::*flag = nullptr) {
  return {key, FieldKind::kString, nullptr, m, nullptr, flag};
}
constexpr Field TokenField(std::string_view key, std::string_view RawEvent::*m) {
  return {key, FieldKind::kToken, nullptr, m};
}

// An element of traceEvents.
inline constexpr Field kEventFields[] = {
    {"ph", FieldKind::kFirstChar, nullptr, nullptr, &RawEvent::ph},
    TokenField("ts", &RawEvent::ts),
    StringField("cat", &RawEvent::cat),
    IntField("pid", &RawEvent::pid),
    IntField("tid", &RawEvent::tid),
    TokenField("dur", &RawEvent::dur),
    StringField("name", &RawEvent::name, &RawEvent::has_name),
    {"args", FieldKind::kArgs},
};

// An event's "args" (where ReadsArgs says they are read). Every member they set lies in RawEvent
// from `device` on (WalkSlot::Clear resets them in one copy; kineto_fields_test checks it).
// "Seq"/"seq" are the collective's NCCL sequence number (record_param_comms). The CPU ops'
// "Sequence number" is autograd's (forward/backward pairing), not a collective's: never read as one.
inline constexpr Field kArgsFields[] = {
    IntField("Seq", &RawEvent::seq),
    IntField("seq", &RawEvent::seq),
    StringField("name", &RawEvent::arg_name),
    IntField("bytes", &RawEvent::bytes),
    StringField("dtype", &RawEvent::dtype),
    IntField("device", &RawEvent::device),
    IntField("stream", &RawEvent::stream),
    StringField("labels", &RawEvent::arg_labels),
    IntField("Src Rank", &RawEvent::src_rank),
    IntField("Dst Rank", &RawEvent::dst_rank),
    IntField("Group size", &RawEvent::group_size),
    IntField("correlation", &RawEvent::correlation),
    TokenField("External id", &RawEvent::external_id),
    IntField("In msg nelems", &RawEvent::in_nelems),
    IntField("Out msg nelems", &RawEvent::out_nelems),
    StringField("Collective name", &RawEvent::coll_name),
    StringField("Process Group Name", &RawEvent::pg_name),
    StringField("Process Group Ranks", &RawEvent::pg_ranks),
    StringField("Process Group Description", &RawEvent::pg_desc),
    IntField("toDevice", &RawEvent::to_device),
    IntField("inDevice", &RawEvent::in_device),
    IntField("fromDevice", &RawEvent::from_device),
    IntField("wait_on_stream", &RawEvent::wait_on_stream),
    IntField("wait_on_cuda_event_record_corr_id", &RawEvent::wait_on_record),
};

namespace fields_internal {

template <const auto& T>
inline constexpr size_t kRows = std::size(T);
inline constexpr size_t kMaxKeyLength = 33;  // VisitField's switch

template <const auto& T>
constexpr bool KeysAreValid() {
  if (kRows<T> > 32) return false;  // a bit each in a uint32_t mask
  for (size_t i = 0; i < kRows<T>; ++i) {
    if (T[i].key.empty() || T[i].key.size() > kMaxKeyLength) return false;
    for (size_t j = 0; j < i; ++j)
      if (T[i].key == T[j].key) return false;
  }
  return true;
}

template <const auto& T>
constexpr size_t RowOfKind(FieldKind kind) {
  for (size_t i = 0; i < kRows<T>; ++i)
    if (T[i].kind == kind) return i;
  return kRows<T>;
}

template <const auto& T>
constexpr bool DestinationsMatchKinds() {
  for (const Field& f : T) {
    const bool ok = f.kind == FieldKind::kInt         ? f.int_member != nullptr
                    : f.kind == FieldKind::kString    ? f.text_member != nullptr
                    : f.kind == FieldKind::kToken     ? f.text_member != nullptr
                    : f.kind == FieldKind::kFirstChar ? f.char_member != nullptr
                                                      : true;
    if (!ok) return false;
  }
  return true;
}

// The W bytes of `key` from `at`, as a load of W bytes from memory holding them gives them.
template <class W>
constexpr W Bytes(std::string_view key, size_t at) {
  W w = 0;
  for (size_t i = 0; i < sizeof(W); ++i) {
    const W byte = static_cast<unsigned char>(key[at + i]);
    w |= std::endian::native == std::endian::little ? byte << (8 * i) : byte << (8 * (sizeof(W) - 1 - i));
  }
  return w;
}
template <class W>
__attribute__((always_inline)) inline W Load(const char* p) {
  W w;
  std::memcpy(&w, p, sizeof w);
  return w;
}
// k[0, L) == T[I].key (of length L), compared as words against constants: loads of 8 bytes (the
// last one overlapping the one before), or two overlapping loads of 4 or 2 bytes. (memcmp of a
// constant size is not always expanded inline: GCC calls it for some sizes in large functions.)
template <const auto& T, size_t I, size_t L>
__attribute__((always_inline)) inline bool KeyEquals(const char* k) {
  constexpr std::string_view key = T[I].key;
  if constexpr (L >= 8) {
    return [&]<size_t... J>(std::index_sequence<J...>) {
      return ((Load<uint64_t>(k + 8 * J) == Bytes<uint64_t>(key, 8 * J)) && ...) &&
             Load<uint64_t>(k + L - 8) == Bytes<uint64_t>(key, L - 8);
    }(std::make_index_sequence<L / 8>{});
  } else if constexpr (L >= 4) {
    return Load<uint32_t>(k) == Bytes<uint32_t>(key, 0) && Load<uint32_t>(k + L - 4) == Bytes<uint32_t>(key, L - 4);
  } else if constexpr (L >= 2) {
    return Load<uint16_t>(k) == Bytes<uint16_t>(key, 0) && Load<uint16_t>(k + L - 2) == Bytes<uint16_t>(key, L - 2);
  } else {
    return k[0] == key[0];
  }
}

// fn(std::integral_constant<size_t, I>) for the row I of T whose key, of length L, is k[0, L).
template <const auto& T, size_t L, class Fn, size_t... I>
__attribute__((always_inline)) inline bool VisitOfLength(const char* k, Fn& fn, std::index_sequence<I...>) {
  const auto visit = [&](auto row) {
    if constexpr (T[row].key.size() != L) {
      return false;
    } else {
      if (!KeyEquals<T, row, L>(k)) return false;
      fn(row);
      return true;
    }
  };
  return (visit(std::integral_constant<size_t, I>{}) || ...);
}

}  // namespace fields_internal

static_assert(fields_internal::KeysAreValid<kEventFields>() && fields_internal::KeysAreValid<kArgsFields>());
static_assert(fields_internal::DestinationsMatchKinds<kEventFields>() &&
              fields_internal::DestinationsMatchKinds<kArgsFields>());

// The row of "args" in kEventFields.
inline constexpr size_t kArgsRow = fields_internal::RowOfKind<kEventFields>(FieldKind::kArgs);
static_assert(kArgsRow < std::size(kEventFields));

// Calls fn(std::integral_constant<size_t, I>{}) for the row I of table T whose key is `key`;
// false (fn not called) when T has no such key.
template <const auto& T, class Fn>
__attribute__((always_inline)) inline bool VisitField(std::string_view key, Fn&& fn) {
  using Rows = std::make_index_sequence<fields_internal::kRows<T>>;
  const char* const k = key.data();
#define OVERLAPPROF_FIELD_LENGTH(n) \
  case n:                           \
    return fields_internal::VisitOfLength<T, n>(k, fn, Rows{});
  switch (key.size()) {
    OVERLAPPROF_FIELD_LENGTH(1) OVERLAPPROF_FIELD_LENGTH(2) OVERLAPPROF_FIELD_LENGTH(3) OVERLAPPROF_FIELD_LENGTH(4)
    OVERLAPPROF_FIELD_LENGTH(5) OVERLAPPROF_FIELD_LENGTH(6) OVERLAPPROF_FIELD_LENGTH(7) OVERLAPPROF_FIELD_LENGTH(8)
    OVERLAPPROF_FIELD_LENGTH(9) OVERLAPPROF_FIELD_LENGTH(10) OVERLAPPROF_FIELD_LENGTH(11)
    OVERLAPPROF_FIELD_LENGTH(12) OVERLAPPROF_FIELD_LENGTH(13) OVERLAPPROF_FIELD_LENGTH(14)
    OVERLAPPROF_FIELD_LENGTH(15) OVERLAPPROF_FIELD_LENGTH(16) OVERLAPPROF_FIELD_LENGTH(17)
    OVERLAPPROF_FIELD_LENGTH(18) OVERLAPPROF_FIELD_LENGTH(19) OVERLAPPROF_FIELD_LENGTH(20)
    OVERLAPPROF_FIELD_LENGTH(21) OVERLAPPROF_FIELD_LENGTH(22) OVERLAPPROF_FIELD_LENGTH(23)
    OVERLAPPROF_FIELD_LENGTH(24) OVERLAPPROF_FIELD_LENGTH(25) OVERLAPPROF_FIELD_LENGTH(26)
    OVERLAPPROF_FIELD_LENGTH(27) OVERLAPPROF_FIELD_LENGTH(28) OVERLAPPROF_FIELD_LENGTH(29)
    OVERLAPPROF_FIELD_LENGTH(30) OVERLAPPROF_FIELD_LENGTH(31) OVERLAPPROF_FIELD_LENGTH(32)
    OVERLAPPROF_FIELD_LENGTH(33)
    default:
      return false;
  }
#undef OVERLAPPROF_FIELD_LENGTH
}

// Whether `key` is the event's "args".
inline bool IsArgsKey(std::string_view key) {
  constexpr std::string_view kKey = kEventFields[kArgsRow].key;
  return key.size() == kKey.size() && std::memcmp(key.data(), kKey.data(), kKey.size()) == 0;
}

// An integer from a raw JSON token: a number, a numeric string (read leniently), or a hex string
// ("0x1f"). False, *out untouched, otherwise.
inline bool AnyIntToken(std::string_view tok, int64_t* out) {
  {  // Fast path: 1 to 18 digits and nothing after them but whitespace, what ids nearly always are.
    const char* p = tok.data();
    const char* const e = p + std::min<size_t>(tok.size(), 18);
    uint64_t v = 0;
    while (p < e && static_cast<unsigned>(*p - '0') < 10) v = v * 10 + static_cast<unsigned>(*p++ - '0');
    const char* q = p;
    while (q < tok.data() + tok.size() && (*q == ' ' || *q == '\n' || *q == '\r' || *q == '\t')) ++q;
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

// The keys of one object read so far (a bit per row of its table) and the duplicates met.
struct FieldsSeen {
  uint32_t seen = 0;
  // True for the first occurrence of row `bit`; false, counted in *dups, for a later one.
  bool First(size_t bit, int* dups) {
    const uint32_t m = uint32_t{1} << bit;
    if (seen & m) {
      ++*dups;
      return false;
    }
    seen |= m;
    return true;
  }
};

// Row I of table T applied to ev from its value v. Not for kArgs (the reader reads the object).
template <const auto& T, size_t I, class V>
__attribute__((always_inline)) inline void ApplyField(const V& v, RawEvent& ev) {
  constexpr Field f = T[I];
  if constexpr (f.kind == FieldKind::kInt) {
    AnyIntToken(v.Token(), &(ev.*f.int_member));
  } else if constexpr (f.kind == FieldKind::kString) {
    const bool is_string = v.Str(&(ev.*f.text_member));
    if constexpr (f.flag != nullptr) ev.*f.flag = is_string;
  } else if constexpr (f.kind == FieldKind::kToken) {
    ev.*f.text_member = v.Token();
  } else if constexpr (f.kind == FieldKind::kFirstChar) {
    std::string_view s;
    if (v.Str(&s) && !s.empty()) ev.*f.char_member = s[0];
  } else {
    static_assert(f.kind != FieldKind::kArgs, "args is an object: the reader reads it (ReadsArgs)");
  }
}

// Puts back a fresh RawEvent's value in every member a row of T writes.
template <const auto& T>
__attribute__((always_inline)) inline void ResetFields(RawEvent& ev) {
  static constexpr RawEvent kFresh{};
  [&]<size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          constexpr Field f = T[I];
          if constexpr (f.int_member != nullptr) ev.*f.int_member = kFresh.*f.int_member;
          if constexpr (f.text_member != nullptr) ev.*f.text_member = kFresh.*f.text_member;
          if constexpr (f.char_member != nullptr) ev.*f.char_member = kFresh.*f.char_member;
          if constexpr (f.flag != nullptr) ev.*f.flag = kFresh.*f.flag;
        }(),
        ...);
  }(std::make_index_sequence<std::size(T)>{});
}

// One field of an event other than args (IsArgsKey), key and value as the reader read them.
template <class V>
__attribute__((always_inline)) inline void EventField(std::string_view key, const V& v, RawEvent& ev,
                                                      FieldsSeen& seen, int* dups) {
  VisitField<kEventFields>(key, [&](auto row) {
    if constexpr (kEventFields[row].kind != FieldKind::kArgs)
      if (seen.First(row, dups)) ApplyField<kEventFields, row>(v, ev);
  });
}

// One field of an event's args.
template <class V>
__attribute__((always_inline)) inline void ArgsField(std::string_view key, const V& v, RawEvent& ev,
                                                     FieldsSeen& seen, int* dups) {
  VisitField<kArgsFields>(key, [&](auto row) {
    if (seen.First(row, dups)) ApplyField<kArgsFields, row>(v, ev);
  });
}

// Whether an event's args (its "args" key just read, `seen` its event's keys) are read with
// kArgsFields: their first occurrence (a later one is counted in *dups and skipped), on an event
// whose args the builder uses. cpu_op args (shapes, call stacks) are large and unused, so they are
// skipped undecoded, except for host ops that launch communication (their External id links their
// kernels, rule 2 of src/trace/classify.h) and record_param_comms, whose NCCL arguments name
// SendRecv kernels ("name" precedes "args" in every writer seen).
inline bool ReadsArgs(const RawEvent& ev, FieldsSeen& seen, int* dups) {
  if (!seen.First(kArgsRow, dups)) return false;
  const Cat c = DecodeCat(ev.cat);
  return (c != Cat::kCpuOp && c != Cat::kOther) ||
         (c == Cat::kCpuOp && ev.has_name && (KeyIs(ev.name, "record_param_comms") || IsCommHostOpName(ev.name)));
}

}  // namespace overlapprof::kineto
