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

namespace overlapprof {
namespace {

std::vector<CommOp> RandomCommOps(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  const Collective ops[] = {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                           Collective::kBroadcast, Collective::kSendRecv};
  const char* types[] = {"Float", "BFloat16", "Int", ""};
  std::vector<CommOp> v;
  for (size_t i = 0; i < n; ++i) {
    CommOp c;
    c.communicator = rng() % 4 ? "0" : std::string(1 + rng() % 40, static_cast<char>('a' + rng() % 26));
    if (rng() % 7 == 0) c.communicator = std::string("with\0nul", 8);
    if (rng() % 3) c.comm_rank = static_cast<int64_t>(rng() % 8);
    if (rng() % 3) c.comm_nranks = static_cast<int64_t>(rng() % 64);
    if (rng() % 2) c.seq = static_cast<int64_t>(i) - static_cast<int64_t>(rng() % 3);
    c.op = ops[rng() % 5];
    c.datatype = types[rng() % 4];
    if (rng() % 2) c.count = static_cast<int64_t>(rng() % (int64_t{1} << 40));
    if (rng() % 2) c.bytes = rng() % 5 == 0 ? INT64_MIN : static_cast<int64_t>(rng());
    if (rng() % 4 == 0) c.root_peer = static_cast<int64_t>(rng() % 8);
    if (rng() % 3) c.stream = static_cast<uint32_t>(rng() % 7);
    if (rng() % 2) c.host_enter_ns = 1'700'000'000'000'000'000 + static_cast<int64_t>(rng() % 1000000000);
    if (rng() % 2) c.host_exit_ns = rng() % 9 == 0 ? INT64_MAX : 1'700'000'000'000'000'000 + static_cast<int64_t>(rng() % 1000000000);
    if (rng() % 2) c.host_tid = static_cast<int64_t>(rng() % 5000000);
    c.pg_desc = rng() % 3 ? "default_pg" : "";
    c.source = static_cast<CommSource>(1 + rng() % 3);
    if (rng() % 3 == 0) c.launch_id = static_cast<int64_t>(rng() % 100000);
    v.push_back(c);
  }
  return v;
}

void ExpectSameCommOps(const std::vector<CommOp>& in, const std::vector<CommOp>& out) {
  ASSERT_EQ(in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const CommOp &a = in[i], &b = out[i];
    ASSERT_EQ(a.communicator, b.communicator) << i;
    ASSERT_EQ(a.comm_rank, b.comm_rank) << i;
    ASSERT_EQ(a.comm_nranks, b.comm_nranks) << i;
    ASSERT_EQ(a.seq, b.seq) << i;
    ASSERT_EQ(a.op, b.op) << i;
    ASSERT_EQ(a.datatype, b.datatype) << i;
    ASSERT_EQ(a.count, b.count) << i;
    ASSERT_EQ(a.bytes, b.bytes) << i;
    ASSERT_EQ(a.root_peer, b.root_peer) << i;
    ASSERT_EQ(a.stream, b.stream) << i;
    ASSERT_EQ(a.host_enter_ns, b.host_enter_ns) << i;
    ASSERT_EQ(a.host_exit_ns, b.host_exit_ns) << i;
    ASSERT_EQ(a.host_tid, b.host_tid) << i;
    ASSERT_EQ(a.pg_desc, b.pg_desc) << i;
    ASSERT_EQ(a.source, b.source) << i;
    ASSERT_EQ(a.launch_id, b.launch_id) << i;
  }
}

TEST(Chunks, CommOpsRoundTripExactly) {
  std::vector<CommOp> in = RandomCommOps(5000, 11);
  std::string blob = EncodeCommOps(in.data(), in.size());
  std::vector<CommOp> out;
  ASSERT_TRUE(DecodeCommOps(blob, in.size(), kLimits, &out).ok());
  ExpectSameCommOps(in, out);
  EXPECT_LT(blob.size(), in.size() * 64);  // random 64-bit values and strings: ~44 bytes an op
}

TEST(Chunks, CommOpTruncationsTrailingBytesAndBadValuesAreRejected) {
  std::vector<CommOp> in = RandomCommOps(30, 5);
  std::string blob = EncodeCommOps(in.data(), in.size());
  for (size_t cut = 0; cut < blob.size(); ++cut) {
    std::vector<CommOp> out;
    Status st = DecodeCommOps(std::string_view(blob).substr(0, cut), in.size(), kLimits, &out);
    ASSERT_FALSE(st.ok()) << cut;
    ASSERT_EQ(st.code(), StatusCode::kCorrupt);
  }
  std::vector<CommOp> out;
  EXPECT_FALSE(DecodeCommOps(blob + '\0', in.size(), kLimits, &out).ok());
  auto decode_one = [](CommOp c) {
    std::string b = EncodeCommOps(&c, 1);
    std::vector<CommOp> o;
    return DecodeCommOps(b, 1, kLimits, &o);
  };
  CommOp c;
  c.stream = 7;  // limit: 7 streams
  EXPECT_NE(decode_one(c).message().find("stream out of range"), std::string::npos);
  // flags 0, source 4, then four empty strings.
  EXPECT_NE(DecodeCommOps(std::string("\x00\x04\x01\x01\x01\x01", 6), 1, kLimits, &out).message().find("source"),
            std::string::npos);
  // Unknown flag bit 11.
  EXPECT_NE(DecodeCommOps(std::string("\x80\x10\x01\x01\x01\x01\x01", 7), 1, kLimits, &out).message().find("flags"),
            std::string::npos);
  // A string longer than what is left.
  EXPECT_FALSE(DecodeCommOps(std::string("\x00\x01\x05\x61", 4), 1, kLimits, &out).ok());
}

TEST(Chunks, CommOpExtensionValuesANewerWriterAddsAreSkipped) {
  // flags = extension; source 2; four strings ("", same, same, same); 3 extension values:
  // launch_id 21 (zigzag 42), then two this reader does not know.
  std::string blob("\x80\x08\x02\x01\x00\x00\x00\x03\x2a\x05\x07", 11);
  std::vector<CommOp> out;
  Status st = DecodeCommOps(blob, 1, kLimits, &out);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].launch_id, 21);
  EXPECT_EQ(out[0].source, CommSource::kKinetoArgs);
  EXPECT_EQ(out[0].comm_rank, kUnknown);
}

std::vector<Range> RandomRanges(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Range> v;
  int64_t t = 1'700'000'000'000'000'000;
  for (size_t i = 0; i < n; ++i) {
    Range r;
    t += static_cast<int64_t>(rng() % 5000) - 1000;
    r.start_ns = t;
    r.end_ns = t + static_cast<int64_t>(rng() % 100000);
    r.kind = static_cast<RangeKind>(1 + rng() % 3);
    if (r.kind == RangeKind::kStep) r.step = static_cast<int64_t>(i);
    if (rng() % 2) r.tid = static_cast<int64_t>(rng() % 100000);
    if (rng() % 3 == 0) r.stream = static_cast<uint32_t>(rng() % 7);
    r.name_id = static_cast<uint32_t>(rng() % 50);
    v.push_back(r);
  }
  return v;
}

TEST(Chunks, RangesRoundTripAndBadOnesAreRejected) {
  std::vector<Range> in = RandomRanges(3000, 9);
  std::string blob = EncodeRanges(in.data(), in.size());
  std::vector<Range> out;
  TimeOrder order;
  ASSERT_TRUE(DecodeRanges(blob, in.size(), kLimits, &out, &order).ok());
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(in[i].start_ns, out[i].start_ns);
    ASSERT_EQ(in[i].end_ns, out[i].end_ns);
    ASSERT_EQ(in[i].kind, out[i].kind);
    ASSERT_EQ(in[i].step, out[i].step);
    ASSERT_EQ(in[i].tid, out[i].tid);
    ASSERT_EQ(in[i].stream, out[i].stream);
    ASSERT_EQ(in[i].name_id, out[i].name_id);
  }
  EXPECT_FALSE(order.sorted);  // starts go back now and then
  std::string small = EncodeRanges(in.data(), 40);
  for (size_t cut = 0; cut < small.size(); ++cut) {
    std::vector<Range> o;
    ASSERT_FALSE(DecodeRanges(std::string_view(small).substr(0, cut), 40, kLimits, &o).ok()) << cut;
  }
  auto decode_one = [](Range r) {
    std::string b = EncodeRanges(&r, 1);
    std::vector<Range> o;
    return DecodeRanges(b, 1, kLimits, &o);
  };
  Range r;
  r.start_ns = 10;
  r.end_ns = 20;
  EXPECT_TRUE(decode_one(r).ok());
  Range bad = r;
  bad.stream = 7;
  EXPECT_NE(decode_one(bad).message().find("stream out of range"), std::string::npos);
  bad = r;
  bad.name_id = 50;
  EXPECT_NE(decode_one(bad).message().find("name out of range"), std::string::npos);
  bad = r;
  bad.start_ns = -3;
  EXPECT_NE(decode_one(bad).message().find("time out of range"), std::string::npos);
  std::vector<Range> o;
  EXPECT_NE(DecodeRanges(std::string("\x00\x04\x00\x00\x00", 5), 1, kLimits, &o).message().find("unknown kind"),
            std::string::npos);
}

TEST(Chunks, TimeOrderFollowsFinalizesOrderAcrossChunks) {
  std::vector<Activity> a(4);
  int64_t times[4][2] = {{10, 20}, {10, 25}, {12, 13}, {12, 13}};
  for (int i = 0; i < 4; ++i) {
    a[i].start_ns = times[i][0];
    a[i].end_ns = times[i][1];
  }
  TimeOrder order;
  std::vector<Activity> out;
  ASSERT_TRUE(DecodeActivities(EncodeActivities(a.data(), 2), 2, kLimits, &out, &order).ok());
  ASSERT_TRUE(DecodeActivities(EncodeActivities(a.data() + 2, 2), 2, kLimits, &out, &order).ok());
  EXPECT_TRUE(order.sorted);
  // Same start, earlier end: out of (start, end) order.
  a[3].end_ns = 12;
  TimeOrder order2;
  ASSERT_TRUE(DecodeActivities(EncodeActivities(a.data(), 4), 4, kLimits, &out, &order2).ok());
  EXPECT_FALSE(order2.sorted);
}

}  // namespace
}  // namespace overlapprof
