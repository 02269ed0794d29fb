// The streaming Kineto reader (memory bounded by its window): batch edges anywhere give the same trace, the scanner
// is not fooled by strings, keys may follow traceEvents, one event may outgrow the window up to
// its cap, and every way a document can be cut or spoiled is reported as before.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "src/common/utf8.h"
#include "src/importers/importer.h"
#include "src/importers/kineto/kineto.h"
#include "src/io/input_stream.h"
#include "test_util.h"
#include "tests/fuzz/trace_dump.h"

namespace overlapprof {
namespace {
using testing::Gzip;

std::string Dump(const RankTrace& t) { return testing::DumpTrace(t); }

// Parses `text` streamed `max_read` bytes at a time through a window of `window` bytes.
// lend_front > 0: the stream lends its bytes in blocks of max_read bytes with that much room before
// them, and the window is in those blocks (as with the threaded gzip stream), not of `window` bytes.
// build_thread: ImportOptions::kineto.build_thread (-1: for large inputs, and lent blocks).
// index_walk: ImportOptions::kineto.index_walk (-1: where simdjson has SIMD, as by default).
// observer: ImportOptions::observer (null: none).
StatusOr<RankTrace> Stream(const std::string& text, size_t window, size_t max_read = SIZE_MAX,
                           size_t max_event = 0, bool gunzip = false, bool on_demand_only = false,
                           size_t lend_front = 0, int build_thread = -1, int index_walk = -1,
                           ImportObserver* observer = nullptr) {
  ImportOptions o;
  o.observer = observer;
  o.kineto.window_bytes = window;
  o.kineto.max_event_bytes = max_event;
  o.kineto.on_demand_only = on_demand_only;
  o.kineto.build_thread = build_thread;
  o.kineto.index_walk = index_walk;
  std::unique_ptr<ByteStream> in = MemoryStream(text, max_read, gunzip, UINT64_MAX, false, lend_front);
  return ParseKinetoStream(*in, o);
}


// Strings holding everything the scanner looks at ({ } [ ] , " \), escapes at string ends,
// non-object elements, nested arrays in args, keys before and after traceEvents, a duplicate
// traceEvents, a host comm op kept until Finish (its bytes long gone from the window).
const char* const kTricky = R"J({"schemaVersion": 1, "traceName": "a \"{[,]}\" name\\",
  "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2, "pg_config": [{"pg_name": "0", "ranks": [0, 1]}]},
  "traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "k{1}[2],\"3\"\\", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2.25, "args": {"device": 0, "stream": 7, "correlation": 1, "shape": [[1, 2], [3]], "x": "}]"}},
    42, "text, with {braces}", null, [1, [2, {"a": "]"}]],
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 0, "tid": 3, "ts": 9, "dur": 1, "args": {"correlation": 1}},
    {"ph": "X", "cat": "cpu_op", "name": "nccl:all_to_all", "pid": 0, "tid": 3, "ts": 19, "dur": 10, "args": {"External id": 77}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 0, "tid": 3, "ts": 20, "dur": 1, "args": {"correlation": 2}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", "pid": 0, "tid": 20, "ts": 21, "dur": 5, "args": {"device": 0, "stream": 20, "correlation": 2, "External id": 77}},
    {"ph": "X", "cat": "kernel", "name": "nccl:all_reduce", "pid": 0, "tid": 20, "ts": 30, "dur": 5, "args": {"device": 0, "stream": 20, "Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1024, "Process Group Name": "0", "Process Group Ranks": "[0, 1]"}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 3, "ts": 1, "dur": 50},
    {"name": "thread_name", "ph": "M", "pid": 0, "tid": 7, "args": {"name": "stream 7 \u00e9"}},
    {"ph": "X", "cat": "kernel", "name": "gemm\u00e9\ud83d\ude00", "pid": 0, "tid": 7, "ts": 40, "dur": 1, "args": {"device": 0, "stream": 7}}
  ],
  "traceEvents": [{"ph": "X", "cat": "kernel", "name": "dup", "ts": 1, "dur": 1}],
  "deviceProperties": [{"id": 0, "name": "GPU \"0\"", "numSms": 132}],
  "baseTimeNanoseconds": 1700000000000000000, "host_name": "h"
})J";

TEST(KinetoStream, BatchEdgesAnywhereGiveTheSameTrace) {
  StatusOr<RankTrace> ref = testing::ParseJsonText(kTricky);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  const std::string want = Dump(*ref);
  ASSERT_EQ(ref->activities.size(), 4u);
  EXPECT_EQ(ref->meta.rank, 1);
  EXPECT_EQ(ref->devices.size(), 1u);
  EXPECT_EQ(ref->activities[0].start_ns, 1700000000000010500);  // baseTimeNanoseconds came last
  EXPECT_EQ(ref->stats.Get(Stat::json_duplicate_keys), 1);
  EXPECT_EQ(ref->comm_ops[ref->activities[1].comm_op].op, Collective::kAllToAll);  // named by its host op at Finish
  // Windows from the minimum up to one that holds everything, every read size pattern, and the
  // text shifted by 0..63 bytes of leading whitespace: batch and read edges fall on every byte.
  const std::string text = kTricky;
  for (size_t pad = 0; pad < 64; pad += 7) {
    const std::string shifted = std::string(pad, ' ') + text;
    for (size_t window : {16, 17, 31, 64, 100, 257, 1000, 4096}) {
      for (size_t max_read : {size_t{1}, size_t{3}, size_t{64}, SIZE_MAX}) {
        for (int index_walk : {0, 1}) {
          StatusOr<RankTrace> t = Stream(shifted, window, max_read, 0, false, false, 0, -1, index_walk);
          ASSERT_TRUE(t.ok()) << pad << " " << window << " " << max_read << ": " << t.status().message();
          EXPECT_EQ(Dump(*t), want) << pad << " " << window << " " << max_read << " " << index_walk;
        }
      }
    }
  }
}

// The scanner reads 64-byte blocks when it has them (bit masks: escapes, strings, brackets) and
// single bytes otherwise (reads of 1 byte): both must find the same element edges. Names end in
// runs of 0..6 backslashes (escaping a quote or one another), with brackets and commas in the
// strings, the whole shifted through all 64 offsets of a block.
TEST(KinetoStream, BlockScanAndByteScanAgree) {
  // Name j, as written in the file: n, 2j backslashes (j escaped ones), "],{", 2j+1 backslashes and
  // a quote (j escaped backslashes, an escaped quote), z, 2j backslashes; unescaped: n, j
  // backslashes, ],{, j backslashes, a quote, z, j backslashes.
  std::string events;
  for (size_t j = 0; j <= 3; ++j) {
    const std::string bs(2 * j, '\\');
    const std::string name = "n" + bs + "],{" + bs + "\\\"z" + bs;
    events += fmt::format(R"J({{"ph": "X", "cat": "kernel", "name": "{}", "ts": {}, "dur": 1, "args": {{"a": [[{}], {{"b": "]}}"}}]}}}},)J",
                          name, j + 1, j);
  }
  const std::string text = R"J({"traceEvents": [)J" + events + R"J("x"]})J";
  StatusOr<RankTrace> ref = testing::ParseJsonText(text);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  ASSERT_EQ(ref->activities.size(), 4u);
  EXPECT_EQ(ref->names.Get(ref->activities[3].name_id), "n\\\\\\],{\\\\\\\"z\\\\\\");
  const std::string want = Dump(*ref);
  for (size_t pad = 0; pad < 64; ++pad) {
    const std::string shifted = std::string(pad, '\n') + text;
    for (size_t window : {64, 100, 128, 300, 4096}) {
      StatusOr<RankTrace> bytes = Stream(shifted, window, 1);
      StatusOr<RankTrace> blocks = Stream(shifted, window, SIZE_MAX);
      ASSERT_TRUE(bytes.ok() && blocks.ok()) << pad << " " << window;
      EXPECT_EQ(Dump(*bytes), want) << pad << " " << window;
      EXPECT_EQ(Dump(*blocks), want) << pad << " " << window;
    }
  }
}

// The walkers (the fast path for events: over simdjson's index of each region, then over the
// bytes; or over the bytes alone) against simdjson On-Demand reading every event: the same
// trace, or the same error to the byte, through the same window and reads.
void ExpectWalkerMatchesOnDemand(const std::string& text, size_t window, size_t max_read, const std::string& what,
                                 size_t lend_front = 0) {
  StatusOr<RankTrace> od = Stream(text, window, max_read, 0, false, true, lend_front);
  for (int index_walk : {0, 1}) {
    StatusOr<RankTrace> walk = Stream(text, window, max_read, 0, false, false, lend_front, -1, index_walk);
    ASSERT_EQ(walk.ok(), od.ok()) << what << ", index walker " << index_walk << ": walker "
                                  << (walk.ok() ? "ok" : walk.status().message()) << ", On-Demand "
                                  << (od.ok() ? "ok" : od.status().message());
    if (!walk.ok()) {
      EXPECT_EQ(walk.status().code(), od.status().code()) << what << ", index walker " << index_walk;
      EXPECT_EQ(walk.status().message(), od.status().message()) << what << ", index walker " << index_walk;
    } else {
      EXPECT_TRUE(Dump(*walk) == Dump(*od)) << what << ", index walker " << index_walk;
    }
  }
}

TEST(KinetoStream, WalkerReadsWhatOnDemandReads) {
  // Events the walker takes (every field it reads, in both forms: numbers and strings, escapes,
  // nested values skipped, duplicates) and events it leaves to On-Demand (not objects, fields
  // without a value, a backslash or a control character outside strings), in every window.
  const std::string text = std::string(kTricky).insert(std::string(kTricky).find("    {\"ph\": \"X\", \"cat\": \"cuda_runtime\""),
      R"J(    {"ph": "X", "ph": "Y", "cat": "Kernel", "name": "dup\u0041", "pid": "0x1f", "tid": "7", "ts": "10", "dur": 1e1,
     "args": {"device": " 1", "stream": 7.0, "correlation": [1], "External id": "12", "bytes": {"a": [1, {"b": "]\\"}]},
              "Collective name": "allreduce", "dtype": "Float", "In msg nelems": -0, "Out msg nelems": 1E400,
              "Group size": 2, "Process Group Name": "pg\"1", "Process Group Ranks": "[0, 1]", "Sequence number": 5,
              "Process Group Description": "d", "Src Rank": 0, "Dst Rank": 1, "fromDevice": 0, "toDevice": 1,
              "inDevice": 0, "seq": 9, "Seq": 8, "name": "n", "labels": "l", "device": 3}, "args": {}},
    {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 11, "dur": 1, "args": {"Collective name": "send", "Src Rank": 0, "Dst Rank": 1}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 11, "dur": 1, "args": {"Input Dims": [[8, 2048], []], "x": tru}},
    {"ph": "X", "cat": "kernel", "name": "k", "ts": 12, "dur": 1, "args": {"grid": [1, 1, 1]}, "x": {}},
    {"ph": "X", "cat": "kernel", "name": "k", "ts": 12 , "dur" : 1 ,"args":{ } },
    {},
)J");
  ASSERT_TRUE(testing::ParseJsonText(text).ok()) << testing::ParseJsonText(text).status().message();
  for (size_t window : {16, 17, 64, 257, 4096, 1 << 20})
    for (size_t max_read : {size_t{1}, size_t{7}, SIZE_MAX})
      ExpectWalkerMatchesOnDemand(text, window, max_read, fmt::format("window {} read {}", window, max_read));
}

// JSON's grammar where the readers are not lenient on purpose (docs/schema.md): numbers with
// leading zeros or no integer digit are no numbers (in ts/dur: the event is malformed, counted;
// in an id: unknown), an escaped lone surrogate is U+FFFD (counted in invalid_utf8_replaced, never
// stored as invalid UTF-8), an invalid escape makes the file not JSON. The three readers agree.
TEST(KinetoStream, NumbersAndEscapesFollowJsonGrammarInEveryReader) {
  const std::string head = R"J({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"stream": 7, "correlation": 1}},
)J";
  const std::string tail = R"J(
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": 1, "args": {"correlation": 1}}]})J";
  const std::string numbers = head + R"J(
    {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 0005, "dur": 1, "args": {"stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 6, "dur": 00, "args": {"stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": -01, "dur": 1, "args": {"stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "d", "pid": 0, "tid": 7, "ts": .5, "dur": 1, "args": {"stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "e", "pid": 0, "tid": 7, "ts": 8, "dur": 1, "args": {"stream": 007, "correlation": 01}},
)J" + tail;
  StatusOr<RankTrace> t = testing::ParseJsonText(numbers);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->activities.size(), 2u);  // "ok" and "e"
  EXPECT_EQ(t->stats.Get(Stat::events_malformed), 4);
  EXPECT_EQ(t->stats.Get(Stat::events_timestamp_out_of_range), 0);
  for (const Activity& a : t->activities)
    if (t->names.Get(a.name_id) == "e") EXPECT_EQ(a.correlation_id, kUnknown);  // 01: no number
  const std::string surrogates = head + R"J(
    {"ph": "X", "cat": "kernel", "name": "lone\ud800high", "pid": 0, "tid": 7, "ts": 2, "dur": 1, "args": {"stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "lone\udc00low\ud83d\ude00", "pid": 0, "tid": 7, "ts": 3, "dur": 1, "args": {"stream": 7}},
)J" + tail;
  t = testing::ParseJsonText(surrogates);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->activities.size(), 3u);
  EXPECT_EQ(t->names.Get(t->activities[1].name_id), "lone\xef\xbf\xbdhigh");
  EXPECT_EQ(t->names.Get(t->activities[2].name_id), "lone\xef\xbf\xbdlow\xf0\x9f\x98\x80");
  EXPECT_EQ(t->stats.Get(Stat::invalid_utf8_replaced), 2);
  for (size_t k = 0; k < t->names.size(); ++k)
    EXPECT_EQ(ValidUtf8Prefix(t->names.Get(static_cast<uint32_t>(k))), t->names.Get(static_cast<uint32_t>(k)).size());
  std::vector<std::string> cases = {numbers, surrogates};
  for (const char* bad : {R"(bad\uzzzz)", R"(bad\u12)", R"(bad\q)"}) {
    const std::string text = head + R"J(    {"ph": "X", "cat": "kernel", "name": ")J" + bad +
                             R"J(", "pid": 0, "tid": 7, "ts": 2, "dur": 1, "args": {"stream": 7}},)J" + tail;
    StatusOr<RankTrace> r = testing::ParseJsonText(text);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput) << bad;
    EXPECT_NE(r.status().message().find("not JSON: a string holds an invalid escape"), std::string::npos)
        << r.status().message();
    cases.push_back(text);
  }
  for (const std::string& text : cases)
    for (size_t window : {16, 61, 1 << 20})
      for (size_t max_read : {size_t{1}, SIZE_MAX})
        ExpectWalkerMatchesOnDemand(text, window, max_read, fmt::format("window {} read {}", window, max_read));
}

TEST(KinetoStream, WalkerMatchesOnDemandOnEveryMutation) {
  // Each byte of a document deleted, or replaced by or preceded with a byte the walker looks
  // at: where the walker bails, On-Demand must report what it reports without the walker.
  const std::string base = R"J({"traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "k\"1", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2, "args": {"device": 0, "stream": 7, "External id": 3, "grid": [1, 2]}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2, "args": {"Input Dims": [[8, 2048], []], "s": "]}"}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1, "dur": 1, "args": {"correlation": 1}}, {"ph": "f", "id": 1}
], "baseTimeNanoseconds": 5})J";
  ASSERT_TRUE(testing::ParseJsonText(base).ok());
  const std::string bytes = std::string("\"\\{}[],: 0\x01\xc3") + '\0';
  size_t n = 0;
  for (size_t i = 16; i < base.size() - 30; ++i) {
    for (size_t m = 0; m <= 2 * bytes.size(); ++m) {
      if ((i + m) % 3 != 0) continue;  // a third of the (position, mutation) pairs, all kinds at every position
      std::string t = base;
      if (m == 2 * bytes.size()) t.erase(i, 1);
      else if (m < bytes.size()) t[i] = bytes[m];
      else t.insert(i, 1, bytes[m - bytes.size()]);
      for (size_t window : {16, 61, 1 << 20}) {
        ExpectWalkerMatchesOnDemand(t, window, window == 61 ? 1 : SIZE_MAX, fmt::format("at {} mutation {} window {}", i, m, window));
        ++n;
      }
      ExpectWalkerMatchesOnDemand(t, 0, 97, fmt::format("at {} mutation {} lent blocks", i, m), 40);
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_GT(n, 10000u);
}

// The index walker: regions of the window indexed by simdjson's stage 1, each ending at a ','
// between '}' and '{' (which may be inside a string: stage 1 then refuses the region and the
// walker over the bytes goes on), read token by token as On-Demand reads them. Names holding
// "}, {" (a false region edge), a bracket after a backslash outside strings (a token for
// simdjson, escaped for the scanner), nesting at and past the walkers' depth limit, escapes,
// and values of every kind, through windows that put the edges everywhere: the same as
// On-Demand, and most events read by the index walker.
TEST(KinetoStream, IndexWalkerReadsRegionsAsOnDemandDoes) {
  std::string events;
  for (int i = 0; i < 60; ++i) {
    std::string name = fmt::format("k{}", i);
    if (i % 7 == 3) name += "}, {\\\"x";  // unescaped: }, {\"x
    if (i % 11 == 5) name += "\\u00e9";
    std::string args = fmt::format(R"J("device": 0, "stream": {}, "correlation": {}, "grid": [[{}, 1], {{}}], "e": "]")J", i % 3, i, i);
    if (i == 20) args += R"J(, "deep": )J" + std::string(512, '[') + std::string(512, ']');  // at the limit: read
    if (i == 55) args += R"J(, "deeper": )J" + std::string(513, '[') + std::string(513, ']');  // past it: bails
    events += fmt::format(R"J(  {{"ph": "X", "cat": "{}", "name": "{}", "pid": {}, "tid": "7", "ts": {}.5, "dur": {},
    "args": {{{}}}}},
)J",
                          i % 5 == 0 ? "cuda_runtime" : "kernel", name, i % 2 ? "1" : "\"0x1f\"", i, i % 4, args);
  }
  const std::string text = R"J({"traceEvents": [
)J" + events + R"J(  {"ph": "X", "cat": "kernel", "name": "last", "ts": 1, "dur": 1}
]})J";
  // A bracket after a backslash outside strings (the document is then invalid for the scanner or
  // for simdjson, and the error must be On-Demand's).
  std::string odd = text;
  odd.insert(odd.find("\"grid\"", odd.find("k30")), R"J("odd": [1, 2\], 3], )J");
  for (const std::string* doc : {&text, static_cast<const std::string*>(&odd)}) {
    for (size_t window : {size_t{200}, size_t{1000}, size_t{4096}, size_t{5000}, size_t{1} << 20})
      ExpectWalkerMatchesOnDemand(*doc, window, SIZE_MAX, fmt::format("window {}", window));
    for (size_t block : {size_t{333}, size_t{4096}})
      ExpectWalkerMatchesOnDemand(*doc, 0, block, fmt::format("lent blocks of {}", block), 2000);
  }
  // In one window, one region up to the separator before "last": the index walker reads events 0
  // to 54 and bails at 55 (nested too deep), which the walker over the bytes and On-Demand read.
  ImportObserver on;
  StatusOr<RankTrace> t = Stream(text, size_t{1} << 20, SIZE_MAX, 0, false, false, 0, -1, 1, &on);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(on.kineto_index_walked_events.load(), 55u);
  EXPECT_EQ(t->activities.size(), 49u);  // 61 events, 12 of them runtime calls
  ImportObserver off;
  ASSERT_TRUE(Stream(text, size_t{1} << 20, SIZE_MAX, 0, false, false, 0, -1, 0, &off).ok());
  EXPECT_EQ(off.kineto_index_walked_events.load(), 0u);
}

// The window in blocks the stream lends (the threaded gzip stream's, without a copy): a block's
// edge anywhere, the bytes before it carried in front of the next block, or, larger than the room
// there, into a window of the reader's own until the next block's edge.
TEST(KinetoStream, LentBlocksGiveTheSameTrace) {
  std::string events;
  for (int i = 0; i < 40; ++i)
    events += fmt::format(R"J({{"ph": "X", "cat": "kernel", "name": "k{}", "ts": {}, "dur": 1, "args": {{"stream": 7, "s": "{}"}}}},)J",
                          i, i, std::string(i * 7 % 300, 'x'));
  const std::string text = std::string(kTricky).insert(std::string(kTricky).find("    42, "), events);
  StatusOr<RankTrace> ref = testing::ParseJsonText(text);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  const std::string want = Dump(*ref);
  for (size_t block : {1, 2, 7, 64, 333, 1000, 5000}) {
    for (size_t front : {1, 16, 100, 400, 100000}) {
      StatusOr<RankTrace> t = Stream(text, 0, block, 0, false, false, front);
      ASSERT_TRUE(t.ok()) << block << " " << front << ": " << t.status().message();
      EXPECT_TRUE(Dump(*t) == want) << block << " " << front;
      StatusOr<RankTrace> gz = Stream(Gzip(text), 0, block, 0, true, false, front);
      ASSERT_TRUE(gz.ok()) << block << " " << front << ": " << gz.status().message();
      EXPECT_TRUE(Dump(*gz) == want) << block << " " << front;
    }
  }
  // An element larger than a block and the room before it, and larger than the cap.
  const std::string big(5000, 'y');
  const std::string text2 = R"J({"traceEvents": [{"ph": "X", "cat": "kernel", "name": ")J" + big +
                            R"J(", "ts": 1, "dur": 1}, {"ph": "X", "cat": "kernel", "name": "b", "ts": 2, "dur": 1}]})J";
  StatusOr<RankTrace> t = Stream(text2, 0, 1000, 0, false, false, 300);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->activities.size(), 2u);
  t = Stream(text2, 0, 1000, 4096, false, false, 300);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("an element of traceEvents larger than 4096 bytes near byte 17: refused"),
            std::string::npos)
      << t.status().message();
  // Errors: the same code as through a window of the reader's own.
  for (const std::string& bad : {text.substr(0, text.size() / 2), text2.substr(0, 3000), std::string("{\"traceEvents\": [}]}")}) {
    StatusOr<RankTrace> lent = Stream(bad, 0, 64, 0, false, false, 32), own = Stream(bad, 4096, 64);
    ASSERT_FALSE(lent.ok());
    EXPECT_EQ(lent.status().code(), own.status().code()) << lent.status().message() << " / " << own.status().message();
  }
}

// The builder on a thread of its own (fed in batches by the walker, synchronized before the
// window's bytes move and before every other use of the builder): the same trace, or the same
// error, as the builder on the reader's thread, through every kind of window.
TEST(KinetoStream, BuildThreadGivesTheSameResult) {
  std::string events;
  for (int i = 0; i < 3000; ++i)  // several batches of the thread's
    events += fmt::format(R"J({{"ph": "X", "cat": "kernel", "name": "k{}", "ts": {}, "dur": 1, "args": {{"stream": {}}}}},)J",
                          i % 7, i, i % 3);
  const std::string text = std::string(kTricky).insert(std::string(kTricky).find("    42, "), events);
  std::vector<std::string> docs = {text, text.substr(0, text.size() * 2 / 3), kTricky};
  std::string bad = text;
  bad[bad.rfind("\"name\": \"k") + 10] = '\x01';  // a control character in a string near the end
  docs.push_back(bad);
  bad = text;
  bad.insert(bad.find("{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k5\""), "{\"a\" 1},");  // On-Demand's error
  docs.push_back(bad);
  for (const std::string& doc : docs) {
    for (size_t lend : {size_t{0}, size_t{200}}) {
      for (size_t window : {size_t{64}, size_t{4096}, size_t{1} << 20}) {
        StatusOr<RankTrace> off = Stream(doc, window, 1000, 0, false, false, lend, 0);
        StatusOr<RankTrace> on = Stream(doc, window, 1000, 0, false, false, lend, 1);
        ASSERT_EQ(off.ok(), on.ok()) << window << " " << lend << ": " << (off.ok() ? on : off).status().message();
        if (!off.ok()) {
          EXPECT_EQ(off.status().message(), on.status().message()) << window << " " << lend;
        } else {
          EXPECT_TRUE(Dump(*off) == Dump(*on)) << window << " " << lend;
        }
      }
    }
  }
}

TEST(KinetoStream, EveryCutOfASmallTraceAtEveryWindow) {
  const std::string text = testing::KinetoJson({{"kernel", "gemm", "1", "2"},
                                                {"kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "5", "3"},
                                                {"gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", "9", "1"}});
  StatusOr<RankTrace> ref = testing::ParseJsonText(text);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  for (size_t window = 16; window <= text.size() + 16; ++window) {
    StatusOr<RankTrace> t = Stream(text, window, 5);
    ASSERT_TRUE(t.ok()) << window << ": " << t.status().message();
    EXPECT_EQ(Dump(*t), Dump(*ref)) << window;
  }
  // A prefix of the document is never a trace: each cut is truncated (or invalid) JSON.
  for (size_t cut = 1; cut < text.size() - 1; ++cut) {
    StatusOr<RankTrace> t = Stream(text.substr(0, cut), 16, 3);
    ASSERT_FALSE(t.ok()) << cut;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(t.status().message().find("JSON"), std::string::npos) << cut << ": " << t.status().message();
  }
}

TEST(KinetoStream, TruncationsAndGarbageAreReportedAsBefore) {
  struct Case {
    std::string text, expect;
  } cases[] = {
      {R"J({"traceEvents": [{"ph": "X", "name": "cut inside a str)J", "truncated JSON: the document ends inside an unclosed string"},
      {R"J({"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1)J", "truncated JSON: the document ends inside an unclosed object or array"},
      {R"J({"traceEvents": [{"ph": "X"}, )J", "truncated JSON: the document ends inside an unclosed object or array"},
      {R"J({"traceEvents": [{"ph": "X"}] )J", "truncated JSON: the document ends inside an unclosed object or array after 30 bytes"},
      {R"J({"traceEvents": [], "baseTimeNanoseconds": 1)J", "truncated JSON"},
      {R"J({"traceEvents": [], "traceNa)J", "truncated JSON: the document ends inside an unclosed string"},
      {R"J({"traceEvents": [{"ph": "X"}]} trailing)J", "invalid JSON: trailing content after the document near byte 31"},
      {R"J({"traceEvents": [{"ph": "X"},]})J", "invalid JSON near byte"},
      {R"J({"traceEvents": [,{"ph": "X"}]})J", "invalid JSON near byte"},
      {R"J({"traceEvents": [{"ph": "X"} {"ph": "X"}]})J", "invalid JSON near byte"},
      {R"J({"traceEvents": [}]})J", "invalid JSON near byte 17"},
      {R"J({"traceEvents": {}})J", "\"traceEvents\" is not an array near byte 16"},
      {R"J({"traceEvents": [] "x": 1})J", "invalid JSON near byte 19 (expected ',' or '}' after a value)"},
      {R"J({"traceEvents" [])J", "truncated JSON"},  // '[' left open: its likely cause
      {R"J({"traceEvents": [], "distributedInfo": {"rank": }})J", "invalid JSON near byte"},
      {R"J(   )J", "invalid JSON near byte 3"},
      {R"J("just a string")J", "not a Chrome-trace JSON"},
  };
  for (const Case& c : cases) {
    for (size_t window : {16, 4096}) {
      StatusOr<RankTrace> t = Stream(c.text, window, 2);
      ASSERT_FALSE(t.ok()) << c.text;
      EXPECT_EQ(t.status().code(), StatusCode::kInvalidInput) << c.text;
      EXPECT_NE(t.status().message().find(c.expect), std::string::npos)
          << c.text << " (window " << window << ") -> " << t.status().message();
    }
  }
}

TEST(KinetoStream, OneEventLargerThanTheWindowGrowsItUpToTheCap) {
  const std::string big(3 << 20, 'x');  // 3 MiB of name
  const std::string text = R"J({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "small", "ts": 1, "dur": 1},
    {"ph": "X", "cat": "kernel", "name": ")J" + big + R"J(", "ts": 2, "dur": 1}, {"ph": "X", "cat": "kernel", "name": "s2", "ts": 3, "dur": 1}]})J";
  StatusOr<RankTrace> t = Stream(text, 4096, 1 << 16, 4 << 20);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->activities.size(), 3u);
  EXPECT_EQ(t->names.Get(t->activities[1].name_id).size(), big.size());
  // Over the cap: refused with one line naming the limit.
  t = Stream(text, 4096, 1 << 16, 2 << 20);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(t.status().message().find("an element of traceEvents larger than 2 MiB near byte 87: refused"),
            std::string::npos)
      << t.status().message();
  // The same for a top-level value other than traceEvents (at most 64 MiB, or the event cap).
  const std::string top = R"J({"traceName": ")J" + big + R"J(", "traceEvents": []})J";
  t = Stream(top, 4096, SIZE_MAX, 2 << 20);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("a top-level value larger than 2 MiB near byte 14: refused"), std::string::npos)
      << t.status().message();
  EXPECT_TRUE(Stream(top, 4096, SIZE_MAX, 4 << 20).ok());
}

TEST(KinetoStream, WhitespaceBetweenEventsIsNotKept) {
  // 8 MiB of spaces between two events through a 64 KiB window capped at 1 MiB: streams.
  const std::string text = R"J({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "a", "ts": 1, "dur": 1},)J" +
                           std::string(8 << 20, ' ') +
                           R"J({"ph": "X", "cat": "kernel", "name": "b", "ts": 2, "dur": 1}   )J" +
                           std::string(4 << 20, '\n') + "]}";
  StatusOr<RankTrace> t = Stream(text, 64 << 10, SIZE_MAX, 1 << 20);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->activities.size(), 2u);
}

TEST(KinetoStream, WhitespaceAfterAnElementIsNotKeptEither) {
  // Runs of whitespace after elements (before their comma, before the ']'), far longer than the
  // largest element allowed (128 bytes): each element is parsed when the window fills, and its
  // separator looked for after the run. Same trace as one whole parse, at every window size.
  const std::string ws(1000, ' ');
  const std::string text = R"J({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "a", "ts": 1, "dur": 1})J" + ws +
                           ",\n" + ws + R"J("a string element")J" + ws + "," + ws +
                           R"J({"ph": "X", "cat": "kernel", "name": "b", "ts": 2, "dur": 1},)J" +
                           R"J({"ph": "X", "cat": "kernel", "name": "c", "ts": 3, "dur": 1})J" + ws + "\n]" + ws +
                           R"J(, "baseTimeNanoseconds": 1000})J";
  StatusOr<RankTrace> ref = testing::ParseJsonText(text);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  ASSERT_EQ(ref->activities.size(), 3u);
  EXPECT_EQ(ref->activities[0].start_ns, 2000);
  EXPECT_EQ(ref->stats.Get(Stat::events_malformed), 1);  // the string element
  for (size_t window = 16; window <= 128; window += 7) {
    for (size_t max_read : {size_t{1}, size_t{5}, SIZE_MAX}) {
      StatusOr<RankTrace> t = Stream(text, window, max_read, 128);
      ASSERT_TRUE(t.ok()) << window << " " << max_read << ": " << t.status().message();
      EXPECT_EQ(Dump(*t), Dump(*ref)) << window << " " << max_read;
    }
  }
  // Content between an element and its separator is still an error, wherever the window ends.
  const std::string bad = R"J({"traceEvents": [{"ph": "X", "name": "a"})J" + ws + R"J(x, {"ph": "X"}]})J";
  const std::string bad2 = R"J({"traceEvents": [{"ph": "X", "name": "a"})J" + ws + R"J({"ph": "X"}]})J";
  for (const std::string* b : {&bad, &bad2}) {
    for (size_t window : {16, 64, 4096}) {
      StatusOr<RankTrace> t = Stream(*b, window, SIZE_MAX, 128);
      ASSERT_FALSE(t.ok()) << window;
      EXPECT_EQ(t.status().code(), StatusCode::kInvalidInput);
      EXPECT_NE(t.status().message().find("invalid JSON near byte"), std::string::npos)
          << window << ": " << t.status().message();
    }
  }
  StatusOr<RankTrace> t = Stream(bad, 64, SIZE_MAX, 128);
  EXPECT_EQ(t.status().message(), "invalid JSON near byte 1041 (content after an element)");
}

TEST(KinetoStream, InvalidUtf8IsReplacedAndCountedWhateverTheBatches) {
  std::string text = kTricky;
  // Inside four strings (a kernel name, a runtime call's name, a device name, a top-level value),
  // from the last so that each insertion leaves the earlier positions where they were.
  std::vector<size_t> at = {text.find("k{1}"), text.find("cudaLaunchKernel"), text.find("GPU \\\"0"),
                            text.find("nccl\"")};
  std::sort(at.rbegin(), at.rend());
  for (size_t i : at) text.insert(i, "\xC3\x28\xFF");
  StatusOr<RankTrace> ref = testing::ParseJsonText(text);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  EXPECT_EQ(ref->stats.Get(Stat::invalid_utf8_replaced), 8);
  for (size_t window : {16, 100, 1000}) {
    StatusOr<RankTrace> t = Stream(text, window, 7);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(Dump(*t), Dump(*ref)) << window;
  }
  // In lent blocks, checked as UTF-8 by the stream block by block (ByteStream::Block::utf8_valid):
  // sequences cut by a block's end, blocks without an ASCII byte; valid and invalid text.
  std::string multi = kTricky;
  for (size_t i : {multi.find("cudaLaunchKernel"), multi.find("k{1}")}) multi.insert(i, "\xC3\xA9\xF0\x9F\x98\x80\xE2\x82\xAC");
  multi.insert(multi.find("GPU \\\"0"), std::string(300, 'x') + "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9");
  for (const std::string* doc : {&text, &multi}) {
    StatusOr<RankTrace> want = testing::ParseJsonText(*doc);
    ASSERT_TRUE(want.ok()) << want.status().message();
    for (size_t block : {1, 2, 3, 5, 8, 64, 1000})
      for (size_t front : {16, 200}) {
        StatusOr<RankTrace> t = Stream(*doc, 0, block, 0, false, false, front);
        ASSERT_TRUE(t.ok()) << block << " " << front << ": " << t.status().message();
        EXPECT_EQ(Dump(*t), Dump(*want)) << block << " " << front;
      }
  }
}

TEST(KinetoStream, TopLevelArrayAndBom) {
  const std::string text = "\xEF\xBB\xBF [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, \"dur\": 1}] ";
  StatusOr<RankTrace> t = Stream(text, 16, 1);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->activities.size(), 1u);
  EXPECT_TRUE(Stream("\xEF\xBB\xBF[]", 16).ok());
  EXPECT_EQ(Stream("\xEF\xBB\xBF", 16).status().message(), "empty file");
}

TEST(KinetoStream, GzipStreamsMembersPaddingAndErrors) {
  const std::string text = kTricky;
  StatusOr<RankTrace> ref = testing::ParseJsonText(text);
  ASSERT_TRUE(ref.ok());
  const std::string a = text.substr(0, 500), b = text.substr(500);
  // Two members, then zero padding (as some writers pad to a block).
  const std::string gz = Gzip(a) + Gzip(b) + std::string(100, '\0');
  for (size_t max_read : {size_t{1}, size_t{13}, SIZE_MAX}) {
    StatusOr<RankTrace> t = Stream(gz, 64, max_read, 0, true);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(Dump(*t), Dump(*ref));
  }
  // Through a file, inflated on the second thread, and on the caller's.
  testing::TempDir dir;
  const std::string path = dir.File("t.json.gz");
  {
    std::ofstream f(path, std::ios::binary);
    f << gz;
  }
  for (bool threaded : {true, false}) {
    StreamOptions so;
    so.threaded = threaded;
    StatusOr<std::unique_ptr<ByteStream>> in = OpenInputStream(path, so);
    ASSERT_TRUE(in.ok());
    EXPECT_TRUE((*in)->was_compressed());
    StatusOr<RankTrace> t = ParseKinetoStream(**in, ImportOptions{});
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(Dump(*t), Dump(*ref));
  }
  // Truncated, garbage after the data, the inflate limit: one error each, the gzip's first.
  StatusOr<RankTrace> t = Stream(gz.substr(0, gz.size() - 150), 64, SIZE_MAX, 0, true);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(t.status().message(), "truncated gzip data (the stream ends inside a member)");
  t = Stream(Gzip(a) + Gzip(b) + "garbage", 64, SIZE_MAX, 0, true);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("trailing garbage after gzip data"), std::string::npos) << t.status().message();
  std::unique_ptr<ByteStream> limited = MemoryStream(gz, SIZE_MAX, true, 1000);
  t = ParseKinetoStream(*limited, ImportOptions{});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "gzip data inflates to more than 0 MiB, the limit set by OVERLAPPROF_MAX_INFLATED_BYTES");
  EXPECT_EQ(Stream(Gzip(""), 64, SIZE_MAX, 0, true).status().message(), "empty file (gzip of nothing)");
}

// Every bundled trace gives the same trace through a window that holds the whole document (its
// traceEvents parsed by simdjson as one document: the reference), the default 16 MiB window, and a
// 4 KiB window fed by 997-byte reads (the goldens check the default against the figures from
// before streaming).
TEST(KinetoStream, BundledTracesThroughATinyWindow) {
  for (const char* name : {"a100_2rank_rank0", "a100_16rank_rank0", "a100_no_distributed_info",
                           "b200_vllm_tp8_symm_mem_rank0", "cpu_only_ops", "mi250_1rank_rocm",
                           "mi300x_ddp_resnet_rank0", "v100_1rank_no_nccl", "v100_resnet50_2021_format"}) {
    std::ifstream f(testing::DataFile(std::string("kineto/") + name + ".json.gz"), std::ios::binary);
    const std::string gz((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(gz.empty()) << name;
    StatusOr<RankTrace> whole = Stream(gz, size_t{64} << 20, SIZE_MAX, 0, true);  // every file inflates to < 64 MiB
    ASSERT_TRUE(whole.ok()) << name << ": " << whole.status().message();
    ASSERT_FALSE(whole->activities.empty() && whole->host_calls.empty() && whole->ranges.empty()) << name;
    const std::string want = Dump(*whole);
    StatusOr<RankTrace> def = Stream(gz, 0, SIZE_MAX, 0, true);
    ASSERT_TRUE(def.ok()) << name << ": " << def.status().message();
    EXPECT_TRUE(Dump(*def) == want) << name;
    StatusOr<RankTrace> tiny = Stream(gz, 4096, 997, 0, true);
    ASSERT_TRUE(tiny.ok()) << name << ": " << tiny.status().message();
    EXPECT_TRUE(Dump(*tiny) == want) << name;
    StatusOr<RankTrace> od = Stream(gz, 0, SIZE_MAX, 0, true, /*on_demand_only=*/true);  // without the walker
    ASSERT_TRUE(od.ok()) << name << ": " << od.status().message();
    EXPECT_TRUE(Dump(*od) == want) << name;
    StatusOr<RankTrace> lent = Stream(gz, 0, 65536, 0, true, false, 4096);  // in lent blocks, built on a thread
    ASSERT_TRUE(lent.ok()) << name << ": " << lent.status().message();
    EXPECT_TRUE(Dump(*lent) == want) << name;
  }
}

}  // namespace
}  // namespace overlapprof
