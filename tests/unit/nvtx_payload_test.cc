// NCCL's NVTX payloads as an Nsight Systems export holds them (src/importers/nvtx_payload.h):
// decoded against the schemas of a real export (NCCL 2.28.9, Nsight Systems 2025.3, the rows of
// tests/data/nsys/h100_ddp2.sqlite), and every blob that does not check out left undecoded.
#include "src/importers/nvtx_payload.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace overlapprof {
namespace {

// The schemas NCCL registered in the H100 export (NVTX_PAYLOAD_SCHEMAS / _SCHEMA_ENTRIES rows).
NvtxPayloadSchemas RealSchemas() {
  NvtxPayloadSchemas s;
  s.AddSchema(1, 16777218, 24);  // ncclCommInitRank: comm, nranks, rank, device
  s.AddEntry(1, 16777218, 0, 18, "NCCL communicator ID", 0);
  s.AddEntry(1, 16777218, 1, 5, "No. of ranks", 8);
  s.AddEntry(1, 16777218, 2, 5, "Rank", 12);
  s.AddEntry(1, 16777218, 3, 5, "CUDA device", 16);
  s.AddSchema(1, 16777221, 24);  // all-reduce: comm, size, reduction (an enum: not read)
  s.AddEntry(1, 16777221, 0, 18, "NCCL communicator ID", 0);
  s.AddEntry(1, 16777221, 1, 22, "Message size [bytes]", 8);
  s.AddEntry(1, 16777221, 2, 16777236, "Reduction operation", 16);
  s.AddSchema(1, 16777222, 24);  // broadcast: comm, size, root
  s.AddEntry(1, 16777222, 0, 18, "NCCL communicator ID", 0);
  s.AddEntry(1, 16777222, 1, 22, "Message size [bytes]", 8);
  s.AddEntry(1, 16777222, 2, 5, "Root", 16);
  // Each process registers its schemas: the export lists them twice, the same.
  s.AddSchema(1, 16777221, 24);
  s.AddEntry(1, 16777221, 1, 22, "Message size [bytes]", 8);
  return s;
}

void Put(std::vector<uint8_t>& b, size_t at, uint64_t v, int width) {
  if (b.size() < at + width) b.resize(at + width);
  for (int i = 0; i < width; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// A binaryData blob: the 32-byte header, then `payload_size` bytes of payload.
std::vector<uint8_t> Blob(uint64_t domain, uint64_t schema, uint64_t payload_size) {
  std::vector<uint8_t> b(32 + payload_size, 0);
  Put(b, 0, domain, 8);
  Put(b, 8, schema, 8);
  Put(b, 16, payload_size, 8);
  Put(b, 24, 32 + payload_size, 8);
  return b;
}

TEST(NvtxPayload, DecodesNcclsSchemasByFieldName) {
  const NvtxPayloadSchemas s = RealSchemas();
  std::vector<uint8_t> init = Blob(1, 16777218, 24);
  Put(init, 32, 0x8c1d5e7f00112233, 8);
  Put(init, 40, 8, 4);
  Put(init, 44, 3, 4);
  Put(init, 48, 0, 4);
  std::optional<NcclPayload> p = s.DecodeNccl(1, init);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->schema_id, 16777218);
  EXPECT_EQ(p->communicator, 0x8c1d5e7f00112233u);
  EXPECT_EQ(p->nranks, 8);
  EXPECT_EQ(p->rank, 3);
  EXPECT_FALSE(p->bytes.has_value());

  std::vector<uint8_t> ar = Blob(1, 16777221, 24);
  Put(ar, 32, 0x8c1d5e7f00112233, 8);
  Put(ar, 40, uint64_t{256} << 20, 8);
  Put(ar, 48, 0, 4);  // ncclSum
  p = s.DecodeNccl(1, ar);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->bytes, int64_t{256} << 20);
  EXPECT_FALSE(p->rank.has_value());

  std::vector<uint8_t> bc = Blob(1, 16777222, 24);
  Put(bc, 40, 4096, 8);
  Put(bc, 48, 5, 4);
  p = s.DecodeNccl(1, bc);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->root, 5);
  EXPECT_EQ(p->bytes, 4096);
  // A header domain the schemas do not list: the event's own domain finds the schema.
  std::vector<uint8_t> other = bc;
  Put(other, 0, 77, 8);
  EXPECT_TRUE(s.DecodeNccl(1, other).has_value());
  EXPECT_FALSE(s.DecodeNccl(2, other).has_value());
}

TEST(NvtxPayload, ABlobThatDoesNotCheckOutIsNotDecoded) {
  const NvtxPayloadSchemas s = RealSchemas();
  const std::vector<uint8_t> good = Blob(1, 16777221, 24);
  ASSERT_TRUE(s.DecodeNccl(1, good).has_value());
  std::vector<uint8_t> b = good;
  b.resize(40);  // shorter than its total size
  EXPECT_FALSE(s.DecodeNccl(1, b).has_value());
  EXPECT_FALSE(s.DecodeNccl(1, std::span<const uint8_t>(good.data(), 31)).has_value());  // no whole header
  EXPECT_FALSE(s.DecodeNccl(1, {}).has_value());
  b = good;
  Put(b, 16, 16, 8);  // payload size not the schema's
  EXPECT_FALSE(s.DecodeNccl(1, b).has_value());
  b = good;
  Put(b, 24, 57, 8);  // total size not header + payload
  EXPECT_FALSE(s.DecodeNccl(1, b).has_value());
  b = good;
  Put(b, 8, 16777299, 8);  // no such schema
  EXPECT_FALSE(s.DecodeNccl(1, b).has_value());
  b = good;
  Put(b, 8, ~uint64_t{0}, 8);
  EXPECT_FALSE(s.DecodeNccl(1, b).has_value());
  // Trailing bytes beyond the total are tolerated (the blob may be padded).
  b = good;
  b.resize(good.size() + 8);
  EXPECT_TRUE(s.DecodeNccl(1, b).has_value());
}

TEST(NvtxPayload, ConflictingSchemasOddTypesAndOutOfRangeFields) {
  NvtxPayloadSchemas s = RealSchemas();
  s.AddSchema(1, 16777222, 32);  // the broadcast schema again with another size: never decoded
  std::vector<uint8_t> bc = Blob(1, 16777222, 24);
  EXPECT_FALSE(s.DecodeNccl(1, bc).has_value());
  bc = Blob(1, 16777222, 32);
  EXPECT_FALSE(s.DecodeNccl(1, bc).has_value());

  NvtxPayloadSchemas t;
  t.AddSchema(3, 16777300, 16);
  t.AddEntry(3, 16777300, 0, 5, "Rank", 0);               // int: -1 is no rank
  t.AddEntry(3, 16777300, 1, 22, "Message size [bytes]", 12);  // 8 bytes at 12: past the payload
  t.AddEntry(3, 16777300, 2, 19, "No. of ranks", 4);      // a float: not read
  t.AddEntry(3, 16777300, 3, 16, "Peer rank", 8);         // uint32
  std::vector<uint8_t> b = Blob(3, 16777300, 16);
  Put(b, 32, 0xFFFFFFFF, 4);
  Put(b, 36, 0x40000000, 4);
  Put(b, 40, 7, 4);
  std::optional<NcclPayload> p = t.DecodeNccl(3, b);
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->rank.has_value());
  EXPECT_FALSE(p->bytes.has_value());
  EXPECT_FALSE(p->nranks.has_value());
  EXPECT_EQ(p->peer, 7);
  // An entry given twice with different definitions makes the schema undecodable.
  t.AddEntry(3, 16777300, 3, 16, "Peer rank", 4);
  EXPECT_FALSE(t.DecodeNccl(3, b).has_value());
  // A schema without its NVTX_PAYLOAD_SCHEMAS row (size unknown) or over the size bound.
  NvtxPayloadSchemas u;
  u.AddEntry(1, 16777400, 0, 18, "NCCL communicator ID", 0);
  EXPECT_FALSE(u.DecodeNccl(1, Blob(1, 16777400, 8)).has_value());
  u.AddSchema(1, 16777401, NvtxPayloadSchemas::kMaxPayloadBytes + 8);
  EXPECT_FALSE(u.DecodeNccl(1, Blob(1, 16777401, NvtxPayloadSchemas::kMaxPayloadBytes + 8)).has_value());
}

}  // namespace
}  // namespace overlapprof
