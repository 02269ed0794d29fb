// NvtxPayloadSchemas::DecodeNccl on untrusted bytes (src/importers/nvtx_payload.h): the input's
// first byte says how many schema entries follow (each 12 bytes: schema id low byte, idx, type,
// offset, payload size), the rest is one binaryData blob. Nothing may be read outside the blob;
// a decoded value must come from a field inside the payload.
#include <cstddef>
#include <cstdint>
#include <span>

#include "src/importers/nvtx_payload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using overlapprof::NvtxPayloadSchemas;
  if (size < 1) return 0;
  static const char* const kNames[] = {"NCCL communicator ID", "Message size [bytes]", "Rank", "No. of ranks",
                                       "Peer rank", "Root", "CUDA device"};
  NvtxPayloadSchemas s;
  size_t n = data[0] % 16, at = 1;
  for (size_t i = 0; i < n && at + 12 <= size; ++i, at += 12) {
    const uint8_t* e = data + at;
    const int64_t schema = (int64_t{1} << 24) + e[0] % 4;
    const int64_t domain = e[1] % 3;
    s.AddSchema(domain, schema, static_cast<int64_t>(e[2]) * 4 - 8);
    s.AddEntry(domain, schema, e[3] % 8, e[4] < 128 ? e[4] % 30 : (int64_t{1} << 24) + e[4], kNames[e[5] % 7],
               static_cast<int64_t>(static_cast<int8_t>(e[6])) + e[7]);
  }
  std::span<const uint8_t> blob(data + at, size - at);
  for (int64_t domain = 0; domain < 3; ++domain) {
    std::optional<overlapprof::NcclPayload> p = s.DecodeNccl(domain, blob);
    if (p && blob.size() < NvtxPayloadSchemas::kHeaderBytes) __builtin_trap();
  }
  return 0;
}
