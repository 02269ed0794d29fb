#pragma once
// NVTX extended payloads as an Nsight Systems SQLite export holds them, decoded for NCCL's own
// NVTX ranges (docs/nsys.md, "NCCL's payloads").
//
// Contract. NCCL (2.19+) annotates its API calls with NVTX ranges that carry a binary payload
// described by a schema it registers (nvToolsExtPayload.h): a fixed-size struct whose entries
// have a name, a type and a byte offset. An export describes the schemas in
// NVTX_PAYLOAD_SCHEMAS (domainId, schemaId, payloadSize) and NVTX_PAYLOAD_SCHEMA_ENTRIES
// (domainId, schemaId, idx, type, name, offset; a NULL offset is 0), and may hold each event's
// payload in NVTX_EVENTS.binaryData: a 32-byte header of four little-endian 64-bit words (domain
// id, schema id, payload size, total size = 32 + payload size) and then the payload bytes. The
// exports recorded here (Nsight Systems 2025.3 and 2026.2) hold the schemas but no binaryData; the
// header layout is the one seen by others in 2026.x exports. A blob is decoded only when every part
// of it checks out against its schema (known schema, sizes equal, blob long enough, each field
// inside the payload); otherwise it is not decoded at all, never partly guessed.
//
// Fields are found by the names NCCL gives them ("NCCL communicator ID", "Message size [bytes]",
// "Rank", "No. of ranks", "Peer rank", "Root"), integer types only. Not thread-safe; one per export.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace overlapprof {

// What NCCL's payload of one call says; each field absent (nullopt) when its schema lacks it.
struct NcclPayload {
  int64_t schema_id = 0;
  std::optional<uint64_t> communicator;  // NCCL's communicator id (commHash)
  std::optional<int64_t> bytes;          // "Message size [bytes]"
  std::optional<int64_t> rank;           // ncclCommInitRank*: this process's rank in the communicator
  std::optional<int64_t> nranks;         // ncclCommInitRank*: the communicator's size
  std::optional<int64_t> peer;           // ncclSend / ncclRecv: the peer's rank
  std::optional<int64_t> root;           // broadcast, reduce: the root's rank
};

class NvtxPayloadSchemas {
 public:
  static constexpr size_t kHeaderBytes = 32;
  // A schema's payload larger than this is not decoded (NCCL's are 8 to 32 bytes).
  static constexpr int64_t kMaxPayloadBytes = 4096;

  // One row of NVTX_PAYLOAD_SCHEMAS. The same schema listed again (each process registers it)
  // must say the same; a schema listed with two sizes is never decoded.
  void AddSchema(int64_t domain, int64_t schema, int64_t payload_size);
  // One row of NVTX_PAYLOAD_SCHEMA_ENTRIES; the same entry listed again must say the same.
  void AddEntry(int64_t domain, int64_t schema, int64_t idx, int64_t type, std::string_view name, int64_t offset);

  bool empty() const { return schemas_.empty(); }
  // Decodes the binaryData of an event of export domain `event_domain`; nullopt when the blob
  // does not check out (see the file comment) or names no schema known here.
  std::optional<NcclPayload> DecodeNccl(int64_t event_domain, std::span<const uint8_t> blob) const;

  // Byte size of an integer entry type of nvToolsExtPayload.h on LP64 (0: not an integer type
  // read here), and whether it is signed.
  static int TypeSize(int64_t type, bool* is_signed);

 private:
  struct Entry {
    int64_t type = 0, offset = 0;
    std::string name;
    bool operator==(const Entry&) const = default;
  };
  struct Schema {
    int64_t payload_size = -1;   // -1: no NVTX_PAYLOAD_SCHEMAS row seen
    bool conflicting = false;    // listed twice with different definitions: never decoded
    std::map<int64_t, Entry> entries;  // by idx
  };
  const Schema* Find(int64_t domain, int64_t schema) const;

  std::map<std::pair<int64_t, int64_t>, Schema> schemas_;  // by (domain, schema id)
};

}  // namespace overlapprof
