#include "src/importers/nvtx_payload.h"

namespace overlapprof {
namespace {

// `width` bytes little-endian, as the export stores them (x86-64, aarch64).
uint64_t LoadLe(const uint8_t* p, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

int NvtxPayloadSchemas::TypeSize(int64_t type, bool* is_signed) {
  *is_signed = false;
  switch (type) {
    case 1: case 11: *is_signed = true; return 1;   // CHAR, INT8
    case 2: case 12: return 1;                      // UCHAR, UINT8
    case 3: case 13: *is_signed = true; return 2;   // SHORT, INT16
    case 4: case 14: return 2;                      // USHORT, UINT16
    case 5: case 15: *is_signed = true; return 4;   // INT, INT32
    case 6: case 16: case 71: case 73: return 4;    // UINT, UINT32, PID_UINT32, TID_UINT32
    case 7: case 9: case 17: *is_signed = true; return 8;  // LONG, LONGLONG, INT64 (LP64)
    case 8: case 10: case 18: case 22: case 23: case 72: case 74:
      return 8;  // ULONG, ULONGLONG, UINT64, SIZE, ADDRESS, PID_UINT64, TID_UINT64
    default: return 0;
  }
}

void NvtxPayloadSchemas::AddSchema(int64_t domain, int64_t schema, int64_t payload_size) {
  Schema& s = schemas_[{domain, schema}];
  if (s.payload_size >= 0 && s.payload_size != payload_size) s.conflicting = true;
  s.payload_size = payload_size;
}

void NvtxPayloadSchemas::AddEntry(int64_t domain, int64_t schema, int64_t idx, int64_t type, std::string_view name,
                                  int64_t offset) {
  Schema& s = schemas_[{domain, schema}];
  Entry e{type, offset, std::string(name)};
  auto [it, inserted] = s.entries.emplace(idx, e);
  if (!inserted && !(it->second == e)) s.conflicting = true;
}

const NvtxPayloadSchemas::Schema* NvtxPayloadSchemas::Find(int64_t domain, int64_t schema) const {
  auto it = schemas_.find({domain, schema});
  return it == schemas_.end() ? nullptr : &it->second;
}

std::optional<NcclPayload> NvtxPayloadSchemas::DecodeNccl(int64_t event_domain, std::span<const uint8_t> blob) const {
  if (blob.size() < kHeaderBytes) return std::nullopt;
  const uint64_t domain = LoadLe(blob.data(), 8), schema_id = LoadLe(blob.data() + 8, 8);
  const uint64_t payload_size = LoadLe(blob.data() + 16, 8), total = LoadLe(blob.data() + 24, 8);
  if (schema_id > static_cast<uint64_t>(INT64_MAX) || domain > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  // The header's domain, else the event's (the two numberings are not known to be the same).
  const Schema* s = Find(static_cast<int64_t>(domain), static_cast<int64_t>(schema_id));
  if (!s) s = Find(event_domain, static_cast<int64_t>(schema_id));
  if (!s || s->conflicting || s->payload_size <= 0 || s->payload_size > kMaxPayloadBytes) return std::nullopt;
  const uint64_t size = static_cast<uint64_t>(s->payload_size);
  if (payload_size != size || total != kHeaderBytes + size || blob.size() < total) return std::nullopt;
  const uint8_t* payload = blob.data() + kHeaderBytes;

  NcclPayload out;
  out.schema_id = static_cast<int64_t>(schema_id);
  for (const auto& [idx, e] : s->entries) {
    bool is_signed = false;
    const int width = TypeSize(e.type, &is_signed);
    if (width == 0 || e.offset < 0 || static_cast<uint64_t>(e.offset) + width > size) continue;
    const uint64_t raw = LoadLe(payload + e.offset, width);
    int64_t value;
    if (is_signed && width < 8 && (raw >> (8 * width - 1)) & 1) {
      value = static_cast<int64_t>(raw | (~uint64_t{0} << (8 * width)));  // sign-extend
    } else {
      value = static_cast<int64_t>(raw);
    }
    const bool nonneg = is_signed ? value >= 0 : raw <= static_cast<uint64_t>(INT64_MAX);
    if (e.name == "NCCL communicator ID") out.communicator = raw;
    else if (!nonneg) continue;  // a negative size or rank is no size or rank
    else if (e.name == "Message size [bytes]") out.bytes = value;
    else if (e.name == "Rank") out.rank = value;
    else if (e.name == "No. of ranks") out.nranks = value;
    else if (e.name == "Peer rank") out.peer = value;
    else if (e.name == "Root") out.root = value;
  }
  return out;
}

}  // namespace overlapprof
