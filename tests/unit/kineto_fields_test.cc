// The Kineto field tables (src/importers/kineto/fields.h): lookup, what each kind of field does
// with its value, duplicates, and the args rule. That the three readers apply them alike is
// kineto_stream_test's (the walkers against On-Demand).
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "src/importers/kineto/fields.h"

namespace overlapprof::kineto {
namespace {

// A value as the readers give it: its raw JSON token.
struct TokenValue {
  std::string_view tok;
  std::string_view Token() const { return tok; }
  bool Str(std::string_view* out) const {
    if (tok.size() < 2 || tok.front() != '"' || tok.back() != '"') return false;
    *out = tok.substr(1, tok.size() - 2);
    return true;
  }
};

template <const auto& T>
int RowOf(std::string_view key) {
  int row = -1;
  const bool found = VisitField<T>(key, [&](auto r) { row = static_cast<int>(r()); });
  EXPECT_EQ(found, row >= 0) << key;
  return row;
}

template <const auto& T>
void ExpectEveryKeyFindsItsRowAndNearKeysNone() {
  for (size_t i = 0; i < std::size(T); ++i) {
    const std::string key(T[i].key);
    EXPECT_EQ(RowOf<T>(key), static_cast<int>(i)) << key;
    std::string other = key;
    other.back() ^= 0x20;  // the same length, one byte different ("Seq"/"seq" are two rows)
    bool other_is_row = false;
    for (const Field& f : T) other_is_row |= f.key == other;
    if (!other_is_row) {
      EXPECT_EQ(RowOf<T>(other), -1) << other;
    }
    EXPECT_NE(RowOf<T>(key.substr(0, key.size() - 1)), static_cast<int>(i)) << key;
    EXPECT_EQ(RowOf<T>(key + " "), -1) << key;
  }
  EXPECT_EQ(RowOf<T>(""), -1);
  EXPECT_EQ(RowOf<T>(std::string(40, 'x')), -1);
}

TEST(KinetoFields, EveryKeyFindsItsOwnRowAndNoOtherKeyDoes) {
  ExpectEveryKeyFindsItsRowAndNearKeysNone<kEventFields>();
  ExpectEveryKeyFindsItsRowAndNearKeysNone<kArgsFields>();
  EXPECT_TRUE(IsArgsKey("args"));
  EXPECT_FALSE(IsArgsKey("argz"));
  EXPECT_FALSE(IsArgsKey("arg"));
}

// WalkSlot::Clear resets every args member with one copy of RawEvent from `device` on.
TEST(KinetoFields, EveryArgsDestinationLiesFromDeviceOn) {
  RawEvent ev;
  const char* const base = reinterpret_cast<const char*>(&ev);
  for (const Field& f : kArgsFields) {
    const char* at = f.int_member ? reinterpret_cast<const char*>(&(ev.*f.int_member))
                                  : reinterpret_cast<const char*>(&(ev.*f.text_member));
    EXPECT_GE(static_cast<size_t>(at - base), offsetof(RawEvent, device)) << f.key;
  }
}

TEST(KinetoFields, EachKindOfFieldReadsItsValueAsTheReadersDid) {
  RawEvent ev;
  FieldsSeen seen;
  int dups = 0;
  EventField("ph", TokenValue{"\"X\""}, ev, seen, &dups);
  EventField("ts", TokenValue{"12.5 "}, ev, seen, &dups);
  EventField("cat", TokenValue{"\"kernel\""}, ev, seen, &dups);
  EventField("pid", TokenValue{"\"0x1f\""}, ev, seen, &dups);
  EventField("tid", TokenValue{"7"}, ev, seen, &dups);
  EventField("name", TokenValue{"\"nccl\\u0041\""}, ev, seen, &dups);
  EventField("other", TokenValue{"1"}, ev, seen, &dups);
  EXPECT_EQ(ev.ph, 'X');
  EXPECT_EQ(ev.ts, "12.5 ");  // undecoded: the builder parses it
  EXPECT_EQ(ev.cat, "kernel");
  EXPECT_EQ(ev.pid, 31);
  EXPECT_EQ(ev.tid, 7);
  EXPECT_EQ(ev.name, "nccl\\u0041");  // raw, still escaped
  EXPECT_TRUE(ev.has_name);
  EXPECT_EQ(ev.dur, "");
  EXPECT_EQ(dups, 0);

  // A value of the wrong kind leaves the member as it was; a name that is no string says so.
  EventField("cat", TokenValue{"5"}, ev, seen, &dups);  // a duplicate: skipped, counted
  EXPECT_EQ(ev.cat, "kernel");
  EXPECT_EQ(dups, 1);
  RawEvent other;
  FieldsSeen other_seen;
  EventField("name", TokenValue{"17"}, other, other_seen, &dups);
  EventField("pid", TokenValue{"\"abc\""}, other, other_seen, &dups);
  EventField("ph", TokenValue{"\"\""}, other, other_seen, &dups);
  EXPECT_FALSE(other.has_name);
  EXPECT_EQ(other.pid, kUnknown);
  EXPECT_EQ(other.ph, 0);
}

TEST(KinetoFields, ArgsKeysThatShareADestinationKeepTheirOwnDuplicateBits) {
  RawEvent ev;
  FieldsSeen seen;
  int dups = 0;
  ArgsField("Seq", TokenValue{"1"}, ev, seen, &dups);
  ArgsField("seq", TokenValue{"2"}, ev, seen, &dups);
  EXPECT_EQ(ev.seq, 2);  // each a first occurrence: the last one read wins
  EXPECT_EQ(dups, 0);
  ArgsField("seq", TokenValue{"4"}, ev, seen, &dups);
  EXPECT_EQ(ev.seq, 2);
  EXPECT_EQ(dups, 1);
  // cpu_op args' "Sequence number" is not read (the readers never matched it): reading it would
  // set op.seq from it, a change of results, not of structure.
  ArgsField("Sequence number", TokenValue{"3"}, ev, seen, &dups);
  EXPECT_EQ(ev.seq, 2);
  ArgsField("External id", TokenValue{"\"12\""}, ev, seen, &dups);
  ArgsField("Process Group Description", TokenValue{"\"default_pg\""}, ev, seen, &dups);
  EXPECT_EQ(ev.external_id, "\"12\"");
  EXPECT_EQ(ev.pg_desc, "default_pg");
}

TEST(KinetoFields, ArgsAreReadForGpuEventsAndCommunicationHostOpsOnly) {
  auto reads = [](std::string_view cat, std::string_view name) {
    RawEvent ev;
    ev.cat = cat;
    ev.name = name;
    ev.has_name = !name.empty();
    FieldsSeen seen;
    int dups = 0;
    return ReadsArgs(ev, seen, &dups);
  };
  EXPECT_TRUE(reads("kernel", "sgemm"));
  EXPECT_TRUE(reads("gpu_memcpy", ""));
  EXPECT_TRUE(reads("cuda_runtime", "cudaLaunchKernel"));
  EXPECT_FALSE(reads("cpu_op", "aten::mm"));
  EXPECT_TRUE(reads("cpu_op", "record_param_comms"));
  EXPECT_TRUE(reads("cpu_op", "nccl:all_reduce"));
  EXPECT_FALSE(reads("python_function", "forward"));
  EXPECT_FALSE(reads("cpu_op", ""));

  RawEvent ev;
  ev.cat = "kernel";
  FieldsSeen seen;
  int dups = 0;
  EXPECT_TRUE(ReadsArgs(ev, seen, &dups));
  EXPECT_FALSE(ReadsArgs(ev, seen, &dups));  // a second "args": skipped, counted
  EXPECT_EQ(dups, 1);
}

}  // namespace
}  // namespace overlapprof::kineto
