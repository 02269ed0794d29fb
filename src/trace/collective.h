#pragma once
// Collective: the kind of a communication operation (CommOp::op, NcclPluginOp::op, the
// injector's HookRecord::op). The list and the names are src/trace/collective.def; names are
// for the edges only (importers parsing a source's names, the store's columns, reports).
// Header-only and allocation-free: the injector's hooks include it.
#include <cstdint>
#include <string_view>

namespace overlapprof {

enum class Collective : uint8_t {
#define X(enumerator, value, name) enumerator = value,
#include "src/trace/collective.def"
#undef X
};

// The normalized name ("allreduce", "p2p_copy", ...); "unknown" for a value not in the table.
constexpr std::string_view CollectiveName(Collective c) {
  switch (c) {
#define X(enumerator, value, name) \
  case Collective::enumerator:     \
    return name;
#include "src/trace/collective.def"
#undef X
  }
  return "unknown";
}

// The collective whose normalized name is exactly `name` (as CollectiveName writes it: the
// store's columns); kUnknown for any other text. A source's own spellings ("AllReduce",
// "_allgather_base", "ncclBcast") go through NormalizeCollectiveName (src/trace/classify.h).
constexpr Collective ParseCollective(std::string_view name) {
#define X(enumerator, value, n) \
  if (name == n) return Collective::enumerator;
#include "src/trace/collective.def"
#undef X
  return Collective::kUnknown;
}

// A raw value from an injector record: the collective it names, kUnknown when out of range.
constexpr Collective CollectiveFromCode(uint8_t code) {
#define X(enumerator, value, name) \
  if (code == value) return Collective::enumerator;
#include "src/trace/collective.def"
#undef X
  return Collective::kUnknown;
}

}  // namespace overlapprof
