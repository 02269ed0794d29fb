// The rocprofv3 JSON importer (src/importers/rocprof/): hand-made files (tests/data/rocprof/small_*.json,
// written with their expected figures in mind: see the comments below), a cut of a real MI350 rank
// file (its figures computed independently, tests/data/rocprof/README.md), and bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "golden_util.h"
#include "src/cli/pipeline.h"
#include "src/cli/registry.h"
#include "src/importers/rocprof/rocprof.h"
#include "test_util.h"

namespace overlapprof {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::string Small(const std::string& name) { return testing::DataFile("rocprof/" + name); }

StatusOr<RankTrace> ParseSmall(const std::string& name, const ImportOptions& o = {}) {
  return rocprof::ParseRocprofText(ReadText(Small(name)), name, o);
}

Summary AnalyzeOk(const std::string& path, const AnalysisOptions& ao = {}) {
  StatusOr<Summary> s = AnalyzeFiles({path}, {}, ao);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

const Activity* FindActivity(const RankTrace& t, std::string_view name) {
  for (const Activity& a : t.activities)
    if (t.names.Get(a.name_id) == name) return &a;
  return nullptr;
}

TEST(RocprofProbe, ClaimsRocprofJsonPlainOrGzippedAndNothingElse) {
  const std::string doc = R"({"rocprofiler-sdk-tool":[{"metadata":{}}]})";
  EXPECT_EQ(rocprof::ProbeRocprof(doc), 70);
  EXPECT_EQ(rocprof::ProbeRocprof("\xEF\xBB\xBF \n{\n \"rocprofiler-sdk-tool\": ["), 70);  // BOM, cereal's indentation
  EXPECT_EQ(rocprof::ProbeRocprof(testing::Gzip(doc)), 70);
  // The head of a large gzip file: the first bytes only.
  std::string noise;
  for (uint32_t x = 1; noise.size() < 100000;) noise += static_cast<char>('a' + (x = x * 1103515245u + 12345u) % 26);
  const std::string big = testing::Gzip(ReadText(Small("small_basic.json")) + noise);
  ASSERT_GT(big.size(), 4096u);
  EXPECT_EQ(rocprof::ProbeRocprof(std::string_view(big).substr(0, 4096)), 70);  // what ChooseImporter reads
  EXPECT_EQ(rocprof::ProbeRocprof(R"({"traceEvents": []})"), 0);
  EXPECT_EQ(rocprof::ProbeRocprof(testing::Gzip(R"({"traceEvents": []})")), 0);
  EXPECT_EQ(rocprof::ProbeRocprof(R"({"metadata": {}, "rocprofiler-sdk-tool": []})"), 0);
  EXPECT_EQ(rocprof::ProbeRocprof("\x1f\x8b garbage"), 0);
  EXPECT_EQ(rocprof::ProbeRocprof(""), 0);
  // Through the registry: rocprofv3 files to this importer, PyTorch-profiler traces still to Kineto's.
  for (const char* f : {"small_basic.json", "mi350_fsdp_rank0_3steps.json.gz", "small_no_kernels.json"}) {
    StatusOr<const Importer*> imp = ChooseImporter(Small(f));
    ASSERT_TRUE(imp.ok()) << f;
    EXPECT_EQ((*imp)->name(), "rocprof") << f;
  }
  StatusOr<const Importer*> kineto = ChooseImporter(testing::DataFile("kineto/mi250_1rank_rocm.json.gz"));
  ASSERT_TRUE(kineto.ok());
  EXPECT_EQ((*kineto)->name(), "kineto");
}

// small_basic.json: two GPUs (agents 101, 102 = GPU 0, 1) and a CPU; on GPU 0 a GEMM on queue 1 [1000,
// 5000), an RCCL kernel on queue 2 [3000, 9000) launched inside ncclAllReduce, a blit copy [6000,
// 6500) and fill [7000, 7100), a GEMM [8000, 10000); copies H2D [100, 600) and GPU 0 -> GPU 1
// [11000, 12000); ProfilerStep#0 [0, 7500), #1 [7500, 13000) and "forward" as roctx ranges; the
// output template "%hostname%/%env{RANK}%_results" expanded to "node1/3_results".
TEST(RocprofImport, ReadsKernelsCopiesHostCallsRangesAndTheRank) {
  StatusOr<RankTrace> t = ParseSmall("small_basic.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->meta.source_format, "rocprof");
  EXPECT_EQ(t->meta.rank, 3);
  EXPECT_EQ(t->stats.Get(Stat::rocprof_rank_from_output_name), 1);
  EXPECT_EQ(t->stats.Get(Stat::rank_unknown), 0);
  EXPECT_EQ(t->meta.local_rank, 1);  // --local_rank=1
  EXPECT_EQ(t->meta.pid, 4242);
  EXPECT_EQ(t->meta.host, "node1");
  ASSERT_EQ(t->activities.size(), 7u);

  const Activity* gemm = FindActivity(*t, "Cijk_Alik_Bljk_gemm");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->kind, ActivityKind::kKernel);
  EXPECT_EQ(gemm->category, Category::kCompute);
  EXPECT_EQ(gemm->start_ns, 1000);
  EXPECT_EQ(gemm->end_ns, 5000);
  EXPECT_EQ(gemm->launch_ns, 900);  // hipLaunchKernel, correlation id 11
  ASSERT_LT(gemm->stream, t->streams.size());
  EXPECT_EQ(t->streams[gemm->stream].device, 0);
  EXPECT_EQ(t->streams[gemm->stream].native_id, 1);
  EXPECT_EQ(t->streams[gemm->stream].name, "queue 1");

  const Activity* copy = FindActivity(*t, "__amd_rocclr_copyBuffer");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->kind, ActivityKind::kMemcpy);
  EXPECT_EQ(copy->category, Category::kMemory);
  const Activity* fill = FindActivity(*t, "__amd_rocclr_fillBufferAligned");
  ASSERT_NE(fill, nullptr);
  EXPECT_EQ(fill->kind, ActivityKind::kMemset);
  EXPECT_EQ(fill->category, Category::kMemory);

  const Activity* h2d = FindActivity(*t, "Memcpy HtoD");
  ASSERT_NE(h2d, nullptr);
  EXPECT_EQ(h2d->bytes, 4096);
  EXPECT_EQ(h2d->category, Category::kMemory);

  // Communication: the RCCL kernel, named from the ncclAllReduce around its launch, and the peer copy.
  ASSERT_EQ(t->comm_ops.size(), 2u);
  const Activity* rccl = FindActivity(*t, "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)");
  ASSERT_NE(rccl, nullptr);
  ASSERT_NE(rccl->comm_op, kNoIndex);
  const CommOp& ar = t->comm_ops[rccl->comm_op];
  EXPECT_EQ(ar.op, Collective::kAllReduce);
  EXPECT_EQ(ar.rule, CommRule::kKernelName);
  EXPECT_EQ(ar.host_enter_ns, 2400);  // the ncclAllReduce call, not the HIP launch inside it
  EXPECT_EQ(ar.host_exit_ns, 2600);
  EXPECT_EQ(ar.host_tid, 10);
  EXPECT_EQ(t->streams[rccl->stream].native_id, 2);
  const Activity* p2p = FindActivity(*t, "Memcpy PtoP (device 0 -> device 1)");
  ASSERT_NE(p2p, nullptr);
  EXPECT_EQ(p2p->category, Category::kComm);
  EXPECT_EQ(t->comm_ops[p2p->comm_op].op, Collective::kPeerCopy);
  EXPECT_EQ(t->comm_ops[p2p->comm_op].bytes, 1024);

  ASSERT_EQ(t->devices.size(), 2u);
  EXPECT_EQ(t->devices[0].id, 0);  // the GPU the kernels ran on first
  EXPECT_EQ(t->devices[0].name, "AMD Instinct MI300X");
  EXPECT_EQ(t->devices[0].sm_count, 304);

  EXPECT_EQ(t->host_calls.size(), 8u);  // 7 HIP, 1 RCCL
  int steps = 0, annotations = 0;
  for (const Range& r : t->ranges) {
    steps += r.kind == RangeKind::kStep;
    annotations += r.kind == RangeKind::kAnnotation && t->names.Get(r.name_id) == "forward";
    EXPECT_NE(t->names.Get(r.name_id), "a mark");  // roctxMarkA is an instant
  }
  EXPECT_EQ(steps, 2);
  EXPECT_EQ(annotations, 1);
  EXPECT_EQ(t->stats.Get(Stat::correlations_unmatched), 0);
  EXPECT_EQ(t->stats.Get(Stat::events_malformed), 0);
}

TEST(RocprofImport, WholeTraceAndStepFiguresOfTheSmallFile) {
  Summary s = AnalyzeOk(Small("small_basic.json"));
  ASSERT_EQ(s.ranks.size(), 1u);
  const OverlapFigures& f = s.ranks[0].whole;
  EXPECT_EQ(f.comm_ns, 6000 + 1000);         // RCCL kernel + peer copy
  EXPECT_EQ(f.compute_ns, 4000 + 2000);      // the two GEMMs
  EXPECT_EQ(f.overlap_ns, 2000 + 1000);      // [3000, 5000) and [8000, 9000)
  EXPECT_EQ(f.memory_ns, 500 + 500 + 100);   // H2D copy, blit copy, blit fill
  EXPECT_EQ(s.ranks[0].rank, 3);
  EXPECT_EQ(s.ranks[0].iteration_source, "ProfilerStep");
  EXPECT_EQ(s.ranks[0].iteration_count, 2);
  // --step-range on a roctx range.
  AnalysisOptions ao;
  ao.step_range = "forward";
  Summary fwd = AnalyzeOk(Small("small_basic.json"), ao);
  EXPECT_EQ(fwd.ranks[0].iteration_count, 1);
}

// small_group.json: ncclGroupStart, ncclSend, ncclRecv, ncclGroupEnd (an RCCL kernel launched in
// it: sendrecv); an elementwise kernel and an RCCL kernel launched inside ncclAllGather
// (communication by its host call, and by name); the rank from `--rank 5`.
TEST(RocprofImport, NamesGroupsAndCountsKernelsLaunchedByRcclCalls) {
  StatusOr<RankTrace> t = ParseSmall("small_group.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->meta.rank, 5);
  EXPECT_EQ(t->stats.Get(Stat::rocprof_rank_from_command_line), 1);
  std::map<std::pair<std::string, CommRule>, int> ops;
  for (const CommOp& op : t->comm_ops) ++ops[{std::string(CollectiveName(op.op)), op.rule}];
  EXPECT_EQ(ops, (std::map<std::pair<std::string, CommRule>, int>{{{"sendrecv", CommRule::kKernelName}, 1},
                                                                  {{"allgather", CommRule::kKernelName}, 1},
                                                                  {{"allgather", CommRule::kHostOp}, 1}}));
  const Activity* add = FindActivity(*t, "elementwise_add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->category, Category::kComm);
  const Activity* gemm = FindActivity(*t, "Cijk_Alik_Bljk_gemm");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->category, Category::kCompute);  // launched outside any RCCL call
  Summary s = AnalyzeOk(Small("small_group.json"));
  EXPECT_EQ(s.ranks[0].whole.comm_ns, 1000 + 500 + 400);
  EXPECT_EQ(s.ranks[0].whole.overlap_ns, 1900);
  EXPECT_EQ(s.ranks[0].comm_rules, (std::map<std::string, int64_t>{{"host_op", 1}, {"kernel_name", 2}}));
}

TEST(RocprofImport, RankFromTheFileNameWhenTheTraceDoesNotSayIt) {
  const std::string text = ReadText(Small("small_no_kernels.json"));
  const std::string with_kernel = ReadText(Small("small_group.json"));
  // small_group says --rank 5; without it, the file name decides.
  std::string no_rank = with_kernel;
  const size_t at = no_rank.find("\"--rank\"");
  ASSERT_NE(at, std::string::npos);
  no_rank.replace(at, 8, "\"--seed\"");
  struct Case {
    const char* file;
    int64_t rank;
  } cases[] = {{"trace_rank7.json", 7},  {"rank_12_pid3.json.gz", 12}, {"run-RANK-2.json", 2},
               {"crank7.json", kUnknown}, {"rank7x.json", kUnknown},     {"rank1_rank2.json", kUnknown},
               {"results.json", kUnknown}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    StatusOr<RankTrace> t = rocprof::ParseRocprofText(no_rank, c.file);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->meta.rank, c.rank);
    EXPECT_EQ(t->stats.Get(Stat::rocprof_rank_from_file_name), c.rank != kUnknown ? 1 : 0);
    EXPECT_EQ(t->stats.Get(Stat::rank_unknown), c.rank == kUnknown ? 1 : 0);
  }
  // The command line wins over the file name.
  StatusOr<RankTrace> t = rocprof::ParseRocprofText(with_kernel, "trace_rank7.json");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->meta.rank, 5);
  (void)text;
}

TEST(RocprofImport, RankFromRocprofOutputNameTemplates) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(ReadText(Small("small_group.json")));
  j["rocprofiler-sdk-tool"][0]["metadata"]["command"] = {"python", "train.py"};
  struct Case {
    const char* raw_path;
    const char* raw_file;
    const char* path;
    const char* file;
    int64_t rank;
  } cases[] = {
      {"/out/%launch_time%", "%hostname%/rank%rank%_%pid%", "/out/2025-12-09_07.09", "node1/rank12_4242", 12},
      {"%cwd%/traces", "$ENV{OMPI_COMM_WORLD_RANK}.%p", "/home/u/x/traces", "6.4242", 6},
      {"/out", "%q{SLURM_PROCID}_%h", "/out", "0_node1", 0},
      {"/out", "%env{LOCAL_RANK}%_%pid%", "/out", "3_4242", kUnknown},  // not the global rank
      {"/out", "%hostname%/%pid%", "/out", "node1/4242", kUnknown},
      {"/out", "%rank%_x", "/out", "abc_x", kUnknown},  // does not match the template
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.raw_file);
    auto& cfg = j["rocprofiler-sdk-tool"][0]["metadata"]["config"];
    cfg["raw_output_path"] = c.raw_path;
    cfg["raw_output_file"] = c.raw_file;
    cfg["output_path"] = c.path;
    cfg["output_file"] = c.file;
    StatusOr<RankTrace> t = rocprof::ParseRocprofText(j.dump(), "results.json");
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->meta.rank, c.rank);
    EXPECT_EQ(t->stats.Get(Stat::rocprof_rank_from_output_name), c.rank != kUnknown ? 1 : 0);
  }
}

TEST(RocprofImport, SectionsInAnyOrder) {
  // buffer_records before strings and kernel_symbols (rocprofiler-sdk versions order them differently).
  const std::string text = ReadText(Small("small_basic.json"));
  nlohmann::json j = nlohmann::json::parse(text);
  nlohmann::ordered_json reordered;
  nlohmann::ordered_json p;
  const nlohmann::json& src = j["rocprofiler-sdk-tool"][0];
  for (const char* k : {"buffer_records", "kernel_symbols", "strings", "agents", "metadata"}) p[k] = src[k];
  reordered["rocprofiler-sdk-tool"] = nlohmann::ordered_json::array({p});
  StatusOr<RankTrace> a = rocprof::ParseRocprofText(text, "small_basic.json");
  StatusOr<RankTrace> b = rocprof::ParseRocprofText(reordered.dump(), "small_basic.json");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(a->activities.size(), b->activities.size());
  for (size_t i = 0; i < a->activities.size(); ++i) {
    EXPECT_EQ(a->activities[i].start_ns, b->activities[i].start_ns);
    EXPECT_EQ(a->names.Get(a->activities[i].name_id), b->names.Get(b->activities[i].name_id));
    EXPECT_EQ(a->activities[i].category, b->activities[i].category);
  }
  EXPECT_EQ(b->comm_ops.size(), a->comm_ops.size());
  EXPECT_EQ(b->meta.rank, 3);
}

TEST(RocprofImport, MalformedRecordsAreSkippedAndCounted) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(ReadText(Small("small_basic.json")));
  auto& kd = j["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"];
  kd[0]["start_timestamp"] = "1000";     // a string
  kd[1].erase("dispatch_info");          // no kernel, agent or queue
  kd[2]["end_timestamp"] = -5;           // negative
  kd[3]["end_timestamp"] = 10;           // before its start
  kd.push_back(7);                       // not an object
  StatusOr<RankTrace> t = rocprof::ParseRocprofText(j.dump(), "x.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->stats.Get(Stat::events_malformed), 4);
  EXPECT_EQ(t->stats.Get(Stat::events_negative_duration), 1);
  EXPECT_EQ(t->activities.size(), 3u);  // one dispatch and the two copies
}

Status ImportError(const std::string& text) {
  StatusOr<RankTrace> t = rocprof::ParseRocprofText(text, "x.json");
  EXPECT_FALSE(t.ok());
  return t.ok() ? OkStatus() : t.status();
}

TEST(RocprofImport, BadDocumentsAreOneLineErrors) {
  Status s = ImportError(ReadText(Small("small_no_kernels.json")));
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("without kernel dispatches"), std::string::npos) << s.message();
  s = ImportError(ReadText(Small("small_wrong_types.json")));
  EXPECT_EQ(s.message(), "rocprofv3 JSON: \"buffer_records.kernel_dispatch\" is not an array");
  s = ImportError(R"({"rocprofiler-sdk-tool": {}})");
  EXPECT_EQ(s.message(), "rocprofv3 JSON: \"rocprofiler-sdk-tool\" is not an array");
  s = ImportError(R"({"rocprofiler-sdk-tool": [3]})");
  EXPECT_EQ(s.message(), "rocprofv3 JSON: \"rocprofiler-sdk-tool[]\" is not an object");
  s = ImportError(R"({"rocprofiler-sdk-tool": [{"strings": []}]})");
  EXPECT_EQ(s.message(), "rocprofv3 JSON: \"strings\" is not an object");
  s = ImportError(R"({"rocprofiler-sdk-tool": []})");
  EXPECT_NE(s.message().find("empty"), std::string::npos) << s.message();
  s = ImportError(R"({"rocprofiler-sdk-tool": [{}, {}]})");
  EXPECT_NE(s.message().find("more than one process"), std::string::npos) << s.message();
  s = ImportError(R"([1, 2])");
  EXPECT_NE(s.message().find("not rocprofv3 JSON"), std::string::npos) << s.message();
  s = ImportError(ReadText(Small("small_basic.json")) + " {}");
  EXPECT_NE(s.message().find("trailing content"), std::string::npos) << s.message();
  for (const std::string& m : {std::string(s.message())}) EXPECT_EQ(m.find('\n'), std::string::npos);
}

// Every cut of a document is an error (never a crash or a hang), one line, and a cut inside the
// brackets says the document is truncated.
TEST(RocprofImport, EveryTruncationIsAnError) {
  const std::string text = ReadText(Small("small_group.json"));
  size_t truncated = 0;
  for (size_t n = 1; n < text.size(); n += 7) {
    StatusOr<RankTrace> t = rocprof::ParseRocprofText(text.substr(0, n), "x.json");
    const bool only_ws_after = text.find_first_not_of(" \n", n) == std::string::npos;
    if (only_ws_after) continue;
    ASSERT_FALSE(t.ok()) << n;
    EXPECT_EQ(t.status().message().find('\n'), std::string::npos);
    truncated += t.status().message().rfind("truncated JSON", 0) == 0;
  }
  EXPECT_GT(truncated, 0u);
}

// A cut of a real MI350 rank file (tests/data/rocprof/README.md): whole-trace figures equal the
// independent union-of-intervals computation of the README to the ns, and the JSON summary its
// golden file.
TEST(RocprofGolden, RealMi350CutMatchesIndependentFiguresAndGolden) {
  Summary s = AnalyzeOk(Small("mi350_fsdp_rank0_3steps.json.gz"));
  ASSERT_EQ(s.ranks.size(), 1u);
  const OverlapFigures& f = s.ranks[0].whole;
  EXPECT_EQ(f.comm_ns, 85241943);
  EXPECT_EQ(f.compute_ns, 15021126);
  EXPECT_EQ(f.overlap_ns, 11923969);
  EXPECT_EQ(f.memory_ns, 768675);
  EXPECT_EQ(f.kernels + f.memcpys + f.memsets, 2466);
  EXPECT_EQ(s.ranks[0].rank, 0);  // from the file name
  EXPECT_EQ(s.ranks[0].stats.Get(Stat::rocprof_rank_from_file_name), 1);
  testing::ExpectGoldenSummary(s, "mi350_fsdp_rank0_3steps");
}

}  // namespace
}  // namespace overlapprof
