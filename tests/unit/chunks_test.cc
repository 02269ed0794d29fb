#include "src/store/chunks.h"

#include <gtest/gtest.h>

#include <random>

namespace overlapprof {
namespace {

std::vector<Activity> RandomActivities(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Activity> v;
  int64_t t = 1'700'000'000'000'000'000;
  for (size_t i = 0; i < n; ++i) {
    Activity a;
    t += static_cast<int64_t>(rng() % 5000) - 1000;  // starts not sorted: deltas go negative too
    a.start_ns = t;
    a.end_ns = t + static_cast<int64_t>(rng() % 100000);
    a.kind = static_cast<ActivityKind>(1 + rng() % 4);
    a.category = static_cast<Category>(rng() % 4);
    a.stream = rng() % 5 == 0 ? kNoIndex : static_cast<uint32_t>(rng() % 7);
    a.name_id = static_cast<uint32_t>(rng() % 50);
    if (rng() % 3) a.correlation_id = static_cast<int64_t>(rng() % 1000000) - 10;
    if (rng() % 2) a.launch_ns = a.start_ns - static_cast<int64_t>(rng() % 10000000);
    if (rng() % 2) a.bytes = static_cast<int64_t>(rng() % (int64_t{1} << 40));
    if (rng() % 4 == 0) a.comm_op = static_cast<uint32_t>(rng() % 9);
    if (rng() % 3 == 0) a.copy_kind = static_cast<uint8_t>(1 + rng() % 10);
    v.push_back(a);
  }
  return v;
}

const ChunkLimits kLimits{50, 7, 9};

TEST(Chunks, ActivitiesRoundTripExactly) {
  std::vector<Activity> in = RandomActivities(20000, 7);
  std::string blob = EncodeActivities(in.data(), in.size());
  std::vector<Activity> out;
  ASSERT_TRUE(DecodeActivities(blob, in.size(), kLimits, &out).ok());
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const Activity &a = in[i], &b = out[i];
    ASSERT_EQ(a.start_ns, b.start_ns);
    ASSERT_EQ(a.end_ns, b.end_ns);
    ASSERT_EQ(a.kind, b.kind);
    ASSERT_EQ(a.category, b.category);
    ASSERT_EQ(a.stream, b.stream);
    ASSERT_EQ(a.name_id, b.name_id);
    ASSERT_EQ(a.correlation_id, b.correlation_id);
    ASSERT_EQ(a.launch_ns, b.launch_ns);
    ASSERT_EQ(a.bytes, b.bytes);
    ASSERT_EQ(a.comm_op, b.comm_op);
    ASSERT_EQ(a.copy_kind, b.copy_kind);
  }
  EXPECT_LT(blob.size(), in.size() * 24);  // compact: a row in SQLite costs ~60 bytes
}

TEST(Chunks, HostCallsRoundTripExactly) {
  std::vector<HostCall> in;
  for (int i = 0; i < 1000; ++i)
    in.push_back(HostCall{1000 + i * 7, 1000 + i * 7 + (i % 13), i % 3 ? i * 2 : kUnknown, i % 5 ? 4242 : kUnknown,
                          static_cast<uint32_t>(i % 50)});
  std::string blob = EncodeHostCalls(in.data(), in.size());
  std::vector<HostCall> out;
  ASSERT_TRUE(DecodeHostCalls(blob, in.size(), kLimits, &out).ok());
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(in[i].start_ns, out[i].start_ns);
    ASSERT_EQ(in[i].end_ns, out[i].end_ns);
    ASSERT_EQ(in[i].correlation_id, out[i].correlation_id);
    ASSERT_EQ(in[i].tid, out[i].tid);
    ASSERT_EQ(in[i].name_id, out[i].name_id);
  }
}

TEST(Chunks, EveryTruncationAndTrailingByteIsRejected) {
  std::vector<Activity> in = RandomActivities(40, 3);
  std::string blob = EncodeActivities(in.data(), in.size());
  for (size_t cut = 0; cut < blob.size(); ++cut) {
    std::vector<Activity> out;
    Status st = DecodeActivities(std::string_view(blob).substr(0, cut), in.size(), kLimits, &out);
    ASSERT_FALSE(st.ok()) << cut;
    ASSERT_EQ(st.code(), StatusCode::kCorrupt);
  }
  std::vector<Activity> out;
  EXPECT_FALSE(DecodeActivities(blob + '\0', in.size(), kLimits, &out).ok());
  EXPECT_FALSE(DecodeActivities(blob, in.size() - 1, kLimits, &out).ok());
}

TEST(Chunks, OutOfRangeValuesAreRejected) {
  auto decode = [](Activity a, ChunkLimits lim = kLimits) {
    std::string blob = EncodeActivities(&a, 1);
    std::vector<Activity> out;
    return DecodeActivities(blob, 1, lim, &out);
  };
  Activity ok;
  ok.start_ns = 10;
  ok.end_ns = 20;
  EXPECT_TRUE(decode(ok).ok());
  Activity a = ok;
  a.start_ns = -5;
  EXPECT_NE(decode(a).message().find("time out of range"), std::string::npos);
  a = ok;
  a.end_ns = kMaxTimeNs;
  EXPECT_NE(decode(a).message().find("time out of range"), std::string::npos);
  a = ok;
  a.stream = 7;  // limit: 7 streams (0..6)
  EXPECT_NE(decode(a).message().find("stream out of range"), std::string::npos);
  a = ok;
  a.name_id = 50;
  EXPECT_NE(decode(a).message().find("name out of range"), std::string::npos);
  a = ok;
  a.comm_op = 9;
  EXPECT_NE(decode(a).message().find("comm op out of range"), std::string::npos);
  a = ok;
  a.launch_ns = -1000;  // not kUnknown (-1): a real value before the epoch
  EXPECT_NE(decode(a).message().find("launch time out of range"), std::string::npos);
  // A hand-made blob with an unknown kind and unknown flags.
  std::vector<Activity> out;
  EXPECT_FALSE(DecodeActivities(std::string("\x00\x51\x00\x00\x00\x00", 6), 1, kLimits, &out).ok());
  EXPECT_FALSE(DecodeActivities(std::string("\x80\x10\x00\x00\x00\x00", 6), 1, kLimits, &out).ok());
  // An over-long varint.
  EXPECT_FALSE(DecodeActivities(std::string("\x00\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x00\x00", 16), 1,
                                kLimits, &out)
                   .ok());
}

}  // namespace
}  // namespace overlapprof
