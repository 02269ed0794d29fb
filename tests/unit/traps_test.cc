// The traps analyzer (analyzers/traps.cc) on small synthetic timelines, through the real importer,
// the store and the pipeline (times in µs): each finding fires on its pattern, none on good overlap.
#include <gtest/gtest.h>

#include "analyzer_trace_util.h"
#include "src/store/writer.h"

namespace overlapprof {
namespace {

using testing::AllReduceArgs;
using testing::D;
using testing::Ev;
using testing::Json;
using testing::KinetoJson;
using testing::T;

// Five steps of 1000 µs. In each: compute A (stream 7) launched at +10 runs [+20, +200); an
// all-reduce on `comm_stream` launched at +210 runs [+220, +400); compute B (stream 7) launched
// at +230, its stream idle since +200, runs [+b_start, +b_start+100).
std::vector<Ev> Steps(int comm_stream, int64_t b_start) {
  std::vector<Ev> ev;
  int64_t corr = 1;
  for (int64_t s = 0; s < 5; ++s) {
    const int64_t t0 = 1000 * s;
    ev.push_back({"user_annotation", fmt::format("ProfilerStep#{}", s), T(t0), D(1000)});
    auto launch = [&](int64_t host, const char* name, int64_t start, int64_t dur, int stream, std::string extra = "") {
      ev.push_back({"cuda_runtime", "cudaLaunchKernel", T(t0 + host), D(5), 0, corr});
      ev.push_back({"kernel", name, T(t0 + start), D(dur), stream, corr++, extra});
    };
    launch(10, "sm90_gemm_a", 20, 180, 7);
    launch(210, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 220, 180, comm_stream, AllReduceArgs(1 << 20));
    launch(230, "sm90_gemm_b", b_start, 100, 7);
  }
  return ev;
}

// The trace as a recorder's store with meta `overlap_env` (empty: none) and the given event
// links, one record and one wait per step ((waiting, recording) stream native ids), analyzed.
Json AnalyzeAsStore(const std::vector<Ev>& events, const std::string& overlap_env,
                    const std::vector<std::pair<int64_t, int64_t>>& waits = {}) {
  StatusOr<RankTrace> t = testing::ParseJsonText(KinetoJson(events));
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (!t.ok()) return Json();
  t->meta.overlap_env_json = overlap_env;
  t->meta.source_format = "overlapprof";  // read as a recorder's store: its event links are read
  auto stream = [&](int64_t native) {
    for (uint32_t i = 0; i < t->streams.size(); ++i)
      if (t->streams[i].native_id == native) return i;
    return kNoIndex;
  };
  int64_t sync = 1;
  for (const auto& [waiting, recording] : waits) {
    for (int s = 0; s < 5; ++s, ++sync) {
      t->event_links.push_back({kUnknown, sync, stream(recording), EventLinkKind::kRecord});
      t->event_links.push_back({kUnknown, sync, stream(waiting), EventLinkKind::kStreamWait});
    }
  }
  testing::TempDir dir;
  const std::string path = dir.path() + "/rank0.db";
  Status w = WriteStore(*t, path, true);
  EXPECT_TRUE(w.ok()) << w.message();
  StatusOr<Summary> s = AnalyzeFiles({path}, ImportOptions{}, AnalysisOptions{}, 1);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return Json();
  return SummaryToJson(*s);
}

std::vector<std::string> TrapFindings(const Json& j) {
  std::vector<std::string> out;
  if (j.contains("findings"))
    for (const Json& f : j["findings"])
      if (f["analyzer"] == "traps") out.push_back(f["message"].get<std::string>());
  return out;
}

bool Has(const std::vector<std::string>& findings, const std::string& needle) {
  for (const std::string& f : findings)
    if (f.find(needle) != std::string::npos) return true;
  return false;
}

TEST(Traps, SerializedStreamsWithoutAKnownCauseNameBoth) {
  // B was ready at +230 while the all-reduce (stream 20) ran, and started only at its end (+400).
  const std::vector<std::string> f = TrapFindings(testing::Analyze(KinetoJson(Steps(20, 400))));
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(f);
  EXPECT_NE(f[0].find("communication and compute never run at the same time (0.0% of 180.0 µs communication per "
                      "step hidden) although they use different streams (communication on 20, compute on 7): 5 "
                      "compute kernels in 5 of 5 steady iterations were launched, their stream idle, while "
                      "communication ran, and started only when it ended (170.0 µs per step waiting)"),
            std::string::npos)
      << f[0];
  EXPECT_TRUE(Has(f, "CUDA_DEVICE_MAX_CONNECTIONS=1")) << f[0];
  EXPECT_TRUE(Has(f, "work.wait()")) << f[0];
}

TEST(Traps, SerializedStreamsNameTheEnvironmentAndTheSmBudget) {
  const Json j = AnalyzeAsStore(Steps(20, 400), R"({"CUDA_DEVICE_MAX_CONNECTIONS":"1","NCCL_MAX_NCHANNELS":"2"})");
  EXPECT_EQ(j["ranks"][0]["overlap_env"], Json::parse(R"({"CUDA_DEVICE_MAX_CONNECTIONS":"1","NCCL_MAX_NCHANNELS":"2"})"));
  const std::vector<std::string> f = TrapFindings(j);
  ASSERT_EQ(f.size(), 2u) << ::testing::PrintToString(f);
  EXPECT_TRUE(Has(f, "the job sets CUDA_DEVICE_MAX_CONNECTIONS=1: every stream shares one hardware queue"));
  EXPECT_FALSE(Has(f, "work.wait()"));
  EXPECT_TRUE(Has(f, "the job sets NCCL's SM budget (NCCL_MAX_NCHANNELS=2)"));
  EXPECT_TRUE(Has(f, "here communication takes 180.0 µs per step, 0.0% of it hidden under compute"));
}

TEST(Traps, EnvironmentWithoutTheSettingSaysSo) {
  const std::vector<std::string> f = TrapFindings(AnalyzeAsStore(Steps(20, 400), R"({"NCCL_ALGO":"Ring"})"));
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(f);
  EXPECT_TRUE(Has(f, "the job does not set CUDA_DEVICE_MAX_CONNECTIONS, and no recorded dependency made it wait"));
}

TEST(Traps, RecordedStreamWaitIsAWaitRightAfterLaunch) {
  // The compute stream 7 waits (cudaStreamWaitEvent) for an event recorded on the comm stream 20.
  const std::vector<std::string> f = TrapFindings(AnalyzeAsStore(Steps(20, 400), "{}", {{7, 20}}));
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(f);
  EXPECT_TRUE(Has(f, "communication is waited for right after its launch: 0.0% of 180.0 µs communication per step "
                     "hidden; 5 compute kernels in 5 of 5 steady iterations were ready while it ran"))
      << f[0];
}

TEST(Traps, CommunicationOnTheComputeStream) {
  // The all-reduce on stream 7 with the compute: B queues behind it on the same stream.
  const std::vector<std::string> f = TrapFindings(testing::Analyze(KinetoJson(Steps(7, 400))));
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(f);
  EXPECT_TRUE(Has(f, "100% of communication time runs on a stream that also runs compute (stream 7): a stream runs "
                     "one kernel after another, so nothing on it can overlap that communication (0.0% of 180.0 µs "
                     "per step hidden)"));
}

TEST(Traps, GoodOverlapFiresNothing) {
  // B starts at +240, under the all-reduce: 100 of 180 µs hidden. An environment without
  // channel settings: no SM budget finding either.
  const Json j = AnalyzeAsStore(Steps(20, 240), R"({"CUDA_DEVICE_MAX_CONNECTIONS":"8"})");
  EXPECT_EQ(TrapFindings(j), std::vector<std::string>());
  EXPECT_EQ(TrapFindings(testing::Analyze(KinetoJson(Steps(20, 240)))), std::vector<std::string>());
}

}  // namespace
}  // namespace overlapprof
